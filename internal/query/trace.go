package query

import "github.com/rastro-dev/rastro/internal/model"

// TraceInfo is what the trace-level intrinsics read: traceDuration,
// rootName, rootServiceName (and their trace: forms).
type TraceInfo struct {
	HasRoot     bool // the root span (no parent) has arrived
	RootName    string
	RootService string
	Duration    uint64 // from the earliest span start to the latest end, ns
}

// traceCtx finds the trace of a span, once per trace.
type traceCtx struct {
	lookup func(id model.TraceID) (TraceInfo, bool)
	memo   map[model.TraceID]*TraceInfo // nil entry: lookup failed
	// children counts each span's children, when the whole trace is at
	// hand (Query.Eval); nil elsewhere.
	children map[model.SpanID]int
}

func (tc *traceCtx) of(s *model.Span) (*TraceInfo, bool) {
	if tc == nil {
		return nil, false
	}
	if t, ok := tc.memo[s.TraceID]; ok {
		return t, t != nil
	}
	var t *TraceInfo
	if info, ok := tc.lookup(s.TraceID); ok {
		t = &info
	}
	tc.memo[s.TraceID] = t
	return t, t != nil
}

// NeedsTrace reports whether f has trace-level conditions: a backend must
// bind it with WithTraces before matching, and where it cannot (live tail,
// LLM statistics) refuse it.
func (f *Filter) NeedsTrace() bool {
	n, ok := f.Expr.(node)
	return ok && needsTrace(n)
}

func needsTrace(n node) bool {
	switch e := n.(type) {
	case andExpr:
		return needsTrace(e.l) || needsTrace(e.r)
	case orExpr:
		return needsTrace(e.l) || needsTrace(e.r)
	case notExpr:
		return needsTrace(e.x)
	case *cond:
		return e.f.intr == intrTraceDuration || e.f.intr == intrRootName || e.f.intr == intrRootService
	case boundExpr:
		return false
	}
	return false
}

// boundExpr is an expression whose trace-level conditions read the traces
// lookup finds.
type boundExpr struct {
	node
	tc *traceCtx
}

func (b boundExpr) Match(s *model.Span) bool { return b.node.matchIn(s, b.tc) }

// WithTraces returns a copy of f whose trace-level conditions read the
// trace lookup returns for a span's trace id (ok false: unknown, and they do
// not hold). lookup is called at most once per trace; the copy is for one
// query, in one goroutine.
func WithTraces(f *Filter, lookup func(id model.TraceID) (TraceInfo, bool)) *Filter {
	n, ok := f.Expr.(node)
	if !ok || !needsTrace(n) {
		return f
	}
	g := *f
	g.Expr = boundExpr{node: traceLast(n), tc: &traceCtx{lookup: lookup, memo: map[model.TraceID]*TraceInfo{}}}
	return &g
}

// traceLast reorders && and || so that trace-level conditions are decided
// after the span's own (matching has no effect but the lookup cache, so the
// order does not change results): a span the cheap side rejects costs no
// trace lookup.
func traceLast(n node) node {
	switch e := n.(type) {
	case andExpr:
		l, r := traceLast(e.l), traceLast(e.r)
		if needsTrace(l) && !needsTrace(r) {
			l, r = r, l
		}
		return andExpr{l, r}
	case orExpr:
		l, r := traceLast(e.l), traceLast(e.r)
		if needsTrace(l) && !needsTrace(r) {
			l, r = r, l
		}
		return orExpr{l, r}
	case notExpr:
		return notExpr{traceLast(e.x)}
	}
	return n
}

// TraceInfoOf is the trace-level view of a trace's spans.
func TraceInfoOf(spans []model.Span) TraceInfo {
	var t TraceInfo
	var start, end uint64
	for i := range spans {
		s := &spans[i]
		if i == 0 || s.StartTimeUnixNano < start {
			start = s.StartTimeUnixNano
		}
		end = max(end, s.EndTimeUnixNano)
		if s.IsRoot() && !t.HasRoot {
			t.HasRoot, t.RootName, t.RootService = true, s.Name, s.Service
		}
	}
	t.Duration = end - min(start, end)
	return t
}

// UsesStructure reports whether e has conditions only a whole trace can
// answer (span:childCount): such a filter is not matched span by span.
func UsesStructure(e Expr) bool {
	n, ok := e.(node)
	return ok && usesStructure(n)
}

func usesStructure(n node) bool {
	switch e := n.(type) {
	case andExpr:
		return usesStructure(e.l) || usesStructure(e.r)
	case orExpr:
		return usesStructure(e.l) || usesStructure(e.r)
	case notExpr:
		return usesStructure(e.x)
	case boundExpr:
		return usesStructure(e.node)
	case *cond:
		return e.f.intr == intrChildCount
	}
	return false
}
