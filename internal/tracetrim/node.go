package tracetrim

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// Node is one shown span.
type Node struct {
	SpanID string `json:"span_id"`
	Parent string `json:"parent,omitempty"` // empty for roots
	// MissingParent is set on a root whose ParentSpanID is not usable: the
	// parent is not in the trace, is the span itself, or is on a parent cycle.
	MissingParent string    `json:"missing_parent,omitempty"`
	Depth         int       `json:"depth"`
	Service       string    `json:"service"`
	Name          string    `json:"name"`
	Kind          string    `json:"kind,omitempty"` // omitted for internal and unspecified
	OffsetMs      float64   `json:"offset_ms"`      // start relative to the trace start
	DurationMs    float64   `json:"duration_ms"`
	Status        string    `json:"status,omitempty"`  // "error" or "ok"; omitted when unset
	Message       string    `json:"message,omitempty"` // for errors: the status message, else the exception
	Why           []string  `json:"why,omitempty"`     // see the why* constants
	LLM           *LLMBrief `json:"llm,omitempty"`
	// Attributes and Events are set only on detailed spans (expanded, errors,
	// roots); string values are cut to Options.MaxValue bytes.
	Attributes map[string]any `json:"attributes,omitempty"`
	Events     []Event        `json:"events,omitempty"`
	// EventsOmitted counts events left out of a detailed span that was not
	// expanded (at most maxEvents are listed, exceptions first).
	EventsOmitted int `json:"events_omitted,omitempty"`
	Hidden        int `json:"hidden_children,omitempty"` // descendants not shown
}

// Event is a span event of a detailed span.
type Event struct {
	Name       string         `json:"name"`
	OffsetMs   float64        `json:"offset_ms"` // relative to the trace start
	Attributes map[string]any `json:"attributes,omitempty"`
}

