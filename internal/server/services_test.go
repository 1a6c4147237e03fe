package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// TestServiceRoutes: the RED, heatmap, error-group, dependency and journey
// routes answer with their documented shapes and figures over HTTP on each
// backend, and refuse bad parameters with an error naming them.
func TestServiceRoutes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(40, 3)
		for i := range spans {
			spans[i].Attributes = append(spans[i].Attributes, model.KeyValue{Key: "user.id", Value: model.StringValue(fmt.Sprintf("u-%d", i%2))})
			if spans[i].StatusCode == model.StatusError {
				spans[i].StatusMessage = fmt.Sprintf("timeout after %d ms", 100+i)
			}
		}
		ts.ingest(spans, "")
		get := func(path string, v any) {
			t.Helper()
			code, _, body := ts.request("GET", path, nil)
			if code != 200 {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			if err := json.Unmarshal(body, v); err != nil {
				t.Fatalf("GET %s: %v in %s", path, err, body)
			}
		}
		var red struct {
			StepSeconds int64 `json:"step_seconds"`
			Series      []struct {
				Service   string  `json:"service"`
				Operation string  `json:"operation"`
				Calls     int64   `json:"calls"`
				Errors    int64   `json:"errors"`
				ErrorRate float64 `json:"error_rate"`
				P50       float64 `json:"p50_ns"`
				Buckets   []struct {
					Calls int64 `json:"calls"`
				} `json:"buckets"`
			} `json:"series"`
		}
		get("/api/v1/red?since=2h&step=1m", &red)
		if red.StepSeconds != 60 || len(red.Series) != 2 || red.Series[0].Calls != 20 || red.Series[1].Calls != 20 {
			t.Fatalf("RED by service: %+v", red)
		}
		var total int64
		for _, s := range red.Series {
			total += s.Errors
			var sum int64
			for _, bk := range s.Buckets {
				sum += bk.Calls
			}
			if sum != s.Calls || s.P50 < 4e6 || s.P50 > 6e6 {
				t.Fatalf("series %s: buckets sum to %d of %d calls; p50 %v (spans last 5ms)", s.Service, sum, s.Calls, s.P50)
			}
		}
		if total != 8 {
			t.Fatalf("RED counts %d errors, want 8", total)
		}
		get("/api/v1/red?since=2h&group=operation&service=svc-a", &red)
		if len(red.Series) == 0 || red.Series[0].Operation == "" || red.Series[0].Service != "svc-a" {
			t.Fatalf("RED by operation of svc-a: %+v", red.Series)
		}

		var hm struct {
			Bounds []uint64 `json:"bounds_ns"`
			Cells  []struct {
				Bucket int   `json:"bucket"`
				Count  int64 `json:"count"`
			} `json:"cells"`
			MaxCount int64 `json:"max_count"`
		}
		get("/api/v1/heatmap?since=2h&step=1h", &hm)
		var cells int64
		for _, c := range hm.Cells {
			cells += c.Count
			if lo, hi := hm.Bounds[c.Bucket], hm.Bounds[c.Bucket+1]; lo > 5e6 || hi <= 5e6 {
				t.Fatalf("5ms spans in bucket [%d, %d)", lo, hi)
			}
		}
		if cells != 40 || hm.MaxCount == 0 {
			t.Fatalf("heatmap counts %d spans (max %d), want 40", cells, hm.MaxCount)
		}

		var eg struct {
			Groups []struct {
				Service, Operation, Message string
				Count                       int64
				SampleTrace                 string `json:"sample_trace_id"`
			} `json:"groups"`
		}
		get("/api/v1/errors?since=2h", &eg)
		var errs int64
		for _, g := range eg.Groups {
			errs += g.Count
			if g.Message != "timeout after <n> ms" || len(g.SampleTrace) != 32 {
				t.Fatalf("error group %+v", g)
			}
		}
		if errs != 8 {
			t.Fatalf("error groups count %d errors, want 8: %+v", errs, eg.Groups)
		}

		var deps struct {
			Edges []struct {
				Parent, Child string
				Calls         int64
			} `json:"edges"`
		}
		get("/api/v1/dependencies?since=2h", &deps)
		// Each trace of 4 has a root in svc-a and two children in svc-b.
		if len(deps.Edges) != 1 || deps.Edges[0].Parent != "svc-a" || deps.Edges[0].Child != "svc-b" || deps.Edges[0].Calls != 20 {
			t.Fatalf("dependencies: %+v", deps.Edges)
		}

		var j struct {
			Traces []struct {
				TraceID string `json:"trace_id"`
			} `json:"traces"`
			Buckets []struct {
				Traces int `json:"traces"`
			} `json:"buckets"`
			Truncated bool `json:"truncated"`
		}
		get("/api/v1/journey?key=user.id&value=u-1", &j)
		if len(j.Traces) != 10 || j.Truncated || len(j.Buckets) == 0 {
			t.Fatalf("journey of u-1: %d traces (truncated %t), want all 10", len(j.Traces), j.Truncated)
		}
		get("/api/v1/journey?key=user.id&value=u-1&limit=3", &j)
		if len(j.Traces) != 3 || !j.Truncated {
			t.Fatalf("journey with limit 3: %d traces, truncated %t", len(j.Traces), j.Truncated)
		}
		get("/api/v1/journey?key=user.id&value="+url.QueryEscape(`x" } || { true`), &j)
		if len(j.Traces) != 0 {
			t.Fatalf("a quoted value escaped its string: %d traces", len(j.Traces))
		}

		for path, want := range map[string]string{
			"/api/v1/red?step=30s":              "step",
			"/api/v1/red?step=1m&since=30d":     "more than 10000 buckets",
			"/api/v1/red?group=model":           "group",
			"/api/v1/heatmap?since=yesterday":   "since",
			"/api/v1/errors?limit=0":            "limit",
			"/api/v1/journey?value=u-1":         "key",
			"/api/v1/journey?key=a%20b&value=x": "key",
			"/api/v1/journey?key=user.id":       "value",
		} {
			code, hdr, body := ts.request("GET", path, nil)
			wantError(t, path, code, hdr, body, 400, want)
		}
	})
}

