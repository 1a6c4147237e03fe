package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestTrimSessionKeepsErrorsAndEnds: a long conversation is cut to its
// budget by clipping messages, then by leaving the middle turns without
// theirs; failed turns, the first and the last keep their messages.
func TestTrimSessionKeepsErrorsAndEnds(t *testing.T) {
	var s apiSession
	s.SessionID = "conv-1"
	long := strings.Repeat("the customer asks about order 1234 again; ", 200) // ~8 KB
	for i := range 40 {
		tr := apiTrace{TraceID: fmt.Sprintf("%032x", i+1), Spans: 3, LLMSpans: []apiLLMSpan{{
			SpanID: fmt.Sprintf("%016x", i+1), Name: "chat", Status: "ok", Model: "gpt-4o",
			Input:  []Message{{Role: "user", Content: fmt.Sprintf("turn %d: %s", i, long)}},
			Output: []Message{{Role: "assistant", Content: long}},
		}}}
		if i == 20 {
			tr.LLMSpans[0].Status = "error"
			tr.Errors = 1
		}
		s.Traces = append(s.Traces, tr)
	}
	for _, budget := range []int{8000, 3000} {
		c := trimSession(&s, budget, &API{})
		b, _ := json.Marshal(c)
		if len(c.Traces) != 40 || (len(b)/4 > budget && !c.OverBudget) || c.Tokens != len(b)/4 {
			t.Fatalf("budget %d: %d traces, %d tokens (reported %d), over %v", budget, len(c.Traces), len(b)/4, c.Tokens, c.OverBudget)
		}
		for _, i := range []int{0, 20, 39} {
			u := c.Traces[i].Turns[0]
			if u.Omitted || len(u.Input) == 0 || !strings.HasPrefix(u.Input[0].Content, fmt.Sprintf("turn %d:", i)) {
				t.Fatalf("budget %d: turn %d lost its messages: %+v", budget, i, u)
			}
		}
		if c.MaxMessage >= 4000 || !strings.Contains(c.Note, "get_span") || (budget == 3000) != (c.Omitted > 0) {
			t.Fatalf("budget %d: messages clipped to %d, %d turns without messages, note %q", budget, c.MaxMessage, c.Omitted, c.Note)
		}
	}
	// A short conversation comes back whole, messages unclipped.
	short := apiSession{SessionID: "conv-2", Traces: s.Traces[:1]}
	short.Traces[0].LLMSpans[0].Input = []Message{{Role: "user", Content: "hello"}}
	short.Traces[0].LLMSpans[0].Output = []Message{{Role: "assistant", Content: "hi"}}
	if c := trimSession(&short, 8000, &API{}); c.Omitted != 0 || c.Traces[0].Turns[0].Output[0].Content != "hi" || c.MaxMessage != 4000 {
		t.Fatalf("short conversation: %+v", c)
	}
}
