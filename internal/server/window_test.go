package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
)

// notListings are the read routes of Rastro's API that take no window of
// the listing kind, and why. A new GET route under /api/v1/ must be a
// listing (route.listing) or be named here.
var notListings = map[string]string{
	"/api/v1/traces/{trace_id}":      "a lookup by id: the trace whenever it happened",
	"/api/v1/sessions/{session_id}":  "a lookup by id: the whole session unless since/until narrow it",
	"/api/v1/llm/prices":             "the price table, not stored data",
	"/api/v1/stats":                  "store totals",
	"/api/v1/status":                 "the running server's report",
	"/api/v1/summary":                "a report comparing its window with the ones before (its own window object, same default)",
	"/api/v1/anomalies":              "a report comparing its window with the ones before (its own window object, same default)",
	"/api/v1/tail":                   "a stream of spans as they arrive: no backfill, no window",
	"/api/v1/logs/tail":              "a stream of log records as they arrive: no backfill, no window",
	"/api/v1/traces/{trace_id}/logs": "a lookup by id: the trace's log records whenever they happened",
	"/api/v1/traceql/metrics":        "a metrics query over time with Tempo's query_range default (1h), for Grafana",
}

// reportsWithWindow are the non-listings that still default since like the
// listings; their answer's window has seconds.
var reportsWithWindow = []string{"/api/v1/summary", "/api/v1/anomalies"}

// listingPath fills a listing route's path wildcards and required
// parameters.
func listingPath(pattern string) string {
	p := strings.NewReplacer("{service}", "research-agent", "{key}", "service.name").Replace(pattern)
	if pattern == "/api/v1/journey" {
		p += "?key=service.name&value=research-agent"
	}
	return p
}

func withParam(path, kv string) string {
	if strings.Contains(path, "?") {
		return path + "&" + kv
	}
	return path + "?" + kv
}

// TestWindowRuleOnEveryRoute walks the route table: every listing route
// defaults to the same window (query.DefaultWindow before now), says which
// window it searched, and, when nothing matched, says how to widen it; the
// other read routes are named in notListings with a reason.
func TestWindowRuleOnEveryRoute(t *testing.T) {
	ts := startServer(t, Options{})
	// Recent data (inside the default window) in project "default",
	// data from 3 days ago in project "old", none in project "empty". Both
	// are one corpus generated at a fixed start and moved in time: what a
	// corpus holds depends on the time of day it starts at (at some starts
	// it has no research-agent spans, which listingPath asks for).
	fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	corpus, err := bench.Generate("llm", bench.CorpusOptions{Seed: 3, Spans: 300, Start: fixed, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(corpus, func(s model.Span) bool { return s.Service == "research-agent" }) {
		t.Fatal("the corpus has no research-agent span for listingPath to find: pick another fixed start")
	}
	ts.ingest(bench.Moved(corpus, time.Now().Add(-2*time.Hour).Sub(fixed)), "")
	ts.ingest(bench.Moved(corpus, time.Now().Add(-72*time.Hour).Sub(fixed)), "old")
	// Log records likewise, for /api/v1/logs.
	ls, err := logstore.Open(logstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Close() })
	ts.srv.SetLogs(ls)
	for project, at := range map[string]time.Time{"": time.Now().Add(-2 * time.Hour), "old": time.Now().Add(-72 * time.Hour)} {
		body := otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: uint64(at.UnixNano()), Body: model.StringValue("a record"),
			Resource: &model.Resource{}, Scope: &model.Scope{}}})
		hdr := []string{}
		if project != "" {
			hdr = []string{"X-Scope-OrgID", project}
		}
		if code, b := ts.post("/v1/logs", "application/x-protobuf", body, hdr...); code != 200 {
			t.Fatalf("logs: %d %s", code, b)
		}
	}

	type answer struct {
		Window *windowJSONField `json:"window"`
		Hint   string           `json:"hint"`
	}
	get := func(path string, hdr ...string) (answer, map[string]json.RawMessage) {
		t.Helper()
		code, _, body := ts.request("GET", path, nil, hdr...)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var a answer
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		json.Unmarshal(body, &top)
		return a, top
	}
	listings := 0
	for _, rt := range ts.srv.routeTable() {
		if rt.method != "GET" || !strings.HasPrefix(rt.pattern, "/api/v1/") {
			continue
		}
		if rt.listing == nil {
			if _, ok := notListings[rt.pattern]; !ok && rt.access != accessAdmin {
				t.Errorf("GET %s is not a listing (route.listing) and not in notListings with a reason", rt.pattern)
			}
			continue
		}
		listings++
		path := listingPath(rt.pattern)
		t0 := time.Now()
		a, top := get(path)
		want := t0.Add(-query.DefaultWindow)
		if a.Window == nil {
			t.Errorf("GET %s: no window in the answer", path)
			continue
		}
		since, err := time.Parse(time.RFC3339Nano, a.Window.Since)
		if err != nil || since.Before(want.Add(-time.Second)) || since.After(time.Now().Add(-query.DefaultWindow)) {
			t.Errorf("GET %s: window since %q, want %s before the request", path, a.Window.Since, query.DefaultWindow)
		}
		if !a.Window.Default || a.Window.Description != "the last 24h" || a.Window.Wider != "7d" || a.Window.Until != "" {
			t.Errorf("GET %s: window %+v, want the default, \"the last 24h\", wider 7d", path, *a.Window)
		}
		if _, ok := top[rt.listing.field]; !ok {
			t.Errorf("GET %s: the answer has no %q field (route.listing names it)", path, rt.listing.field)
		}
		// Spans from 3 days ago: not in the default window; the
		// empty answer says so and how to widen it.
		a, _ = get(path, "X-Scope-OrgID", "old")
		if hint := "no " + rt.listing.noun + " in the last 24h; try since=7d"; a.Hint != hint {
			t.Errorf("GET %s in a project with only older data: hint %q, want %q", path, a.Hint, hint)
		}
		// The wider window finds them (errors and dependencies
		// may have none to find in this corpus).
		if rt.listing.noun != "errors" {
			a, top = get(withParam(path, "since="+a.Window.Wider), "X-Scope-OrgID", "old")
			if a.Hint != "" || a.Window.Description != "the last 7d" || a.Window.Default {
				t.Errorf("GET %s since=7d: hint %q, window %+v; want the 3-day-old data", path, a.Hint, *a.Window)
			}
		}
		a, _ = get(withParam(path, "since=all"), "X-Scope-OrgID", "empty")
		if a.Window.Description != "all time" || a.Window.Wider != "" || a.Hint != "no "+rt.listing.noun+" in all time" {
			t.Errorf("GET %s since=all in an empty project: window %+v, hint %q", path, *a.Window, a.Hint)
		}
	}
	if listings < 10 {
		t.Errorf("only %d listing routes in the table", listings)
	}
	for _, path := range reportsWithWindow {
		var a struct {
			Window struct {
				Seconds float64 `json:"seconds"`
			} `json:"window"`
		}
		if code := ts.get(path, &a); code != 200 || math.Round(a.Window.Seconds) != query.DefaultWindow.Seconds() {
			t.Errorf("GET %s: %d, window of %vs, want the default %v", path, code, a.Window.Seconds, query.DefaultWindow)
		}
	}
}