// TestUIAndPricesOptions: Options.UI answers every path the API does not
// claim (deep links included), never an API path; Options.Prices is listed
// at /api/v1/llm/prices with its source.
func TestUIAndPricesOptions(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ui:"+r.URL.Path) })
	srv, err := New(Options{HTTPAddr: "127.0.0.1:0", UI: ui, Prices: llm.DefaultPrices()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, base: "http://" + srv.HTTPAddr()}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	for _, p := range []string{"/", "/traces/4bf92f3577b34da6a3ce929d0e0e4736", "/sessions/s-1", "/ui/app.js"} {
		if code, _, body := ts.request("GET", p, nil); code != 200 || string(body) != "ui:"+p {
			t.Errorf("GET %s: %d %q, want the UI", p, code, body)
		}
	}
	for _, p := range []string{"/api/v1/nope", "/v1/nope", "/api/traces/nope", "/api/search"} {
		if code, _, body := ts.request("GET", p, nil); code < 400 || strings.HasPrefix(string(body), "ui:") {
			t.Errorf("GET %s: %d %q, want an API answer", p, code, body)
		}
	}
	code, _, body := ts.request("GET", "/api/v1/llm/prices", nil)
	var prices struct {
		Source string `json:"source"`
		AsOf   string `json:"as_of"`
		Models []struct {
			Match  string `json:"match"`
			Text   string `json:"text"`
			Prices []struct {
				From  string  `json:"from"`
				Input float64 `json:"input"`
			} `json:"prices"`
		} `json:"models"`
	}
	if code != 200 || json.Unmarshal(body, &prices) != nil || prices.Source == "" || prices.AsOf == "" || len(prices.Models) < 10 {
		t.Fatalf("GET /api/v1/llm/prices: %d %.300s", code, body)
	}
	for _, m := range prices.Models {
		if m.Text == "" || len(m.Prices) == 0 || m.Prices[0].From == "" {
			t.Fatalf("price entry %+v", m)
		}
	}
}

// TestSpanJSONCarriesLLMFields: a span's JSON in a trace carries the LLM
// fields derived at ingest (model, tokens, cost), so clients need not
// re-read the attribute dialects; other spans have no llm member.
func TestSpanJSONCarriesLLMFields(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(4, 9)
		spans[1].Attributes = append(spans[1].Attributes,
			model.KeyValue{Key: "gen_ai.system", Value: model.StringValue("openai")},
			model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue("gpt-4o")},
			model.KeyValue{Key: "gen_ai.operation.name", Value: model.StringValue("chat")},
			model.KeyValue{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(1000)},
			model.KeyValue{Key: "gen_ai.usage.output_tokens", Value: model.IntValue(100)})
		ts.ingest(spans, "")
		code, _, body := ts.request("GET", "/api/v1/traces/"+spans[0].TraceID.String(), nil)
		var tr struct {
			Spans []struct {
				SpanID string `json:"span_id"`
				LLM    *struct {
					Provider string  `json:"provider"`
					Model    string  `json:"model"`
					In       *int64  `json:"input_tokens"`
					Out      *int64  `json:"output_tokens"`
					Cost     float64 `json:"cost_usd"`
					Source   string  `json:"cost_source"`
				} `json:"llm"`
			} `json:"spans"`
		}
		if code != 200 || json.Unmarshal(body, &tr) != nil || len(tr.Spans) != 4 {
			t.Fatalf("GET trace: %d %.300s", code, body)
		}
		for _, s := range tr.Spans {
			if s.SpanID != spans[1].SpanID.String() {
				if s.LLM != nil {
					t.Errorf("span %s has an llm member", s.SpanID)
				}
				continue
			}
			want, _ := llm.DefaultPrices().Cost("openai", "gpt-4o", time.Now(), 1000, 100, 0, 0)
			if s.LLM == nil || s.LLM.Provider != "openai" || s.LLM.Model != "gpt-4o" || s.LLM.In == nil || *s.LLM.In != 1000 ||
				*s.LLM.Out != 100 || s.LLM.Source != "computed" || s.LLM.Cost != float64(want)/1e9 || want == 0 {
				t.Errorf("LLM span's llm member: %+v (want cost %d nano-USD)", s.LLM, want)
			}
		}
	})
}

