package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/metricstore"
)

// Concurrent range queries over real HTTP, of different sizes, each get
// their own answer, byte for byte the one the same query gets alone: the
// answer buffers the handler reuses are never shared by two requests.
func TestPromConcurrentAnswersAreTheirOwn(t *testing.T) {
	ts := startServer(t, Options{})
	ms, err := metricstore.Open(metricstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	ts.srv.SetMetrics(ms)
	req := &colmetrics.ExportMetricsServiceRequest{}
	for i := range 60 {
		var dps []*metricspb.NumberDataPoint
		for k := range 241 {
			dps = append(dps, &metricspb.NumberDataPoint{TimeUnixNano: uint64(k) * 15e9,
				Attributes: []*commonpb.KeyValue{{Key: "instance", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprint(i)}}},
					{Key: "job", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprintf("svc-%d", i%6)}}}},
				Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: float64(k*(i+1)) / 3}})
		}
		req.ResourceMetrics = append(req.ResourceMetrics, &metricspb.ResourceMetrics{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
			{Name: "req", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: dps}}}}}}})
	}
	body, _ := proto.Marshal(req)
	resp, err := http.Post(ts.base+"/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %d", resp.StatusCode)
	}
	var queries []string
	for j := range 6 {
		queries = append(queries, fmt.Sprintf(`req_total{job="svc-%d"}`, j), fmt.Sprintf(`rate(req_total{job=~"svc-[0-%d]"}[1m])`, j))
	}
	queries = append(queries, "req_total", "sum by (job) (req_total)")
	fetch := func(q string) ([]byte, error) {
		u := ts.base + "/prom/api/v1/query_range?" + url.Values{"query": {q}, "start": {"0"}, "end": {"3600"}, "step": {"15"}}.Encode()
		resp, err := http.Get(u)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("%s: %d %s", q, resp.StatusCode, b)
		}
		return b, err
	}
	want := map[string][]byte{}
	for _, q := range queries {
		b, err := fetch(q)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"resultType":"matrix"`)) || !bytes.Contains(b, []byte(`[3600,"`)) {
			t.Fatalf("%s: %.200s", q, b)
		}
		want[q] = b
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range 30 {
				q := queries[(g*7+k)%len(queries)]
				b, err := fetch(q)
				if err == nil && !bytes.Equal(b, want[q]) {
					err = fmt.Errorf("%s: concurrent answer differs from the one alone:\n%.300s\nwant\n%.300s", q, b, want[q])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
