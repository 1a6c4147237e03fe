package tracetrim

import "strconv"

// noteState is what the note reports.
type noteState struct {
	whole   bool // every span is shown, some without attributes
	total   int  // spans in the trace
	shown   int
	hidden  int
	groups  int
	dropped int // must-keep spans that lost their attributes to the budget
	mode    groupMode
	over    bool
	budget  int
}

func (s noteState) String() string {
	if s.whole {
		return "All spans are shown, but only roots, errors and expanded spans carry attributes and events: call get_trace with expand=[span ids], or get_span, to see those of another span."
	}
	var b []byte
	if s.over {
		b = append(b, overClause(s.budget)...)
	}
	b = append(b, "Showing "...)
	b = strconv.AppendInt(b, int64(s.shown), 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, int64(s.total), 10)
	b = append(b, " spans (roots, errors and the critical path are always shown)"...)
	if s.hidden > 0 {
		b = append(b, "; the other "...)
		b = strconv.AppendInt(b, int64(s.hidden), 10)
		b = append(b, " are summarised in "...)
		b = strconv.AppendInt(b, int64(s.groups), 10)
		b = append(b, " collapsed groups under their nearest shown ancestor"...)
		switch s.mode {
		case byService:
			b = append(b, " by service (name \"*\")"...)
		case byParent:
			b = append(b, " (service and name \"*\")"...)
		}
		b = append(b, ", counted per span in hidden_children"...)
	}
	if s.dropped > 0 {
		b = append(b, "; "...)
		b = strconv.AppendInt(b, int64(s.dropped), 10)
		b = append(b, " root or error spans lost their attributes to the budget"...)
	}
	b = append(b, ". Call get_trace with expand=[span ids] (e.g. a group's sample_span_id), or get_span, to see a span in full."...)
	return string(b)
}

// overClause opens the note of an over-budget result. It is plain ASCII, so
// its JSON length is its length.
func overClause(budget int) string {
	return "The spans that must be shown (roots, errors, critical path, expanded, and their ancestors) exceed the budget of " +
		strconv.Itoa(budget) + " tokens. "
}

// noteBytes bounds the size of the note field for a state, whatever the
// counts in it (at most the number of spans each).
func (tr *trimmer) noteBytes(ns noteState) int {
	n := len(tr.t.spans)
	ns.total, ns.shown, ns.hidden, ns.groups = n, n, n, n
	if ns.dropped > 0 {
		ns.dropped = n
	}
	return len(`,"note":`) + jsonStrLen(ns.String())
}
