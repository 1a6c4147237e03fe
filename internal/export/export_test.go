package export

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAttributeString: the MAP columns' text of every kind of API value.
func TestAttributeString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`"plain"`, `plain`},
		{`"quote \" and \\ and \n"`, "quote \" and \\ and \n"},
		{`"caf\u00e9 退款"`, `café 退款`},
		{`""`, ``},
		{`42`, `42`},
		{`-0.5`, `-0.5`},
		{`true`, `true`},
		{`null`, `null`},
		{`"NaN"`, `NaN`},
		{`["a", "b c", 1]`, `["a","b c",1]`},
		{`{"k": {"bytes": "AAE="}}`, `{"k":{"bytes":"AAE="}}`},
	} {
		got, err := AttributeString(json.RawMessage(c.in))
		if err != nil || got != c.want {
			t.Errorf("AttributeString(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := AttributeString(json.RawMessage(`[1, 2`)); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("broken JSON: %v", err)
	}
}

// TestRowsRefuseWhatTheAPINeverSends: a conversion error names the span and
// the member.
func TestRowsRefuseWhatTheAPINeverSends(t *testing.T) {
	for _, c := range []struct{ span, want string }{
		{`{"trace_id":"t","span_id":"s","kind":"server","status":true}`, `span s of trace t: status: "true" is neither a name nor an integer`},
		{`{"trace_id":"t","span_id":"s","kind":"server","status":"ok","start_time_unix_nano":18446744073709551615}`, "start_time_unix_nano 18446744073709551615 does not fit"},
	} {
		var s APISpan
		if err := json.Unmarshal([]byte(c.span), &s); err != nil {
			t.Fatal(err)
		}
		if _, err := Rows([]APISpan{s}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.span, err, c.want)
		}
	}
	// An unknown enum is its number.
	var s APISpan
	json.Unmarshal([]byte(`{"trace_id":"t","span_id":"s","kind":9,"status":"error"}`), &s)
	rows, err := Rows([]APISpan{s})
	if err != nil || rows[0].Kind != "9" || rows[0].StatusCode != "error" || rows[0].Events != "[]" || rows[0].LLMCounted != nil {
		t.Errorf("unknown kind: %+v, %v", rows, err)
	}
}
