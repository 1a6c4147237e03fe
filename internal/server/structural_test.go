package server

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestStructuralQueriesOverHTTP: structural and pipeline queries on the
// trace and span search routes, on both backends, give the traces and spans
// a per-trace evaluation of every stored trace gives.
func TestStructuralQueriesOverHTTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(80, 6)
		ts.ingest(spans, "")
		ids := map[model.TraceID]bool{}
		for i := range spans {
			ids[spans[i].TraceID] = true
		}
		for _, src := range []string{
			`{ resource.service.name = "svc-a" } >> { status = error }`,
			`{ resource.service.name = "svc-a" } > { resource.service.name = "svc-b" }`,
			`{ status = error } ~ { }`,
			`{ } !>> { status = error }`,
			`{ name = "op-1" } &>> { name = "op-2" }`,
			`{ } | count() > 3`,
			`{ resource.service.name = "svc-b" } | count() = 2`,
			`({ status = error } || { name = "op-0" }) | by(resource.service.name) | count() > 1`,
			`{ span:childCount = 3 }`,
			`{ span:childCount = 0 && status = error } | count() > 0`,
		} {
			q, err := query.ParseQuery(src)
			if err != nil {
				t.Fatal(err)
			}
			wantTraces := map[string]bool{}
			var wantSpans []string
			for id := range ids {
				tr, _, err := b.Trace(context.Background(), "default", id)
				if err != nil {
					t.Fatal(err)
				}
				sets, err := q.Eval(tr)
				if err != nil {
					t.Fatal(err)
				}
				if len(sets) > 0 {
					wantTraces[id.String()] = true
				}
				var idx []int
				for _, ss := range sets {
					idx = append(idx, ss.Spans...)
				}
				slices.Sort(idx)
				for _, x := range slices.Compact(idx) {
					wantSpans = append(wantSpans, tr[x].SpanID.String())
				}
			}
			var traces struct {
				Traces []struct {
					TraceID string `json:"trace_id"`
					Matched int    `json:"matched_spans"`
				} `json:"traces"`
				Metrics struct {
					Inspected int  `json:"inspected_traces"`
					Partial   bool `json:"partial"`
				} `json:"metrics"`
			}
			path := "/api/v1/traces?since=3h&limit=1000&q=" + url.QueryEscape(src)
			if code := ts.get(path, &traces); code != 200 {
				t.Fatalf("%s: %d", src, code)
			}
			got := map[string]bool{}
			for _, tr := range traces.Traces {
				got[tr.TraceID] = true
			}
			if len(got) != len(wantTraces) || traces.Metrics.Partial || traces.Metrics.Inspected == 0 {
				t.Fatalf("%s: traces %v (metrics %+v), want %v", src, got, traces.Metrics, wantTraces)
			}
			for id := range wantTraces {
				if !got[id] {
					t.Fatalf("%s: trace %s missing", src, id)
				}
			}
			var sp struct {
				Spans []struct {
					SpanID string `json:"span_id"`
				} `json:"spans"`
			}
			if code := ts.get("/api/v1/spans?since=3h&limit=1000&q="+url.QueryEscape(src), &sp); code != 200 {
				t.Fatalf("%s spans: %d", src, code)
			}
			var gotSpans []string
			for _, s := range sp.Spans {
				gotSpans = append(gotSpans, s.SpanID)
			}
			slices.Sort(gotSpans)
			slices.Sort(wantSpans)
			if !slices.Equal(gotSpans, wantSpans) {
				t.Fatalf("%s: spans %v, want %v", src, gotSpans, wantSpans)
			}
		}
		for _, c := range []struct{ path, want string }{
			{"/api/v1/spans?cursor=x&q=" + url.QueryEscape(`{ } >> { }`), "paging is not available"},
			{"/api/v1/traces?service=svc-a&q=" + url.QueryEscape(`{ } >> { }`), "cannot be combined"},
			{"/api/v1/traces?q=" + url.QueryEscape(`({ } | by(name)) >> { }`), "coalesce"},
		} {
			code, _, body := ts.request("GET", c.path, nil)
			var e struct{ Error string }
			json.Unmarshal(body, &e)
			if code != 400 || !strings.Contains(e.Error, c.want) {
				t.Errorf("%s: %d %s, want 400 naming %q", c.path, code, body, c.want)
			}
		}
	})
}

// TestTempoSearchStructural: Tempo's /api/search answers a pipeline with
// one spanSet per result spanset, carrying its by() and aggregate values
// as attributes, as Grafana reads them.
func TestTempoSearchStructural(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		ts.ingest(recentSpans(40, 7), "")
		var resp struct {
			Traces []struct {
				TraceID  string `json:"traceID"`
				SpanSets []struct {
					Matched int `json:"matched"`
					Spans   []struct {
						SpanID     string `json:"spanID"`
						Attributes []struct {
							Key string `json:"key"`
						} `json:"attributes"`
					} `json:"spans"`
					Attributes []struct {
						Key   string         `json:"key"`
						Value map[string]any `json:"value"`
					} `json:"attributes"`
				} `json:"spanSets"`
			} `json:"traces"`
		}
		q := `{ } | by(resource.service.name) | count() > 1 | select(span.http.route)`
		if code := ts.get("/api/search?q="+url.QueryEscape(q), &resp); code != 200 {
			t.Fatalf("search: %d", code)
		}
		if len(resp.Traces) != 10 {
			t.Fatalf("%d traces, want the 10 traces of 4 spans", len(resp.Traces))
		}
		for _, tr := range resp.Traces {
			if len(tr.SpanSets) != 2 {
				t.Fatalf("trace %s: %d spanSets, want one per service", tr.TraceID, len(tr.SpanSets))
			}
			for _, ss := range tr.SpanSets {
				if ss.Matched != 2 || len(ss.Spans) != 2 || len(ss.Attributes) != 2 ||
					ss.Attributes[0].Key != "by(resource.service.name)" || ss.Attributes[1].Key != "count()" ||
					ss.Attributes[1].Value["intValue"] != "2" {
					t.Fatalf("trace %s: spanSet %+v", tr.TraceID, ss)
				}
				for _, sp := range ss.Spans {
					if len(sp.Attributes) != 1 || sp.Attributes[0].Key != "span.http.route" {
						t.Fatalf("trace %s: span %+v lacks the selected attribute", tr.TraceID, sp)
					}
				}
			}
		}
	})
}
