package promql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rastro-dev/rastro/internal/store"
)

// ErrorKind tells a malformed query from one outside the subset.
type ErrorKind int

const (
	BadQuery    ErrorKind = iota // a syntax or type error
	Unsupported                  // valid PromQL this subset does not evaluate
)

// Error is a parse or evaluation error, with the byte position in the query.
type Error struct {
	Kind ErrorKind
	Pos  int
	Msg  string
}

func (e *Error) Error() string {
	if e.Kind == Unsupported {
		return fmt.Sprintf("unsupported at char %d: %s (Rastro answers a PromQL subset: see docs/metrics.md)", e.Pos+1, e.Msg)
	}
	return fmt.Sprintf("parse error at char %d: %s", e.Pos+1, e.Msg)
}

// ValueType is the type of an expression.
type ValueType int

const (
	TypeScalar ValueType = iota
	TypeVector
	TypeMatrix
)

func (t ValueType) String() string { return [...]string{"scalar", "instant vector", "range vector"}[t] }

// Node is a parsed expression.
type Node interface{ Type() ValueType }

// NumberLiteral is a number.
type NumberLiteral struct{ V float64 }

// VectorSelector selects series by matchers (the metric name is a matcher on __name__).
type VectorSelector struct {
	Matchers []*store.LabelMatcher
}

// MatrixSelector is a vector selector with a range.
type MatrixSelector struct {
	VS    *VectorSelector
	Range time.Duration
}

// Call is a function call.
type Call struct {
	Func string
	Args []Node
}

// Aggregate is sum, avg, min, max or count over a vector.
type Aggregate struct {
	Op       string
	Expr     Node
	Grouping []string
	Without  bool
}

// Binary is arithmetic with at least one number side.
type Binary struct {
	Op       byte // + - * /
	LHS, RHS Node
}

func (*NumberLiteral) Type() ValueType  { return TypeScalar }
func (*VectorSelector) Type() ValueType { return TypeVector }
func (*MatrixSelector) Type() ValueType { return TypeMatrix }
func (*Aggregate) Type() ValueType      { return TypeVector }
func (c *Call) Type() ValueType         { return TypeVector }
func (b *Binary) Type() ValueType {
	if b.LHS.Type() == TypeScalar && b.RHS.Type() == TypeScalar {
		return TypeScalar
	}
	return TypeVector
}

var aggregations = map[string]bool{"sum": true, "avg": true, "min": true, "max": true, "count": true}

// otherAggregations and otherFunctions are valid PromQL, refused by name.
var otherAggregations = map[string]bool{"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "count_values": true,
	"quantile": true, "group": true, "limitk": true, "limit_ratio": true}

// Parse parses a query of the subset.
func Parse(q string) (Node, error) {
	p := &parser{lex: lexer{s: q}}
	p.next()
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errf(BadQuery, "unexpected %s", p.tok.desc())
	}
	return n, nil
}

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tNumber
	tString
	tDuration
	tOp // punctuation and operators
)

type token struct {
	kind tokKind
	s    string
	pos  int
}

func (t token) desc() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string " + strconv.Quote(t.s)
	}
	return strconv.Quote(t.s)
}

type lexer struct {
	s   string
	pos int
}

func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdent(c byte) bool      { return isIdentStart(c) || (c >= '0' && c <= '9') }

