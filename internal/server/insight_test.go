package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/insight"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestSummaryAndAnomalyRoutes: the summary and the anomaly list over HTTP
// on both backends: figures, filters, the text rendering, links into the
// UI, and clear errors for bad parameters.
func TestSummaryAndAnomalyRoutes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, b store.Backend) {
		spans := recentSpans(40, 3)
		for i := range spans {
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
		var s insight.Summary
		get("/api/v1/summary?since=2h", &s)
		if s.Totals.Spans != 40 || s.Totals.Errors != 8 || len(s.Services) != 2 || s.Services[0].Current.Spans != 20 {
			t.Fatalf("summary: totals %+v services %+v", s.Totals, s.Services)
		}
		if len(s.ErrorGroups) == 0 || s.ErrorGroups[0].Message != "timeout after <n> ms" || s.ErrorGroups[0].Links.TraceID == "" {
			t.Fatalf("summary error groups: %+v", s.ErrorGroups)
		}
		if s.ErrorGroups[0].Links.TraceURL != "" {
			t.Fatalf("links into a UI the server does not have: %+v", s.ErrorGroups[0].Links)
		}
		if len(s.SlowestOperations) == 0 || s.Anomalies == nil {
			t.Fatalf("summary lists: %+v", s)
		}
		// A service and a filter narrow it.
		get("/api/v1/summary?since=2h&service=svc-a", &s)
		if s.Totals.Spans != 20 || len(s.Services) != 1 || s.Services[0].Service != "svc-a" {
			t.Fatalf("summary of svc-a: %+v", s.Totals)
		}
		get("/api/v1/summary?since=2h&q="+url.QueryEscape(`{ status = error }`), &s)
		if s.Totals.Spans != 8 || s.Totals.Errors != 8 {
			t.Fatalf("summary of the error spans: %+v", s.Totals)
		}
		// The text rendering.
		code, hdr, body := ts.request("GET", "/api/v1/summary?since=2h&format=text", nil)
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") ||
			!strings.Contains(string(body), "svc-a: ") || !strings.Contains(string(body), `"timeout after <n> ms" x`) {
			t.Fatalf("text summary: %d %s\n%s", code, hdr.Get("Content-Type"), body)
		}
		var a insight.AnomalyReport
		get("/api/v1/anomalies?since=2h&sensitivity=2", &a)
		if a.Sensitivity != 2 || a.Threshold != 0.5 || a.Method == "" || a.Anomalies == nil {
			t.Fatalf("anomalies: %+v", a)
		}
		for _, c := range []struct{ path, want string }{
			{"/api/v1/summary?since=2h&sensitivity=0", "sensitivity"},
			{"/api/v1/anomalies?sensitivity=lots", "sensitivity"},
			{"/api/v1/summary?format=yaml", "format"},
			{"/api/v1/summary?since=1h&until=2h", "is not before until"},
			{"/api/v1/summary?q=" + url.QueryEscape("{ nonsense"), "q:"},
			{"/api/v1/summary?limit=0", "limit"},
			{"/api/v1/anomalies?since=yesterday", "since"},
		} {
			code, _, body := ts.request("GET", c.path, nil)
			if code != 400 || !strings.Contains(string(body), c.want) {
				t.Errorf("GET %s: %d %s, want 400 naming %q", c.path, code, body, c.want)
			}
		}
	})
}

// TestSummaryLinksIntoTheUI: with the web UI on, the summary's links are
// absolute URLs of this server's pages.
func TestSummaryLinksIntoTheUI(t *testing.T) {
	ts := startServer(t, Options{UI: http.NotFoundHandler()})
	spans := recentSpans(40, 4)
	ts.ingest(spans, "")
	var s insight.Summary
	if code := ts.get("/api/v1/summary?since=2h", &s); code != 200 {
		t.Fatalf("summary: %d", code)
	}
	g := s.ErrorGroups[0]
	if g.Links.TraceURL != ts.base+"/traces/"+g.Links.TraceID+"?span="+g.Links.SpanID || !strings.HasPrefix(g.Links.SearchURL, ts.base+"/search?q=") {
		t.Fatalf("links: %+v (base %s)", g.Links, ts.base)
	}
	if _, err := time.Parse(time.RFC3339Nano, s.Window.Since); err != nil {
		t.Fatalf("window: %+v", s.Window)
	}
}
