package query

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// SyntaxError is a TraceQL parse error. Pos is the 0-based byte offset of
// the offending token in the query.
type SyntaxError struct {
	Pos int
	Msg string
}

// Error renders the error as `position 17: expected ...`.
func (e *SyntaxError) Error() string { return "position " + strconv.Itoa(e.Pos) + ": " + e.Msg }

// maxDepth bounds nesting of parentheses and negations.
const maxDepth = 200

// ParseTraceQL parses one TraceQL spanset filter `{ ... }` (see the package
// documentation for the supported subset). Every error is a *SyntaxError.
func ParseTraceQL(q string) (Expr, error) {
	p := &parser{src: q}
	e, err := p.parseQuery()
	if err != nil {
		return nil, err
	}
	return e, nil
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tLBrace
	tRBrace
	tLParen
	tRParen
	tAnd
	tOr
	tNot
	tOp
	tString
	tNumber
	tIdent
	tAttr
	tPipe
	tMinus // a minus not starting a number: `-span.a`
)

type token struct {
	kind     tokKind
	pos, end int
	op       op
	lit      literal // tString, tNumber
	fld      field   // tAttr
}

type parser struct {
	src     string
	pos     int // lexer position: start of the next token
	tok     token
	depth   int
	metrics *Metrics // a whole query's metrics stage (ParseQuery)
	whole   bool     // parsing a whole query (ParseQuery): structure-dependent intrinsics allowed
}

func (p *parser) errf(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// desc describes the current token for messages.
func (p *parser) desc() string {
	if p.tok.kind == tEOF {
		return "end of query"
	}
	t := p.src[p.tok.pos:p.tok.end]
	if len(t) > 40 {
		t = t[:40] + "..."
	}
	return strconv.Quote(t)
}

func (p *parser) parseQuery() (node, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLBrace {
		return nil, p.errf(p.tok.pos, "expected { at start of query, got %s", p.desc())
	}
	e, err := p.parseFilterBody()
	if err != nil {
		return nil, err
	}
	// Spanset operators the lexer has no token for (~, !~, !>, &>, ...).
	rest := strings.TrimLeft(p.src[p.pos:], " \t\r\n")
	for _, prefix := range []string{"~", "!~", "!<", "!>", "&~", "&<", "&>"} {
		if strings.HasPrefix(rest, prefix) {
			n := 0
			for n < len(rest) && strings.IndexByte("<>&|~!=", rest[n]) >= 0 {
				n++
			}
			return nil, p.errf(len(p.src)-len(rest), "spanset operators between filters are not supported, got %q after }", rest[:n])
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tEOF:
		return e, nil
	case tPipe:
		return nil, p.errf(p.tok.pos, "pipelines (|) are not supported: only one spanset filter { ... }")
	case tAnd, tOr, tOp:
		// Name the whole operator (>>, !~, &&), not its first token.
		op := p.src[p.tok.pos:]
		n := 0
		for n < len(op) && strings.IndexByte("<>&|~!=", op[n]) >= 0 {
			n++
		}
		return nil, p.errf(p.tok.pos, "spanset operators between filters are not supported, got %q after }", op[:n])
	}
	return nil, p.errf(p.tok.pos, "unexpected %s after closing }", p.desc())
}

func (p *parser) parseOr() (node, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tOr {
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = orExpr{l, r}
	}
	return l, nil
}

func (p *parser) parseAnd() (node, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tAnd {
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		l = andExpr{l, r}
	}
	return l, nil
}

func (p *parser) parseUnary() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, p.errf(p.tok.pos, "expression nested deeper than %d levels", maxDepth)
	}
	switch p.tok.kind {
	case tNot:
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notExpr{x}, nil
	case tLParen:
		open := p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) to close ( at position %d, got %s", open, p.desc())
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		return e, nil
	}
	return p.parseCond()
}

