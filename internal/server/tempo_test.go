package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// The message layouts below mirror grafana/tempo pkg/tempopb/tempo.proto at
// 87c2dc380cec (2025-05-29), the tempopb that Grafana's Tempo data source
// compiles against and decodes search answers with, strictly: a field not
// declared there fails Grafana's decoding. 64-bit integers are strings in
// jsonpb; declaring them as string here fails the decoding of a number.

type tpSearchResponse struct {
	Traces  []tpTraceSearchMetadata `json:"traces"`
	Metrics *struct {
		InspectedTraces uint32 `json:"inspectedTraces"`
		InspectedBytes  string `json:"inspectedBytes"`
		TotalBlocks     uint32 `json:"totalBlocks"`
		CompletedJobs   uint32 `json:"completedJobs"`
		TotalJobs       uint32 `json:"totalJobs"`
		TotalBlockBytes string `json:"totalBlockBytes"`
		InspectedSpans  string `json:"inspectedSpans"`
	} `json:"metrics"`
}

type tpTraceSearchMetadata struct {
	TraceID           string                `json:"traceID"`
	RootServiceName   string                `json:"rootServiceName"`
	RootTraceName     string                `json:"rootTraceName"`
	StartTimeUnixNano string                `json:"startTimeUnixNano"`
	DurationMs        uint32                `json:"durationMs"`
	SpanSet           *tpSpanSet            `json:"spanSet"`
	SpanSets          []tpSpanSet           `json:"spanSets"`
	ServiceStats      map[string]tpSvcStats `json:"serviceStats"`
}

type tpSpanSet struct {
	Spans []struct {
		SpanID            string            `json:"spanID"`
		Name              string            `json:"name"`
		StartTimeUnixNano string            `json:"startTimeUnixNano"`
		DurationNanos     string            `json:"durationNanos"`
		Attributes        []json.RawMessage `json:"attributes"`
	} `json:"spans"`
	Matched    uint32            `json:"matched"`
	Attributes []json.RawMessage `json:"attributes"`
}

type tpSvcStats struct {
	SpanCount  uint32 `json:"spanCount"`
	ErrorCount uint32 `json:"errorCount"`
}

type tpMetadataMetrics struct {
	InspectedBytes  string `json:"inspectedBytes"`
	TotalJobs       uint32 `json:"totalJobs"`
	CompletedJobs   uint32 `json:"completedJobs"`
	TotalBlocks     uint32 `json:"totalBlocks"`
	TotalBlockBytes string `json:"totalBlockBytes"`
}

// tempoSpans is a trace of three spans over two services with typed
// attributes, an event and a link, whose id has leading zeros (as Tempo
// lists 64-bit ids), and a second trace with an error.
func tempoSpans() []model.Span {
	now := uint64(time.Now().Add(-time.Minute).UnixNano())
	resA := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("shop")},
		{Key: "deployment.environment", Value: model.StringValue("prod")}}}
	resB := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("payments")}}}
	t1 := model.TraceID{0, 0, 0, 0, 0, 0, 0, 0, 0x2f, 0x3e, 1, 2, 3, 4, 5, 6}
	t2 := model.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	return []model.Span{
		{TraceID: t1, SpanID: model.SpanID{1, 1, 1, 1, 1, 1, 1, 1}, Name: "GET /cart", Kind: model.KindServer,
			Resource: resA, Service: "shop", StartTimeUnixNano: now, EndTimeUnixNano: now + 557e6,
			Attributes: []model.KeyValue{{Key: "http.response.status_code", Value: model.IntValue(200)},
				{Key: "http.route", Value: model.StringValue("/cart")}, {Key: "cache.hit", Value: model.BoolValue(true)}}},
		{TraceID: t1, SpanID: model.SpanID{2, 2, 2, 2, 2, 2, 2, 2}, ParentSpanID: model.SpanID{1, 1, 1, 1, 1, 1, 1, 1},
			Name: "charge", Kind: model.KindClient, Resource: resA, Service: "shop",
			StartTimeUnixNano: now + 10e6, EndTimeUnixNano: now + 300e6,
			Attributes: []model.KeyValue{{Key: "retry.ratio", Value: model.DoubleValue(0.25)}},
			Events:     []model.Event{{TimeUnixNano: now + 20e6, Name: "retry", Attributes: []model.KeyValue{{Key: "attempt", Value: model.IntValue(2)}}}},
			Links:      []model.Link{{TraceID: t2, SpanID: model.SpanID{7, 7, 7, 7, 7, 7, 7, 7}}}},
		{TraceID: t1, SpanID: model.SpanID{3, 3, 3, 3, 3, 3, 3, 3}, ParentSpanID: model.SpanID{2, 2, 2, 2, 2, 2, 2, 2},
			Name: "POST /charge", Kind: model.KindServer, Resource: resB, Service: "payments",
			StartTimeUnixNano: now + 20e6, EndTimeUnixNano: now + 290e6, StatusCode: model.StatusError, StatusMessage: "card declined",
			Attributes: []model.KeyValue{{Key: "http.response.status_code", Value: model.IntValue(402)}}},
		{TraceID: t2, SpanID: model.SpanID{7, 7, 7, 7, 7, 7, 7, 7}, Name: "GET /", Kind: model.KindServer,
			Resource: resA, Service: "shop", StartTimeUnixNano: now - 5e9, EndTimeUnixNano: now - 4e9},
	}
}