// TestWindowDescriptions: the window's words for each form of since and
// until, and the wider since to try.
func TestWindowDescriptions(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		since, until, desc, wider string
	}{
		{"", "", "the last 24h", "7d"},
		{"1h", "", "the last 1h", "7d"},
		{"now-7d", "", "the last 7d", "30d"},
		{"30d", "", "the last 30d", "365d"},
		{"400d", "", "the last 400d", "all"},
		{"all", "", "all time", ""},
		{"ALL", "2026-12-01T00:00:00Z", "all time up to 2026-12-01T00:00:00Z", ""},
		{"2026-11-01T00:00:00Z", "", "since 2026-11-01T00:00:00Z", "365d"},
		{"", "2026-12-01T00:00:00Z", "the 24h before 2026-12-01T00:00:00Z", "all"},
		{"2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", "from 2026-11-01T00:00:00Z to 2026-11-02T00:00:00Z", "all"},
	} {
		v := url.Values{}
		if c.since != "" {
			v.Set("since", c.since)
		}
		if c.until != "" {
			v.Set("until", c.until)
		}
		win, err := resolveWindow(v, now)
		if err != nil || win.Description != c.desc || win.Wider != c.wider {
			t.Errorf("since %q until %q: %q wider %q (%v), want %q wider %q", c.since, c.until, win.Description, win.Wider, err, c.desc, c.wider)
		}
		if _, err := query.FromValues(v, now); err != nil {
			t.Errorf("since %q until %q: the rewritten window does not parse: %v", c.since, c.until, err)
		}
	}
	for _, c := range []struct{ since, until, want string }{
		{"yesterday", "", `since: invalid time "yesterday"`},
		{"", "soon", `until: invalid time "soon"`},
		{"", "1970-01-01T01:00:00Z", "since was not given; it defaults to 24h before until"},
	} {
		v := url.Values{"since": {c.since}, "until": {c.until}}
		if _, err := resolveWindow(v, now); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("since %q until %q: %v, want an error containing %q", c.since, c.until, err, c.want)
		}
	}
}

