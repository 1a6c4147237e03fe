package otlp

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// invalidSpan reports what breaks the guarantees a decoded span must keep, or "".
func invalidSpan(s *model.Span) string {
	switch {
	case s.TraceID.IsZero():
		return "zero trace id"
	case s.SpanID.IsZero():
		return "zero span id"
	case s.EndTimeUnixNano < s.StartTimeUnixNano:
		return "end before start"
	case s.Service == "":
		return "empty service"
	case s.Resource == nil || s.Scope == nil:
		return "nil resource or scope"
	}
	for _, str := range []string{s.Name, s.TraceState, s.StatusMessage, s.Scope.Name, s.Scope.Version, s.Scope.SchemaURL, s.Resource.SchemaURL} {
		if !utf8.ValidString(str) {
			return fmt.Sprintf("invalid UTF-8 in %q", str)
		}
	}
	lists := [][]model.KeyValue{s.Attributes, s.Resource.Attributes, s.Scope.Attributes}
	for _, e := range s.Events {
		if !utf8.ValidString(e.Name) {
			return "invalid UTF-8 in event name"
		}
		lists = append(lists, e.Attributes)
	}
	for _, l := range s.Links {
		if l.TraceID.IsZero() || l.SpanID.IsZero() {
			return "zero link id"
		}
		if !utf8.ValidString(l.TraceState) {
			return "invalid UTF-8 in link trace state"
		}
		lists = append(lists, l.Attributes)
	}
	for _, kvs := range lists {
		if !validKVs(kvs) {
			return "invalid UTF-8 in attributes"
		}
	}
	return ""
}

func validKVs(kvs []model.KeyValue) bool {
	for _, kv := range kvs {
		if !utf8.ValidString(kv.Key) || !validValue(kv.Value) {
			return false
		}
	}
	return true
}

func validValue(v model.Value) bool {
	switch v.Type {
	case model.ValueString:
		return utf8.ValidString(v.Str)
	case model.ValueArray:
		for _, e := range v.Elems() {
			if !validValue(e) {
				return false
			}
		}
	case model.ValueKvList:
		return validKVs(v.Fields())
	}
	return true
}

func checkBatch(b Batch) string {
	for i := range b.Spans {
		if r := invalidSpan(&b.Spans[i]); r != "" {
			return fmt.Sprintf("span %d: %s", i, r)
		}
	}
	if (b.Rejected == 0) != (b.RejectMsg == "") {
		return fmt.Sprintf("Rejected = %d but RejectMsg = %q", b.Rejected, b.RejectMsg)
	}
	return ""
}

func jsonValid(b []byte) bool { return json.Valid(b) }