// TestLLMStatsTopAndPricesSummary: top=N returns the N costliest groups
// with totals over all of them; prices?models=false is provenance only.
func TestLLMStatsTopAndPricesSummary(t *testing.T) {
	srv, err := New(Options{HTTPAddr: "127.0.0.1:0", Prices: llm.DefaultPrices()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	m := memstore.New(memstore.Options{})
	srv.SetBackend(m)
	ts := &testServer{t: t, srv: srv, base: "http://" + srv.HTTPAddr()}
	t.Cleanup(func() { srv.Shutdown(context.Background()); m.Close() })
	spans := recentSpans(6, 4)
	for i := range spans {
		spans[i].Attributes = append(spans[i].Attributes,
			model.KeyValue{Key: "gen_ai.system", Value: model.StringValue("openai")},
			model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue("gpt-4o")},
			model.KeyValue{Key: "session.id", Value: model.StringValue(fmt.Sprintf("s-%d", i))},
			model.KeyValue{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(int64(1000 * (i + 1)))})
	}
	ts.ingest(spans, "")
	var st struct {
		Groups []struct {
			Key  map[string]string `json:"key"`
			Cost float64           `json:"cost_usd"`
		} `json:"groups"`
		Totals struct {
			Spans int64 `json:"spans"`
		} `json:"totals"`
		TotalGroups int `json:"total_groups"`
	}
	if code, _, body := ts.request("GET", "/api/v1/llm/stats?group_by=session&top=2", nil); code != 200 || json.Unmarshal(body, &st) != nil {
		t.Fatalf("top=2: %d %s", code, body)
	}
	if len(st.Groups) != 2 || st.Groups[0].Key["session"] != "s-5" || st.Groups[1].Key["session"] != "s-4" || st.Totals.Spans != 6 || st.TotalGroups != 6 {
		t.Fatalf("top=2 by cost: %+v", st)
	}
	code, hdr, body := ts.request("GET", "/api/v1/llm/stats?sort=tokenz", nil)
	wantError(t, "unknown sort", code, hdr, body, 400, "sort")
	var p map[string]any
	if code, _, body := ts.request("GET", "/api/v1/llm/prices?models=false", nil); code != 200 || json.Unmarshal(body, &p) != nil {
		t.Fatalf("prices summary: %d %s", code, body)
	}
	if _, has := p["models"]; has || p["source"] == "" || p["count"].(float64) < 10 {
		t.Fatalf("prices?models=false: %v", p)
	}
}

// TestSessionsFind: find keeps the sessions whose id or a user contains the
// text (case-insensitive), before paging, and total counts the matches.
func TestSessionsFind(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(6, 6)
		for i := range spans {
			spans[i].Attributes = append(spans[i].Attributes,
				model.KeyValue{Key: "gen_ai.system", Value: model.StringValue("openai")},
				model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue("gpt-4o")},
				model.KeyValue{Key: "session.id", Value: model.StringValue(fmt.Sprintf("Conv-%d", i))},
				model.KeyValue{Key: "user.id", Value: model.StringValue([]string{"alice", "bob"}[i%2])})
		}
		ts.ingest(spans, "")
		for find, want := range map[string]int{"": 6, "conv-3": 1, "ALICE": 3, "zed": 0} {
			var r struct {
				Sessions []struct {
					ID    string   `json:"session_id"`
					Users []string `json:"users"`
				} `json:"sessions"`
				Total int `json:"total"`
			}
			code, _, body := ts.request("GET", "/api/v1/sessions?since=2h&limit=2&find="+url.QueryEscape(find), nil)
			if code != 200 || json.Unmarshal(body, &r) != nil || r.Total != want || len(r.Sessions) != min(want, 2) {
				t.Fatalf("find=%q: %d, total %d, %d sessions; want %d: %s", find, code, r.Total, len(r.Sessions), want, body)
			}
		}
	})
}