func startTempo(t *testing.T) (*testServer, []model.Span) {
	ts := startServer(t, Options{})
	spans := tempoSpans()
	ts.ingest(spans, "")
	return ts, spans
}

func TestTempoHealthAndBuildInfo(t *testing.T) {
	if ts := startWith(t, nil); true {
		if code, _, body := ts.request("GET", "/ready", nil); code != 503 {
			t.Fatalf("/ready before the store opens: %d %s", code, body)
		}
	}
	ts, _ := startTempo(t)
	// cmd/tempo/app/modules.go echoHandler; app.go readyHandler.
	for path, want := range map[string]string{"/api/echo": "echo\n", "/ready": "ready\n"} {
		if code, hdr, body := ts.request("GET", path, nil); code != 200 || string(body) != want || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
			t.Errorf("GET %s: %d %q %s", path, code, body, hdr.Get("Content-Type"))
		}
	}
	// cmd/tempo/app/app.go buildinfoHandler: this key order; a version below
	// 2.2.0 keeps an older Grafana off the gRPC streaming Rastro lacks.
	code, _, body := ts.request("GET", "/api/status/buildinfo", nil)
	keys := []string{}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v string
		dec.Decode(&v)
		if k == "version" && v != "2.1.0" {
			t.Errorf("buildinfo version %q, want 2.1.0", v)
		}
	}
	if code != 200 || !slices.Equal(keys, []string{"version", "revision", "branch", "buildUser", "buildDate", "goVersion"}) {
		t.Fatalf("buildinfo: %d %s", code, body)
	}
}

// traceByIDResponse decodes a tempopb.TraceByIDResponse: field 1 the trace
// (the wire format of OTLP's TracesData), 3 the status, 4 the message.
func traceByIDResponse(t *testing.T, b []byte) (td *tracepb.TracesData, hasTrace bool, status uint64) {
	t.Helper()
	td = &tracepb.TracesData{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag in TraceByIDResponse")
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if err := proto.Unmarshal(v, td); err != nil || n < 0 {
				t.Fatalf("field 1: %v", err)
			}
			hasTrace, b = true, b[n:]
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			status, b = v, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				t.Fatalf("bad field %d", num)
			}
			b = b[n:]
		}
	}
	return td, hasTrace, status
}