// LLMBrief is the short form of model.LLM. Token counts that were not
// reported are omitted.
type LLMBrief struct {
	Model        string  `json:"model,omitempty"`
	Operation    string  `json:"operation,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
	Tool         string  `json:"tool,omitempty"`
	Agent        string  `json:"agent,omitempty"`
}

// Reasons a span is shown, as listed in Node.Why.
const (
	whyRoot     = "root"
	whyError    = "error"
	whyCritical = "critical_path"
	whyExpanded = "expanded"
	whyLLM      = "llm"
	whySlow     = "slow"     // self time is at least a tenth of the trace's duration
	whyAncestor = "ancestor" // shown only to connect a must-keep span to its root
)

// reason bits, in the order they are listed in Node.Why.
const (
	rRoot uint8 = 1 << iota
	rError
	rCritical
	rExpanded
	rLLM
	rSlow
	rAncestor

	rMustKeep = rRoot | rError | rCritical | rExpanded | rAncestor
)

var reasonNames = [...]string{whyRoot, whyError, whyCritical, whyExpanded, whyLLM, whySlow, whyAncestor}

func reasonList(r uint8) []string {
	if r&(rMustKeep&^rAncestor) != 0 {
		r &^= rAncestor // listed only when it is the sole reason to keep the span
	}
	var out []string
	for i, name := range reasonNames {
		if r&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// maxEvents is how many events a detailed span lists unless it is expanded.
const maxEvents = 10

// builder turns spans into Nodes.
type builder struct {
	t        *tree
	maxValue int
}

// node builds the node for x without Hidden. detail adds attributes and
// events; full lists every event (for expanded spans).
func (b *builder) node(x int32, why uint8, detail, full bool) Node {
	t, s := b.t, b.t.spans[x]
	n := Node{
		SpanID:     s.SpanID.String(),
		Depth:      int(t.depth[x]),
		Service:    b.str(s.Service),
		Name:       b.str(s.Name),
		OffsetMs:   ms(t.start[x] - t.traceStart),
		DurationMs: ms(t.duration(x)),
		Why:        reasonList(why),
	}
	if p := t.parent[x]; p >= 0 {
		n.Parent = t.spans[p].SpanID.String()
	} else if t.orphan[x] {
		n.MissingParent = s.ParentSpanID.String()
	}
	if s.Kind != model.KindInternal && s.Kind != model.KindUnspecified {
		n.Kind = s.Kind.String()
	}
	switch s.StatusCode {
	case model.StatusError:
		n.Status = "error"
		n.Message = b.str(errorMessage(s))
	case model.StatusOK:
		n.Status = "ok"
	}
	if l := s.LLM; l != nil {
		n.LLM = &LLMBrief{
			Model:        b.str(l.Model()),
			Operation:    b.str(l.Operation),
			InputTokens:  max(l.InputTokens, 0),
			OutputTokens: max(l.OutputTokens, 0),
			CostUSD:      float64(l.CostNanoUSD) / 1e9,
			Tool:         b.str(l.ToolName),
			Agent:        b.str(l.AgentName),
		}
	}
	if !detail {
		return n
	}
	n.Attributes = b.attrs(s.Attributes)
	events := s.Events
	if !full && len(events) > maxEvents {
		events = pickEvents(events)
		n.EventsOmitted = len(s.Events) - len(events)
	}
	if len(events) > 0 {
		n.Events = make([]Event, len(events))
		for i := range events {
			ev := &events[i]
			n.Events[i] = Event{
				Name:       b.str(ev.Name),
				OffsetMs:   ms(max(ev.TimeUnixNano, t.traceStart) - t.traceStart),
				Attributes: b.attrs(ev.Attributes),
			}
		}
	}
	return n
}

// pickEvents keeps maxEvents events, exceptions first, in their order.
func pickEvents(evs []model.Event) []model.Event {
	keep := make([]bool, len(evs))
	k := 0
	for pass := 0; pass < 2 && k < maxEvents; pass++ {
		for i := range evs {
			if k == maxEvents {
				break
			}
			if !keep[i] && (pass == 1 || evs[i].Name == "exception") {
				keep[i] = true
				k++
			}
		}
	}
	out := make([]model.Event, 0, k)
	for i := range evs {
		if keep[i] {
			out = append(out, evs[i])
		}
	}
	return out
}

// errorMessage is the status message, else the first exception event's
// "type: message".
func errorMessage(s *model.Span) string {
	if s.StatusMessage != "" {
		return s.StatusMessage
	}
	for i := range s.Events {
		ev := &s.Events[i]
		if ev.Name != "exception" {
			continue
		}
		var typ, msg string
		if v, ok := model.Lookup(ev.Attributes, "exception.type"); ok {
			typ = v.AsString()
		}
		if v, ok := model.Lookup(ev.Attributes, "exception.message"); ok {
			msg = v.AsString()
		}
		switch {
		case typ == "":
			return msg
		case msg == "":
			return typ
		}
		return typ + ": " + msg
	}
	return ""
}

func (b *builder) attrs(kvs []model.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		if _, dup := m[kv.Key]; !dup { // the first wins, as in model.Lookup
			m[kv.Key] = b.value(kv.Value)
		}
	}
	return m
}

// value converts an attribute value for encoding/json. Arrays and kvlists
// whose text is longer than maxValue become that text, truncated.
func (b *builder) value(v model.Value) any {
	switch v.Type {
	case model.ValueEmpty:
		return nil
	case model.ValueBool:
		return v.Bool()
	case model.ValueInt:
		return v.Int
	case model.ValueDouble:
		if math.IsNaN(v.Double) || math.IsInf(v.Double, 0) {
			return v.AsString() // encoding/json rejects them
		}
		return v.Double
	case model.ValueArray, model.ValueKvList:
		if s := v.AsString(); len(s) > b.maxValue {
			return b.str(s)
		}
		if v.Type == model.ValueArray {
			out := make([]any, len(v.Elems()))
			for i, e := range v.Elems() {
				out[i] = b.value(e)
			}
			return out
		}
		return b.attrs(v.Fields())
	}
	return b.str(v.AsString())
}

func (b *builder) str(s string) string { return truncate(s, b.maxValue) }

// truncate cuts s to at most n bytes on a character boundary and appends
// "…(N more bytes)".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)-cut) + " more bytes)"
}

// ms converts nanoseconds to milliseconds rounded to three decimals.
func ms(ns uint64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }
