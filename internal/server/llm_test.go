package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestLLMEndpoints ingests the generated LLM corpus over OTLP/HTTP and checks
// the statistics, time series and sessions APIs against the corpus itself.
func TestLLMEndpoints(t *testing.T) {
	ts := startServer(t, Options{})
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 4, Spans: 4000, Start: start, Window: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Half the corpus is sealed into a segment, half stays in the write buffer.
	for i := 0; i < len(spans); i += 500 {
		if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans[i:min(i+500, len(spans))])); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
		if i == len(spans)/2 {
			if err := ts.eng.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	llm.Enrich(spans, llm.DefaultPrices())
	var llmSpans, counted int64
	var costNano int64
	sessions := map[string]int64{}
	models := map[string]bool{}
	for i := range spans {
		if l := spans[i].LLM; l != nil {
			llmSpans++
			models[l.Model()] = true
			if l.Counted {
				counted++
				costNano += l.CostNanoUSD
			}
			if l.SessionID != "" {
				sessions[l.SessionID] += l.CostNanoUSD
			}
		}
	}

	type measures struct {
		Spans   int64   `json:"spans"`
		Counted int64   `json:"counted_spans"`
		Cost    float64 `json:"cost_usd"`
		Input   int64   `json:"input_tokens"`
		Latency *struct {
			P50, P95, P99 float64
		} `json:"latency_ms"`
	}
	var stats struct {
		Groups []struct {
			Key map[string]string `json:"key"`
			measures
		} `json:"groups"`
		Totals measures `json:"totals"`
	}
	if code := ts.get("/api/v1/llm/stats?group_by=model", &stats); code != 200 {
		t.Fatalf("llm stats: %d", code)
	}
	if stats.Totals.Spans != llmSpans || stats.Totals.Counted != counted {
		t.Fatalf("totals: %d spans / %d counted, corpus has %d / %d", stats.Totals.Spans, stats.Totals.Counted, llmSpans, counted)
	}
	if got, want := stats.Totals.Cost, float64(costNano)/1e9; got < want-1e-9 || got > want+1e-9 || want == 0 {
		t.Fatalf("total cost %.9f, corpus %.9f", got, want)
	}
	if len(stats.Groups) != len(models) {
		t.Fatalf("%d model groups, corpus has %d models", len(stats.Groups), len(models))
	}
	for _, g := range stats.Groups {
		if g.Latency == nil || g.Latency.P50 <= 0 || g.Latency.P50 > g.Latency.P99 {
			t.Fatalf("group %v latency %+v", g.Key, g.Latency)
		}
	}

	var series struct {
		Step   int64 `json:"step_seconds"`
		Points []struct {
			Time string `json:"time"`
			measures
		} `json:"points"`
	}
	if code := ts.get("/api/v1/llm/timeseries?since=4h&step=30m", &series); code != 200 || series.Step != 1800 {
		t.Fatalf("timeseries: %d step %d", code, series.Step)
	}
	var inSeries int64
	for _, p := range series.Points {
		inSeries += p.Spans
	}
	if inSeries != llmSpans || len(series.Points) < 4 {
		t.Fatalf("timeseries: %d spans in %d points, corpus has %d", inSeries, len(series.Points), llmSpans)
	}

	var list struct {
		Sessions []struct {
			ID    string   `json:"session_id"`
			Users []string `json:"users"`
			measures
		} `json:"sessions"`
		Total int `json:"total"`
	}
	if code := ts.get("/api/v1/sessions?sort=cost&limit=5", &list); code != 200 {
		t.Fatalf("sessions: %d", code)
	}
	if list.Total != len(sessions) || len(list.Sessions) != 5 {
		t.Fatalf("sessions: total %d (corpus %d), page %d", list.Total, len(sessions), len(list.Sessions))
	}
	costs := make([]int64, 0, len(sessions))
	for _, c := range sessions {
		costs = append(costs, c)
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i] > costs[j] })
	for i, s := range list.Sessions {
		if fmt.Sprintf("%.6f", s.Cost) != fmt.Sprintf("%.6f", float64(costs[i])/1e9) {
			t.Fatalf("session %d (%s) cost %.9f, want %.9f (sorted by cost)", i, s.ID, s.Cost, float64(costs[i])/1e9)
		}
	}

	var detail struct {
		Traces []struct {
			TraceID  string `json:"trace_id"`
			LLMSpans []struct {
				Model string `json:"model"`
				In    []struct {
					Role, Content string
				} `json:"input_messages"`
			} `json:"llm_spans"`
		} `json:"traces"`
	}
	if code := ts.get("/api/v1/sessions/"+url.PathEscape(list.Sessions[0].ID), &detail); code != 200 || len(detail.Traces) == 0 {
		t.Fatalf("session detail: %d, %d traces", code, len(detail.Traces))
	}
	messages := 0
	for _, tr := range detail.Traces {
		for _, s := range tr.LLMSpans {
			messages += len(s.In)
		}
	}
	if messages == 0 {
		b, _ := json.Marshal(detail)
		t.Fatalf("session detail carries no messages: %.500s", b)
	}

	var e struct {
		Error string `json:"error"`
	}
	if code := ts.get("/api/v1/llm/stats?group_by=colour", &e); code != 400 || e.Error == "" {
		t.Fatalf("bad group_by: %d %q", code, e.Error)
	}
	if code := ts.get("/api/v1/sessions/nope", &e); code != 404 {
		t.Fatalf("unknown session: %d", code)
	}
}

