package query

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// Expr is a parsed TraceQL spanset filter. Match must not allocate.
// String renders a canonical `{ ... }` form that ParseTraceQL turns back into
// an expression that matches the same spans.
type Expr interface {
	Match(s *model.Span) bool
	String() string
}

// Scope says where an attribute is looked up.
type Scope uint8

const (
	// ScopeAny is TraceQL's unscoped `.key`: the span attribute if present,
	// else the resource attribute.
	ScopeAny Scope = iota
	// ScopeSpan is `span.key`.
	ScopeSpan
	// ScopeResource is `resource.key`.
	ScopeResource
	// ScopeEvent is `event.key`: an attribute of any of the span's events.
	ScopeEvent
	// ScopeLink is `link.key`: an attribute of any of the span's links.
	ScopeLink
	// ScopeInstrumentation is `instrumentation.key`: an attribute of the
	// span's instrumentation scope.
	ScopeInstrumentation
)

var scopeNames = [...]string{"any", "span", "resource", "event", "link", "instrumentation"}

// String returns "any", "span", "resource", "event", "link" or
// "instrumentation".
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return "any"
}

// node is implemented by every expression the parser builds.
type node interface {
	Expr
	prec() int
	appendBody(b []byte) []byte
	// matchIn is Match with the span's trace at hand for trace-level
	// intrinsics (nil: unknown, and they do not hold).
	matchIn(s *model.Span, t *traceCtx) bool
}

const (
	precOr    = 1
	precAnd   = 2
	precUnary = 3
)

func render(n node) string {
	return string(append(n.appendBody(append(make([]byte, 0, 64), "{ "...)), " }"...))
}

func appendChild(b []byte, n node, min int) []byte {
	if n.prec() < min {
		b = append(b, '(')
		b = n.appendBody(b)
		return append(b, ')')
	}
	return n.appendBody(b)
}

// allExpr is `{ }`. The parser only produces it at the top level.
type allExpr struct{}

func (allExpr) Match(*model.Span) bool              { return true }
func (allExpr) matchIn(*model.Span, *traceCtx) bool { return true }
func (allExpr) String() string                      { return "{ }" }
func (allExpr) prec() int                           { return precUnary }
func (allExpr) appendBody(b []byte) []byte          { return b }

// andExpr is `l && r`.
type andExpr struct{ l, r node }

func (e andExpr) Match(s *model.Span) bool { return e.matchIn(s, nil) }
func (e andExpr) matchIn(s *model.Span, t *traceCtx) bool {
	return e.l.matchIn(s, t) && e.r.matchIn(s, t)
}
func (e andExpr) String() string             { return render(e) }
func (andExpr) prec() int                    { return precAnd }
func (e andExpr) appendBody(b []byte) []byte { return appendBin(b, e.l, e.r, " && ", precAnd) }

// orExpr is `l || r`.
type orExpr struct{ l, r node }

func (e orExpr) Match(s *model.Span) bool { return e.matchIn(s, nil) }
func (e orExpr) matchIn(s *model.Span, t *traceCtx) bool {
	return e.l.matchIn(s, t) || e.r.matchIn(s, t)
}
func (e orExpr) String() string             { return render(e) }
func (orExpr) prec() int                    { return precOr }
func (e orExpr) appendBody(b []byte) []byte { return appendBin(b, e.l, e.r, " || ", precOr) }

// notExpr is `!(x)`; it always renders its operand in parentheses.
type notExpr struct{ x node }

func (e notExpr) Match(s *model.Span) bool                { return e.matchIn(s, nil) }
func (e notExpr) matchIn(s *model.Span, t *traceCtx) bool { return !e.x.matchIn(s, t) }
func (e notExpr) String() string                          { return render(e) }
func (notExpr) prec() int                                 { return precUnary }
func (e notExpr) appendBody(b []byte) []byte {
	return appendChild(append(b, '!'), e.x, precUnary+1)
}

func appendBin(b []byte, l, r node, op string, p int) []byte {
	b = appendChild(b, l, p)
	b = append(b, op...)
	return appendChild(b, r, p)
}

// intrinsic identifies a span field; intrNone marks an attribute.
type intrinsic uint8

