package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// The API suite: routing, error shapes, paging, project isolation and the
// JSON shapes of every route family, run against every backend behind the
// seam. A new backend (ClickHouse) joins by adding a factory here.
var apiBackends = []struct {
	name string
	open func(t *testing.T) store.Backend
}{
	{"memstore", func(t *testing.T) store.Backend {
		m := memstore.New(memstore.Options{})
		t.Cleanup(m.Close)
		return m
	}},
	{"engine", func(t *testing.T) store.Backend {
		e, err := engine.Open(engine.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}},
	// A real clickhouse-server (internal/chstore/chtest), one database per
	// test; without the server installed this fails and says how to get it.
	{"clickhouse", func(t *testing.T) store.Backend {
		s, err := chstore.Open(t.Context(), chstore.Options{URL: chtest.URL(t), BatchWindow: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// startWith starts a real server on loopback ports over b (nil: no backend
// attached, as while the WAL replays).
func startWith(t *testing.T, b store.Backend) *testServer {
	t.Helper()
	srv, err := New(Options{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if b != nil {
		srv.SetBackend(b)
	}
	ts := &testServer{t: t, srv: srv, base: "http://" + srv.HTTPAddr()}
	if e, ok := b.(*engine.Engine); ok {
		ts.eng = e
	}
	// Registered after the backend's cleanup: runs first.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		http.DefaultClient.CloseIdleConnections()
	})
	return ts
}

// forEachBackend runs f against a fresh server over each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, ts *testServer, b store.Backend)) {
	for _, be := range apiBackends {
		t.Run(be.name, func(t *testing.T) {
			b := be.open(t)
			f(t, startWith(t, b), b)
		})
	}
}

// do sends a request and returns the status, headers and body.
func (ts *testServer) request(method, path string, body []byte, hdr ...string) (int, http.Header, []byte) {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.base+path, bytes.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// wantError checks a JSON error answer: the status, and a message holding want.
func wantError(t *testing.T, what string, code int, hdr http.Header, body []byte, wantCode int, want string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if code != wantCode || hdr.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, want) {
		t.Errorf("%s: %d %s %q, want %d and a JSON error containing %q", what, code, hdr.Get("Content-Type"), body, wantCode, want)
	}
}

// recentSpans makes n spans in traces of 4, a second apart, ending a
// minute ago (inside every default window), with services a and b.
func recentSpans(n int, seed byte) []model.Span {
	base := uint64(time.Now().Add(-time.Minute).UnixNano()) - uint64(n)*1e9
	out := make([]model.Span, n)
	for i := range out {
		svc := []string{"svc-a", "svc-b"}[i%2]
		res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(svc)}}}
		s := model.Span{
			TraceID: model.TraceID{seed, byte(i / 4), 7}, SpanID: model.SpanID{seed, byte(i), 9},
			Name: fmt.Sprintf("op-%d", i%3), Kind: model.KindServer, Resource: res, Service: svc,
			StartTimeUnixNano: base + uint64(i)*1e9, EndTimeUnixNano: base + uint64(i)*1e9 + 5e6,
			Attributes: []model.KeyValue{{Key: "http.route", Value: model.StringValue(fmt.Sprintf("/r/%d", i%2))}},
		}
		if i%4 != 0 {
			s.ParentSpanID = model.SpanID{seed, byte(i - i%4), 9}
		}
		if i%5 == 0 {
			s.StatusCode = model.StatusError
		}
		out[i] = s
	}
	return out
}

// ingest posts spans as OTLP protobuf in project (empty: the default).
func (ts *testServer) ingest(spans []model.Span, project string) {
	ts.t.Helper()
	var hdr []string
	if project != "" {
		hdr = []string{"X-Scope-OrgID", project}
	}
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans), hdr...); code != 200 {
		ts.t.Fatalf("ingest: %d %s", code, body)
	}
}

func TestAPIRoutingAndErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		ts.ingest(recentSpans(8, 1), "")
		for _, c := range []struct {
			method, path string
			hdr          []string
			code         int
			msg          string
		}{
			{"GET", "/api/v1/nope", nil, 404, "no route for GET /api/v1/nope"},
			{"POST", "/api/v1/spans", nil, 404, "no route for POST /api/v1/spans"},
			{"GET", "/v1/metrics", nil, 404, "no route for GET /v1/metrics"},
			{"GET", "/api/v1/traces/xyz", nil, 400, "trace"},
			{"GET", "/api/v1/traces/" + strings.Repeat("ab", 16), nil, 404, `not found in project "default"`},
			{"GET", "/api/v1/traces/" + model.TraceID{1, 0, 7}.String() + "?format=yaml", nil, 400, `unknown format "yaml"`},
			{"GET", "/api/v1/spans?q=" + url.QueryEscape("{ span.x = }"), nil, 400, "position"},
			{"GET", "/api/v1/spans?cursor=nope", nil, 400, "cursor"},
			{"GET", "/api/v1/spans", []string{"X-Scope-OrgID", "bad tenant!"}, 400, "X-Scope-OrgID"},
			{"GET", "/api/v1/llm/stats?group_by=colour", nil, 400, `unknown key "colour"`},
			{"GET", "/api/v1/sessions?sort=size", nil, 400, "sort"},
			{"GET", "/api/v1/sessions/nope", nil, 404, `session "nope" not found`},
			{"GET", "/api/v1/erasures/7", nil, 404, "no erasure 7"},
			{"POST", "/api/v1/erase", nil, 400, "body"},
			{"GET", "/api/v1/services?since=1969-01-01T00:00:00Z", nil, 400, "since"},
			{"POST", "/healthz", nil, 404, "no route for POST /healthz"},
			{"DELETE", "/metrics", nil, 404, "no route for DELETE /metrics"},
		} {
			code, hdr, body := ts.request(c.method, c.path, nil, c.hdr...)
			wantError(t, c.method+" "+c.path, code, hdr, body, c.code, c.msg)
		}
		// Outside the API, paths are the web UI's; with no UI they say so.
		code, hdr, body := ts.request("GET", "/traces/abc", nil)
		wantError(t, "GET /traces/abc without a UI", code, hdr, body, 404, "web UI is turned off")
	})
}

// TestAPIBeforeTheBackendIsAttached: while the store opens (WAL replay),
// queries and ingest answer 503 with Retry-After, and /readyz says so.
func TestAPIBeforeTheBackendIsAttached(t *testing.T) {
	ts := startWith(t, nil)
	for _, p := range []string{"/api/v1/spans", "/api/v1/stats", "/readyz"} {
		code, hdr, body := ts.request("GET", p, nil)
		if code != 503 || (p != "/readyz" && hdr.Get("Retry-After") == "") {
			t.Errorf("GET %s before the backend: %d %s (Retry-After %q), want 503", p, code, body, hdr.Get("Retry-After"))
		}
	}
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(recentSpans(2, 1))); code != 503 {
		t.Errorf("ingest before the backend: %d %s, want 503", code, body)
	}
}

// TestAPIPagingWalksEverySpanOnce: following next_cursor with a small limit
// returns every span exactly once, newest first, whatever the backend.
func TestAPIPagingWalksEverySpanOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(23, 2)
		// Two spans start at the same time: the order falls back to ids.
		spans[5].StartTimeUnixNano = spans[6].StartTimeUnixNano
		ts.ingest(spans[:12], "")
		if ts.eng != nil {
			if err := ts.eng.Seal(); err != nil { // half in a segment, half in the buffer
				t.Fatal(err)
			}
		}
		ts.ingest(spans[12:], "")
		want := slices.Clone(spans)
		slices.SortFunc(want, func(a, b model.Span) int {
			if a.StartTimeUnixNano != b.StartTimeUnixNano {
				return cmp.Compare(b.StartTimeUnixNano, a.StartTimeUnixNano)
			}
			if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
				return c
			}
			return bytes.Compare(a.SpanID[:], b.SpanID[:])
		})
		var got []string
		cursor, pages := "", 0
		for {
			var page spansResp
			path := "/api/v1/spans?limit=5"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			if code := ts.get(path, &page); code != 200 {
				t.Fatalf("page %d: %d", pages, code)
			}
			for _, s := range page.Spans {
				got = append(got, s["span_id"].(string))
			}
			pages++
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		var wantIDs []string
		for _, s := range want {
			wantIDs = append(wantIDs, s.SpanID.String())
		}
		if !slices.Equal(got, wantIDs) || pages != 5 {
			t.Fatalf("paged %d pages:\n got %v\nwant %v", pages, got, wantIDs)
		}
	})
}