func TestSessionsPagingBounds(t *testing.T) {
	ts := startServer(t, Options{})
	var e struct {
		Error string `json:"error"`
	}
	var list struct {
		Sessions []any `json:"sessions"`
		Total    int   `json:"total"`
	}
	if code := ts.get("/api/v1/sessions?offset=9223372036854775807", &list); code != 200 || len(list.Sessions) != 0 {
		t.Fatalf("huge offset: %d, %d sessions", code, len(list.Sessions))
	}
	if code := ts.get("/api/v1/sessions?offset=-1", &e); code != 400 {
		t.Fatalf("negative offset: %d", code)
	}
}

// TestLLMStatsPages: /api/v1/llm/stats returns at most 1,000 groups unless
// top says otherwise; pages walked with offset and next_offset are the
// whole ranking in order; total_groups and totals cover every group and
// others is exactly what a page leaves out; over a backend that ranks
// (the engine, half its spans sealed) and one that returns every group.
func TestLLMStatsPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		const n = 1003
		spans := recentSpans(n, 7)
		for i := range spans {
			spans[i].Attributes = append(spans[i].Attributes,
				model.KeyValue{Key: "gen_ai.system", Value: model.StringValue("openai")},
				model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue("gpt-4o")},
				model.KeyValue{Key: "session.id", Value: model.StringValue(fmt.Sprintf("s-%04d", i))},
				model.KeyValue{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(int64(1000 * (i%13 + 1)))})
		}
		ts.ingest(spans[:n/2], "")
		if ts.eng != nil {
			if err := ts.eng.Seal(); err != nil {
				t.Fatal(err)
			}
		}
		ts.ingest(spans[n/2:], "")
		type group struct {
			Key   map[string]string `json:"key"`
			Spans int64             `json:"spans"`
			Cost  float64           `json:"cost_usd"`
			In    int64             `json:"input_tokens"`
		}
		type page struct {
			Groups      []group `json:"groups"`
			NextOffset  *int    `json:"next_offset"`
			TotalGroups int     `json:"total_groups"`
			Totals      group   `json:"totals"`
			Others      *group  `json:"others"`
		}
		get := func(path string) page {
			t.Helper()
			var p page
			code, _, body := ts.request("GET", path, nil)
			if code != 200 || json.Unmarshal(body, &p) != nil {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			return p
		}
		all := get("/api/v1/llm/stats?group_by=session&top=10000")
		if len(all.Groups) != n || all.TotalGroups != n || all.NextOffset != nil || all.Others != nil || all.Totals.Spans != n {
			t.Fatalf("top=10000: %d groups of %d, next %v, others %v, totals %+v", len(all.Groups), all.TotalGroups, all.NextOffset, all.Others, all.Totals)
		}
		for i := 1; i < n; i++ {
			if all.Groups[i].Cost > all.Groups[i-1].Cost {
				t.Fatalf("groups not ranked by cost at %d", i)
			}
		}
		def := get("/api/v1/llm/stats?group_by=session")
		if len(def.Groups) != 1000 || def.TotalGroups != n || def.NextOffset == nil || *def.NextOffset != 1000 ||
			def.Others == nil || def.Others.Spans != n-1000 || fmt.Sprint(def.Totals) != fmt.Sprint(all.Totals) {
			t.Fatalf("default page: %d groups of %d, next %v, others %+v, totals %+v (want %+v)", len(def.Groups), def.TotalGroups, def.NextOffset, def.Others, def.Totals, all.Totals)
		}
		var walked []group
		for off := 0; ; {
			p := get(fmt.Sprintf("/api/v1/llm/stats?group_by=session&top=97&offset=%d", off))
			var in int64
			for _, g := range p.Groups {
				in += g.In
			}
			if p.Others == nil || p.Others.In != all.Totals.In-in || p.Others.Spans != n-int64(len(p.Groups)) || fmt.Sprint(p.Totals) != fmt.Sprint(all.Totals) {
				t.Fatalf("offset %d: others %+v, page input tokens %d, totals %+v", off, p.Others, in, p.Totals)
			}
			walked = append(walked, p.Groups...)
			if p.NextOffset == nil {
				break
			}
			off = *p.NextOffset
		}
		if fmt.Sprint(walked) != fmt.Sprint(all.Groups) {
			t.Fatalf("pages walked with next_offset differ from the whole ranking")
		}
		bySpans := get("/api/v1/llm/stats?group_by=session&sort=tokens&top=3")
		for i, g := range bySpans.Groups {
			if g.In != 13000 || (i > 0 && g.Cost > bySpans.Groups[i-1].Cost) {
				t.Fatalf("sort=tokens: group %d is %+v", i, g)
			}
		}
		for q, want := range map[string]string{"top=0": "top", "top=10001": "top", "offset=-1": "offset", "sort=colour": "sort"} {
			code, hdr, body := ts.request("GET", "/api/v1/llm/stats?group_by=session&"+q, nil)
			wantError(t, q, code, hdr, body, 400, want)
		}
	})
}