func (l *lexer) next() (token, error) {
	for l.pos < len(l.s) && unicode.IsSpace(rune(l.s[l.pos])) {
		l.pos++
	}
	if l.pos < len(l.s) && l.s[l.pos] == '#' { // comment to end of line
		for l.pos < len(l.s) && l.s[l.pos] != '\n' {
			l.pos++
		}
		return l.next()
	}
	start := l.pos
	if l.pos >= len(l.s) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.s[l.pos]
	switch {
	case isIdentStart(c):
		for l.pos < len(l.s) && isIdent(l.s[l.pos]) {
			l.pos++
		}
		return token{kind: tIdent, s: l.s[start:l.pos], pos: start}, nil
	case c >= '0' && c <= '9' || (c == '.' && l.pos+1 < len(l.s) && l.s[l.pos+1] >= '0' && l.s[l.pos+1] <= '9'):
		// A number, or a duration such as 5m or 1h30m.
		for l.pos < len(l.s) && ((isIdent(l.s[l.pos]) && l.s[l.pos] != ':') || l.s[l.pos] == '.' ||
			((l.s[l.pos] == '+' || l.s[l.pos] == '-') && (l.s[l.pos-1] == 'e' || l.s[l.pos-1] == 'E'))) {
			l.pos++
		}
		text := l.s[start:l.pos]
		if _, err := strconv.ParseFloat(text, 64); err == nil {
			return token{kind: tNumber, s: text, pos: start}, nil
		}
		if _, err := parseDuration(text); err == nil {
			return token{kind: tDuration, s: text, pos: start}, nil
		}
		return token{}, &Error{BadQuery, start, "bad number or duration " + strconv.Quote(text)}
	case c == '"' || c == '\'' || c == '`':
		l.pos++
		for l.pos < len(l.s) && l.s[l.pos] != c {
			if l.s[l.pos] == '\\' && c != '`' {
				l.pos++
			}
			l.pos++
		}
		if l.pos >= len(l.s) {
			return token{}, &Error{BadQuery, start, "unterminated string"}
		}
		l.pos++
		raw := l.s[start:l.pos]
		var v string
		var err error
		switch c {
		case '`':
			v = raw[1 : len(raw)-1]
		case '\'':
			v, err = strconv.Unquote(`"` + strings.ReplaceAll(strings.ReplaceAll(raw[1:len(raw)-1], `\'`, `'`), `"`, `\"`) + `"`)
		default:
			v, err = strconv.Unquote(raw)
		}
		if err != nil {
			return token{}, &Error{BadQuery, start, "bad string " + raw}
		}
		return token{kind: tString, s: v, pos: start}, nil
	}
	for _, op := range []string{"!=", "=~", "!~", "==", ">=", "<=", "{", "}", "(", ")", "[", "]", ",", "=", "+", "-", "*", "/", "%", "^", "<", ">", "@", ":"} {
		if strings.HasPrefix(l.s[l.pos:], op) {
			l.pos += len(op)
			return token{kind: tOp, s: op, pos: start}, nil
		}
	}
	return token{}, &Error{BadQuery, start, "unexpected character " + strconv.QuoteRune(rune(c))}
}

type parser struct {
	lex lexer
	tok token
	err error
}

func (p *parser) next() {
	if p.err != nil {
		return
	}
	p.tok, p.err = p.lex.next()
	if p.err != nil {
		p.tok = token{kind: tEOF, pos: p.lex.pos}
	}
}

func (p *parser) errf(kind ErrorKind, format string, args ...any) error {
	if p.err != nil {
		return p.err
	}
	return &Error{kind, p.tok.pos, fmt.Sprintf(format, args...)}
}

func (p *parser) isOp(s string) bool { return p.tok.kind == tOp && p.tok.s == s }

func (p *parser) expect(s string) error {
	if !p.isOp(s) {
		return p.errf(BadQuery, "expected %q, got %s", s, p.tok.desc())
	}
	p.next()
	return nil
}

func precedence(t token) int {
	if t.kind == tOp {
		switch t.s {
		case "+", "-":
			return 1
		case "*", "/":
			return 2
		case "%", "^", "==", "!=", ">", "<", ">=", "<=":
			return 3 // refused below
		}
	}
	if t.kind == tIdent {
		switch t.s {
		case "and", "or", "unless", "atan2":
			return 3 // refused below
		}
	}
	return 0
}

func (p *parser) expr(minPrec int) (Node, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		prec := precedence(p.tok)
		if prec == 0 || prec <= minPrec {
			return lhs, nil
		}
		op := p.tok
		if prec == 3 {
			return nil, p.errf(Unsupported, "binary operator %q", op.s)
		}
		p.next()
		if p.tok.kind == tIdent && (p.tok.s == "bool" || p.tok.s == "on" || p.tok.s == "ignoring" || p.tok.s == "group_left" || p.tok.s == "group_right") {
			return nil, p.errf(Unsupported, "vector matching modifier %q", p.tok.s)
		}
		rhs, err := p.expr(prec)
		if err != nil {
			return nil, err
		}
		if lhs.Type() == TypeMatrix || rhs.Type() == TypeMatrix {
			return nil, &Error{BadQuery, op.pos, "binary expression must contain only scalar and instant vector types"}
		}
		if lhs.Type() == TypeVector && rhs.Type() == TypeVector {
			return nil, &Error{Unsupported, op.pos, fmt.Sprintf("binary operator %q between two instant vectors (only a vector and a number, or two numbers)", op.s)}
		}
		lhs = &Binary{Op: op.s[0], LHS: lhs, RHS: rhs}
	}
}

