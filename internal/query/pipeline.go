package query

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// Query is a whole TraceQL query: spanset filters combined with the
// spanset operators (&&, ||) and the structural ones (>>, >, <<, <, ~, their
// negations !>> ... and union forms &>> ...), followed by a pipeline
// (| count() > 2, | avg(duration) > 1s, | by(...), | select(...),
// | coalesce(), | { filter }). It is evaluated per trace (Eval). A query
// that is one spanset filter is Simple: its Expr matches span by span.
type Query struct {
	root    stage
	metrics *Metrics // the metrics stage ending the query, if any
	math    *Math    // arithmetic between metrics queries (root is then { })
}

// Spanset is one result set of a query on a trace: indices into the trace's
// spans (ascending), the last aggregate's value, and the attributes that
// by() and the aggregates added.
type Spanset struct {
	Spans  []int
	Scalar *model.Value
	Attrs  []GroupAttr
}

// GroupAttr is a by() key or an aggregate's value ("by(span.x)": "a").
type GroupAttr struct {
	Name  string
	Value model.Value
}

// ErrMultipleSpansets is Tempo's rule: a structural operator needs one
// spanset on each side; by() makes several (undo it with coalesce()).
var ErrMultipleSpansets = errors.New("spanset operators are not supported for multiple spansets per trace; consider using coalesce()")

// ParseQuery parses a whole TraceQL query. Every error is a *SyntaxError.
func ParseQuery(q string) (*Query, error) {
	query, err := parseQuery(q)
	if err == nil {
		return query, nil
	}
	// Metrics arithmetic starts with a number, a minus or a parenthesis.
	t := strings.TrimLeft(q, " \t\r\n")
	if t == "" || !strings.ContainsRune("(-.0123456789", rune(t[0])) {
		return nil, err
	}
	m, definite, merr := parseMath(q)
	if merr == nil {
		return &Query{root: filterStage{n: allExpr{}}, math: m}, nil
	}
	var se, mse *SyntaxError
	if t[0] != '(' || definite || errors.As(merr, &mse) && errors.As(err, &se) && mse.Pos > se.Pos {
		return nil, merr
	}
	return nil, err
}

func parseQuery(q string) (*Query, error) {
	p := &parser{src: q, whole: true}
	if err := p.advance(); err != nil {
		return nil, err
	}
	st, err := p.parsePipeline()
	if err != nil {
		return nil, err
	}
	if err := p.skipHints(); err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		if p.tok.kind == tRParen {
			return nil, p.errf(p.tok.pos, "unbalanced ): no matching (")
		}
		return nil, p.errf(p.tok.pos, "unexpected %s; expected a spanset operator (&&, ||, >>, >, <<, <, ~, ...) or |", p.desc())
	}
	return &Query{root: st, metrics: p.metrics}, nil
}

// Simple returns the query's spanset filter when the query is exactly one
// `{ ... }`: it can then be matched span by span.
func (q *Query) Simple() (Expr, bool) {
	if f, ok := q.root.(filterStage); ok && q.metrics == nil && q.math == nil && !usesStructure(f.n) {
		return f.n, true
	}
	return nil, false
}

// String renders the query in canonical form.
func (q *Query) String() string {
	if q.math != nil {
		return string(q.math.appendTo(nil))
	}
	b := q.root.appendTo(nil)
	if q.metrics != nil {
		b = q.metrics.appendTo(append(b, " | "...))
	}
	return string(b)
}

// Leaves returns the spanset filters of the query in source order: a trace
// in the answer has a span matching one of them (candidate selection).
func (q *Query) Leaves() []Expr {
	var out []Expr
	walkStages(q.root, func(s stage) {
		if f, ok := s.(filterStage); ok {
			out = append(out, f.n)
		}
	})
	return out
}

// Required returns spanset filters every trace in the answer has a span
// matching: a backend may read only the traces holding a span of the most
// selective one. Empty when the query guarantees none (|| at the top).
func (q *Query) Required() []Expr { return required(q.root) }