// TestAPIProjectsAreIsolated: X-Scope-OrgID selects the project on every
// route family; no answer mixes projects.
func TestAPIProjectsAreIsolated(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		a, bb := recentSpans(8, 3), recentSpans(4, 4)
		ts.ingest(a, "tenant-a")
		ts.ingest(bb, "tenant-b")
		count := func(project string) int {
			var page spansResp
			if code := ts.get("/api/v1/spans?limit=100", &page, "X-Scope-OrgID", project); code != 200 {
				t.Fatalf("search %s: %d", project, code)
			}
			return len(page.Spans)
		}
		if got := [3]int{count("tenant-a"), count("tenant-b"), count("default")}; got != [3]int{8, 4, 0} {
			t.Fatalf("spans per project a, b, default: %v, want [8 4 0]", got)
		}
		id := a[0].TraceID.String()
		if code := ts.get("/api/v1/traces/"+id, nil, "X-Scope-OrgID", "tenant-b"); code != 404 {
			t.Fatalf("tenant-a's trace from tenant-b: %d, want 404", code)
		}
		var tr traceResp
		if code := ts.get("/api/v1/traces/"+id, &tr, "X-Scope-OrgID", "tenant-a"); code != 200 || len(tr.Spans) != 4 {
			t.Fatalf("tenant-a's trace: %d, %d spans", code, len(tr.Spans))
		}
		var svc struct {
			Services []struct {
				Name  string `json:"name"`
				Count int    `json:"count"`
			} `json:"services"`
		}
		if code := ts.get("/api/v1/services", &svc, "X-Scope-OrgID", "tenant-b"); code != 200 ||
			len(svc.Services) != 2 || svc.Services[0].Count+svc.Services[1].Count != 4 {
			t.Fatalf("tenant-b services: %d %+v", code, svc)
		}
		var empty map[string]json.RawMessage
		if code := ts.get("/api/v1/services", &empty, "X-Scope-OrgID", "nobody"); code != 200 || string(empty["services"]) != "[]" {
			t.Fatalf("services of an empty project: %d %s, want []", code, empty["services"])
		}
		// Erasing in one project leaves the other's trace with the same id.
		shared := recentSpans(4, 3) // same ids as tenant-a's first trace
		ts.ingest(shared, "tenant-b")
		code, hdr, body := ts.request("DELETE", "/api/v1/traces/"+id, nil, "X-Scope-OrgID", "tenant-b")
		if code != 202 || !strings.HasPrefix(hdr.Get("Location"), "/api/v1/erasures/") {
			t.Fatalf("erase in tenant-b: %d %s", code, body)
		}
		if code := ts.get("/api/v1/traces/"+id, &tr, "X-Scope-OrgID", "tenant-a"); code != 200 || len(tr.Spans) != 4 {
			t.Fatalf("tenant-a's trace after tenant-b erased its copy: %d, %d spans", code, len(tr.Spans))
		}
		if code := ts.get("/api/v1/traces/"+id, nil, "X-Scope-OrgID", "tenant-b"); code != 404 {
			t.Fatalf("tenant-b's erased trace: %d, want 404", code)
		}
		var st struct {
			Erasures []map[string]any `json:"erasures"`
		}
		if ts.get("/api/v1/erasures", &st, "X-Scope-OrgID", "tenant-a"); len(st.Erasures) != 0 {
			t.Fatalf("tenant-a sees tenant-b's erasures: %v", st.Erasures)
		}
		if ts.get(hdr.Get("Location"), nil, "X-Scope-OrgID", "tenant-a") != 404 {
			t.Fatal("tenant-b's erasure is visible by id from tenant-a")
		}
	})
}