var intrinsicByName = map[string]intrinsic{
	"name": intrName, "status": intrStatus, "duration": intrDuration, "kind": intrKind,
	"statusMessage": intrStatusMessage, "content": intrContent,
	"span:name": intrName, "span:status": intrStatus, "span:duration": intrDuration,
	"span:kind": intrKind, "span:statusMessage": intrStatusMessage,
	"span:id": intrSpanID, "span:parentID": intrParentID, "trace:id": intrTraceID,
	"event:name": intrEventName, "event:timeSinceStart": intrEventTimeSinceStart,
	"link:traceID": intrLinkTraceID, "link:spanID": intrLinkSpanID,
	"instrumentation:name": intrInstrName, "instrumentation:version": intrInstrVersion,
	"traceDuration": intrTraceDuration, "trace:duration": intrTraceDuration,
	"rootName": intrRootName, "trace:rootName": intrRootName,
	"rootServiceName": intrRootService, "trace:rootService": intrRootService,
	"span:childCount": intrChildCount, "childCount": intrChildCount,
}

// unsupportedIntrinsics are Tempo's intrinsics Rastro does not evaluate yet:
// the nested-set ones and child counts need the trace's structure.
var unsupportedIntrinsics = map[string]bool{
	"nestedSetLeft": true, "nestedSetRight": true, "nestedSetParent": true,
}

func (p *parser) parseField() (field, error) {
	switch p.tok.kind {
	case tAttr:
		return p.tok.fld, nil
	case tIdent:
		w := p.src[p.tok.pos:p.tok.end]
		if in, ok := intrinsicByName[w]; ok {
			if in == intrChildCount && !p.whole {
				return field{}, p.errf(p.tok.pos, "%s needs the trace's structure: it works in searches and TraceQL metrics, not in a single-filter context such as this one", w)
			}
			return field{intr: in}, nil
		}
		if unsupportedIntrinsics[w] {
			return field{}, p.errf(p.tok.pos, "intrinsic %s is not supported: it is Tempo's storage numbering of a trace's spans; ask about structure with >>, >, <<, <, ~ or span:childCount", w)
		}
		for _, prefix := range []string{"trace:", "event:", "link:", "instrumentation:"} {
			if strings.HasPrefix(w, prefix) {
				return field{}, p.errf(p.tok.pos, "unknown intrinsic %s", w)
			}
		}
		switch w {
		case "true", "false", "nil", "ok", "error", "unset", "unspecified", "internal", "server", "client",
			"producer", "consumer":
			return field{}, p.errf(p.tok.pos, "expected attribute or intrinsic before the operator, got value %s", w)
		}
		if strings.HasPrefix(w, "span:") {
			return field{}, p.errf(p.tok.pos, "unknown intrinsic %s", w)
		}
		return field{}, p.errf(p.tok.pos, "unknown intrinsic %q; attributes need a scope: span.%s, resource.%s or .%s", w, w, w, w)
	}
	return field{}, p.errf(p.tok.pos, "expected condition (attribute or intrinsic), got %s", p.desc())
}

// literalToken reports whether the current token starts a condition with a
// value on the left (`{ true }`, `{ 1 < 2 }`, `{ "a" = .b }`), and reads it.
func (p *parser) literalToken() (literal, bool) {
	switch p.tok.kind {
	case tString, tNumber:
		return p.tok.lit, true
	case tIdent:
		switch p.src[p.tok.pos:p.tok.end] {
		case "true":
			return literal{kind: litBool, i: 1}, true
		case "false":
			return literal{kind: litBool}, true
		case "nil":
			return literal{kind: litNil}, true
		}
	}
	return literal{}, false
}

// flipped is the operator with its operands swapped (a < b is b > a).
var flipped = map[op]op{opEq: opEq, opNe: opNe, opGt: opLt, opGe: opLe, opLt: opGt, opLe: opGe}