func required(s stage) []Expr {
	switch s := s.(type) {
	case filterStage:
		return []Expr{s.n}
	case pipeStage:
		return required(s.stages[0])
	case opStage:
		switch s.op {
		case soOr:
			return nil
		case soAnd, soChild, soParent, soDesc, soAnce, soSibl, soUnionChild, soUnionParent, soUnionDesc, soUnionAnce, soUnionSibl:
			return append(required(s.l), required(s.r)...)
		}
		return required(s.r) // negations: the right side's spans are the answer
	}
	return nil
}

func walkStages(s stage, f func(stage)) {
	f(s)
	switch s := s.(type) {
	case pipeStage:
		for _, x := range s.stages {
			walkStages(x, f)
		}
	case opStage:
		walkStages(s.l, f)
		walkStages(s.r, f)
	}
}

// Eval evaluates the query on one trace's spans (all of them). The
// trace-level intrinsics (rootName, traceDuration, ...) read this trace.
func (q *Query) Eval(spans []model.Span) ([]Spanset, error) {
	t := newTraceView(spans)
	all := make([]int, len(spans))
	for i := range all {
		all[i] = i
	}
	return q.root.eval(t, []Spanset{{Spans: all}})
}

// traceView is one trace prepared for structural operators.
type traceView struct {
	spans       []model.Span
	parent      []int // index of the parent span, -1 for none (a root, or a parent not in the trace)
	left, right []int // nested-set numbers: d is a descendant of a iff left[a] < left[d] && right[d] < right[a]
	tc          *traceCtx
}

func newTraceView(spans []model.Span) *traceView {
	t := &traceView{spans: spans, parent: make([]int, len(spans)), left: make([]int, len(spans)), right: make([]int, len(spans))}
	info := TraceInfoOf(spans)
	t.tc = &traceCtx{lookup: func(model.TraceID) (TraceInfo, bool) { return info, true }, memo: map[model.TraceID]*TraceInfo{}}
	byID := make(map[model.SpanID]int, len(spans))
	for i := range spans {
		if _, dup := byID[spans[i].SpanID]; !dup {
			byID[spans[i].SpanID] = i
		}
	}
	children := make([][]int, len(spans))
	t.tc.children = map[model.SpanID]int{}
	var roots []int
	for i := range spans {
		t.parent[i] = -1
		if p, ok := byID[spans[i].ParentSpanID]; ok && !spans[i].ParentSpanID.IsZero() && p != i {
			t.parent[i] = p
			children[p] = append(children[p], i)
			t.tc.children[spans[p].SpanID]++
		} else {
			roots = append(roots, i)
		}
	}
	// Number the trees depth-first (iteratively: traces can be deep). A
	// span on a parent cycle is unreachable from any root: it keeps the
	// numbers 0, 0 and is nobody's descendant or ancestor.
	n := 0
	type frame struct{ x, next int }
	for _, r := range roots {
		stack := []frame{{r, 0}}
		n++
		t.left[r] = n
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(children[f.x]) {
				c := children[f.x][f.next]
				f.next++
				n++
				t.left[c] = n
				stack = append(stack, frame{c, 0})
				continue
			}
			n++
			t.right[f.x] = n
			stack = stack[:len(stack)-1]
		}
	}
	return t
}

// descendant reports whether d is a strict descendant of a.
func (t *traceView) descendant(d, a int) bool {
	return t.left[a] != 0 && t.left[d] != 0 && t.left[a] < t.left[d] && t.right[d] < t.right[a]
}

// stage is one element of a query.
type stage interface {
	eval(t *traceView, in []Spanset) ([]Spanset, error)
	appendTo(b []byte) []byte
}

// filterStage keeps the spans of each spanset that match a spanset filter.
type filterStage struct{ n node }