func (p *parser) unary() (Node, error) {
	if p.isOp("-") || p.isOp("+") {
		neg := p.tok.s == "-"
		pos := p.tok.pos
		p.next()
		n, err := p.expr(2) // binds tighter than + and -, looser than * and / (as Prometheus)
		if err != nil {
			return nil, err
		}
		if n.Type() == TypeMatrix {
			return nil, &Error{BadQuery, pos, "unary expression only allowed on expressions of type scalar or instant vector"}
		}
		if !neg {
			return n, nil
		}
		if num, ok := n.(*NumberLiteral); ok {
			return &NumberLiteral{-num.V}, nil
		}
		return &Binary{Op: '*', LHS: n, RHS: &NumberLiteral{-1}}, nil
	}
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(n)
}

// postfix handles a range, offset and @ after a selector.
func (p *parser) postfix(n Node) (Node, error) {
	if p.isOp("[") {
		vs, ok := n.(*VectorSelector)
		if !ok {
			return nil, p.errf(Unsupported, "subquery (a range on an expression that is not a selector)")
		}
		p.next()
		if p.tok.kind != tDuration && p.tok.kind != tNumber {
			return nil, p.errf(BadQuery, "expected a duration in the range, got %s", p.tok.desc())
		}
		d, err := parseDuration(p.tok.s)
		if err != nil || d <= 0 {
			return nil, p.errf(BadQuery, "bad range duration %q", p.tok.s)
		}
		p.next()
		if p.isOp(":") || (p.tok.kind == tIdent && strings.HasPrefix(p.tok.s, ":")) {
			return nil, p.errf(Unsupported, "subquery")
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		n = &MatrixSelector{VS: vs, Range: d}
	}
	if p.tok.kind == tIdent && p.tok.s == "offset" {
		return nil, p.errf(Unsupported, "offset modifier")
	}
	if p.isOp("@") {
		return nil, p.errf(Unsupported, "@ modifier")
	}
	return n, nil
}

func (p *parser) primary() (Node, error) {
	t := p.tok
	switch {
	case t.kind == tNumber:
		p.next()
		v, _ := strconv.ParseFloat(t.s, 64)
		return &NumberLiteral{v}, nil
	case t.kind == tOp && t.s == "(":
		p.next()
		n, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return n, nil
	case t.kind == tOp && t.s == "{":
		return p.selector("")
	case t.kind == tIdent:
		lower := strings.ToLower(t.s)
		if lower == "inf" || lower == "nan" {
			p.next()
			if lower == "nan" {
				return &NumberLiteral{math.NaN()}, nil
			}
			return &NumberLiteral{math.Inf(1)}, nil
		}
		if aggregations[t.s] {
			return p.aggregate()
		}
		if otherAggregations[t.s] {
			return nil, p.errf(Unsupported, "aggregation %q (supported: sum, avg, min, max, count)", t.s)
		}
		p.next()
		if p.isOp("(") {
			return p.call(t)
		}
		p.lex.pos, p.tok = t.pos, t // re-read as a selector
		p.lex.pos += len(t.s)
		return p.selector(t.s)
	}
	return nil, p.errf(BadQuery, "unexpected %s", t.desc())
}

func (p *parser) selector(name string) (Node, error) {
	vs := &VectorSelector{}
	pos := p.tok.pos
	if name != "" {
		m, _ := store.NewLabelMatcher(store.MatchEqual, store.MetricName, name)
		vs.Matchers = append(vs.Matchers, m)
		p.next()
	}
	if p.isOp("{") {
		p.next()
		for !p.isOp("}") {
			if p.tok.kind != tIdent && p.tok.kind != tString {
				return nil, p.errf(BadQuery, "expected a label name, got %s", p.tok.desc())
			}
			lname := p.tok.s
			p.next()
			var mt store.MatchType
			switch {
			case p.isOp("="):
				mt = store.MatchEqual
			case p.isOp("!="):
				mt = store.MatchNotEqual
			case p.isOp("=~"):
				mt = store.MatchRegexp
			case p.isOp("!~"):
				mt = store.MatchNotRegexp
			default:
				return nil, p.errf(BadQuery, "expected a label matching operator (=, !=, =~, !~), got %s", p.tok.desc())
			}
			p.next()
			if p.tok.kind != tString {
				return nil, p.errf(BadQuery, "expected a quoted label value, got %s", p.tok.desc())
			}
			m, err := store.NewLabelMatcher(mt, lname, p.tok.s)
			if err != nil {
				return nil, &Error{BadQuery, p.tok.pos, err.Error()}
			}
			vs.Matchers = append(vs.Matchers, m)
			p.next()
			if p.isOp(",") {
				p.next()
				continue
			}
			if !p.isOp("}") {
				return nil, p.errf(BadQuery, "expected \",\" or \"}\" in the label matchers, got %s", p.tok.desc())
			}
		}
		p.next()
	}
	// Prometheus: a selector must have a matcher that does not match "".
	empty := true
	for _, m := range vs.Matchers {
		if !m.Matches("") {
			empty = false
		}
	}
	if empty {
		return nil, &Error{BadQuery, pos, "vector selector must contain at least one non-empty matcher"}
	}
	return vs, nil
}

func (p *parser) grouping() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []string
	for !p.isOp(")") {
		if p.tok.kind != tIdent {
			return nil, p.errf(BadQuery, "expected a label name in the grouping, got %s", p.tok.desc())
		}
		out = append(out, p.tok.s)
		p.next()
		if p.isOp(",") {
			p.next()
		} else if !p.isOp(")") {
			return nil, p.errf(BadQuery, "expected \",\" or \")\" in the grouping, got %s", p.tok.desc())
		}
	}
	p.next()
	return out, nil
}