// parseValueFirst parses a condition whose left side is the value l: a
// constant (`{ true }`, `{ 1 < 1h }`), decided now, or `value op field`,
// read as `field op' value`.
func (p *parser) parseValueFirst(l literal) (node, error) {
	lpos, lsrc := p.tok.pos, p.src[p.tok.pos:p.tok.end]
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tOp {
		if l.kind == litBool {
			return constExpr{v: l.i != 0, src: lsrc}, nil
		}
		return nil, p.errf(p.tok.pos, "expected operator after %s, got %s", lsrc, p.desc())
	}
	o, opPos := p.tok.op, p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if r, ok := p.literalToken(); ok {
		rsrc := p.src[p.tok.pos:p.tok.end]
		v, err := p.evalConst(l, o, r, opPos)
		if err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		return constExpr{v: v, src: lsrc + " " + o.String() + " " + rsrc}, nil
	}
	fo, ok := flipped[o]
	if !ok {
		return nil, p.errf(opPos, "%s needs the field on its left: write field %s value", o, o)
	}
	f, err := p.parseField()
	if err != nil {
		return nil, err
	}
	if f.intr == intrContent {
		return nil, p.errf(p.tok.pos, "content comes first: write content = \"words\"")
	}
	c := &cond{f: f, op: fo, lit: l}
	if err := p.check(c, opPos, lpos); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return c, nil
}

// evalConst decides a comparison of two values: numbers (integers, floats
// and durations, as nanoseconds) with numbers, strings with strings (=~
// and !~ take a regular expression on the right, fully anchored), booleans
// and nil with their own kind.
func (p *parser) evalConst(l literal, o op, r literal, opPos int) (bool, error) {
	num := func(x literal) (float64, bool) {
		switch x.kind {
		case litInt, litDuration:
			return float64(x.i), true
		case litFloat:
			return x.f, true
		}
		return 0, false
	}
	isInt := func(x literal) bool { return x.kind == litInt || x.kind == litDuration }
	if isInt(l) && isInt(r) && o != opRe && o != opNre {
		return cmpInt(o, l.i, r.i), nil // exact beyond 2^53
	}
	if a, ok := num(l); ok {
		if b, ok := num(r); ok && o != opRe && o != opNre {
			return cmpFloat(o, a, b), nil
		}
	}
	switch {
	case l.kind == litString && r.kind == litString:
		if o == opRe || o == opNre {
			if _, err := regexp.Compile(r.s); err != nil { // on its own, as for attributes
				return false, p.errf(opPos, "invalid regular expression %s: %v", strconv.Quote(r.s), err)
			}
			re, err := regexp.Compile("^(?s:" + r.s + ")$")
			if err != nil {
				return false, p.errf(opPos, "invalid regular expression %s: %v", strconv.Quote(r.s), err)
			}
			return re.MatchString(l.s) == (o == opRe), nil
		}
		c := &cond{op: o, lit: r}
		return c.cmpString(l.s), nil
	case l.kind == r.kind && (l.kind == litBool || l.kind == litNil) && (o == opEq || o == opNe):
		return cmpEq(o, l.i == r.i), nil
	}
	return false, p.errf(opPos, "cannot compare %s with %s using %s", litNames[l.kind], litNames[r.kind], o)
}

