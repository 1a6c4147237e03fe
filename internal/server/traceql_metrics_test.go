package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// Mirrors of tempopb's QueryRangeResponse and QueryInstantResponse (grafana/tempo
// pkg/tempopb/tempo.proto: TimeSeries, Sample, Exemplar, InstantSeries,
// SearchMetrics; common.v1.KeyValue), decoded strictly: an unknown field
// fails, as Grafana's jsonpb decoding of the instant response does.
type tpKV struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string  `json:"stringValue"`
		IntValue    *string  `json:"intValue"`
		DoubleValue *float64 `json:"doubleValue"`
		BoolValue   *bool    `json:"boolValue"`
	} `json:"value"`
}

type tpSearchMetrics struct {
	InspectedTraces uint32 `json:"inspectedTraces"`
	InspectedBytes  string `json:"inspectedBytes"`
	TotalBlocks     uint32 `json:"totalBlocks"`
	CompletedJobs   uint32 `json:"completedJobs"`
	TotalJobs       uint32 `json:"totalJobs"`
	TotalBlockBytes string `json:"totalBlockBytes"`
	InspectedSpans  string `json:"inspectedSpans"`
}

type tpQueryRange struct {
	Series []struct {
		Labels  []tpKV `json:"labels"`
		Samples []struct {
			TimestampMs string  `json:"timestampMs"`
			Value       float64 `json:"value"`
		} `json:"samples"`
		Exemplars []struct {
			Labels      []tpKV  `json:"labels"`
			Value       float64 `json:"value"`
			TimestampMs string  `json:"timestampMs"`
		} `json:"exemplars"`
	} `json:"series"`
	Metrics tpSearchMetrics `json:"metrics"`
	Status  string          `json:"status"`
	Message string          `json:"message"`
}

type tpInstant struct {
	Series []struct {
		Labels []tpKV  `json:"labels"`
		Value  float64 `json:"value"`
	} `json:"series"`
	Metrics tpSearchMetrics `json:"metrics"`
	Status  string          `json:"status"`
	Message string          `json:"message"`
}

func strictGet(t *testing.T, ts *testServer, path string, out any) {
	t.Helper()
	code, _, body := ts.request("GET", path, nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// TestTraceQLMetricsRoutes: Tempo's metrics routes answer in tempopb's
// shapes with the right figures, Rastro's route says which path answered,
// and bad requests are refused with the reason.
func TestTraceQLMetricsRoutes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(40, 9) // over the last ~41 minutes, svc-a and svc-b alternating, every 5th an error
		ts.ingest(spans, "")
		now := time.Now()
		win := fmt.Sprintf("start=%d&end=%d", now.Add(-2*time.Hour).Unix(), now.Unix())

		var rr tpQueryRange
		strictGet(t, ts, "/api/metrics/query_range?step=60&"+win+"&q="+url.QueryEscape(`{ } | count_over_time() by (resource.service.name)`), &rr)
		total := map[string]float64{}
		for _, s := range rr.Series {
			if len(s.Labels) != 1 || s.Labels[0].Key != "resource.service.name" || s.Labels[0].Value.StringValue == nil {
				t.Fatalf("labels %+v", s.Labels)
			}
			for _, p := range s.Samples {
				if len(p.TimestampMs) < 13 {
					t.Fatalf("timestampMs %q is not a quoted int64 of milliseconds", p.TimestampMs)
				}
				total[*s.Labels[0].Value.StringValue] += p.Value
			}
		}
		if total["svc-a"] != 20 || total["svc-b"] != 20 {
			t.Fatalf("count_over_time by service: %v", total)
		}

		strictGet(t, ts, "/api/metrics/query_range?"+win+"&q="+url.QueryEscape(`{ status = error } | rate()`), &rr)
		if len(rr.Series) != 1 || rr.Series[0].Labels[0].Key != "__name__" || *rr.Series[0].Labels[0].Value.StringValue != "rate" {
			t.Fatalf("ungrouped rate: %+v", rr.Series)
		}
		var errs float64
		for _, p := range rr.Series[0].Samples {
			errs += p.Value * 15 // 2h / 240 = 30 s, rounded down to Tempo's 15 s granularity
		}
		if errs < 7.99 || errs > 8.01 || len(rr.Series[0].Exemplars) == 0 || rr.Series[0].Exemplars[0].Labels[0].Key != "trace:id" {
			t.Fatalf("rate of errors sums to %v errors (want 8), exemplars %+v", errs, rr.Series[0].Exemplars)
		}

		var in tpInstant
		strictGet(t, ts, "/api/metrics/query?"+win+"&q="+url.QueryEscape(`{ } | quantile_over_time(duration, .5) by (name)`), &in)
		if len(in.Series) != 3 {
			t.Fatalf("instant quantiles by name: %+v", in.Series)
		}
		for _, s := range in.Series {
			if len(s.Labels) != 2 || s.Labels[1].Key != "p" || *s.Labels[1].Value.DoubleValue != 0.5 || s.Value != 0.005 {
				t.Fatalf("instant series %+v (every span lasts 5 ms)", s)
			}
		}

		// Metrics arithmetic: the error ratio per service is 1/5 wherever a
		// service has spans (every 5th span is an error, services alternate).
		strictGet(t, ts, "/api/metrics/query?"+win+"&q="+url.QueryEscape(`({ status = error } | count_over_time() by (resource.service.name)) / ({ } | count_over_time() by (resource.service.name)) * 100`), &in)
		if len(in.Series) != 2 {
			t.Fatalf("instant error ratio by service: %+v", in.Series)
		}
		for _, s := range in.Series {
			if len(s.Labels) != 1 || s.Labels[0].Key != "resource.service.name" || s.Value != 20 {
				t.Fatalf("error ratio series %+v, want 20 per service", s)
			}
		}

		var own struct {
			Path   string `json:"path"`
			Series []struct {
				Labels  map[string]any `json:"labels"`
				Samples []struct {
					Value float64 `json:"value"`
				} `json:"samples"`
			} `json:"series"`
		}
		if code := ts.get("/api/v1/traceql/metrics?since=2h&q="+url.QueryEscape(`{ } | count_over_time() by (name)`), &own); code != 200 || own.Path != "aggregates" || len(own.Series) != 3 {
			t.Fatalf("own route: %d %+v", code, own)
		}
		if code := ts.get("/api/v1/traceql/metrics?since=2h&q="+url.QueryEscape(`{ span.http.route = "/r/1" } | count_over_time()`), &own); code != 200 || own.Path != "spans" {
			t.Fatalf("own route, span path: %d %+v", code, own)
		}

		for _, c := range []struct{ path, want string }{
			{"/api/metrics/query_range?q=" + url.QueryEscape(`{ }`), "not a metrics query"},
			{"/api/metrics/query_range?start=2000&end=1000&q=" + url.QueryEscape(`{ } | rate()`), "end must be greater than start"},
			{"/api/metrics/query_range?q=" + url.QueryEscape(`{ } | rate(`), "invalid TraceQL query"},
			{"/api/v1/traceql/metrics", "q is required"},
			{"/api/v1/spans?q=" + url.QueryEscape(`{ } | rate()`), "metrics query"},
			{"/api/search?q=" + url.QueryEscape(`{ } | rate()`), "metrics query"},
			{"/api/v1/traces?q=" + url.QueryEscape(`({ } | rate()) * 2`), "metrics query"},
			{"/api/metrics/query_range?q=" + url.QueryEscape(`({ } | rate()) * 1s`), "duration cannot be a scalar operand"},
		} {
			code, _, body := ts.request("GET", c.path, nil)
			if code != 400 || !strings.Contains(string(body), c.want) {
				t.Errorf("%s: %d %s, want 400 naming %q", c.path, code, body, c.want)
			}
		}
	})
}
