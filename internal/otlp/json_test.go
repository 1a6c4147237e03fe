package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// rewriteJSON decodes a JSON document, applies fn to every object, and encodes it again.
func rewriteJSON(tb testing.TB, in []byte, fn func(obj map[string]any)) []byte {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("rewriteJSON: %v", err)
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
			fn(x) // after the children, so what fn adds is not walked
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

var idKeys = []string{"traceId", "spanId", "parentSpanId"}

// hexIDs turns protojson output (base64 ids) into OTLP/JSON (hex ids).
func hexIDs(tb testing.TB, pj []byte) []byte {
	return rewriteJSON(tb, pj, func(obj map[string]any) {
		for _, k := range idKeys {
			if s, ok := obj[k].(string); ok {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					tb.Fatalf("id %q: %v", s, err)
				}
				obj[k] = hex.EncodeToString(b)
			}
		}
	})
}

// base64IDs turns OTLP/JSON (hex ids) into protojson's form (base64 ids).
func base64IDs(tb testing.TB, j []byte) []byte {
	return rewriteJSON(tb, j, func(obj map[string]any) {
		for _, k := range idKeys {
			if s, ok := obj[k].(string); ok {
				b, err := hex.DecodeString(s)
				if err != nil {
					tb.Fatalf("id %q: %v", s, err)
				}
				obj[k] = base64.StdEncoding.EncodeToString(b)
			}
		}
	})
}

var camelToSnake = map[string]string{
	"resourceSpans": "resource_spans", "scopeSpans": "scope_spans", "schemaUrl": "schema_url",
	"droppedAttributesCount": "dropped_attributes_count", "traceId": "trace_id", "spanId": "span_id",
	"parentSpanId": "parent_span_id", "traceState": "trace_state", "startTimeUnixNano": "start_time_unix_nano",
	"endTimeUnixNano": "end_time_unix_nano", "droppedEventsCount": "dropped_events_count",
	"droppedLinksCount": "dropped_links_count", "timeUnixNano": "time_unix_nano", "stringValue": "string_value",
	"boolValue": "bool_value", "intValue": "int_value", "doubleValue": "double_value", "bytesValue": "bytes_value",
	"arrayValue": "array_value", "kvlistValue": "kvlist_value",
}

// variant rewrites OTLP/JSON into other spellings receivers must accept:
// snake_case keys, 64-bit integers as numbers, enums as integers, unknown keys, upper-case hex.
func variant(tb testing.TB, j []byte, r *rand.Rand) []byte {
	snake, nums, enumInts, unknown, upper := r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
	kinds := map[string]int{}
	for i, n := range spanKindNames {
		kinds[n] = i
	}
	for i, n := range statusCodeNames {
		kinds[n] = i
	}
	return rewriteJSON(tb, j, func(obj map[string]any) {
		for _, k := range []string{"startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue"} {
			if s, ok := obj[k].(string); ok && nums {
				obj[k] = json.Number(s)
			}
		}
		for _, k := range []string{"kind", "code"} {
			if s, ok := obj[k].(string); ok && enumInts {
				obj[k] = kinds[s]
			}
		}
		for _, k := range idKeys {
			if s, ok := obj[k].(string); ok && upper {
				obj[k] = strings.ToUpper(s)
			}
		}
		if unknown {
			obj["someFutureField"] = map[string]any{"nested": []any{1, "x", nil, true}}
		}
		if snake {
			for k, v := range obj {
				if s, ok := camelToSnake[k]; ok {
					delete(obj, k)
					obj[s] = v
				}
			}
		}
	})
}

func TestDecodeJSONDifferential(t *testing.T) {
	g := newGen(3)
	g.badIDs = true
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 1000 {
		req := g.request()
		pj, err := protojson.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		in := hexIDs(t, pj)
		if iter%2 == 1 {
			in = variant(t, in, r)
		}
		got, err := DecodeJSON(in)
		if err != nil {
			t.Fatalf("iter %d: DecodeJSON: %v\n%.2000s", iter, err, in)
		}
		want, rejected := expected(req)
		if d := diffSpans(got.Spans, want); d != "" {
			t.Fatalf("iter %d: %s\n%.2000s", iter, d, in)
		}
		if got.Rejected != rejected {
			t.Fatalf("iter %d: Rejected = %d, want %d (%s)", iter, got.Rejected, rejected, got.RejectMsg)
		}
	}
}

func TestEncodeJSONRoundTrip(t *testing.T) {
	g := newGen(4)
	for iter := range 1000 {
		req := g.request()
		want, _ := expected(req)
		j := EncodeJSON(want)
		if !json.Valid(j) {
			t.Fatalf("iter %d: EncodeJSON output is not valid JSON:\n%.2000s", iter, j)
		}
		var back coltrace.ExportTraceServiceRequest
		if err := protojson.Unmarshal(base64IDs(t, j), &back); err != nil {
			t.Fatalf("iter %d: protojson.Unmarshal(EncodeJSON): %v\n%.2000s", iter, err, j)
		}
		got, _ := expected(&back)
		if d := diffGrouped(got, want); d != "" {
			t.Fatalf("iter %d: protojson decode of EncodeJSON: %s", iter, d)
		}
		ours, err := DecodeJSON(j)
		if err != nil {
			t.Fatalf("iter %d: DecodeJSON(EncodeJSON): %v", iter, err)
		}
		if d := diffSpans(ours.Spans, got); d != "" {
			t.Fatalf("iter %d: DecodeJSON(EncodeJSON) differs from protojson: %s", iter, d)
		}
	}
}
