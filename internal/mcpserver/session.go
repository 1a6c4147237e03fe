package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/url"
)

// apiSession is the answer of /api/v1/sessions/{id}.
type apiSession struct {
	SessionID string     `json:"session_id"`
	Traces    []apiTrace `json:"traces"`
}

// apiTrace is one trace of a session.
type apiTrace struct {
	TraceID     string       `json:"trace_id"`
	Start       string       `json:"start_time"`
	DurationNs  float64      `json:"duration_ns"`
	RootService string       `json:"root_service"`
	RootName    string       `json:"root_name"`
	Spans       int          `json:"span_count"`
	Errors      int          `json:"error_count"`
	LLMSpans    []apiLLMSpan `json:"llm_spans"`
}

// apiLLMSpan is one LLM call of a session's trace.
type apiLLMSpan struct {
	SpanID       string    `json:"span_id"`
	Name         string    `json:"name"`
	Start        string    `json:"start_time"`
	DurationNs   float64   `json:"duration_ns"`
	Status       string    `json:"status"`
	Model        string    `json:"model"`
	Operation    string    `json:"operation"`
	Agent        string    `json:"agent"`
	Tool         string    `json:"tool"`
	User         string    `json:"user"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	CostUSD      float64   `json:"cost_usd"`
	Input        []Message `json:"input_messages"`
	Output       []Message `json:"output_messages"`
}

// Message is one prompt or completion message.
type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Turn is one LLM span of a conversation.
type Turn struct {
	SpanID       string    `json:"span_id"`
	Name         string    `json:"name"`
	Start        string    `json:"start_time"`
	DurationMs   float64   `json:"duration_ms"`
	Status       string    `json:"status,omitempty"`
	Model        string    `json:"model,omitempty"`
	Operation    string    `json:"operation,omitempty"`
	Agent        string    `json:"agent,omitempty"`
	Tool         string    `json:"tool,omitempty"`
	User         string    `json:"user,omitempty"`
	InputTokens  int64     `json:"input_tokens,omitempty"`
	OutputTokens int64     `json:"output_tokens,omitempty"`
	CostUSD      float64   `json:"cost_usd,omitempty"`
	Input        []Message `json:"input_messages,omitempty"`
	Output       []Message `json:"output_messages,omitempty"`
	Omitted      bool      `json:"messages_omitted,omitempty"` // messages left out for the budget (get_span shows them)
}

// ConvTrace is one trace of a conversation.
type ConvTrace struct {
	TraceID     string  `json:"trace_id"`
	Start       string  `json:"start_time"`
	DurationMs  float64 `json:"duration_ms"`
	RootService string  `json:"root_service"`
	RootName    string  `json:"root_name"`
	Spans       int     `json:"span_count"`
	Errors      int     `json:"error_count"`
	Turns       []Turn  `json:"turns"`
	TraceURL    string  `json:"trace_url,omitempty"`
}

// Conversation is a session trimmed to a token budget.
type Conversation struct {
	SessionID  string      `json:"session_id"`
	Traces     []ConvTrace `json:"traces"`
	Budget     int         `json:"budget_tokens"`
	Tokens     int         `json:"tokens"`
	MaxMessage int         `json:"max_message_bytes"` // messages were clipped to this many bytes
	Omitted    int         `json:"turns_without_messages,omitempty"`
	OverBudget bool        `json:"over_budget,omitempty"`
	Note       string      `json:"note,omitempty"`
	SessionURL string      `json:"session_url,omitempty"`
}

// trimSession fits a session into budget tokens (bytes/4 of its JSON):
// messages are clipped ever shorter, then turns lose their messages from
// the middle of the conversation outwards; failed turns and the first and
// last turns keep theirs.
func trimSession(s *apiSession, budget int, api *API) Conversation {
	build := func(maxMsg int) Conversation {
		c := Conversation{SessionID: s.SessionID, Traces: []ConvTrace{}, Budget: budget, MaxMessage: maxMsg,
			SessionURL: api.link("/sessions/"+url.PathEscape(s.SessionID), nil)}
		for _, tr := range s.Traces {
			ct := ConvTrace{TraceID: tr.TraceID, Start: tr.Start, DurationMs: ms(tr.DurationNs), RootService: tr.RootService,
				RootName: tr.RootName, Spans: tr.Spans, Errors: tr.Errors, Turns: []Turn{}, TraceURL: api.link("/traces/"+tr.TraceID, nil)}
			for _, sp := range tr.LLMSpans {
				status := sp.Status
				if status == "unset" {
					status = ""
				}
				ct.Turns = append(ct.Turns, Turn{SpanID: sp.SpanID, Name: sp.Name, Start: sp.Start, DurationMs: ms(sp.DurationNs), Status: status,
					Model: sp.Model, Operation: sp.Operation, Agent: sp.Agent, Tool: sp.Tool, User: sp.User, InputTokens: sp.InputTokens,
					OutputTokens: sp.OutputTokens, CostUSD: sp.CostUSD, Input: clipMessages(sp.Input, maxMsg), Output: clipMessages(sp.Output, maxMsg)})
			}
			c.Traces = append(c.Traces, ct)
		}
		return c
	}
	// size measures c and sets its Tokens (twice: the figure's own digits
	// count).
	size := func(c *Conversation) int {
		for range 2 {
			b, _ := json.Marshal(c)
			c.Tokens = len(b) / 4
		}
		return c.Tokens
	}
	var c Conversation
	for _, maxMsg := range []int{4000, 1000, 300, 100} {
		c = build(maxMsg)
		if size(&c) <= budget {
			if maxMsg < 4000 {
				c.Note = fmt.Sprintf("Messages clipped to %d bytes to fit the budget; get_span with a turn's trace and span id shows it in full.", maxMsg)
				size(&c)
			}
			return c
		}
	}
	// Drop messages from the middle outwards, keeping failed turns and
	// the first and last.
	type ref struct{ t, u int }
	var turns []ref
	for i := range c.Traces {
		for j := range c.Traces[i].Turns {
			turns = append(turns, ref{i, j})
		}
	}
	order := make([]ref, 0, len(turns))
	for lo, hi := (len(turns)-1)/2, (len(turns)-1)/2+1; lo >= 1 || hi < len(turns)-1; lo, hi = lo-1, hi+1 {
		if lo >= 1 {
			order = append(order, turns[lo])
		}
		if hi < len(turns)-1 {
			order = append(order, turns[hi])
		}
	}
	for _, r := range order {
		u := &c.Traces[r.t].Turns[r.u]
		if u.Status == "error" || (u.Input == nil && u.Output == nil) {
			continue
		}
		u.Input, u.Output, u.Omitted = nil, nil, true
		c.Omitted++
		// Re-measured every 16 drops (and at the end): a marshal per
		// drop would be quadratic on long sessions.
		if c.Omitted%16 == 0 || r == order[len(order)-1] {
			if size(&c) <= budget {
				break
			}
		}
	}
	c.Note = fmt.Sprintf("Messages clipped to %d bytes; %d turns shown without their messages (get_span with the turn's trace and span id shows them).", c.MaxMessage, c.Omitted)
	c.OverBudget = size(&c) > budget
	if c.OverBudget {
		size(&c) // the flag's own bytes
	}
	return c
}

func clipMessages(ms []Message, n int) []Message {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		m.Content = clip(m.Content, n)
		out[i] = m
	}
	return out
}