func (f filterStage) eval(t *traceView, in []Spanset) ([]Spanset, error) {
	var out []Spanset
	for _, ss := range in {
		var keep []int
		for _, i := range ss.Spans {
			if f.n.matchIn(&t.spans[i], t.tc) {
				keep = append(keep, i)
			}
		}
		if len(keep) > 0 {
			out = append(out, Spanset{Spans: keep, Scalar: ss.Scalar, Attrs: ss.Attrs})
		}
	}
	return out, nil
}

func (f filterStage) appendTo(b []byte) []byte {
	if _, ok := f.n.(allExpr); ok {
		return append(b, "{ }"...)
	}
	b = append(b, "{ "...)
	b = f.n.appendBody(b)
	return append(b, " }"...)
}

// pipeStage runs its stages in turn.
type pipeStage struct{ stages []stage }

func (p pipeStage) eval(t *traceView, in []Spanset) ([]Spanset, error) {
	var err error
	for _, s := range p.stages {
		if in, err = s.eval(t, in); err != nil || len(in) == 0 {
			return nil, err
		}
	}
	return in, nil
}

func (p pipeStage) appendTo(b []byte) []byte {
	for i, s := range p.stages {
		if i > 0 {
			b = append(b, " | "...)
		}
		_, isOp := s.(opStage)
		if isOp && i > 0 {
			b = append(b, '(')
		}
		b = s.appendTo(b)
		if isOp && i > 0 {
			b = append(b, ')')
		}
	}
	return b
}

// spansetOp is a spanset or structural operator.
type spansetOp uint8

const (
	soAnd spansetOp = iota
	soOr
	soChild       // >
	soParent      // <
	soDesc        // >>
	soAnce        // <<
	soSibl        // ~
	soNotChild    // !>
	soNotParent   // !<
	soNotDesc     // !>>
	soNotAnce     // !<<
	soNotSibl     // !~
	soUnionChild  // &>
	soUnionParent // &<
	soUnionDesc   // &>>
	soUnionAnce   // &<<
	soUnionSibl   // &~
)

var spansetOpNames = [...]string{"&&", "||", ">", "<", ">>", "<<", "~", "!>", "!<", "!>>", "!<<", "!~", "&>", "&<", "&>>", "&<<", "&~"}

// opStage combines the spansets its two sides make of each input spanset.
type opStage struct {
	op   spansetOp
	l, r stage
}

func (o opStage) appendTo(b []byte) []byte {
	wrap := func(b []byte, s stage) []byte {
		if _, ok := s.(filterStage); ok {
			return s.appendTo(b)
		}
		b = append(b, '(')
		b = s.appendTo(b)
		return append(b, ')')
	}
	b = wrap(b, o.l)
	b = append(append(append(b, ' '), spansetOpNames[o.op]...), ' ')
	return wrap(b, o.r)
}

func (o opStage) eval(t *traceView, in []Spanset) ([]Spanset, error) {
	var out []Spanset
	for _, ss := range in {
		one := []Spanset{ss}
		lhs, err := o.l.eval(t, one)
		if err != nil {
			return nil, err
		}
		rhs, err := o.r.eval(t, one)
		if err != nil {
			return nil, err
		}
		var spans []int
		switch o.op {
		case soAnd:
			if len(lhs) > 0 && len(rhs) > 0 {
				spans = unionSpans(lhs, rhs)
			}
		case soOr:
			if len(lhs) > 0 || len(rhs) > 0 {
				spans = unionSpans(lhs, rhs)
			}
		default:
			if len(lhs) > 1 || len(rhs) > 1 {
				return nil, ErrMultipleSpansets
			}
			var l, r []int
			if len(lhs) == 1 {
				l = lhs[0].Spans
			}
			if len(rhs) == 1 {
				r = rhs[0].Spans
			}
			spans = t.relate(o.op, l, r)
		}
		if len(spans) > 0 {
			out = append(out, Spanset{Spans: spans, Scalar: ss.Scalar, Attrs: ss.Attrs})
		}
	}
	return out, nil
}