const (
	intrNone intrinsic = iota
	intrName
	intrStatus
	intrDuration
	intrKind
	intrStatusMessage
	intrContent
	intrEventName           // event:name, any of the span's events
	intrEventTimeSinceStart // event:timeSinceStart, any event: its time minus the span's start
	intrLinkTraceID         // link:traceID, hex, any link
	intrLinkSpanID          // link:spanID, hex, any link
	intrInstrName           // instrumentation:name
	intrInstrVersion        // instrumentation:version
	intrSpanID              // span:id, hex
	intrParentID            // span:parentID, hex ("" for a root span)
	intrTraceID             // trace:id, hex
	intrTraceDuration       // traceDuration: the trace's earliest start to latest end
	intrRootName            // rootName: the root span's name
	intrRootService         // rootServiceName: the root span's service
	intrChildCount          // span:childCount: children in the trace (whole-trace queries only)
)

var intrinsicNames = [...]string{"", "name", "status", "duration", "kind", "statusMessage", "content",
	"event:name", "event:timeSinceStart", "link:traceID", "link:spanID", "instrumentation:name",
	"instrumentation:version", "span:id", "span:parentID", "trace:id", "traceDuration", "rootName", "rootServiceName", "span:childCount"}

type field struct {
	intr  intrinsic
	scope Scope
	key   string
}

func (f field) String() string { return string(f.appendTo(nil)) }

func (f field) appendTo(b []byte) []byte {
	if f.intr != intrNone {
		return append(b, intrinsicNames[f.intr]...)
	}
	if f.scope == ScopeAny {
		b = append(b, '.')
	} else {
		b = append(append(b, scopeNames[f.scope]...), '.')
	}
	if bareKey(f.key) {
		return append(b, f.key...)
	}
	return appendQuoted(b, f.key)
}

func bareKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !isKeyRune(r) {
			return false
		}
	}
	return true
}

// lookup resolves an attribute field on s (the span, resource and
// instrumentation scopes: one value at most).
func (f field) lookup(s *model.Span) (model.Value, bool) {
	switch f.scope {
	case ScopeSpan:
		return model.Lookup(s.Attributes, f.key)
	case ScopeResource:
		return resourceAttr(s, f.key)
	case ScopeInstrumentation:
		if s.Scope == nil {
			return model.Value{}, false
		}
		return model.Lookup(s.Scope.Attributes, f.key)
	}
	if v, ok := model.Lookup(s.Attributes, f.key); ok {
		return v, true
	}
	return resourceAttr(s, f.key)
}

func resourceAttr(s *model.Span, key string) (model.Value, bool) {
	if s.Resource != nil {
		if v, ok := model.Lookup(s.Resource.Attributes, key); ok {
			return v, true
		}
	}
	if key == "service.name" && s.Service != "" {
		return model.StringValue(s.Service), true
	}
	return model.Value{}, false
}

type op uint8

const (
	opEq op = iota
	opNe
	opGt
	opGe
	opLt
	opLe
	opRe
	opNre
)

var opNames = [...]string{"=", "!=", ">", ">=", "<", "<=", "=~", "!~"}

func (o op) String() string { return opNames[o] }

type litKind uint8

const (
	litString litKind = iota
	litInt
	litFloat
	litBool
	litDuration
	litStatus
	litSpanKind
	litNil
)

// literal is a value in a condition. i holds ints, duration nanoseconds,
// bools (0/1), status and kind codes.
type literal struct {
	kind litKind
	s    string
	i    int64
	f    float64
}

func (l literal) appendTo(b []byte) []byte {
	switch l.kind {
	case litString:
		return appendQuoted(b, l.s)
	case litInt:
		return strconv.AppendInt(b, l.i, 10)
	case litFloat:
		n := len(b)
		b = strconv.AppendFloat(b, l.f, 'g', -1, 64)
		for _, c := range b[n:] {
			if c == '.' || c == 'e' {
				return b
			}
		}
		return append(b, ".0"...)
	case litBool:
		return strconv.AppendBool(b, l.i != 0)
	case litDuration:
		return append(b, time.Duration(l.i).String()...)
	case litStatus:
		return append(b, model.StatusCode(l.i).String()...)
	case litSpanKind:
		return append(b, model.SpanKind(l.i).String()...)
	}
	return append(b, "nil"...)
}