// decodeStrict decodes body into v, refusing fields v does not have: the
// test's struct is the documented shape, so a field added or renamed by
// accident fails here.
func decodeStrict(t *testing.T, what string, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v in %s", what, err, body)
	}
}

// The shapes below are the documented JSON of docs/api.md, written out here
// rather than taken from the server's own types: a field renamed, added or
// dropped in the server fails the strict decoding.

type traceSummaryShape struct {
	TraceID       string   `json:"trace_id"`
	RootService   string   `json:"root_service"`
	RootName      string   `json:"root_name"`
	StartTime     string   `json:"start_time"`
	StartUnixNano uint64   `json:"start_time_unix_nano"`
	DurationNanos uint64   `json:"duration_ns"`
	SpanCount     int      `json:"span_count"`
	ErrorCount    int      `json:"error_count"`
	MatchedSpans  int      `json:"matched_spans"`
	Services      []string `json:"services"`
}

type statsShape struct {
	Spans        int64    `json:"spans"`
	Traces       int64    `json:"traces"`
	Segments     int      `json:"segments"`
	DiskBytes    int64    `json:"disk_bytes"`
	SegmentBytes int64    `json:"segment_bytes"`
	BufferSpans  int64    `json:"buffer_spans"`
	BufferBytes  int64    `json:"buffer_bytes"`
	WALBytes     int64    `json:"wal_bytes"`
	ValueBytes   int64    `json:"value_bytes"`
	Values       int64    `json:"values"`
	Quarantined  []string `json:"quarantined"`
	SealError    string   `json:"seal_error"`
}

type messageShape struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolName   string `json:"tool_name"`
	ToolCallID string `json:"tool_call_id"`
}

type llmCallShape struct {
	SpanID              string         `json:"span_id"`
	Name                string         `json:"name"`
	Service             string         `json:"service"`
	StartTime           string         `json:"start_time"`
	DurationNanos       uint64         `json:"duration_ns"`
	Status              string         `json:"status"`
	Provider            string         `json:"provider"`
	Model               string         `json:"model"`
	Operation           string         `json:"operation"`
	Agent               string         `json:"agent"`
	Tool                string         `json:"tool"`
	User                string         `json:"user"`
	Counted             bool           `json:"counted"`
	InputTokens         int64          `json:"input_tokens"`
	OutputTokens        int64          `json:"output_tokens"`
	CacheReadTokens     int64          `json:"cache_read_tokens"`
	CacheCreationTokens int64          `json:"cache_creation_tokens"`
	ReasoningTokens     int64          `json:"reasoning_tokens"`
	CostUSD             float64        `json:"cost_usd"`
	CostSource          string         `json:"cost_source"`
	InputMessages       []messageShape `json:"input_messages"`
	OutputMessages      []messageShape `json:"output_messages"`
}

type erasureShape struct {
	ID          uint64     `json:"id"`
	Project     string     `json:"project"`
	Query       string     `json:"query"`
	TraceID     string     `json:"trace_id"`
	State       string     `json:"state"`
	RequestedAt time.Time  `json:"requested_at"`
	HiddenAt    *time.Time `json:"hidden_at"`
	DoneAt      *time.Time `json:"done_at"`
	Traces      int        `json:"traces"`
	SpansErased int64      `json:"spans_erased"`
	Error       string     `json:"error"`
}

type nameCountShape struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