func (p *parser) parseCond() (node, error) {
	if p.tok.kind == tMinus {
		// `-span.a > 2`: arithmetic starting with a minus.
		first, err := p.parseArithOperand()
		if err != nil {
			return nil, err
		}
		return p.parseArithCond(first)
	}
	if _, ok := p.arithOpNext(); ok && (p.tok.kind == tAttr || p.tok.kind == tIdent || p.tok.kind == tNumber) {
		// Arithmetic: `span.a + span.b > 3`, `duration / 2 > 1s`.
		first, err := p.parseArithOperand()
		if err != nil {
			return nil, err
		}
		return p.parseArithCond(first)
	}
	if p.tok.kind == tNumber {
		// A number first with arithmetic on the right (`{ 3 < span.a * 2 }`):
		// read it as arithmetic; anything else is a value-first condition.
		save := *p
		if first, err := p.parseArithOperand(); err == nil {
			if n, err := p.parseArithCond(first); err == nil {
				if c, ok := n.(arithCond); ok {
					if _, bin := c.r.(arithBin); bin {
						return n, nil
					}
				}
			}
		}
		*p = save
	}
	if l, ok := p.literalToken(); ok {
		return p.parseValueFirst(l)
	}
	f, err := p.parseField()
	if err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tOp {
		if f.intr == intrNone && f.scope != ScopeEvent && f.scope != ScopeLink {
			// A bare attribute is a boolean condition: `{ .a }` is `{ .a = true }`.
			return &cond{f: f, op: opEq, lit: literal{kind: litBool, i: 1}}, nil
		}
		return nil, p.errf(p.tok.pos, "expected operator after %s, got %s", f, p.desc())
	}
	o, opPos := p.tok.op, p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if o != opRe && o != opNre && p.arithRightSide() {
		// The value is arithmetic or another field: `span.a > span.b * 2`.
		rPos := p.tok.pos
		r, err := p.parseArith(0)
		if err != nil {
			return nil, err
		}
		c := arithCond{l: arithField{f}, r: r, op: o}
		if err := p.checkArithCond(c, opPos, rPos); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		return c, nil
	}
	litPos := p.tok.pos
	var l literal
	switch p.tok.kind {
	case tString, tNumber:
		l = p.tok.lit
	case tIdent:
		w := p.src[p.tok.pos:p.tok.end]
		if st, ok := model.ParseStatusCode(w); ok {
			l = literal{kind: litStatus, i: int64(st)}
		} else if k, ok := model.ParseSpanKind(w); ok {
			l = literal{kind: litSpanKind, i: int64(k)}
		} else {
			switch w {
			case "true":
				l = literal{kind: litBool, i: 1}
			case "false":
				l = literal{kind: litBool}
			case "nil":
				l = literal{kind: litNil}
			default:
				switch f.intr {
				case intrStatus:
					return nil, p.errf(litPos, "unknown status %q: want ok, error or unset", w)
				case intrKind:
					return nil, p.errf(litPos, "unknown span kind %q: want unspecified, internal, server, client, producer or consumer", w)
				}
				return nil, p.errf(litPos, "expected value after %s %s, got %s (strings need double quotes)", f, o, p.desc())
			}
		}
	default:
		return nil, p.errf(litPos, "expected value after %s %s, got %s", f, o, p.desc())
	}
	c := &cond{f: f, op: o, lit: l}
	if f.intr == intrContent {
		if err := p.checkContent(c, opPos, litPos); err != nil {
			return nil, err
		}
	} else if err := p.check(c, opPos, litPos); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return c, nil
}

// idBytes are the id intrinsics with their sizes in bytes.
var idBytes = map[intrinsic]int{intrTraceID: 16, intrLinkTraceID: 16, intrSpanID: 8, intrParentID: 8, intrLinkSpanID: 8}