func (p *parser) aggregate() (Node, error) {
	a := &Aggregate{Op: p.tok.s}
	p.next()
	readMod := func() (bool, error) {
		if p.tok.kind == tIdent && (p.tok.s == "by" || p.tok.s == "without") {
			if a.Grouping != nil || a.Without {
				return false, p.errf(BadQuery, "more than one grouping clause")
			}
			a.Without = p.tok.s == "without"
			p.next()
			g, err := p.grouping()
			if g == nil {
				g = []string{}
			}
			a.Grouping = g
			return true, err
		}
		return false, nil
	}
	if _, err := readMod(); err != nil {
		return nil, err
	}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	pos := p.tok.pos
	e, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.isOp(",") {
		return nil, p.errf(BadQuery, "%s takes one argument", a.Op)
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	if e.Type() != TypeVector {
		return nil, &Error{BadQuery, pos, fmt.Sprintf("expected type instant vector in aggregation expression, got %s", e.Type())}
	}
	a.Expr = e
	if _, err := readMod(); err != nil {
		return nil, err
	}
	return a, nil
}

func (p *parser) call(name token) (Node, error) {
	var want []ValueType
	switch name.s {
	case "rate", "increase":
		want = []ValueType{TypeMatrix}
	case "histogram_quantile":
		want = []ValueType{TypeScalar, TypeVector}
	default:
		return nil, &Error{Unsupported, name.pos, fmt.Sprintf("function %q (supported: rate, increase, histogram_quantile)", name.s)}
	}
	p.next() // (
	c := &Call{Func: name.s}
	for !p.isOp(")") {
		pos := p.tok.pos
		a, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		i := len(c.Args)
		if i >= len(want) {
			return nil, &Error{BadQuery, pos, fmt.Sprintf("expected %d argument(s) in call to %q, got more", len(want), name.s)}
		}
		if a.Type() != want[i] {
			return nil, &Error{BadQuery, pos, fmt.Sprintf("expected type %s in call to function %q, got %s", want[i], name.s, a.Type())}
		}
		c.Args = append(c.Args, a)
		if p.isOp(",") {
			p.next()
		} else if !p.isOp(")") {
			return nil, p.errf(BadQuery, "expected \",\" or \")\" in the call to %q, got %s", name.s, p.tok.desc())
		}
	}
	if len(c.Args) != len(want) {
		return nil, &Error{BadQuery, name.pos, fmt.Sprintf("expected %d argument(s) in call to %q, got %d", len(want), name.s, len(c.Args))}
	}
	p.next()
	return c, nil
}

// parseDuration reads a Prometheus duration: units y, w, d, h, m, s, ms in
// that order, each at most once (e.g. 1h30m), or a plain number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > math.MaxInt64/1e9 {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	units := []struct {
		u string
		d time.Duration
	}{{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"h", time.Hour}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second}}
	var total time.Duration
	rest := s
	last := -1
	if rest == "" {
		return 0, fmt.Errorf("empty duration")
	}
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		rest = rest[i:]
		found := false
		for j, u := range units {
			if strings.HasPrefix(rest, u.u) && !(u.u == "m" && strings.HasPrefix(rest, "ms")) {
				order := j
				if u.u == "ms" {
					order = len(units) // ms comes last
				}
				if order <= last {
					return 0, fmt.Errorf("bad duration %q: units out of order", s)
				}
				last = order
				if n > int64(math.MaxInt64/u.d) {
					return 0, fmt.Errorf("duration %q out of range", s)
				}
				total += time.Duration(n) * u.d
				rest = rest[len(u.u):]
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("bad duration %q: unknown unit", s)
		}
	}
	return total, nil
}

// ParseDuration reads a duration as the query API's step and range
// parameters take it: a Prometheus duration (5m, 1h30m) or seconds (15, 0.5).
func ParseDuration(s string) (time.Duration, error) { return parseDuration(s) }