// unionSpans returns the distinct spans of every spanset, ascending.
func unionSpans(a, b []Spanset) []int {
	var out []int
	for _, s := range [][]Spanset{a, b} {
		for _, ss := range s {
			out = append(out, ss.Spans...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// relate applies a structural operator to the left spans l and right spans
// r of one trace (see docs/traceql.md): the right spans related to some
// left span (negated: to none), or for the union forms both sides of every
// related pair.
func (t *traceView) relate(op spansetOp, l, r []int) []int {
	// rel(x, y): x (a right span) stands in the operator's relation to y (a
	// left span).
	var rel func(x, y int) bool
	switch op {
	case soChild, soNotChild, soUnionChild:
		rel = func(x, y int) bool { return t.parent[x] == y }
	case soParent, soNotParent, soUnionParent:
		rel = func(x, y int) bool { return t.parent[y] == x }
	case soDesc, soNotDesc, soUnionDesc:
		rel = func(x, y int) bool { return t.descendant(x, y) }
	case soAnce, soNotAnce, soUnionAnce:
		rel = func(x, y int) bool { return t.descendant(y, x) }
	case soSibl, soNotSibl, soUnionSibl:
		rel = func(x, y int) bool { return x != y && t.parent[x] >= 0 && t.parent[x] == t.parent[y] }
	}
	negate := op >= soNotChild && op <= soNotSibl
	unionForm := op >= soUnionChild
	var out []int
	seen := map[int]bool{}
	add := func(i int) {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	// Parent and child relations are found through the parent index in
	// linear time; the others compare pairs (traces are small; a large one
	// costs len(l) x len(r)).
	for _, x := range r {
		found := false
		for _, y := range l {
			if rel(x, y) {
				found = true
				if !unionForm {
					break
				}
				add(y)
			}
		}
		if found != negate {
			add(x)
		}
	}
	slices.Sort(out)
	return out
}

// aggKind is a pipeline aggregate.
type aggKind uint8

const (
	aggCount aggKind = iota
	aggAvg
	aggMin
	aggMax
	aggSum
)

var aggNames = [...]string{"count", "avg", "min", "max", "sum"}

// aggStage computes an aggregate of each spanset and keeps the spansets
// whose value compares true with lit (a scalar filter: `count() > 2`).
type aggStage struct {
	kind aggKind
	f    arith // not for count: a field or arithmetic over fields
	op   op
	lit  literal
}

func (a aggStage) name() string {
	if a.kind == aggCount {
		return "count()"
	}
	return aggNames[a.kind] + "(" + string(a.f.appendTo(nil)) + ")"
}

func (a aggStage) appendTo(b []byte) []byte {
	b = append(b, a.name()...)
	b = append(append(append(b, ' '), a.op.String()...), ' ')
	return a.lit.appendTo(b)
}

func (a aggStage) eval(t *traceView, in []Spanset) ([]Spanset, error) {
	var out []Spanset
	for _, ss := range in {
		v, ok := a.value(t, ss.Spans)
		if !ok || !compareValue(v, a.op, a.lit) {
			continue
		}
		c := Spanset{Spans: ss.Spans, Scalar: &v, Attrs: append(slices.Clip(ss.Attrs), GroupAttr{Name: a.name(), Value: v})}
		out = append(out, c)
	}
	return out, nil
}

// value is the aggregate over the spans: numbers (ints, doubles,
// durations as nanoseconds) only; spans without a numeric value are left
// out; false when none has one (count: never).
func (a aggStage) value(t *traceView, spans []int) (model.Value, bool) {
	if a.kind == aggCount {
		return model.IntValue(int64(len(spans))), true
	}
	var sum, best float64
	n := 0
	allInt := true
	for _, i := range spans {
		v, ok := exprValue(a.f, &t.spans[i])
		if !ok {
			continue
		}
		x, isInt, ok := numeric(v)
		if !ok {
			continue
		}
		allInt = allInt && isInt
		if n == 0 || (a.kind == aggMin && x < best) || (a.kind == aggMax && x > best) {
			best = x
		}
		sum += x
		n++
	}
	if n == 0 {
		return model.Value{}, false
	}
	var x float64
	switch a.kind {
	case aggAvg:
		return model.DoubleValue(sum / float64(n)), true
	case aggSum:
		x = sum
	default:
		x = best
	}
	if allInt {
		return model.IntValue(int64(x)), true
	}
	return model.DoubleValue(x), true
}

// numeric reads an int or a double.
func numeric(v model.Value) (x float64, isInt, ok bool) {
	switch v.Type {
	case model.ValueInt:
		return float64(v.Int), true, true
	case model.ValueDouble:
		return v.Double, false, !math.IsNaN(v.Double)
	}
	return 0, false, false
}

// compareValue compares a number with a numeric literal (durations as
// nanoseconds).
func compareValue(v model.Value, o op, l literal) bool {
	x, _, ok := numeric(v)
	if !ok {
		return false
	}
	var y float64
	switch l.kind {
	case litInt, litDuration:
		y = float64(l.i)
	case litFloat:
		y = l.f
	default:
		return false
	}
	return compareFloat(x, o, y)
}

// fieldValue reads a field of a span for aggregates and by(): intrinsics
// as values (duration in nanoseconds, ids as hex) and attributes.
func fieldValue(f field, s *model.Span) (model.Value, bool) {
	switch f.intr {
	case intrNone:
		switch f.scope {
		case ScopeEvent:
			for i := range s.Events {
				if v, ok := model.Lookup(s.Events[i].Attributes, f.key); ok {
					return v, true
				}
			}
			return model.Value{}, false
		case ScopeLink:
			for i := range s.Links {
				if v, ok := model.Lookup(s.Links[i].Attributes, f.key); ok {
					return v, true
				}
			}
			return model.Value{}, false
		}
		return f.lookup(s)
	case intrDuration:
		return model.IntValue(int64(s.Duration())), true
	case intrName:
		return model.StringValue(s.Name), true
	case intrStatus:
		return model.StringValue(s.StatusCode.String()), true
	case intrKind:
		return model.StringValue(s.Kind.String()), true
	case intrStatusMessage:
		return model.StringValue(s.StatusMessage), true
	case intrSpanID:
		return model.StringValue(s.SpanID.String()), true
	case intrParentID:
		if s.ParentSpanID.IsZero() {
			return model.Value{}, false
		}
		return model.StringValue(s.ParentSpanID.String()), true
	case intrTraceID:
		return model.StringValue(s.TraceID.String()), true
	case intrInstrName:
		if s.Scope == nil {
			return model.Value{}, false
		}
		return model.StringValue(s.Scope.Name), true
	case intrInstrVersion:
		if s.Scope == nil {
			return model.Value{}, false
		}
		return model.StringValue(s.Scope.Version), true
	}
	return model.Value{}, false
}

// byStage splits each spanset by the value of a field (spans without it
// form the nil group, as in Tempo).
type byStage struct{ f arith }

func (g byStage) appendTo(b []byte) []byte { return append(g.f.appendTo(append(b, "by("...)), ')') }

func (g byStage) eval(t *traceView, in []Spanset) ([]Spanset, error) {
	var out []Spanset
	name := string(g.appendTo(nil))
	for _, ss := range in {
		idx := map[string]int{}
		first := len(out)
		for _, i := range ss.Spans {
			v, ok := exprValue(g.f, &t.spans[i])
			if !ok {
				v = model.Value{}
			}
			k := valueKey(v, ok)
			j, seen := idx[k]
			if !seen {
				j = len(out)
				idx[k] = j
				out = append(out, Spanset{Scalar: ss.Scalar, Attrs: append(slices.Clip(ss.Attrs), GroupAttr{Name: name, Value: v})})
			}
			out[j].Spans = append(out[j].Spans, i)
		}
		// Groups in a stable order: by their first span.
		slices.SortStableFunc(out[first:], func(a, b Spanset) int { return cmp.Compare(a.Spans[0], b.Spans[0]) })
	}
	return out, nil
}

func valueKey(v model.Value, ok bool) string {
	if !ok {
		return "\x00nil"
	}
	return strconv.Itoa(int(v.Type)) + "\x00" + v.AsString()
}

// coalesceStage merges a trace's spansets into one.
type coalesceStage struct{}

func (coalesceStage) appendTo(b []byte) []byte { return append(b, "coalesce()"...) }

func (coalesceStage) eval(t *traceView, in []Spanset) ([]Spanset, error) {
	if len(in) == 0 {
		return nil, nil
	}
	return []Spanset{{Spans: unionSpans(in, nil)}}, nil
}

// selectStage names fields to return with the spans; it does not change
// the spansets (the API returns whole spans anyway).
type selectStage struct{ fields []field }

func (s selectStage) appendTo(b []byte) []byte {
	b = append(b, "select("...)
	for i, f := range s.fields {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = f.appendTo(b)
	}
	return append(b, ')')
}

func (s selectStage) eval(_ *traceView, in []Spanset) ([]Spanset, error) { return in, nil }

// SelectValues reads the fields of the query's select() stages on a span
// (those it has), named as written: what Tempo adds to a search result's
// spans.
func (q *Query) SelectValues(s *model.Span) []GroupAttr {
	var out []GroupAttr
	walkStages(q.root, func(st stage) {
		if sel, ok := st.(selectStage); ok {
			for _, f := range sel.fields {
				if v, ok := fieldValue(f, s); ok {
					out = append(out, GroupAttr{Name: f.String(), Value: v})
				}
			}
		}
	})
	return out
}

// Selected lists the fields of the query's select() stages, rendered.
func (q *Query) Selected() []string {
	var out []string
	walkStages(q.root, func(s stage) {
		if sel, ok := s.(selectStage); ok {
			for _, f := range sel.fields {
				out = append(out, f.String())
			}
		}
	})
	return out
}

// --- parsing

// parseFieldList reads `field, field, ...` (the lexer has no comma: it is
// read from the source) and the token after the last field.
func (p *parser) parseFieldList() ([]field, error) {
	var fs []field
	for {
		f, err := p.parseField()
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		rest := strings.TrimLeft(p.src[p.tok.end:], " \t\r\n")
		if !strings.HasPrefix(rest, ",") {
			return fs, p.advance()
		}
		p.pos = len(p.src) - len(rest) + 1
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

// skipHints reads Tempo's query hints, `with (key = value, ...)` at the
// end of a query: accepted and ignored (they tune Tempo's sampling and
// sharding, which Rastro does not have).
func (p *parser) skipHints() error {
	if p.tok.kind != tIdent || p.src[p.tok.pos:p.tok.end] != "with" {
		return nil
	}
	pos := p.tok.pos
	rest := strings.TrimLeft(p.src[p.tok.end:], " \t\r\n")
	if !strings.HasPrefix(rest, "(") {
		return p.errf(pos, "expected ( after with")
	}
	start := len(p.src) - len(rest)
	depth, inStr := 0, false
	for i := start; i < len(p.src); i++ {
		c := p.src[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && c == '(':
			depth++
		case !inStr && c == ')':
			depth--
			if depth == 0 {
				p.pos = i + 1
				return p.advance()
			}
		}
	}
	return p.errf(pos, "unterminated with(...)")
}

// parsePipeline: expr ( '|' element )*. A pipeline may start with an
// element (`count() > 2 | ...`, `by(.a)`): its input is every span, an
// implicit `{ }`, as in Tempo.
func (p *parser) parsePipeline() (stage, error) {
	var first stage
	var err error
	if p.tok.kind == tIdent {
		if _, metric := isMetricsFunc(p.src[p.tok.pos:p.tok.end]); !metric {
			el, err := p.parseElement()
			if err != nil {
				return nil, err
			}
			first = pipeStage{stages: []stage{filterStage{n: allExpr{}}, el}}
		}
	}
	if first == nil {
		if first, err = p.parseSpansetExpr(); err != nil {
			return nil, err
		}
	}
	stages := []stage{first}
	for p.tok.kind == tPipe {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tIdent {
			if fn, ok := isMetricsFunc(p.src[p.tok.pos:p.tok.end]); ok {
				pos := p.tok.pos
				if p.depth > 0 {
					return nil, p.errf(pos, "a metrics function (%s) must end the query, outside parentheses", fn)
				}
				if err := p.advance(); err != nil {
					return nil, err
				}
				if p.tok.kind != tLParen {
					return nil, p.errf(p.tok.pos, "expected ( after %s", fn)
				}
				if err := p.advance(); err != nil {
					return nil, err
				}
				m, err := p.parseMetrics(fn)
				if err != nil {
					return nil, err
				}
				p.metrics = m
				if err := p.skipHints(); err != nil {
					return nil, err
				}
				if p.tok.kind != tEOF {
					return nil, p.errf(p.tok.pos, "unexpected %s after the metrics function; it must end the query", p.desc())
				}
				break
			}
		}
		el, err := p.parseElement()
		if err != nil {
			return nil, err
		}
		stages = append(stages, el)
	}
	if len(stages) == 1 {
		return first, nil
	}
	return pipeStage{stages: stages}, nil
}

// parseSpansetExpr: struct ( ('&&' | '||') struct )*, left-associative.
func (p *parser) parseSpansetExpr() (stage, error) {
	l, err := p.parseStructural()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tAnd || p.tok.kind == tOr {
		op := soAnd
		if p.tok.kind == tOr {
			op = soOr
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseStructural()
		if err != nil {
			return nil, err
		}
		l = opStage{op: op, l: l, r: r}
	}
	return l, nil
}

// parseStructural: primary ( structOp primary )*, left-associative; the
// structural operators bind tighter than && and ||.
func (p *parser) parseStructural() (stage, error) {
	l, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := p.structuralOp()
		if !ok {
			return l, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		l = opStage{op: op, l: l, r: r}
	}
}

// structuralOp reads a structural operator at the current token (the
// lexer knows none of them: it is read from the source) and moves the
// lexer past it.
func (p *parser) structuralOp() (spansetOp, bool) {
	if p.tok.kind == tEOF {
		return 0, false
	}
	rest := p.src[p.tok.pos:]
	for _, c := range []struct {
		s  string
		op spansetOp
	}{
		{"!>>", soNotDesc}, {"!<<", soNotAnce}, {"&>>", soUnionDesc}, {"&<<", soUnionAnce},
		{">>", soDesc}, {"<<", soAnce}, {"!>", soNotChild}, {"!<", soNotParent}, {"!~", soNotSibl},
		{"&>", soUnionChild}, {"&<", soUnionParent}, {"&~", soUnionSibl}, {">", soChild}, {"<", soParent}, {"~", soSibl},
	} {
		if strings.HasPrefix(rest, c.s) {
			p.pos = p.tok.pos + len(c.s)
			return c.op, true
		}
	}
	return 0, false
}

// parsePrimary: '{' filter '}' | '(' pipeline ')'.
func (p *parser) parsePrimary() (stage, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, p.errf(p.tok.pos, "query nested deeper than %d levels", maxDepth)
	}
	switch p.tok.kind {
	case tLBrace:
		n, err := p.parseFilter()
		if err != nil {
			return nil, err
		}
		return filterStage{n: n}, nil
	case tLParen:
		open := p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		s, err := p.parsePipeline()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) to close ( at position %d, got %s", open, p.desc())
		}
		return s, p.advanceAfterSpanset()
	}
	return nil, p.errf(p.tok.pos, "expected { or ( to start a spanset, got %s", p.desc())
}

// parseFilter reads `{ ... }` and the token after it.
func (p *parser) parseFilter() (node, error) {
	e, err := p.parseFilterBody()
	if err != nil {
		return nil, err
	}
	return e, p.advanceAfterSpanset()
}

// parseFilterBody reads `{ ... }`, leaving the closing } as the current
// token.
func (p *parser) parseFilterBody() (node, error) {
	open := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	var e node = allExpr{}
	if p.tok.kind != tRBrace {
		var err error
		if e, err = p.parseOr(); err != nil {
			return nil, err
		}
		switch p.tok.kind {
		case tRBrace:
		case tEOF:
			return nil, p.errf(p.tok.pos, "missing closing } for { at position %d", open)
		case tRParen:
			return nil, p.errf(p.tok.pos, "unbalanced ): no matching (")
		default:
			return nil, p.errf(p.tok.pos, "expected &&, || or }, got %s", p.desc())
		}
	}
	return e, nil
}

// advanceAfterSpanset reads the token after a spanset's closing } or ).
// A structural operator the lexer does not know (~, !~, &>, ...) is left
// for structuralOp, which reads the source.
func (p *parser) advanceAfterSpanset() error {
	rest := strings.TrimLeft(p.src[p.pos:], " \t\r\n")
	p.pos = len(p.src) - len(rest)
	if rest != "" && strings.IndexByte("~!&<>", rest[0]) >= 0 && !strings.HasPrefix(rest, "&&") {
		p.tok = token{kind: tOp, pos: p.pos, end: p.pos + 1}
		return nil
	}
	return p.advance()
}

// parseElement reads one pipeline element after |.
func (p *parser) parseElement() (stage, error) {
	switch p.tok.kind {
	case tLBrace, tLParen:
		return p.parseSpansetExpr()
	case tIdent:
	default:
		return nil, p.errf(p.tok.pos, "expected a pipeline element after | (a spanset { ... }, count(), avg(), min(), max(), sum(), by(), select(), coalesce()), got %s", p.desc())
	}
	w := p.src[p.tok.pos:p.tok.end]
	pos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLParen {
		return nil, p.errf(p.tok.pos, "expected ( after %s", w)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	closeParen := func() error {
		if p.tok.kind != tRParen {
			return p.errf(p.tok.pos, "expected ) to close %s(, got %s", w, p.desc())
		}
		return p.advance()
	}
	switch w {
	case "coalesce":
		return coalesceStage{}, closeParen()
	case "by":
		x, err := p.parseArith(0)
		if err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		return byStage{f: x}, closeParen()
	case "select":
		fs, err := p.parseFieldList()
		if err != nil {
			return nil, err
		}
		return selectStage{fields: fs}, closeParen()
	case "count", "avg", "min", "max", "sum":
		a := aggStage{kind: aggKind(slices.Index(aggNames[:], w))}
		if a.kind != aggCount {
			x, err := p.parseArith(0)
			if err != nil {
				return nil, err
			}
			a.f = x
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		if err := closeParen(); err != nil {
			return nil, err
		}
		if p.tok.kind != tOp || p.tok.op == opRe || p.tok.op == opNre {
			return nil, p.errf(p.tok.pos, "expected a comparison after %s (= != > >= < <=), got %s", a.name(), p.desc())
		}
		a.op = p.tok.op
		if err := p.advance(); err != nil {
			return nil, err
		}
		l, ok, err := p.constValue()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, p.errf(p.tok.pos, "expected a number or a duration after %s %s, got %s", a.name(), a.op, p.desc())
		}
		a.lit = l
		return a, nil
	}
	return nil, p.errf(pos, "unknown pipeline element %s (supported: count, avg, min, max, sum, by, select, coalesce)", w)
}