// padHexID is a hex id in lowercase, left-padded to n bytes; ok is false
// when s is not hex of at most that size.
func padHexID(s string, n int) (string, bool) {
	if s == "" || len(s) > 2*n {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(s[i] >= '0' && s[i] <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return strings.Repeat("0", 2*n-len(s)) + strings.ToLower(s), true
}

// stringIntrinsic are the intrinsics compared with strings.
var stringIntrinsic = map[intrinsic]bool{intrName: true, intrStatusMessage: true, intrEventName: true,
	intrRootName: true, intrRootService: true,
	intrLinkTraceID: true, intrLinkSpanID: true, intrInstrName: true, intrInstrVersion: true,
	intrSpanID: true, intrParentID: true, intrTraceID: true}

var litNames = [...]string{"string", "integer", "float", "boolean", "duration", "status", "kind", "nil"}

// check applies the type rules and compiles regular expressions.
func (p *parser) check(c *cond, opPos, litPos int) error {
	if c.op == opRe || c.op == opNre {
		if c.lit.kind != litString {
			return p.errf(litPos, "%s needs a string regular expression, got %s", c.op, litNames[c.lit.kind])
		}
		if c.f.intr != intrNone && !stringIntrinsic[c.f.intr] {
			return p.errf(opPos, "%s does not support %s", c.f, c.op)
		}
		if _, err := regexp.Compile(c.lit.s); err != nil {
			return p.errf(litPos, "invalid regular expression %s: %v", strconv.Quote(c.lit.s), err)
		}
		re, err := regexp.Compile("^(?s:" + c.lit.s + ")$")
		if err != nil {
			return p.errf(litPos, "invalid regular expression %s: %v", strconv.Quote(c.lit.s), err)
		}
		c.re = re
		return nil
	}
	ordering := c.op != opEq && c.op != opNe
	switch {
	case stringIntrinsic[c.f.intr]:
		if c.lit.kind == litNil && !ordering {
			return nil // see cond.matchNil
		}
		if c.lit.kind != litString {
			return p.errf(litPos, "%s compares with a string, got %s", c.f, litNames[c.lit.kind])
		}
		if n := idBytes[c.f.intr]; n > 0 && !ordering {
			// Ids compare as ids, as Tempo decodes them: any case, leading
			// zeros optional (Tempo lists trace ids without them).
			if id, ok := padHexID(c.lit.s, n); ok {
				c.lit.s = id
			}
		}
		return nil
	case c.f.intr == intrEventTimeSinceStart || c.f.intr == intrTraceDuration:
		if c.lit.kind != litDuration && c.lit.kind != litInt {
			return p.errf(litPos, "%s compares with a duration (100ms) or integer nanoseconds, got %s", c.f, litNames[c.lit.kind])
		}
		return nil
	}
	switch c.f.intr {
	case intrChildCount:
		if c.lit.kind != litInt {
			return p.errf(litPos, "%s compares with an integer, got %s", c.f, litNames[c.lit.kind])
		}
	case intrStatus, intrKind:
		want := litStatus
		if c.f.intr == intrKind {
			want = litSpanKind
		}
		if c.lit.kind != want {
			return p.errf(litPos, "%s compares with a %s word, got %s", c.f, litNames[want], litNames[c.lit.kind])
		}
		if ordering {
			return p.errf(opPos, "%s supports only = and !=, got %s", c.f, c.op)
		}
	case intrDuration:
		if c.lit.kind != litDuration && c.lit.kind != litInt {
			return p.errf(litPos, "duration compares with a duration (100ms) or integer nanoseconds, got %s", litNames[c.lit.kind])
		}
	default:
		switch c.lit.kind {
		case litStatus, litSpanKind:
			return p.errf(litPos, "%s is a %s value; compare it with the %s intrinsic", p.src[litPos:p.tok.end], litNames[c.lit.kind], litNames[c.lit.kind])
		case litBool, litNil:
			if ordering {
				return p.errf(opPos, "%s supports only = and != with %s", c.op, litNames[c.lit.kind])
			}
		}
	}
	return nil
}

// checkContent admits `content = "words"` only and parses the words.
func (p *parser) checkContent(c *cond, opPos, litPos int) error {
	if c.op != opEq {
		return p.errf(opPos, "content supports only = with a string of words, got %s", c.op)
	}
	if c.lit.kind != litString {
		return p.errf(litPos, "content compares with a string of words, got %s", litNames[c.lit.kind])
	}
	q, err := text.ParseQuery(c.lit.s)
	if err != nil {
		return p.errf(litPos, "content query %s: %v", strconv.Quote(c.lit.s), err)
	}
	c.txt, c.lit.s = q, q.String()
	return nil
}

// advance lexes the next token into p.tok.
func (p *parser) advance() error {
	s := p.src
	i := p.pos
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	t := token{pos: i, end: i + 1}
	if i >= len(s) {
		t.kind, t.end = tEOF, i
		p.tok, p.pos = t, i
		return nil
	}
	next := byte(0)
	if i+1 < len(s) {
		next = s[i+1]
	}
	c := s[i]
	switch {
	case c == '{':
		t.kind = tLBrace
	case c == '}':
		t.kind = tRBrace
	case c == '(':
		t.kind = tLParen
	case c == ')':
		t.kind = tRParen
	case c == '&':
		if next != '&' {
			return p.errf(i, "expected && but found a single &")
		}
		t.kind, t.end = tAnd, i+2
	case c == '|':
		t.kind = tPipe
		if next == '|' {
			t.kind, t.end = tOr, i+2
		}
	case c == '!':
		t.kind = tNot
		switch next {
		case '=':
			t.kind, t.op, t.end = tOp, opNe, i+2
		case '~':
			t.kind, t.op, t.end = tOp, opNre, i+2
		}
	case c == '=':
		t.kind, t.op = tOp, opEq
		switch next {
		case '~':
			t.op, t.end = opRe, i+2
		case '=':
			return p.errf(i, "unknown operator ==; use = for equality")
		}
	case c == '>' || c == '<':
		t.kind, t.op = tOp, opGt
		if c == '<' {
			t.op = opLt
		}
		if next == '=' {
			t.op++
			t.end = i + 2
		}
	case c == '"':
		str, end, err := p.scanString(i)
		if err != nil {
			return err
		}
		t.kind, t.end, t.lit = tString, end, literal{kind: litString, s: str}
	case c == '-' && !(next >= '0' && next <= '9'):
		t.kind = tMinus
	case c >= '0' && c <= '9' || c == '-' && next >= '0' && next <= '9':
		end, l, err := p.scanNumber(i)
		if err != nil {
			return err
		}
		t.kind, t.end, t.lit = tNumber, end, l
	case c == '.':
		key, end, err := p.scanKey(i+1, ".")
		if err != nil {
			return err
		}
		t.kind, t.end, t.fld = tAttr, end, field{scope: ScopeAny, key: key}
	case isIdentStart(c):
		j := i
		for j < len(s) && isIdentByte(s[j]) {
			j++
		}
		w := s[i:j]
		if j < len(s) && s[j] == '.' {
			scopes := map[string]Scope{"span": ScopeSpan, "resource": ScopeResource, "event": ScopeEvent,
				"link": ScopeLink, "instrumentation": ScopeInstrumentation}
			if sc, ok := scopes[w]; ok {
				key, end, err := p.scanKey(j+1, w+".")
				if err != nil {
					return err
				}
				t.kind, t.end, t.fld = tAttr, end, field{scope: sc, key: key}
				p.tok, p.pos = t, t.end
				return nil
			}
			if w == "scope" || w == "trace" {
				return p.errf(i, "attribute scope %s. does not exist: use span., resource., event., link., instrumentation. or .", w)
			}
		}
		if j < len(s) && s[j] == ':' {
			k := j + 1
			for k < len(s) && isIdentByte(s[k]) {
				k++
			}
			j = k
		}
		t.kind, t.end = tIdent, j
	default:
		r, _ := utf8.DecodeRuneInString(s[i:])
		return p.errf(i, "unexpected character %q", r)
	}
	p.tok, p.pos = t, t.end
	return nil
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isIdentByte(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// isKeyRune reports whether r may appear in an unquoted attribute key.
func isKeyRune(r rune) bool {
	switch r {
	case '_', '-', '.', '/', '@':
		return true
	}
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// scanKey reads an attribute key starting at i (after the scope prefix).
func (p *parser) scanKey(i int, prefix string) (string, int, error) {
	s := p.src
	if i < len(s) && s[i] == '"' {
		key, end, err := p.scanString(i)
		if err != nil {
			return "", 0, err
		}
		if key == "" {
			return "", 0, p.errf(i, "empty attribute name after %s", prefix)
		}
		return key, end, nil
	}
	j := i
	for j < len(s) {
		r, n := utf8.DecodeRuneInString(s[j:])
		if !isKeyRune(r) {
			break
		}
		j += n
	}
	if j == i {
		got := "end of query"
		if i < len(s) {
			r, _ := utf8.DecodeRuneInString(s[i:])
			got = strconv.QuoteRune(r)
		}
		return "", 0, p.errf(i, "expected attribute name after %s, got %s", prefix, got)
	}
	return s[i:j], j, nil
}

// scanString reads a double-quoted string starting at the quote at i and
// returns its value and the offset after the closing quote.
func (p *parser) scanString(i int) (string, int, error) {
	s := p.src
	var b []byte
	start := i + 1
	for j := start; j < len(s); {
		c := s[j]
		if c == '"' {
			if b == nil {
				return s[start:j], j + 1, nil
			}
			return string(b), j + 1, nil
		}
		if c != '\\' {
			if b != nil {
				b = append(b, c)
			}
			j++
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)-start), s[start:j]...)
		}
		if j+1 >= len(s) {
			break
		}
		e := s[j+1]
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'a':
			b = append(b, '\a')
		case 'v':
			b = append(b, '\v')
		case 'x', 'u', 'U':
			n := 2
			if e == 'u' {
				n = 4
			} else if e == 'U' {
				n = 8
			}
			if j+2+n > len(s) {
				return "", 0, p.errf(j, "invalid escape \\%c in string: want %d hex digits", e, n)
			}
			v, err := strconv.ParseUint(s[j+2:j+2+n], 16, 32)
			if err != nil || strings.ContainsAny(s[j+2:j+2+n], "+-_") {
				return "", 0, p.errf(j, "invalid escape \\%c in string: want %d hex digits", e, n)
			}
			if e == 'x' {
				b = append(b, byte(v))
			} else {
				if v > unicode.MaxRune || v >= 0xD800 && v < 0xE000 {
					return "", 0, p.errf(j, "invalid escape %s in string: not a Unicode code point", s[j:j+2+n])
				}
				b = utf8.AppendRune(b, rune(v))
			}
			j += 2 + n
			continue
		default:
			r, _ := utf8.DecodeRuneInString(s[j+1:])
			return "", 0, p.errf(j, "invalid escape \\%c in string", r)
		}
		j += 2
	}
	return "", 0, p.errf(i, "unterminated string: missing closing \"")
}

// scanNumber reads an integer, float or duration starting at i.
func (p *parser) scanNumber(i int) (int, literal, error) {
	s := p.src
	j := i
	if s[j] == '-' {
		j++
	}
	digits := func() {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	digits()
	isFloat := false
	if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
		isFloat = true
		j++
		digits()
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			isFloat = true
			j = k
			digits()
		}
	}
	// A unit makes it a duration: 100ms, 1.5s, 1h30m, 10µs.
	if j < len(s) && (isIdentStart(s[j]) || strings.HasPrefix(s[j:], "µ")) {
		for j < len(s) && (isIdentByte(s[j]) || s[j] == '.' || strings.HasPrefix(s[j:], "µ")) {
			if s[j] == 0xC2 {
				j += len("µ")
			} else {
				j++
			}
		}
		text := s[i:j]
		d, err := time.ParseDuration(text)
		if err != nil {
			return 0, literal{}, p.errf(i, "invalid duration %q", text)
		}
		return j, literal{kind: litDuration, i: int64(d)}, nil
	}
	text := s[i:j]
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(f, 0) {
			return 0, literal{}, p.errf(i, "float %s out of range", text)
		}
		return j, literal{kind: litFloat, f: f}, nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, literal{}, p.errf(i, "integer %s out of range", text)
	}
	return j, literal{kind: litInt, i: v}, nil
}