type measuresShape struct {
	Spans               int64   `json:"spans"`
	Counted             int64   `json:"counted_spans"`
	Errors              int64   `json:"errors"`
	Traces              int64   `json:"traces"`
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CacheReadTokens     int64   `json:"cache_read_tokens"`
	CacheCreationTokens int64   `json:"cache_creation_tokens"`
	ReasoningTokens     int64   `json:"reasoning_tokens"`
	CostUSD             float64 `json:"cost_usd"`
	FirstSeen           string  `json:"first_seen"`
	LastSeen            string  `json:"last_seen"`
	Latency             *struct {
		P50, P95, P99, Max float64
	} `json:"latency_ms"`
	TTFT *struct {
		P50, P95, P99, Max float64
	} `json:"time_to_first_token_ms"`
}

// TestAPIShapes decodes one answer of every query route with the exact
// documented field set and checks the values against what was sent.
func TestAPIShapes(t *testing.T) {
	// Generated at a fixed start and moved to two hours ago: the corpus's
	// content depends on its start's hour, and the checks below need the
	// same content every day.
	fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	corpus, err := bench.Generate("llm", bench.CorpusOptions{Seed: 9, Spans: 600, Start: fixed, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	corpus = bench.Moved(corpus, time.Now().Add(-2*time.Hour).Sub(fixed))
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := slices.Clone(corpus)
		ts.ingest(spans, "")
		get := func(path string, v any) {
			t.Helper()
			code, _, body := ts.request("GET", path, nil)
			if code != 200 {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			// A listing's window (window_test.go checks it) is
			// taken out here, so that the strict decode checks the rest.
			var top map[string]json.RawMessage
			if json.Unmarshal(body, &top) == nil && top["window"] != nil {
				var win windowJSONField
				decodeStrict(t, path, top["window"], &win)
				if win.Since == "" || win.Description == "" {
					t.Fatalf("GET %s: window %s", path, top["window"])
				}
				delete(top, "window")
				body, _ = json.Marshal(top)
			}
			decodeStrict(t, path, body, v)
		}

		var traces struct {
			Traces []traceSummaryShape `json:"traces"`
		}
		get("/api/v1/traces?limit=3&since=3h", &traces)
		if len(traces.Traces) != 3 || traces.Traces[0].SpanCount == 0 || traces.Traces[0].StartTime == "" ||
			len(traces.Traces[0].TraceID) != 32 || len(traces.Traces[0].Services) == 0 {
			t.Fatalf("trace summaries: %+v", traces.Traces)
		}

		var stats struct {
			GroupBy []string `json:"group_by"`
			Groups  []struct {
				Key map[string]string `json:"key"`
				measuresShape
			} `json:"groups"`
			Totals      measuresShape `json:"totals"`
			TotalGroups int           `json:"total_groups"`
			RelErr      float64       `json:"percentile_relative_error"`
			Warning     []string      `json:"warnings"`
		}
		get("/api/v1/llm/stats?group_by=model&since=3h", &stats)
		var llmSpans int64
		for i := range spans {
			if spans[i].LLM != nil {
				llmSpans++
			}
		}
		if stats.Totals.Spans == 0 || stats.Totals.Latency != nil || len(stats.Groups) == 0 || stats.Groups[0].Latency == nil ||
			!slices.Equal(stats.GroupBy, []string{"model"}) || stats.RelErr < 0 || stats.RelErr > 0.02 || stats.TotalGroups != len(stats.Groups) {
			t.Fatalf("llm stats: %+v", stats)
		}
		var sum int64
		for _, g := range stats.Groups {
			sum += g.Spans
		}
		if sum != stats.Totals.Spans {
			t.Fatalf("groups add up to %d spans, totals say %d", sum, stats.Totals.Spans)
		}

		var series struct {
			GroupBy []string `json:"group_by"`
			Step    int64    `json:"step_seconds"`
			Points  []struct {
				Key  map[string]string `json:"key"`
				Time string            `json:"time"`
				measuresShape
			} `json:"points"`
			RelErr float64 `json:"percentile_relative_error"`
		}
		get("/api/v1/llm/timeseries?step=30m&since=3h", &series)
		var pointSpans int64
		for i, p := range series.Points {
			pointSpans += p.Spans
			if i > 0 && p.Time < series.Points[i-1].Time {
				t.Fatalf("points out of time order: %s after %s", p.Time, series.Points[i-1].Time)
			}
		}
		if series.Step != 1800 || pointSpans != stats.Totals.Spans {
			t.Fatalf("time series: step %d, %d spans over the points, want 1800 and %d", series.Step, pointSpans, stats.Totals.Spans)
		}

		var sessions struct {
			Sessions []struct {
				ID    string   `json:"session_id"`
				Users []string `json:"users"`
				measuresShape
			} `json:"sessions"`
			Total      int `json:"total"`
			NextOffset int `json:"next_offset"`
		}
		get("/api/v1/sessions?limit=2&sort=spans&since=3h", &sessions)
		if len(sessions.Sessions) != 2 || sessions.Total < 3 || sessions.NextOffset != 2 ||
			sessions.Sessions[0].Spans < sessions.Sessions[1].Spans || sessions.Sessions[0].Latency != nil {
			t.Fatalf("sessions page: %+v", sessions)
		}
		var session struct {
			ID     string `json:"session_id"`
			Traces []struct {
				TraceID     string            `json:"trace_id"`
				StartTime   string            `json:"start_time"`
				Duration    uint64            `json:"duration_ns"`
				RootService string            `json:"root_service"`
				RootName    string            `json:"root_name"`
				Spans       int               `json:"span_count"`
				Errors      int               `json:"error_count"`
				LLMSpans    []json.RawMessage `json:"llm_spans"`
			} `json:"traces"`
		}
		get("/api/v1/sessions/"+url.PathEscape(sessions.Sessions[0].ID)+"?since=3h", &session)
		if session.ID != sessions.Sessions[0].ID || len(session.Traces) == 0 || len(session.Traces[0].LLMSpans) == 0 {
			t.Fatalf("session: %+v", session)
		}
		var call llmCallShape
		decodeStrict(t, "llm call", session.Traces[0].LLMSpans[0], &call)
		if call.SpanID == "" || call.InputMessages == nil || call.OutputMessages == nil {
			t.Fatalf("llm call: %+v", call)
		}

		var attrs struct {
			Attributes []nameCountShape `json:"attributes"`
		}
		get("/api/v1/attributes?since=3h", &attrs)
		if !slices.ContainsFunc(attrs.Attributes, func(n nameCountShape) bool { return n.Name == "resource.service.name" && n.Count > 0 }) {
			t.Fatalf("attribute keys lack resource.service.name: %+v", attrs.Attributes)
		}
		var values struct {
			Values []nameCountShape `json:"values"`
		}
		get("/api/v1/attributes/service.name/values?since=3h&limit=2", &values)
		if len(values.Values) != 2 || values.Values[0].Count < values.Values[1].Count {
			t.Fatalf("attribute values: %+v", values.Values)
		}

		code, _, body := ts.request("GET", "/api/v1/stats", nil)
		if _, ok := b.(store.StatsReporter); ok {
			var st statsShape
			decodeStrict(t, "stats", body, &st)
			if code != 200 || st.Spans != int64(len(spans)) {
				t.Fatalf("stats: %d %+v, want %d spans", code, st, len(spans))
			}
		} else if code != 501 {
			t.Fatalf("stats without the capability: %d %s, want 501", code, body)
		}
		// An erasure's status, by its id and in the list.
		code, hdr, body := ts.request("DELETE", "/api/v1/traces/"+traces.Traces[0].TraceID, nil)
		var er erasureShape
		decodeStrict(t, "erasure", body, &er)
		if code != 202 || er.ID == 0 || er.TraceID != traces.Traces[0].TraceID || er.HiddenAt == nil || er.Project != "default" {
			t.Fatalf("erase: %d %s", code, body)
		}
		var ers struct {
			Erasures []erasureShape `json:"erasures"`
		}
		get("/api/v1/erasures", &ers)
		get(hdr.Get("Location"), &er)
		if len(ers.Erasures) != 1 || ers.Erasures[0].ID != er.ID {
			t.Fatalf("erasures: %+v", ers)
		}

		code, hdr, body = ts.request("POST", "/api/v1/admin/compact", nil)
		if _, ok := b.(store.Compactor); ok {
			var res struct {
				Merges         int     `json:"merges"`
				SegmentsBefore int     `json:"segments_before"`
				SegmentsAfter  int     `json:"segments_after"`
				BytesWritten   int64   `json:"bytes_written"`
				TookMS         float64 `json:"took_ms"`
			}
			decodeStrict(t, "compact", body, &res)
			if code != 200 {
				t.Fatalf("compact: %d %s", code, body)
			}
		} else {
			wantError(t, "compact without the capability", code, hdr, body, 501, "does not support")
		}
	})
}

// failing is a backend whose queries fail with err: how the API maps a
// backend's error kinds to statuses, whatever the backend.
type failing struct {
	store.Backend
	err error
}

func (f failing) SearchSpans(context.Context, string, *query.Filter, int, *store.Cursor) ([]model.Span, *store.Cursor, store.Result, error) {
	return nil, nil, store.Result{}, f.err
}

func (f failing) Append(context.Context, *store.Write) error { return f.err }

func TestAPIMapsBackendErrors(t *testing.T) {
	for _, c := range []struct {
		err                  error
		query, ingest        int
		queryMsg, ingestMsgs string
	}{
		{fmt.Errorf("I/O error reading segment 7.seg: %w", errors.New("input/output error")), 500, 503, "query failed: I/O error", "could not store"},
		{fmt.Errorf("nope: %w", store.ErrBadRequest), 400, 400, "nope", "nope"},
		{store.ErrClosed, 503, 503, "closing", "could not store"},
		{fmt.Errorf("insert_quorum=2: too few replicas: %w", store.ErrUnavailable), 503, 503, "retry later: insert_quorum=2", "nothing was stored"},
		{fmt.Errorf("full: %w", store.ErrOverloaded), 500, 429, "query failed", "write buffer is full"},
	} {
		ts := startWith(t, failing{memstore.New(memstore.Options{}), c.err})
		code, hdr, body := ts.request("GET", "/api/v1/spans", nil)
		wantError(t, fmt.Sprintf("query failing with %v", c.err), code, hdr, body, c.query, c.queryMsg)
		code, hdr, body = ts.request("POST", "/v1/spans", []byte(`[{"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b174","name":"x","start_time":1}]`),
			"Content-Type", "application/json")
		wantError(t, fmt.Sprintf("ingest failing with %v", c.err), code, hdr, body, c.ingest, c.ingestMsgs)
		if (c.ingest == 429 || errors.Is(c.err, store.ErrUnavailable)) && hdr.Get("Retry-After") == "" {
			t.Errorf("%d for %v without Retry-After", c.ingest, c.err)
		}
	}
}

// TestServerDoesNotImportStorage: the API knows storage only through
// internal/store. (The before-stop hook checks the same with go list.)
func TestServerDoesNotImportStorage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/engine", "/internal/segment", "/internal/wal", "/internal/valuestore", "/internal/sketch"} {
			if strings.HasSuffix(dep, banned) {
				t.Errorf("internal/server depends on %s: speak to storage through internal/store", dep)
			}
		}
	}
}