// TestWindowRecorderStreamsLargeAnswers: an answer larger than the held
// size, written in pieces of any size, comes out whole with the window
// added, as valid JSON; a small empty one gets the hint.
func TestWindowRecorderStreamsLargeAnswers(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"spans":[`)
	for i := range 2000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"name":"` + strings.Repeat("x", i%97) + `"}`)
	}
	sb.WriteString("]}\n")
	large := sb.String()
	win := &windowJSONField{Since: "2026-12-01T12:00:00Z", Default: true, Description: "the last 24h", Wider: "7d"}
	for _, c := range []struct {
		body     string
		wantHint bool
	}{{large, false}, {`{"spans":[]}` + "\n", true}, {`{"spans":[{"name":"a"}],"warnings":["w"]}`, false}} {
		for _, piece := range []int{1, 7, 16, 17, 4096, len(c.body)} {
			rec := httptest.NewRecorder()
			rw := &windowRecorder{ResponseWriter: rec, code: http.StatusOK}
			rw.Header().Set("Content-Type", "application/json")
			for b := c.body; b != ""; {
				n := min(piece, len(b))
				rw.Write([]byte(b[:n]))
				b = b[n:]
			}
			rw.finish(listing{"spans", "spans"}, win)
			var got struct {
				Spans  []map[string]any `json:"spans"`
				Window windowJSONField  `json:"window"`
				Hint   string           `json:"hint"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("%d-byte pieces of a %d-byte answer: %v: %.200s...%s", piece, len(c.body), err, rec.Body.String(), rec.Body.String()[max(0, rec.Body.Len()-200):])
			}
			var want struct{ Spans []map[string]any }
			json.Unmarshal([]byte(c.body), &want)
			if len(got.Spans) != len(want.Spans) || got.Window != *win || (got.Hint != "") != c.wantHint {
				t.Errorf("%d-byte pieces of a %d-byte answer: %d spans (want %d), window %+v, hint %q", piece, len(c.body), len(got.Spans), len(want.Spans), got.Window, got.Hint)
			}
		}
	}
}

// emptyListingByDecoding decodes the whole answer (as emptyListing did
// before it scanned): the reference its answers are held to. Two things
// differ from that first version, which finish never relied on: a body
// that is not an object (null decoded into a nil map: "empty") has no
// items field to look at, and an empty array with white space in it is
// empty too (the encoder writes none).
func emptyListingByDecoding(body []byte, field string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return false
	}
	var items bytes.Buffer
	json.Compact(&items, top[field])
	return items.Len() == 0 || items.String() == "null" || items.String() == "[]"
}

var emptyListingSeeds = []string{
	`{"spans":[]}`, `{"spans":[ ]}` + "\n", ` { "spans" : null } `, `{}`, ` { } `, `{"total":0}`,
	`{"spans":[{"name":"a"}]}`, `{"spans":[[]]}`, `{"spans":[null]}`, `{"spans":[{}],"window":{}}`,
	`{"warnings":["a \"spans\":[] b"],"spans":[]}`, `{"warnings":["a \"spans\":[] b"],"spans":[1]}`,
	`{"spa\u006es":[]}`, `{"spa\u006es":[2]}`, `{"x":{"spans":[1]},"spans":[]}`, `{"x":{"spans":[]},"spans":[3]}`,
	`{"n":-1.5e3,"t":true,"f":false,"z":null,"spans":[]}`, `{"n":12,"spans":["]"]}`, `{"s":"\\","spans":[]}`,
	`{"spans":{}}`, `{"spans":""}`, `{"spans":0}`, `{"other":[]}`,
	``, `[]`, `null`, `{`, `{"spans"`, `{"spans":`, `{"spans":[`, `{"a":1,}`, `{"a" 1}`, `{"a":1 "b":2}`, `"spans"`,
}

// TestEmptyListingAsDecoded: the scan answers as decoding the whole answer
// did, for well-formed answers and broken ones alike.
func TestEmptyListingAsDecoded(t *testing.T) {
	for _, body := range emptyListingSeeds {
		if got, want := emptyListing([]byte(body), "spans"), emptyListingByDecoding([]byte(body), "spans"); got != want {
			t.Errorf("emptyListing(%q) = %v, decoding it says %v", body, got, want)
		}
	}
}

// FuzzEmptyListing holds the scan to the decoding for any well-formed
// object whose items field appears at most once (decoding keeps the last
// of repeated keys, the scan the first; the server's answers repeat none).
func FuzzEmptyListing(f *testing.F) {
	for _, s := range emptyListingSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got := emptyListing([]byte(body), "spans")
		if !json.Valid([]byte(body)) {
			return // any answer; it must only not panic
		}
		dec := json.NewDecoder(strings.NewReader(body))
		if tok, _ := dec.Token(); tok != json.Delim('{') {
			if got {
				t.Fatalf("emptyListing(%q) = true for a body that is not an object", body)
			}
			return
		}
		seen := 0
		for dec.More() {
			k, _ := dec.Token()
			if k == "spans" {
				seen++
			}
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return
			}
		}
		if seen > 1 {
			return
		}
		if want := emptyListingByDecoding([]byte(body), "spans"); got != want {
			t.Fatalf("emptyListing(%q) = %v, decoding it says %v", body, got, want)
		}
	})
}
