package query

import (
	"math"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// arith is a numeric expression over a span's fields: `span.a + span.b`,
// `duration / 2`, `(span.x - 1) * 2`. Durations are nanoseconds.
type arith interface {
	eval(s *model.Span) (float64, bool)
	appendTo(b []byte) []byte
	aprec() int
}

type arithField struct{ f field }

func (a arithField) eval(s *model.Span) (float64, bool) {
	v, ok := fieldValue(a.f, s)
	if !ok {
		return 0, false
	}
	x, _, ok := numeric(v)
	return x, ok
}
func (a arithField) appendTo(b []byte) []byte { return a.f.appendTo(b) }
func (arithField) aprec() int                 { return 4 }

// exprValue is a field's value as stored, or an arithmetic expression's
// value as a double.
func exprValue(x arith, s *model.Span) (model.Value, bool) {
	if f, ok := x.(arithField); ok {
		return fieldValue(f.f, s)
	}
	v, ok := x.eval(s)
	if !ok {
		return model.Value{}, false
	}
	return model.DoubleValue(v), true
}

// arithNeg is unary minus: `-span.a`.
type arithNeg struct{ x arith }

func (a arithNeg) eval(s *model.Span) (float64, bool) {
	v, ok := a.x.eval(s)
	return -v, ok
}
func (a arithNeg) appendTo(b []byte) []byte {
	if a.x.aprec() < 4 {
		return append(a.x.appendTo(append(b, "-("...)), ')')
	}
	return a.x.appendTo(append(b, '-'))
}
func (arithNeg) aprec() int { return 4 }

type arithLit struct{ l literal }

func (a arithLit) eval(*model.Span) (float64, bool) {
	if a.l.kind == litFloat {
		return a.l.f, true
	}
	return float64(a.l.i), true
}
func (a arithLit) appendTo(b []byte) []byte { return a.l.appendTo(b) }
func (arithLit) aprec() int                 { return 4 }

type arithBin struct {
	op   byte // + - * / % ^
	l, r arith
}

var arithPrec = map[byte]int{'+': 1, '-': 1, '*': 2, '/': 2, '%': 2, '^': 3}

func (a arithBin) aprec() int { return arithPrec[a.op] }

func (a arithBin) eval(s *model.Span) (float64, bool) {
	x, ok := a.l.eval(s)
	if !ok {
		return 0, false
	}
	y, ok := a.r.eval(s)
	if !ok {
		return 0, false
	}
	var v float64
	switch a.op {
	case '+':
		v = x + y
	case '-':
		v = x - y
	case '*':
		v = x * y
	case '/':
		v = x / y
	case '%':
		v = math.Mod(x, y)
	case '^':
		v = math.Pow(x, y)
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

func (a arithBin) appendTo(b []byte) []byte {
	wrap := func(b []byte, x arith, need int) []byte {
		if x.aprec() < need {
			return append(x.appendTo(append(b, '(')), ')')
		}
		return x.appendTo(b)
	}
	p := a.aprec()
	rp := p + 1 // left-associative: a right operand of equal precedence needs parentheses
	lp := p
	if a.op == '^' {
		lp, rp = p+1, p // right-associative
	}
	b = wrap(b, a.l, lp)
	b = append(append(append(b, ' '), a.op), ' ')
	return wrap(b, a.r, rp)
}

// arithCond compares two numeric expressions; false when either side has
// no numeric value (a missing or non-numeric attribute).
type arithCond struct {
	l, r arith
	op   op
}

func (c arithCond) Match(s *model.Span) bool { return c.matchIn(s, nil) }
func (c arithCond) matchIn(s *model.Span, _ *traceCtx) bool {
	// Two fields compared for (in)equality: any value type, as Tempo does
	// (`{ span.a = resource.a }`).
	if lf, ok := c.l.(arithField); ok && (c.op == opEq || c.op == opNe) {
		if rf, ok := c.r.(arithField); ok {
			a, okA := fieldValue(lf.f, s)
			b, okB := fieldValue(rf.f, s)
			if !okA || !okB {
				return false
			}
			if x, _, ok := numeric(a); ok {
				if y, _, ok := numeric(b); ok {
					return compareFloat(x, c.op, y)
				}
			}
			return (a.Type == b.Type && a.AsString() == b.AsString()) == (c.op == opEq)
		}
	}
	x, ok := c.l.eval(s)
	if !ok {
		return false
	}
	y, ok := c.r.eval(s)
	return ok && compareFloat(x, c.op, y)
}
func (c arithCond) String() string { return render(c) }
func (arithCond) prec() int        { return precUnary }
func (c arithCond) appendBody(b []byte) []byte {
	b = c.l.appendTo(b)
	b = append(append(append(b, ' '), c.op.String()...), ' ')
	return c.r.appendTo(b)
}

func compareFloat(x float64, o op, y float64) bool {
	switch o {
	case opEq:
		return x == y
	case opNe:
		return x != y
	case opGt:
		return x > y
	case opGe:
		return x >= y
	case opLt:
		return x < y
	case opLe:
		return x <= y
	}
	return false
}

// arithOpNext reads, from the source after the current token, an
// arithmetic operator (the lexer knows none of them).
func (p *parser) arithOpNext() (byte, bool) {
	rest := strings.TrimLeft(p.src[p.tok.end:], " \t\r\n")
	if rest == "" || strings.IndexByte("+-*/%^", rest[0]) < 0 {
		return 0, false
	}
	return rest[0], true
}

// consumeArithOp moves past the operator arithOpNext saw and reads the
// next token.
func (p *parser) consumeArithOp() error {
	rest := strings.TrimLeft(p.src[p.tok.end:], " \t\r\n")
	p.pos = len(p.src) - len(rest) + 1
	return p.advance()
}

// parseArithOperand reads one operand at the current token: a numeric
// field, a number or duration, or a parenthesised expression; the current
// token stays on the operand's last token.
func (p *parser) parseArithOperand() (arith, error) {
	switch p.tok.kind {
	case tMinus:
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseArithOperand()
		if err != nil {
			return nil, err
		}
		// A negated number is folded into the literal, so that `-(0)`
		// and `-0` read back alike from the rendered form.
		if l, ok := x.(arithLit); ok && l.l.i != math.MinInt64 {
			switch l.l.kind {
			case litInt, litDuration:
				l.l.i = -l.l.i
				return l, nil
			case litFloat:
				l.l.f = -l.l.f
				return l, nil
			}
		}
		return arithNeg{x}, nil
	case tNumber:
		if l := p.tok.lit; l.kind == litInt || l.kind == litFloat || l.kind == litDuration {
			return arithLit{l}, nil
		}
	case tLParen:
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseArith(0)
		if err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) in arithmetic, got %s", p.desc())
		}
		return x, nil
	case tAttr, tIdent:
		f, err := p.parseField()
		if err != nil {
			return nil, err
		}
		return arithField{f}, nil
	}
	return nil, p.errf(p.tok.pos, "expected a number, a duration or a numeric field in arithmetic, got %s", p.desc())
}

// parseArith reads an arithmetic expression by precedence climbing,
// starting at the current token; it stays on the expression's last token.
func (p *parser) parseArith(minPrec int) (arith, error) {
	l, err := p.parseArithOperand()
	if err != nil {
		return nil, err
	}
	return p.parseArithRest(l, minPrec)
}

func (p *parser) parseArithRest(l arith, minPrec int) (arith, error) {
	for {
		o, ok := p.arithOpNext()
		if !ok || arithPrec[o] < minPrec {
			return l, nil
		}
		if err := p.consumeArithOp(); err != nil {
			return nil, err
		}
		next := arithPrec[o] + 1
		if o == '^' {
			next = arithPrec[o]
		}
		r, err := p.parseArith(next)
		if err != nil {
			return nil, err
		}
		l = arithBin{op: o, l: l, r: r}
	}
}

// parseArithCond reads `left op right` once arithmetic was seen after the
// first operand (the current token).
func (p *parser) parseArithCond(first arith) (node, error) {
	l, err := p.parseArithRest(first, 0)
	if err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tOp || p.tok.op == opRe || p.tok.op == opNre {
		return nil, p.errf(p.tok.pos, "expected a comparison (= != > >= < <=) after the arithmetic, got %s", p.desc())
	}
	o, opPos := p.tok.op, p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	rPos := p.tok.pos
	r, err := p.parseArith(0)
	if err != nil {
		return nil, err
	}
	c := arithCond{l: l, r: r, op: o}
	if err := p.checkArithCond(c, opPos, rPos); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkArithCond holds a comparison of a field with a lone number, which
// arithmetic reads when the number is negated or in parentheses
// (`duration >= -(1.5)`, `-2 < span:childCount`), to the rules of the plain
// condition it amounts to, so that both spellings are accepted or refused
// alike. litPos is where the right side starts (the number's place when it is
// on the left).
func (p *parser) checkArithCond(c arithCond, opPos, litPos int) error {
	f, fok := c.l.(arithField)
	l, lok := c.r.(arithLit)
	o := c.op
	if !fok || !lok {
		f, fok = c.r.(arithField)
		l, lok = c.l.(arithLit)
		o = flipped[c.op]
	}
	if !fok || !lok {
		return nil
	}
	return p.check(&cond{f: f.f, op: o, lit: l.l}, opPos, litPos)
}

// arithRightSide reports whether the value after a comparison is an
// arithmetic expression or a field rather than a literal.
func (p *parser) arithRightSide() bool {
	_, op := p.arithOpNext()
	switch p.tok.kind {
	case tAttr, tLParen, tMinus:
		return true
	case tNumber:
		return op
	case tIdent:
		_, intr := intrinsicByName[p.src[p.tok.pos:p.tok.end]]
		return intr
	}
	return false
}
