package server

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
)

// taggedSpans is n spans of one trace whose attribute "tag" is tag-<i>.
func taggedSpans(seed byte, tag string, n int) []model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("svc-" + tag)}}}
	spans := make([]model.Span, n)
	for i := range spans {
		s := &spans[i]
		s.TraceID = model.TraceID{1, seed, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
		s.SpanID = model.SpanID{1, seed, byte(i), byte(i >> 8), 5, 6, 7, 8}
		s.Name = fmt.Sprintf("op-%s-%d", tag, i)
		s.StartTimeUnixNano = uint64(time.Now().UnixNano()) - 1e6
		s.EndTimeUnixNano = s.StartTimeUnixNano + 1000
		s.Resource = res
		s.Attributes = []model.KeyValue{
			{Key: "tag", Value: model.StringValue(fmt.Sprintf("%s-%d", tag, i))},
			{Key: "n", Value: model.IntValue(int64(i))},
		}
	}
	return spans
}

// TestTailedSpansOutliveLaterRequests: the decoded spans of a request go to
// the next request's decode only when nothing holds them any more. A live
// tail that has not read its batch yet reads it intact after many requests
// of another project were decoded (into reused memory) and stored, and
// those requests are stored intact too.
func TestTailedSpansOutliveLaterRequests(t *testing.T) {
	ts := startServer(t, Options{})
	ctx := context.Background()
	tl, err := ts.eng.Tail(ctx, DefaultProject, &query.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	if code, b := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(taggedSpans(0, "a", 50))); code != 200 {
		t.Fatalf("post a: %d %s", code, b)
	}
	const others = 30
	for k := range others {
		if code, b := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(taggedSpans(byte(1+k), fmt.Sprintf("b%d", k), 50)),
			"X-Scope-OrgID", "other"); code != 200 {
			t.Fatalf("post b%d: %d %s", k, code, b)
		}
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, _, err := tl.Next(nctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 {
		t.Fatalf("tail read %d spans, want 50", len(got))
	}
	for i := range got {
		s := &got[i]
		v, _ := s.Attr("tag")
		if want := fmt.Sprintf("a-%d", s.SpanID[2]); s.Name != "op-"+want || v.Str != want || s.Service != "svc-a" {
			t.Fatalf("tailed span %d was overwritten by a later request: name %q, tag %q, service %q; want op-%s, %s, svc-a",
				i, s.Name, v.Str, s.Service, want, want)
		}
	}
	for k := range others {
		var tr traceResp
		id := model.TraceID{1, byte(1 + k), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
		if code := ts.get("/api/v1/traces/"+hex.EncodeToString(id[:]), &tr, "X-Scope-OrgID", "other"); code != 200 {
			t.Fatalf("trace b%d: %d", k, code)
		}
		if len(tr.Spans) != 50 {
			t.Fatalf("trace b%d: %d spans, want 50", k, len(tr.Spans))
		}
		for _, s := range tr.Spans {
			attrs, _ := s["attributes"].(map[string]any)
			name, _ := s["name"].(string)
			var i int
			if _, err := fmt.Sscanf(name, "op-b%d-%d", new(int), &i); err != nil {
				t.Fatalf("trace b%d: span name %q", k, name)
			}
			if want := fmt.Sprintf("b%d-%d", k, i); name != "op-"+want || attrs["tag"] != want || fmt.Sprint(attrs["n"]) != fmt.Sprint(i) {
				t.Fatalf("trace b%d: span %q has attributes %v, want tag %s and n %d", k, name, attrs, want, i)
			}
		}
	}
}

// TestNativeAnswerCountsSpans: the native route's answer counts the spans it
// stored and names the first it refused, read after the request's spans
// were handed to the store (and their memory possibly released).
func TestNativeAnswerCountsSpans(t *testing.T) {
	ts := startServer(t, Options{})
	body := `[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","name":"a","service":"s","start_time_unix_nano":1,"end_time_unix_nano":2},
{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203332","name":"b","service":"s","start_time_unix_nano":1,"end_time_unix_nano":2},
{"trace_id":"0af7","span_id":"b7ad6b7169203333","name":"c","service":"s","start_time_unix_nano":1,"end_time_unix_nano":2}]`
	code, b := ts.post("/v1/spans", "application/json", []byte(body))
	if want := `{"accepted":2,"error":"[2]: trace_id must be 16 bytes, got 2","rejected":1}` + "\n"; code != 200 || string(b) != want {
		t.Fatalf("POST /v1/spans: %d %s, want 200 %s", code, b, want)
	}
}
