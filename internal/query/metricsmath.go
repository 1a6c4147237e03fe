package query

import (
	"math"
	"strconv"
	"strings"
)

// Math is arithmetic between metrics queries and numbers, as Tempo's
// metrics math: `({ } | rate()) * 100`, `({ status = error } | rate()) /
// ({ } | rate())`, `(...) + (...) | topk(5) > 10`. A node is a metrics
// query (Op 0), a number (Op '#', folded at parse time: `1 + 2` is 3) or
// an operator (+ - * /) between two nodes; Second are the filters and
// topk/bottomk applied to the node's series, in order.
type Math struct {
	Op     byte
	Query  *Query
	Number float64
	L, R   *Math
	Second []SecondStage

	intLit, duration bool // a number written as an integer, or a duration (seconds)
}

// Math returns the query's metrics arithmetic, or nil when the query is
// not arithmetic between metrics queries.
func (q *Query) Math() *Math { return q.math }

// IsMetrics reports whether the query answers with series: a metrics
// query or arithmetic between metrics queries.
func (q *Query) IsMetrics() bool { return q.metrics != nil || q.math != nil }

// Leaves returns the metrics queries of the expression, left to right.
func (m *Math) Leaves() []*Query {
	switch m.Op {
	case 0:
		return []*Query{m.Query}
	case '#':
		return nil
	}
	return append(m.L.Leaves(), m.R.Leaves()...)
}

func (m *Math) appendTo(b []byte) []byte {
	switch m.Op {
	case 0:
		b = append(append(b, '('), m.Query.String()...)
		b = append(b, ')')
	case '#':
		b = strconv.AppendFloat(b, m.Number, 'g', -1, 64)
	default:
		wrap := func(b []byte, x *Math) []byte {
			if x.Op == '+' || x.Op == '-' || x.Op == '*' || x.Op == '/' || len(x.Second) > 0 {
				return append(x.appendTo(append(b, '(')), ')')
			}
			return x.appendTo(b)
		}
		b = wrap(b, m.L)
		b = append(b, ' ', m.Op, ' ')
		b = wrap(b, m.R)
	}
	return appendSecond(b, m.Second)
}

// mscan parses metrics arithmetic and constant expressions over the
// source, character by character; numbers are read by the query lexer,
// parenthesised queries by ParseQuery. end bounds the scan (the closing
// parenthesis of an enclosing group).
type mscan struct {
	src      string
	pos, end int
	depth    int
	definite *bool // set by an error only metrics arithmetic can mean
}

// sure marks an error as one only metrics arithmetic can mean: ParseQuery
// reports it rather than the spanset parser's.
func (s *mscan) sure(err *SyntaxError) *SyntaxError {
	if s.definite != nil {
		*s.definite = true
	}
	return err
}

func (s *mscan) ws() {
	for s.pos < s.end && strings.IndexByte(" \t\r\n", s.src[s.pos]) >= 0 {
		s.pos++
	}
}

func (s *mscan) errf(pos int, format string, args ...any) *SyntaxError {
	return (&parser{}).errf(pos, format, args...)
}

// parseMath parses a whole query as metrics arithmetic. It fails unless
// the expression holds at least one metrics query.
func parseMath(src string) (m *Math, definite bool, err error) {
	s := &mscan{src: src, end: len(src), definite: &definite}
	defer func() {
		if err != nil {
			m = nil
		}
	}()
	if m, err = s.top(true); err != nil {
		return nil, definite, err
	}
	if s.pos < s.end {
		return nil, definite, s.errf(s.pos, "unexpected %q in metrics arithmetic; expected + - * /, a comparison or | topk(n)", s.src[s.pos:s.pos+1])
	}
	if m.Op == '#' {
		return nil, true, s.errf(0, "a query of numbers only; metrics arithmetic needs a metrics query such as ({ } | rate())")
	}
	return m, definite, nil
}

// top: sum ( cmp const | '|' topk(n) | '|' bottomk(n) )*.
func (s *mscan) top(queries bool) (*Math, error) {
	m, err := s.sum(queries)
	if err != nil {
		return nil, err
	}
	for {
		s.ws()
		if s.pos >= s.end {
			return m, nil
		}
		rest := s.src[s.pos:s.end]
		if rest[0] == '|' && queries {
			st, err := s.topK()
			if err != nil {
				return nil, err
			}
			m = withSecond(m, st)
			continue
		}
		o, n := compareOp(rest)
		if n == 0 || !queries {
			return m, nil
		}
		pos := s.pos
		s.pos += n
		v, err := s.sum(false)
		if err != nil {
			return nil, err
		}
		if v.Op != '#' {
			return nil, s.errf(pos, "expected a number after %s in a filter on the series' values", o)
		}
		m = withSecond(m, SecondStage{Op: o, Value: v.Number})
	}
}