// TestExtraListenersServeTheSameRoutes: --tempo-addr, --jaeger-addr and
// --zipkin-addr serve every route, so existing configurations only change
// their host.
func TestExtraListenersServeTheSameRoutes(t *testing.T) {
	ts := startServer(t, Options{ExtraHTTPAddrs: []string{"127.0.0.1:0", "", "127.0.0.1:0"}})
	extra := ts.srv.ExtraHTTPAddrs()
	if len(extra) != 2 {
		t.Fatalf("extra listeners: %v, want 2 (empty addresses are skipped)", extra)
	}
	zipkin := &testServer{t: t, base: "http://" + extra[1]}
	code, body := zipkin.post("/api/v2/spans", "application/json", []byte(`[{"traceId":"00000000000000000000000000000abc","id":"0000000000000001","name":"x","timestamp":1700000000000000,"duration":3,"localEndpoint":{"serviceName":"legacy"}}]`))
	if code != 202 {
		t.Fatalf("zipkin on its own port: %d %s", code, body)
	}
	tempo := &testServer{t: t, base: "http://" + extra[0]}
	if code, _, body := tempo.request("GET", "/api/echo", nil); code != 200 || string(body) != "echo\n" {
		t.Fatalf("tempo port: %d %q", code, body)
	}
	if code, _, body := tempo.request("GET", "/api/v2/traces/abc", nil, "Accept", "application/protobuf"); code != 200 || len(body) < 10 {
		t.Fatalf("trace sent on the zipkin port, read on the tempo port: %d %x", code, body)
	}
}