// checkTrace compares a decoded trace with the spans sent, field by field,
// and checks what Grafana's plugin dereferences without a nil check.
func checkTrace(t *testing.T, what string, td *tracepb.TracesData, want []model.Span) {
	t.Helper()
	got := map[string]*tracepb.Span{}
	for _, rs := range td.ResourceSpans {
		if rs.Resource == nil || len(rs.Resource.Attributes) == 0 {
			t.Fatalf("%s: a resource without attributes (Grafana drops it)", what)
		}
		for _, ss := range rs.ScopeSpans {
			if ss.Scope == nil {
				t.Fatalf("%s: a scope message is missing (Grafana reads it without a nil check)", what)
			}
			for _, sp := range ss.Spans {
				if sp.Status == nil {
					t.Fatalf("%s: span %x has no status message", what, sp.SpanId)
				}
				got[string(sp.SpanId)] = sp
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d spans, want %d", what, len(got), len(want))
	}
	for i := range want {
		w := &want[i]
		g := got[string(w.SpanID[:])]
		if g == nil || !bytes.Equal(g.TraceId, w.TraceID[:]) || g.Name != w.Name || g.StartTimeUnixNano != w.StartTimeUnixNano ||
			g.EndTimeUnixNano != w.EndTimeUnixNano || int32(g.Kind) != int32(w.Kind) || int32(g.Status.Code) != int32(w.StatusCode) ||
			g.Status.Message != w.StatusMessage || len(g.Attributes) != len(w.Attributes) || len(g.Events) != len(w.Events) ||
			len(g.Links) != len(w.Links) || (!w.ParentSpanID.IsZero() && !bytes.Equal(g.ParentSpanId, w.ParentSpanID[:])) {
			t.Fatalf("%s: span %s: got %v, want %+v", what, w.SpanID, g, w)
		}
		for j, kv := range w.Attributes {
			if g.Attributes[j].Key != kv.Key {
				t.Fatalf("%s: span %s attribute %d: %s, want %s", what, w.SpanID, j, g.Attributes[j].Key, kv.Key)
			}
		}
	}
}

func TestTempoTraceByID(t *testing.T) {
	ts, spans := startTempo(t)
	trace1 := spans[:3]
	short := strings.TrimLeft(spans[0].TraceID.String(), "0") // as Tempo lists it
	pb := []string{"Accept", "application/protobuf"}

	code, hdr, body := ts.request("GET", "/api/v2/traces/"+strings.ToUpper(short), nil, pb...)
	if code != 200 || hdr.Get("Content-Type") != "application/protobuf" {
		t.Fatalf("v2 protobuf: %d %s", code, hdr.Get("Content-Type"))
	}
	td, has, status := traceByIDResponse(t, body)
	if !has || status != 0 {
		t.Fatalf("v2: trace field present %v, status %d", has, status)
	}
	checkTrace(t, "v2 protobuf", td, trace1)

	// Unknown trace: v2 answers 200 with field 1 present and empty (Grafana
	// reads "not found" from it); v1 answers 404 with an empty body.
	// modules/frontend/combiner/trace_by_id_v2.go, trace_by_id.go.
	code, _, body = ts.request("GET", "/api/v2/traces/abc", nil, pb...)
	if code != 200 || !bytes.Equal(body, []byte{0x0a, 0x00}) {
		t.Fatalf("v2 unknown trace: %d %x, want 200 0a00", code, body)
	}
	if code, _, body := ts.request("GET", "/api/traces/abc", nil, pb...); code != 404 || len(body) != 0 {
		t.Fatalf("v1 unknown trace: %d %q, want 404 and no body", code, body)
	}

	code, hdr, body = ts.request("GET", "/api/traces/"+short, nil, pb...)
	v1 := &tracepb.TracesData{}
	if code != 200 || hdr.Get("Content-Type") != "application/protobuf" || proto.Unmarshal(body, v1) != nil {
		t.Fatalf("v1 protobuf: %d %s", code, hdr.Get("Content-Type"))
	}
	checkTrace(t, "v1 protobuf", v1, trace1)

	// JSON: v2 wraps the trace in "trace"; ids are base64 (jsonpb bytes).
	// (/api/traces/{id} in JSON is Jaeger's: jaeger_test.go.)
	code, _, body = ts.request("GET", "/api/v2/traces/"+short, nil)
	var v2 struct {
		Trace json.RawMessage `json:"trace"`
	}
	decodeStrict(t, "v2 JSON", body, &v2)
	jtd := &tracepb.TracesData{}
	if code != 200 || protojson.Unmarshal(v2.Trace, jtd) != nil {
		t.Fatalf("v2 JSON: %d %s", code, body)
	}
	checkTrace(t, "v2 JSON", jtd, trace1)

	for _, c := range []struct{ id, msg string }{
		{"xyz", "trace IDs can only contain hex characters: invalid character 'x' at position 1"},
		{strings.Repeat("a", 33), "trace IDs can't be larger than 128 bits"},
	} {
		code, hdr, body := ts.request("GET", "/api/v2/traces/"+c.id, nil)
		if code != 400 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || !strings.Contains(string(body), c.msg) {
			t.Errorf("trace id %q: %d %s %q, want 400 plain %q", c.id, code, hdr.Get("Content-Type"), body, c.msg)
		}
	}
	if code, _, body := ts.request("GET", "/api/v2/traces/"+short+"?start=20&end=10", nil); code != 400 ||
		!strings.Contains(string(body), "start must be before end") {
		t.Errorf("start after end: %d %s", code, body)
	}
}

func TestTempoSearch(t *testing.T) {
	ts, spans := startTempo(t)
	search := func(params string) tpSearchResponse {
		t.Helper()
		code, hdr, body := ts.request("GET", "/api/search?"+params, nil)
		if code != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("search %s: %d %s", params, code, body)
		}
		var r tpSearchResponse
		decodeStrict(t, "search "+params, body, &r)
		return r
	}
	// Grafana's query: q, limit, spss, start, end (seconds).
	now := time.Now().Unix()
	r := search("q=" + url.QueryEscape(`{resource.service.name="payments" && status=error}`) + "&limit=20&spss=3&start=" +
		itoa(now-3600) + "&end=" + itoa(now))
	if len(r.Traces) != 1 || r.Metrics == nil {
		t.Fatalf("search: %+v", r)
	}
	tr := r.Traces[0]
	if tr.TraceID != strings.TrimLeft(spans[0].TraceID.String(), "0") || tr.RootServiceName != "shop" || tr.RootTraceName != "GET /cart" ||
		tr.StartTimeUnixNano != itou(spans[0].StartTimeUnixNano) || tr.DurationMs != 557 {
		t.Fatalf("trace metadata: %+v", tr)
	}
	if tr.SpanSet == nil || len(tr.SpanSets) != 1 || tr.SpanSet.Matched != 1 || len(tr.SpanSet.Spans) != 1 ||
		tr.SpanSet.Spans[0].SpanID != spans[2].SpanID.String() || tr.SpanSet.Spans[0].Name != "POST /charge" ||
		tr.SpanSet.Spans[0].DurationNanos != "270000000" || tr.SpanSets[0].Spans[0].SpanID != tr.SpanSet.Spans[0].SpanID {
		t.Fatalf("span set: %+v / %+v", tr.SpanSet, tr.SpanSets)
	}
	if tr.ServiceStats["shop"] != (tpSvcStats{SpanCount: 2}) || tr.ServiceStats["payments"] != (tpSvcStats{1, 1}) {
		t.Fatalf("service stats: %+v", tr.ServiceStats)
	}

	// Newest first, limit, spss; the legacy tags and durations.
	if r := search("q=" + url.QueryEscape("{}") + "&limit=1&spss=2"); len(r.Traces) != 1 || len(r.Traces[0].SpanSet.Spans) != 2 || r.Traces[0].SpanSet.Matched != 3 {
		t.Fatalf("limit 1, spss 2: %+v", r.Traces)
	}
	if r := search("tags=" + url.QueryEscape(`http.response.status_code=402 service.name=payments`)); len(r.Traces) != 1 {
		t.Fatalf("legacy tags: %+v", r.Traces)
	}
	if r := search("minDuration=800ms"); len(r.Traces) != 1 || r.Traces[0].DurationMs != 1000 {
		t.Fatalf("minDuration: %+v", r.Traces)
	}
	if r := search("minDuration=500ms&maxDuration=600ms"); len(r.Traces) != 1 || r.Traces[0].DurationMs != 557 {
		t.Fatalf("minDuration and maxDuration: %+v", r.Traces)
	}
	// Trace-level conditions: the span set holds the spans they select.
	if r := search("q=" + url.QueryEscape(`{ rootServiceName = "shop" && name = "charge" }`)); len(r.Traces) != 1 ||
		r.Traces[0].SpanSet == nil || r.Traces[0].SpanSet.Matched != 1 || r.Traces[0].SpanSet.Spans[0].Name != "charge" {
		t.Fatalf("trace-level search: %+v", r.Traces)
	}
	if r := search("q=" + url.QueryEscape(`{ name = "nothing" }`)); r.Traces == nil || len(r.Traces) != 0 {
		t.Fatalf("no match: %+v, want traces: []", r)
	}

	// pkg/api/http.go and pkg/traceql/parse.go: plain-text 400s.
	for params, msg := range map[string]string{
		"q=foo":                  "invalid TraceQL query: parse error at line 1, col 1:",
		"q=%7B%7D&tags=a%3Db":    "can't specify tags and q in the same query",
		"limit=0":                "invalid limit: must be a positive number",
		"spss=101":               "spans per span set exceeds 100. received 101",
		"start=20&end=10":        "http parameter start must be before end. received start=20 end=10",
		"q=%7B%20.x%20%3D%20%7D": "invalid TraceQL query: parse error at line 1, col",
		"minDuration=fast":       "invalid minDuration",
	} {
		code, hdr, body := ts.request("GET", "/api/search?"+params, nil)
		if code != 400 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || !strings.Contains(string(body), msg) {
			t.Errorf("search %s: %d %q, want 400 with %q", params, code, body, msg)
		}
	}
}

func TestTempoTagsAndValues(t *testing.T) {
	ts, _ := startTempo(t)
	get := func(path string, v any) {
		t.Helper()
		code, _, body := ts.request("GET", path, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		decodeStrict(t, path, body, v)
	}
	var v2 struct {
		Scopes []struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		} `json:"scopes"`
		Metrics *tpMetadataMetrics `json:"metrics"`
	}
	get("/api/v2/search/tags?limit=5000", &v2)
	scopes := map[string][]string{}
	for _, s := range v2.Scopes {
		scopes[s.Name] = s.Tags
	}
	if !slices.Contains(scopes["resource"], "service.name") || !slices.Contains(scopes["resource"], "deployment.environment") ||
		!slices.Contains(scopes["span"], "http.response.status_code") || !slices.Contains(scopes["intrinsic"], "status") ||
		!slices.Contains(scopes["intrinsic"], "span:kind") || slices.Contains(scopes["span"], "service.name") ||
		!slices.Contains(scopes["intrinsic"], "rootServiceName") || slices.Contains(scopes["intrinsic"], "nestedSetLeft") {

		t.Fatalf("v2 tags: %+v", scopes)
	}
	get("/api/v2/search/tags?scope=resource", &v2)
	if len(v2.Scopes) != 1 || v2.Scopes[0].Name != "resource" {
		t.Fatalf("scope=resource: %+v", v2.Scopes)
	}
	if code, _, body := ts.request("GET", "/api/v2/search/tags?scope=nope", nil); code != 400 || !strings.Contains(string(body), "invalid scope: nope") {
		t.Fatalf("bad scope: %d %s", code, body)
	}
	var v1 struct {
		TagNames []string           `json:"tagNames"`
		Metrics  *tpMetadataMetrics `json:"metrics"`
	}
	get("/api/search/tags", &v1)
	if !slices.Contains(v1.TagNames, "service.name") || !slices.Contains(v1.TagNames, "http.route") || slices.Contains(v1.TagNames, "status") {
		t.Fatalf("v1 tags: %v", v1.TagNames)
	}

	// Typed values: Grafana quotes a value only when its type is string.
	values := func(tag string) map[string]string {
		t.Helper()
		var r struct {
			TagValues []struct {
				Type  string `json:"type"`
				Value string `json:"value"`
			} `json:"tagValues"`
			Metrics *tpMetadataMetrics `json:"metrics"`
		}
		get("/api/v2/search/tag/"+tag+"/values", &r)
		out := map[string]string{}
		for _, v := range r.TagValues {
			out[v.Value] = v.Type
		}
		return out
	}
	for tag, want := range map[string]map[string]string{
		"resource.service.name":          {"shop": "string", "payments": "string"},
		"span.http.response.status_code": {"200": "int", "402": "int"},
		".cache.hit":                     {"true": "bool"},
		"span.retry.ratio":               {"0.25": "float"},
		"status":                         {"error": "keyword", "ok": "keyword", "unset": "keyword"},
		"span:kind":                      {"client": "keyword", "server": "keyword", "producer": "keyword", "consumer": "keyword", "internal": "keyword", "unspecified": "keyword"},
		"name":                           {"GET /cart": "string", "charge": "string", "POST /charge": "string", "GET /": "string"},
		"duration":                       {},
		"event:name":                     {},
		"rootServiceName":                {"shop": "string", "payments": "string"},
	} {
		if got := values(tag); !maps.Equal(got, want) {
			t.Errorf("values of %s: %v, want %v", tag, got, want)
		}
	}
	var sv struct {
		TagValues []string `json:"tagValues"`
	}
	get("/api/search/tag/service.name/values", &sv)
	if slices.Sort(sv.TagValues); !slices.Equal(sv.TagValues, []string{"payments", "shop"}) {
		t.Fatalf("v1 values: %v", sv.TagValues)
	}
	if code, _, body := ts.request("GET", "/api/v2/search/tag/"+url.PathEscape("{bad}")+"/values", nil); code != 400 {
		t.Fatalf("bad tag name: %d %s", code, body)
	}
}

// TestTempoProject: X-Scope-OrgID selects the project on the Tempo routes.
func TestTempoProject(t *testing.T) {
	ts, spans := startTempo(t)
	id := spans[0].TraceID.String()
	if code, _, _ := ts.request("GET", "/api/traces/"+id, nil, "X-Scope-OrgID", "other"); code != http.StatusNotFound {
		t.Fatalf("trace from another project: %d, want 404", code)
	}
	code, _, body := ts.request("GET", "/api/search", nil, "X-Scope-OrgID", "other")
	var r tpSearchResponse
	decodeStrict(t, "search", body, &r)
	if code != 200 || len(r.Traces) != 0 {
		t.Fatalf("search another project: %d %+v", code, r)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func itou(n uint64) string { return strconv.FormatUint(n, 10) }