// cond is one `field op value` comparison.
type cond struct {
	f   field
	op  op
	lit literal
	re  *regexp.Regexp // for opRe and opNre
	txt *text.Query    // for content; lit.s is its canonical String
}

func (c *cond) String() string { return render(c) }
func (*cond) prec() int        { return precUnary }

func (c *cond) appendBody(b []byte) []byte {
	b = c.f.appendTo(b)
	b = append(b, ' ')
	b = append(b, opNames[c.op]...)
	b = append(b, ' ')
	return c.lit.appendTo(b)
}

// Match reports whether s satisfies the condition. A condition on events or
// links holds when it holds for one of them. A trace-level condition holds
// only where the backend bound the span's trace (WithTraces).
func (c *cond) Match(s *model.Span) bool { return c.matchIn(s, nil) }

func (c *cond) matchIn(s *model.Span, tc *traceCtx) bool {
	if c.f.intr != intrNone && c.lit.kind == litNil {
		return c.matchNil(s, tc)
	}
	switch c.f.intr {
	case intrTraceDuration, intrRootName, intrRootService:
		t, ok := tc.of(s)
		if !ok {
			return false
		}
		switch c.f.intr {
		case intrTraceDuration:
			return cmpInt(c.op, int64(min(t.Duration, math.MaxInt64)), c.lit.i)
		case intrRootName:
			return t.HasRoot && c.cmpString(t.RootName)
		}
		return t.HasRoot && c.cmpString(t.RootService)
	case intrChildCount:
		if tc == nil || tc.children == nil {
			return false // no trace structure here (see Query.Simple)
		}
		return cmpInt(c.op, int64(tc.children[s.SpanID]), c.lit.i)
	case intrEventName:
		return slices.ContainsFunc(s.Events, func(e model.Event) bool { return c.cmpString(e.Name) })
	case intrEventTimeSinceStart:
		return slices.ContainsFunc(s.Events, func(e model.Event) bool {
			return cmpInt(c.op, int64(e.TimeUnixNano)-int64(s.StartTimeUnixNano), c.lit.i)
		})
	case intrLinkTraceID:
		return slices.ContainsFunc(s.Links, func(l model.Link) bool { return c.cmpString(l.TraceID.String()) })
	case intrLinkSpanID:
		return slices.ContainsFunc(s.Links, func(l model.Link) bool { return c.cmpString(l.SpanID.String()) })
	case intrInstrName, intrInstrVersion:
		var v string
		if s.Scope != nil {
			v = s.Scope.Name
			if c.f.intr == intrInstrVersion {
				v = s.Scope.Version
			}
		}
		return c.cmpString(v)
	case intrSpanID:
		return c.cmpString(s.SpanID.String())
	case intrParentID:
		if s.ParentSpanID.IsZero() {
			return c.cmpString("")
		}
		return c.cmpString(s.ParentSpanID.String())
	case intrTraceID:
		return c.cmpString(s.TraceID.String())
	case intrName:
		return c.cmpString(s.Name)
	case intrStatusMessage:
		return c.cmpString(s.StatusMessage)
	case intrStatus:
		return cmpEq(c.op, int64(s.StatusCode) == c.lit.i)
	case intrKind:
		return cmpEq(c.op, int64(s.Kind) == c.lit.i)
	case intrContent:
		return c.txt.Matches(s, 0)
	case intrDuration:
		d := s.Duration()
		if d > math.MaxInt64 {
			d = math.MaxInt64
		}
		return cmpInt(c.op, int64(d), c.lit.i)
	}
	switch c.f.scope {
	case ScopeEvent, ScopeLink:
		n := len(s.Events)
		if c.f.scope == ScopeLink {
			n = len(s.Links)
		}
		has := false // some event (link) has the key
		for i := 0; i < n; i++ {
			var attrs []model.KeyValue
			if c.f.scope == ScopeLink {
				attrs = s.Links[i].Attributes
			} else {
				attrs = s.Events[i].Attributes
			}
			v, ok := model.Lookup(attrs, c.f.key)
			has = has || ok
			if ok && c.lit.kind != litNil && c.matchValue(v) {
				return true
			}
		}
		if c.lit.kind == litNil { // = nil: no event (link) has the key
			return cmpEq(c.op, !has)
		}
		return false
	}
	v, ok := c.f.lookup(s)
	if c.lit.kind == litNil {
		return cmpEq(c.op, !ok)
	}
	return ok && c.matchValue(v)
}

