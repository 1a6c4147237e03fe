package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
)

// fuzzRoutes are the query routes FuzzQueryRoutes drives: every GET query
// route of the table (the live tail streams until its client leaves, and
// is left out).
func fuzzRoutes(s *Server) []route {
	var out []route
	for _, rt := range s.routeTable() {
		if rt.method == "GET" && rt.isQuery() {
			out = append(out, rt)
		}
	}
	return out
}

// FuzzQueryRoutes sends every query route a fuzzed path parameter and query
// string, over a store holding a few traces: whatever the bytes, the
// answer is not a crash and not a 500, and a JSON answer is valid JSON
// (errors included). This covers every parameter parser behind the routes:
// times and durations, limits, cursors, TraceQL, Tempo and Jaeger
// parameters, LLM groupings and steps.
func FuzzQueryRoutes(f *testing.F) {
	for _, c := range []struct {
		route       uint16
		arg, params string
	}{
		{0, "0102030405060708090a0b0c0d0e0f10", "format=otlp"},
		{1, "", "q=%7B+span.http.route+%3D+%22%2Fr%2F1%22+%7D&since=1h&limit=5"},
		{2, "", "since=2024-05-01T12:00:00Z&until=now&min_duration=1.5ms&max_duration=2d&status=error&limit=10000"},
		{2, "", "cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&limit=1000000"},
		{3, "", "since=1714564800123&until=now-15m"},
		{5, "svc-a", "since=1w"},
		{7, "http.route", "limit=0"},
		{9, "", "group_by=model,service&step=30s"},
		{12, "", "tags=name%3Dop-1+status%3Derror+http.route%3D%22%2Fr%2F1%22&minDuration=1ms&start=0&end=99999999999"},
		{14, "", "q=%7B%7D+%7C+rate%28%29&start=1714564800&end=1714568400&step=1m"},
		{16, "", "service=svc-a&lookback=2h&limit=1000000&tags=%7B%22a%22%3A%221%22%7D"},
		{20, "", "query.service_name=svc-a&query.start_time_min=2024-05-01T12:00:00Z&query.start_time_max=2024-05-02T12:00:00Z"},
		{25, "", "content=%22order+42%22+refund&since=now-1d"},
	} {
		f.Add(c.route, c.arg, c.params)
	}
	eng, err := engine.Open(engine.Options{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	s, err := New(Options{HTTPAddr: "127.0.0.1:0", QueryTimeout: 2 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	s.SetBackend(eng)
	ingest := httptest.NewRequest("POST", "/v1/traces", bytes.NewReader(otlp.EncodeProto(recentSpans(24, 1))))
	ingest.Header.Set("Content-Type", "application/x-protobuf")
	rec := httptest.NewRecorder()
	s.api.ServeHTTP(rec, ingest)
	if rec.Code != 200 {
		f.Fatalf("ingest: %d %s", rec.Code, rec.Body)
	}
	routes := fuzzRoutes(s)
	f.Fuzz(func(t *testing.T, ri uint16, arg, params string) {
		rt := routes[int(ri)%len(routes)]
		path := rt.pattern
		for {
			i := strings.IndexByte(path, '{')
			if i < 0 {
				break
			}
			j := strings.IndexByte(path[i:], '}')
			path = path[:i] + url.PathEscape(arg) + path[i+j+1:]
		}
		req, err := http.NewRequest("GET", "http://x"+path, nil)
		if err != nil {
			return // not a request a client could send
		}
		req.URL.RawQuery = params
		rec := httptest.NewRecorder()
		s.api.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusNotImplemented && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("GET %s?%s: %d %s", path, params, rec.Code, rec.Body)
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("GET %s?%s: invalid JSON %q", path, params, rec.Body)
		}
	})
}

// FuzzTagsQuery: Tempo's legacy tags parameter either is refused with an
// error about the tags, or becomes a spanset filter that parses, holding
// one condition per tag.
func FuzzTagsQuery(f *testing.F) {
	for _, s := range []string{
		`name=op-1 status=error http.route="/r/1"`, `a=1.5 b=-2 c=true`, `status.code=ok`,
		`"odd key"=x`, `k="unterminated`, `=v`, `a=1 a=2`, `status=}`, "k=\xff", `a b=c`, `status="error } || { name = x"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tags string) {
		q, err := tagsQuery(tags)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid tags: ") {
				t.Fatalf("tagsQuery(%q): error %q does not say it is about the tags", tags, err)
			}
			return
		}
		if _, err := query.ParseTraceQL(q); err != nil {
			t.Fatalf("tagsQuery(%q) = %s, which does not parse: %v", tags, q, err)
		}
	})
}

// FuzzDecodeCursor: any cursor string decodes or is refused, and a decoded
// cursor encodes to one that decodes to it again.
func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{"", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not a cursor", "////////////////////////////////////////////A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			if !strings.Contains(err.Error(), "cursor") {
				t.Fatalf("decodeCursor(%q): error %q does not name the cursor", s, err)
			}
			return
		}
		again, err := decodeCursor(encodeCursor(c))
		if err != nil || *again != *c {
			t.Fatalf("decodeCursor(%q) = %+v, which encodes to a cursor decoding to %+v (%v)", s, c, again, err)
		}
	})
}
