package otlp

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// nativeExpressible rewrites values the native shape cannot carry into what
// DecodeNative gives back for them.
func nativeExpressible(spans []model.Span) []model.Span {
	var fixKVs func([]model.KeyValue) []model.KeyValue
	var fixV func(model.Value) model.Value
	fixV = func(v model.Value) model.Value {
		switch v.Type {
		case model.ValueBytes:
			return model.KvListValue([]model.KeyValue{{Key: "bytes", Value: model.StringValue(base64.StdEncoding.EncodeToString(v.Bytes()))}})
		case model.ValueDouble:
			switch {
			case math.IsNaN(v.Double):
				return model.StringValue("NaN")
			case math.IsInf(v.Double, 1):
				return model.StringValue("Infinity")
			case math.IsInf(v.Double, -1):
				return model.StringValue("-Infinity")
			}
		case model.ValueArray:
			var elems []model.Value
			for _, e := range v.Elems() {
				elems = append(elems, fixV(e))
			}
			return model.ArrayValue(elems)
		case model.ValueKvList:
			return model.KvListValue(fixKVs(v.Fields()))
		}
		return v
	}
	fixKVs = func(kvs []model.KeyValue) []model.KeyValue {
		var out []model.KeyValue
		for _, kv := range kvs {
			out = append(out, model.KeyValue{Key: kv.Key, Value: fixV(kv.Value)})
		}
		return out
	}
	out := make([]model.Span, len(spans))
	for i, s := range spans {
		s.Attributes = fixKVs(s.Attributes)
		s.Events = append([]model.Event(nil), s.Events...)
		for j := range s.Events {
			s.Events[j].Attributes = fixKVs(s.Events[j].Attributes)
		}
		s.Links = append([]model.Link(nil), s.Links...)
		for j := range s.Links {
			s.Links[j].Attributes = fixKVs(s.Links[j].Attributes)
		}
		r, sc := *s.Resource, *s.Scope
		r.Attributes, sc.Attributes = fixKVs(r.Attributes), fixKVs(sc.Attributes)
		s.Resource, s.Scope = &r, &sc
		model.Normalize(&s, &model.Problems{}) // service.name may have changed type
		out[i] = s
	}
	return out
}

func TestNativeRoundTrip(t *testing.T) {
	g := newGen(5)
	for iter := range 1000 {
		want, _ := expected(g.request())
		body := EncodeNative(want)
		if !json.Valid(body) {
			t.Fatalf("iter %d: EncodeNative output is not valid JSON:\n%.2000s", iter, body)
		}
		got, err := DecodeNative(body)
		if err != nil {
			t.Fatalf("iter %d: DecodeNative(EncodeNative): %v\n%.2000s", iter, err, body)
		}
		if got.Rejected != 0 {
			t.Fatalf("iter %d: rejected %d: %s", iter, got.Rejected, got.RejectMsg)
		}
		if d := diffSpans(got.Spans, nativeExpressible(want)); d != "" {
			t.Fatalf("iter %d: %s\n%.2000s", iter, d, body)
		}
	}
}

const nativeExample = `[
 {"trace_id":"5B8EFFF798038103D269B633813FC60C","span_id":"eee19b7ec3c1b174","name":"GET /x","kind":"server",
  "start_time":"2026-01-02T15:04:05.123456789Z","duration_ns":1000,"service":"api","status":"error",
  "status_message":"boom","attributes":{"i":42,"d":1.0,"e":1e3,"b":true,"s":"x","n":null,"a":[1,"y"],"o":{"k":2}},
  "resource":{"env":"prod","service.name":"ignored"},"scope":{"name":"lib","version":"1"},
  "events":[{"time":1767366245200000000,"name":"retry","attributes":{"attempt":2}}],
  "links":[{"trace_id":"5b8efff798038103d269b633813fc60d","span_id":"eee19b7ec3c1b175","attributes":{}}],
  "some_future_field":{"x":[1,2]}},
 {"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b175","parent_span_id":"eee19b7ec3c1b174",
  "name":"db","kind":3,"start_time":"1767366245200000000","end_time":"2026-01-02T15:04:05.3+00:00",
  "service":"api","resource":{"env":"prod"},"scope":{"name":"lib","version":"1"}},
 {"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b176","name":"no start"},
 {"trace_id":"xyz","span_id":"eee19b7ec3c1b177","start_time":0}
]`