// withSecond adds a stage after a node's own.
func withSecond(m *Math, st SecondStage) *Math {
	c := *m
	c.Second = append(append([]SecondStage(nil), m.Second...), st)
	return &c
}

func compareOp(s string) (op, int) {
	for _, c := range []struct {
		s string
		o op
	}{{">=", opGe}, {"<=", opLe}, {"!=", opNe}, {">", opGt}, {"<", opLt}, {"=", opEq}} {
		if strings.HasPrefix(s, c.s) && !strings.HasPrefix(s, "=~") && !strings.HasPrefix(s, "!~") {
			return c.o, len(c.s)
		}
	}
	return 0, 0
}

func (s *mscan) topK() (SecondStage, error) {
	s.pos++ // |
	s.ws()
	rest := s.src[s.pos:s.end]
	var st SecondStage
	switch {
	case strings.HasPrefix(rest, "topk"):
		s.pos += 4
	case strings.HasPrefix(rest, "bottomk"):
		s.pos += 7
		st.BottomK = true
	default:
		return st, s.errf(s.pos, "only topk(n), bottomk(n) or a comparison may follow metrics arithmetic")
	}
	s.ws()
	if s.pos >= s.end || s.src[s.pos] != '(' {
		return st, s.errf(s.pos, "expected ( after topk or bottomk")
	}
	s.pos++
	s.ws()
	j := s.pos
	for j < s.end && s.src[j] >= '0' && s.src[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(s.src[s.pos:j])
	if err != nil || n < 1 || n > 10000 {
		return st, s.errf(s.pos, "expected a whole number from 1 to 10000 in topk() or bottomk()")
	}
	st.TopK = n
	s.pos = j
	s.ws()
	if s.pos >= s.end || s.src[s.pos] != ')' {
		return st, s.errf(s.pos, "expected ) to close topk( or bottomk(")
	}
	s.pos++
	return st, nil
}

// sum: prod (('+' | '-') prod)*.
func (s *mscan) sum(queries bool) (*Math, error) {
	l, err := s.prod(queries)
	if err != nil {
		return nil, err
	}
	for {
		s.ws()
		if s.pos >= s.end || (s.src[s.pos] != '+' && s.src[s.pos] != '-') {
			return l, nil
		}
		o, pos := s.src[s.pos], s.pos
		s.pos++
		r, err := s.prod(queries)
		if err != nil {
			return nil, err
		}
		if l, err = s.binary(pos, o, l, r); err != nil {
			return nil, err
		}
	}
}

// prod: unary (('*' | '/') unary)*.
func (s *mscan) prod(queries bool) (*Math, error) {
	l, err := s.unary(queries)
	if err != nil {
		return nil, err
	}
	for {
		s.ws()
		if s.pos >= s.end || (s.src[s.pos] != '*' && s.src[s.pos] != '/') {
			return l, nil
		}
		o, pos := s.src[s.pos], s.pos
		s.pos++
		r, err := s.unary(queries)
		if err != nil {
			return nil, err
		}
		if l, err = s.binary(pos, o, l, r); err != nil {
			return nil, err
		}
	}
}

// unary: '-' unary | atom.
func (s *mscan) unary(queries bool) (*Math, error) {
	s.ws()
	if s.pos < s.end && s.src[s.pos] == '-' {
		pos := s.pos
		s.pos++
		x, err := s.unary(queries)
		if err != nil {
			return nil, err
		}
		if x.Op == '#' {
			c := *x
			c.Number = -c.Number
			return &c, nil
		}
		return s.binary(pos, '*', &Math{Op: '#', Number: -1, intLit: true}, x)
	}
	return s.atom(queries)
}

// atom: number | duration | '(' top ')' | '(' metrics query ')'.
func (s *mscan) atom(queries bool) (*Math, error) {
	s.ws()
	if s.pos >= s.end {
		return nil, s.errf(s.pos, "expected a number or a parenthesised metrics query, got the end of the query")
	}
	c := s.src[s.pos]
	switch {
	case c >= '0' && c <= '9' || c == '.':
		p := &parser{src: s.src[:s.end]}
		if c == '.' {
			j := s.pos + 1
			for j < s.end && s.src[j] >= '0' && s.src[j] <= '9' {
				j++
			}
			f, err := strconv.ParseFloat("0"+s.src[s.pos:j], 64)
			if err != nil || j == s.pos+1 {
				return nil, s.errf(s.pos, "expected a number, got %q", s.src[s.pos:j])
			}
			s.pos = j
			return &Math{Op: '#', Number: f}, nil
		}
		end, l, err := p.scanNumber(s.pos)
		if err != nil {
			return nil, err
		}
		s.pos = end
		m := &Math{Op: '#'}
		switch l.kind {
		case litInt:
			m.Number, m.intLit = float64(l.i), true
		case litFloat:
			m.Number = l.f
		case litDuration:
			m.Number, m.duration = float64(l.i)/1e9, true // series values of durations are seconds
		}
		return m, nil
	case c == '(':
		s.depth++
		defer func() { s.depth-- }()
		if s.depth > maxDepth {
			return nil, s.errf(s.pos, "query nested deeper than %d levels", maxDepth)
		}
		open := s.pos
		close := matchParen(s.src[:s.end], open)
		if close < 0 {
			return nil, s.errf(open, "missing ) for ( at position %d", open)
		}
		sub := &mscan{src: s.src, pos: open + 1, end: close, depth: s.depth, definite: s.definite}
		m, merr := sub.top(queries)
		if merr == nil {
			sub.ws()
			if sub.pos == close {
				s.pos = close + 1
				return m, nil
			}
			merr = sub.errf(sub.pos, "unexpected %q in metrics arithmetic", s.src[sub.pos:sub.pos+1])
		}
		if !queries || !strings.ContainsAny(s.src[open+1:close], "{|") {
			return nil, merr
		}
		q, err := ParseQuery(s.src[open+1 : close])
		if err != nil {
			if se, ok := err.(*SyntaxError); ok {
				se.Pos += open + 1
			}
			return nil, err
		}
		if !q.IsMetrics() {
			return nil, s.sure(s.errf(open, "a spanset query in metrics arithmetic; end it with a metrics function such as | rate()"))
		}
		if q.metrics != nil && q.metrics.Func == FuncCompare {
			return nil, s.sure(s.errf(open, "compare() cannot be used in metrics arithmetic: its series are attribute values, not a measure"))
		}
		s.pos = close + 1
		if q.math != nil {
			return q.math, nil
		}
		return &Math{Query: q}, nil
	}
	return nil, s.errf(s.pos, "expected a number or a parenthesised metrics query such as ({ } | rate()), got %q", s.src[s.pos:s.pos+1])
}

// binary makes l o r, folding two numbers (integers divide as integers,
// as in Tempo: 1 / 2 is 0).
func (s *mscan) binary(pos int, o byte, l, r *Math) (*Math, error) {
	if l.Op == '#' && r.Op == '#' {
		if l.duration || r.duration {
			return nil, s.sure(s.errf(pos, "a duration cannot be used in arithmetic between numbers"))
		}
		if l.intLit && r.intLit {
			x, y := int64(l.Number), int64(r.Number)
			var v int64
			switch o {
			case '+':
				v = x + y
			case '-':
				v = x - y
			case '*':
				v = x * y
			case '/':
				if y == 0 {
					return nil, s.sure(s.errf(pos, "division by zero"))
				}
				v = x / y
			}
			return &Math{Op: '#', Number: float64(v), intLit: true}, nil
		}
		return &Math{Op: '#', Number: applyMath(o, l.Number, r.Number)}, nil
	}
	if l.duration || r.duration {
		return nil, s.sure(s.errf(pos, "a duration cannot be a scalar operand in metrics arithmetic"))
	}
	return &Math{Op: o, L: l, R: r}, nil
}

// ApplyMath is l o r for + - * /; a division by zero is NaN (the point is
// dropped), as in Tempo.
func ApplyMath(o byte, l, r float64) float64 { return applyMath(o, l, r) }

func applyMath(o byte, l, r float64) float64 {
	switch o {
	case '+':
		return l + r
	case '-':
		return l - r
	case '*':
		return l * r
	case '/':
		if r == 0 {
			return math.NaN()
		}
		return l / r
	}
	return math.NaN()
}

// matchParen returns the index of the ) closing the ( at open, skipping
// quoted strings, or -1.
func matchParen(src string, open int) int {
	depth := 0
	for i := open; i < len(src); i++ {
		switch src[i] {
		case '"', '`':
			q := src[i]
			for i++; i < len(src) && src[i] != q; i++ {
				if src[i] == '\\' && q == '"' {
					i++
				}
			}
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// constValue parses a constant expression (`2 / 6`, `1 - 3`, `-5`, `10s`)
// at the parser's current token, leaving the parser at the token after it.
func (p *parser) constValue() (literal, bool, error) {
	s := &mscan{src: p.src, pos: p.tok.pos, end: len(p.src)}
	m, err := s.sum(false)
	if err != nil || m.Op != '#' {
		return literal{}, false, nil
	}
	p.pos = s.pos
	if err := p.advance(); err != nil {
		return literal{}, false, err
	}
	switch {
	case m.duration:
		return literal{kind: litDuration, i: int64(math.Round(m.Number * 1e9))}, true, nil
	case m.intLit:
		return literal{kind: litInt, i: int64(m.Number)}, true, nil
	}
	return literal{kind: litFloat, f: m.Number}, true, nil
}
