package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

func (ts *testServer) do(method, path, body string) (int, []byte, http.Header) {
	ts.t.Helper()
	req, _ := http.NewRequest(method, ts.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// TestEraseOverHTTP: DELETE of a trace and POST /api/v1/erase with a filter
// answer 202 with the erasure's status, hide the traces at once, and the
// status resource follows the pass to "done" with the count; bad requests get
// 400 naming the problem.
func TestEraseOverHTTP(t *testing.T) {
	ts := startServer(t, Options{})
	a, b := spansFor(6, 1), spansFor(6, 2)
	for i := range b {
		b[i].Attributes = append(b[i].Attributes, model.KeyValue{Key: "user.id", Value: model.StringValue("u_42")})
	}
	for _, spans := range [][]model.Span{a, b} {
		if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans)); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	code, body, hdr := ts.do(http.MethodDelete, "/api/v1/traces/"+a[0].TraceID.String(), "")
	if code != http.StatusAccepted || hdr.Get("Location") == "" {
		t.Fatalf("DELETE trace: %d %s (Location %q)", code, body, hdr.Get("Location"))
	}
	if code := ts.get("/api/v1/traces/"+a[0].TraceID.String(), nil); code != 404 {
		t.Fatalf("erased trace: GET answered %d, want 404", code)
	}
	code, body, _ = ts.do(http.MethodPost, "/api/v1/erase", `{"query": "{ span.user.id = \"u_42\" }"}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST erase: %d %s", code, body)
	}
	var st struct {
		ID          uint64 `json:"id"`
		State       string `json:"state"`
		Traces      int    `json:"traces"`
		SpansErased int64  `json:"spans_erased"`
	}
	if err := json.Unmarshal(body, &st); err != nil || st.State != "hidden" || st.Traces != 2 {
		t.Fatalf("erase status %s (%v): want hidden with 2 traces", body, err)
	}
	var sr spansResp
	ts.get("/api/v1/spans?limit=100&since=all", &sr)
	if len(sr.Spans) != 3 { // spansFor makes traces of 3 spans: a's second trace is left
		t.Fatalf("visible after erasures: %d spans, want 3", len(sr.Spans))
	}
	if err := ts.eng.EraseNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.get(fmt.Sprintf("/api/v1/erasures/%d", st.ID), &st)
	if st.State != "done" || st.SpansErased != 6 {
		t.Fatalf("after the pass: %+v, want done with 6 spans", st)
	}
	var list struct {
		Erasures []map[string]any `json:"erasures"`
	}
	if ts.get("/api/v1/erasures", &list); len(list.Erasures) != 2 {
		t.Fatalf("erasure list: %d, want 2", len(list.Erasures))
	}
	for _, bad := range []struct{ body, want string }{
		{`{}`, "give a trace id or a query"},
		{`{"query": "{ }"}`, "matches every span"},
		{`{"query": "{ span.x = "}`, "query"},
		{`{"qeury": "{ span.x = 1 }"}`, "unknown field"},
		{`not json`, "body"},
		{`{"trace_id": "xyz"}`, "trace_id"},
	} {
		code, body, _ := ts.do(http.MethodPost, "/api/v1/erase", bad.body)
		if code != 400 || !strings.Contains(string(body), bad.want) {
			t.Fatalf("POST erase %s: %d %s, want 400 naming %q", bad.body, code, body, bad.want)
		}
	}
	if code := ts.get("/api/v1/erasures/999", nil); code != 404 {
		t.Fatalf("unknown erasure: %d, want 404", code)
	}
}

// TestCompactOverHTTP: POST /api/v1/admin/compact merges the segments and
// reports it; the data is unchanged.
func TestCompactOverHTTP(t *testing.T) {
	ts := startServer(t, Options{})
	for i := range 4 {
		spans := spansFor(9, byte(i+1))
		if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans)); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
		if err := ts.eng.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	code, body, _ := ts.do(http.MethodPost, "/api/v1/admin/compact", "")
	var r struct {
		Merges         int `json:"merges"`
		SegmentsBefore int `json:"segments_before"`
		SegmentsAfter  int `json:"segments_after"`
	}
	if code != 200 || json.Unmarshal(body, &r) != nil || r.SegmentsBefore != 4 || r.SegmentsAfter != 1 || r.Merges != 1 {
		t.Fatalf("compact: %d %s", code, body)
	}
	var sr spansResp
	if ts.get("/api/v1/spans?limit=100&since=all", &sr); len(sr.Spans) != 36 {
		t.Fatalf("after compaction: %d spans, want 36", len(sr.Spans))
	}
}