func TestDecodeNativeExample(t *testing.T) {
	b, err := DecodeNative([]byte(nativeExample))
	if err != nil {
		t.Fatal(err)
	}
	if b.Rejected != 2 || b.RejectMsg != "[2]: start_time is required" {
		t.Fatalf("Rejected = %d, RejectMsg = %q", b.Rejected, b.RejectMsg)
	}
	if len(b.Spans) != 2 {
		t.Fatalf("got %d spans", len(b.Spans))
	}
	s0, s1 := &b.Spans[0], &b.Spans[1]
	if s0.TraceID.String() != "5b8efff798038103d269b633813fc60c" || s0.Kind != model.KindServer || s0.Service != "api" ||
		s0.StatusCode != model.StatusError || s0.StatusMessage != "boom" || !s0.IsRoot() {
		t.Errorf("span 0 = %+v", *s0)
	}
	if s0.StartTimeUnixNano != 1767366245123456789 || s0.Duration() != 1000 {
		t.Errorf("span 0 times = %d + %d", s0.StartTimeUnixNano, s0.Duration())
	}
	wantAttrs := []model.KeyValue{
		{Key: "i", Value: model.IntValue(42)}, {Key: "d", Value: model.DoubleValue(1)}, {Key: "e", Value: model.DoubleValue(1000)},
		{Key: "b", Value: model.BoolValue(true)}, {Key: "s", Value: model.StringValue("x")}, {Key: "n"},
		{Key: "a", Value: model.ArrayValue([]model.Value{model.IntValue(1), model.StringValue("y")})},
		{Key: "o", Value: model.KvListValue([]model.KeyValue{{Key: "k", Value: model.IntValue(2)}})},
	}
	if !model.EqualKeyValues(s0.Attributes, wantAttrs) {
		t.Errorf("attributes = %v\nwant %v", s0.Attributes, wantAttrs)
	}
	wantRes := []model.KeyValue{{Key: "service.name", Value: model.StringValue("api")}, {Key: "env", Value: model.StringValue("prod")}}
	if !model.EqualKeyValues(s0.Resource.Attributes, wantRes) {
		t.Errorf("resource = %v, want %v", s0.Resource.Attributes, wantRes)
	}
	if s0.Resource != s1.Resource || s0.Scope != s1.Scope {
		t.Errorf("spans with the same service, resource and scope do not share them")
	}
	if len(s0.Events) != 1 || s0.Events[0].TimeUnixNano != 1767366245200000000 || len(s0.Links) != 1 {
		t.Errorf("events/links = %+v / %+v", s0.Events, s0.Links)
	}
	if s1.Kind != model.KindClient || s1.StartTimeUnixNano != 1767366245200000000 || s1.EndTimeUnixNano != 1767366245300000000 {
		t.Errorf("span 1 = kind %v, %d..%d", s1.Kind, s1.StartTimeUnixNano, s1.EndTimeUnixNano)
	}
}

func TestAppendSpanJSON(t *testing.T) {
	bad := "bad\xff\xfeutf8\u2028\x01"
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("svc")}}}
	s := model.Span{
		TraceID: model.TraceID{1}, SpanID: model.SpanID{2}, Name: bad, Kind: model.KindClient,
		StartTimeUnixNano: 1_700_000_000_000_000_001, EndTimeUnixNano: 1_700_000_000_500_000_001,
		Attributes: []model.KeyValue{
			{Key: bad, Value: model.DoubleValue(math.NaN())}, {Key: "two", Value: model.DoubleValue(2)},
			{Key: "big", Value: model.IntValue(math.MaxInt64)}, {Key: "raw", Value: model.BytesValue([]byte{0xff})},
			{Key: "none"},
		},
		Resource: res, Scope: &model.Scope{}, Service: "svc", StatusCode: 7,
	}
	out := AppendSpanJSON([]byte("prefix"), &s)
	if !strings.HasPrefix(string(out), "prefix{") {
		t.Fatalf("AppendSpanJSON did not append: %s", out)
	}
	out = out[len("prefix"):]
	if !json.Valid(out) {
		t.Fatalf("not valid JSON: %s", out)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	checks := map[string]any{
		"service": "svc", "kind": "client", "start_time": "2023-11-14T22:13:20.000000001Z",
		"duration_ns": json.Number("500000000"), "status": json.Number("7"),
	}
	for k, want := range checks {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	if _, ok := m["parent_span_id"]; ok {
		t.Errorf("root span has parent_span_id")
	}
	attrs := m["attributes"].(map[string]any)
	if attrs["two"] != json.Number("2.0") || attrs["big"] != json.Number("9223372036854775807") || attrs["none"] != nil {
		t.Errorf("attributes = %v", attrs)
	}
	if raw, _ := attrs["raw"].(map[string]any); raw["bytes"] != "/w==" {
		t.Errorf("bytes value = %v", attrs["raw"])
	}
}