// TestAPITraceLevelConditions: rootServiceName, rootName and traceDuration
// select every span of the traces they describe, part sealed and part in
// the write buffer; where spans are read without their traces (live tail,
// LLM statistics) they are refused with a 400.
func TestAPITraceLevelConditions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(16, 6) // 4 traces of 4 spans; roots at 0, 4, 8, 12
		res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("edge")}}}
		spans[4].Resource, spans[4].Service, spans[4].Name = res, "edge", "GET /edge"
		spans[15].EndTimeUnixNano = spans[12].StartTimeUnixNano + uint64(30*time.Second) // trace 3 lasts 30 s
		ts.ingest(spans[:8], "")
		if ts.eng != nil {
			if err := ts.eng.Seal(); err != nil {
				t.Fatal(err)
			}
		}
		ts.ingest(spans[8:], "")
		ids := func(q string) []string {
			t.Helper()
			var page spansResp
			if code := ts.get("/api/v1/spans?limit=100&q="+url.QueryEscape(q), &page); code != 200 {
				t.Fatalf("%s: %d", q, code)
			}
			var out []string
			for _, s := range page.Spans {
				out = append(out, s["span_id"].(string))
			}
			slices.Sort(out)
			return out
		}
		want := func(idx ...int) []string {
			var out []string
			for _, i := range idx {
				out = append(out, spans[i].SpanID.String())
			}
			slices.Sort(out)
			return out
		}
		for q, w := range map[string][]string{
			`{ rootServiceName = "edge" }`:                           want(4, 5, 6, 7),
			`{ trace:rootService = "edge" && kind = server }`:        want(4, 5, 6, 7),
			`{ rootName = "GET /edge" && span.http.route = "/r/1" }`: want(5, 7),
			`{ traceDuration > 20s }`:                                want(12, 13, 14, 15),
			`{ !(rootServiceName = "svc-a") }`:                       want(4, 5, 6, 7),
		} {
			if got := ids(q); !slices.Equal(got, w) {
				t.Errorf("%s: %v, want %v", q, got, w)
			}
		}
		var traces struct {
			Traces []traceSummaryShape `json:"traces"`
		}
		if code := ts.get("/api/v1/traces?q="+url.QueryEscape(`{ traceDuration > 20s }`), &traces); code != 200 ||
			len(traces.Traces) != 1 || traces.Traces[0].TraceID != spans[12].TraceID.String() {
			t.Fatalf("trace search by duration: %d %+v", code, traces.Traces)
		}
		for _, path := range []string{"/api/v1/tail", "/api/v1/llm/stats"} {
			code, hdr, body := ts.request("GET", path+"?q="+url.QueryEscape(`{ rootServiceName = "edge" }`), nil)
			wantError(t, path, code, hdr, body, 400, "trace-level conditions")
		}
	})
}