// matchValue compares a present attribute value with the literal.
func (c *cond) matchValue(v model.Value) bool {
	switch c.lit.kind {
	case litString:
		return v.Type == model.ValueString && c.cmpString(v.Str)
	case litBool:
		return v.Type == model.ValueBool && cmpEq(c.op, v.Bool() == (c.lit.i != 0))
	case litInt, litDuration:
		switch v.Type {
		case model.ValueInt:
			return cmpInt(c.op, v.Int, c.lit.i)
		case model.ValueDouble:
			return cmpFloat(c.op, v.Double, float64(c.lit.i))
		}
	case litFloat:
		switch v.Type {
		case model.ValueInt:
			return cmpFloat(c.op, float64(v.Int), c.lit.f)
		case model.ValueDouble:
			return cmpFloat(c.op, v.Double, c.lit.f)
		}
	}
	return false
}

// matchNil decides `intrinsic = nil` and `!= nil`: span intrinsics are
// always present; event and link ones when the span has an event (a link);
// root ones when the trace's root has arrived (neither form holds while the
// trace is unknown).
func (c *cond) matchNil(s *model.Span, tc *traceCtx) bool {
	present := true
	switch c.f.intr {
	case intrEventName, intrEventTimeSinceStart:
		present = len(s.Events) > 0
	case intrLinkTraceID, intrLinkSpanID:
		present = len(s.Links) > 0
	case intrParentID:
		present = !s.ParentSpanID.IsZero()
	case intrRootName, intrRootService, intrTraceDuration:
		t, ok := tc.of(s)
		if !ok {
			return false
		}
		present = t.HasRoot || c.f.intr == intrTraceDuration
	}
	return cmpEq(c.op, !present)
}

// constExpr is a condition without a field, decided when the query is
// parsed: `{ true }`, `{ 1 < 2 }`, `{ "a" = "b" }`.
type constExpr struct {
	v   bool
	src string // as written, normalised
}

func (e constExpr) Match(*model.Span) bool              { return e.v }
func (e constExpr) matchIn(*model.Span, *traceCtx) bool { return e.v }
func (e constExpr) String() string                      { return render(e) }
func (constExpr) prec() int                             { return precUnary }
func (e constExpr) appendBody(b []byte) []byte          { return append(b, e.src...) }

func (c *cond) cmpString(s string) bool {
	switch c.op {
	case opEq:
		return s == c.lit.s
	case opNe:
		return s != c.lit.s
	case opGt:
		return s > c.lit.s
	case opGe:
		return s >= c.lit.s
	case opLt:
		return s < c.lit.s
	case opLe:
		return s <= c.lit.s
	case opRe:
		return c.re.MatchString(s)
	case opNre:
		return !c.re.MatchString(s)
	}
	return false
}

// cmpEq applies = or != given whether the operands are equal.
func cmpEq(o op, eq bool) bool {
	if o == opEq {
		return eq
	}
	return o == opNe && !eq
}

func cmpInt(o op, a, b int64) bool {
	switch o {
	case opEq:
		return a == b
	case opNe:
		return a != b
	case opGt:
		return a > b
	case opGe:
		return a >= b
	case opLt:
		return a < b
	case opLe:
		return a <= b
	}
	return false
}

func cmpFloat(o op, a, b float64) bool {
	if math.IsNaN(a) {
		return false
	}
	switch o {
	case opEq:
		return a == b
	case opNe:
		return a != b
	case opGt:
		return a > b
	case opGe:
		return a >= b
	case opLt:
		return a < b
	case opLe:
		return a <= b
	}
	return false
}

// appendQuoted writes s as a TraceQL string literal that unquote reads back
// byte for byte (invalid UTF-8 becomes \xHH).
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, '\\', 'x', hex[s[i]>>4], hex[s[i]&15])
			i++
			continue
		}
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r < 0x20 || r == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
