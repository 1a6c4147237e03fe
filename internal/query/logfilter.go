package query

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// LogFilter is a parsed log filter (the `q` of GET /api/v1/logs): a
// TraceQL-like condition over one log record. Grammar (docs/logs.md):
//
//	filter = [ "{" ] [ or ] [ "}" ]
//	or     = and { "||" and }
//	and    = unary { "&&" unary }
//	unary  = "!" unary | "(" or ")" | field [ op value ]
//	op     = "=" | "!=" | "<" | "<=" | ">" | ">=" | "=~" | "!~"
//	value  = "string" | `raw string` | number | true | false | nil | severity name
//
// Fields: severity (a number 1-24 or a name: warn, error, info2), severity_text,
// body, body.KEY (a key of a structured body), service, event_name,
// trace_id, span_id, scope.name, scope.version, resource.KEY (a resource
// attribute), attr.KEY (a record attribute) and .KEY (a record attribute,
// else a resource attribute). A field alone means it is present. A
// condition on an absent value is false (so `!=` too), except `= nil`.
// Regular expressions are Go RE2, fully anchored, as in TraceQL.
type LogFilter struct {
	root logNode
	src  string
}

// LogHints are necessary conditions of a LogFilter that a store can use to
// skip data: every record the filter matches satisfies all of them.
type LogHints struct {
	Service     string               // the record's service is this ("" = any)
	MinSeverity model.SeverityNumber // the record's severity is at least this
	TraceID     model.TraceID        // the record belongs to this trace (zero = any)
}

// String is the filter as it was written.
func (f *LogFilter) String() string { return f.src }

// Match reports whether r satisfies the filter. A nil filter matches all.
func (f *LogFilter) Match(r *model.LogRecord) bool {
	return f == nil || f.root == nil || f.root.match(r)
}

// Hints returns what every matching record must satisfy, from the
// conditions joined by && at the top of the filter.
func (f *LogFilter) Hints() LogHints {
	var h LogHints
	if f == nil {
		return h
	}
	var walk func(n logNode)
	walk = func(n logNode) {
		switch n := n.(type) {
		case *logAnd:
			walk(n.a)
			walk(n.b)
		case *logCond:
			if n.lit.kind == llNil {
				return
			}
			switch n.f.kind {
			case lfService:
				if n.op == lopEq && n.lit.kind == llString {
					h.Service = n.lit.s
				}
			case lfSeverity:
				v := model.SeverityNumber(n.lit.num)
				switch n.op {
				case lopEq, lopGe:
				case lopGt:
					v++
				default:
					return
				}
				h.MinSeverity = max(h.MinSeverity, v)
			case lfTraceID:
				if n.op == lopEq {
					if id, err := model.ParseTraceID(n.lit.s); err == nil {
						h.TraceID = id
					}
				}
			}
		}
	}
	walk(f.root)
	return h
}

type logFieldKind uint8

const (
	lfSeverity logFieldKind = iota + 1
	lfSeverityText
	lfBody
	lfBodyKey
	lfService
	lfEventName
	lfTraceID
	lfSpanID
	lfScopeName
	lfScopeVersion
	lfResource
	lfAttr
	lfAny // record attribute, else resource attribute
)

type logField struct {
	kind logFieldKind
	key  string
	name string // as written
}

type logLitKind uint8

const (
	llNil logLitKind = iota
	llString
	llNumber
	llBool
)

// logOp is a comparison of a log filter; lopPresent is a field alone.
type logOp uint8

const (
	lopPresent logOp = iota
	lopEq
	lopNe
	lopLt
	lopLe
	lopGt
	lopGe
	lopRe
	lopNre
)

type logLit struct {
	kind  logLitKind
	s     string
	num   float64
	isInt bool
	b     bool
	re    *regexp.Regexp
}

type logNode interface {
	match(r *model.LogRecord) bool
}

type logAnd struct{ a, b logNode }
type logOr struct{ a, b logNode }
type logNot struct{ a logNode }
type logCond struct {
	f   logField
	op  logOp
	lit logLit
}

func (n *logAnd) match(r *model.LogRecord) bool { return n.a.match(r) && n.b.match(r) }
func (n *logOr) match(r *model.LogRecord) bool  { return n.a.match(r) || n.b.match(r) }
func (n *logNot) match(r *model.LogRecord) bool { return !n.a.match(r) }

// value reads the field from r; ok is false when the record has none.
func (f *logField) value(r *model.LogRecord) (model.Value, bool) {
	str := func(s string) (model.Value, bool) { return model.StringValue(s), s != "" }
	switch f.kind {
	case lfSeverity:
		return model.IntValue(int64(r.SeverityNumber)), r.SeverityNumber != 0
	case lfSeverityText:
		return str(r.SeverityText)
	case lfBody:
		return r.Body, r.Body.Type != model.ValueEmpty
	case lfBodyKey:
		return kvLookup(r.Body, f.key)
	case lfService:
		return str(r.Service)
	case lfEventName:
		return str(r.EventName)
	case lfTraceID:
		if r.TraceID.IsZero() {
			return model.Value{}, false
		}
		return model.StringValue(r.TraceID.String()), true
	case lfSpanID:
		if r.SpanID.IsZero() {
			return model.Value{}, false
		}
		return model.StringValue(r.SpanID.String()), true
	case lfScopeName, lfScopeVersion:
		if r.Scope == nil {
			return model.Value{}, false
		}
		if f.kind == lfScopeName {
			return str(r.Scope.Name)
		}
		return str(r.Scope.Version)
	case lfResource:
		if r.Resource == nil {
			return model.Value{}, false
		}
		return attrLookup(r.Resource.Attributes, f.key)
	case lfAttr:
		return attrLookup(r.Attributes, f.key)
	case lfAny:
		if v, ok := attrLookup(r.Attributes, f.key); ok {
			return v, true
		}
		if r.Resource != nil {
			return attrLookup(r.Resource.Attributes, f.key)
		}
	}
	return model.Value{}, false
}

func attrLookup(kvs []model.KeyValue, key string) (model.Value, bool) {
	for i := range kvs {
		if kvs[i].Key == key {
			return kvs[i].Value, true
		}
	}
	return model.Value{}, false
}

// kvLookup finds key in a structured body: the whole key first, then the
// path of its dot-separated parts through nested maps.
func kvLookup(v model.Value, key string) (model.Value, bool) {
	if v.Type != model.ValueKvList || v.List == nil {
		return model.Value{}, false
	}
	if x, ok := attrLookup(v.List.KvList, key); ok {
		return x, true
	}
	for i := 1; i < len(key); i++ {
		if key[i] != '.' {
			continue
		}
		if x, ok := attrLookup(v.List.KvList, key[:i]); ok {
			if y, ok := kvLookup(x, key[i+1:]); ok {
				return y, true
			}
		}
	}
	return model.Value{}, false
}

func (c *logCond) match(r *model.LogRecord) bool {
	v, ok := c.f.value(r)
	if c.op == lopPresent {
		return ok
	}
	if c.lit.kind == llNil {
		return ok == (c.op == lopNe)
	}
	if !ok {
		return false
	}
	switch c.lit.kind {
	case llString:
		if v.Type != model.ValueString && v.Type != model.ValueBytes {
			return false
		}
		switch c.op {
		case lopRe:
			return c.lit.re.MatchString(v.Str)
		case lopNre:
			return !c.lit.re.MatchString(v.Str)
		}
		return compare(c.op, v.Str, c.lit.s)
	case llNumber:
		var x float64
		switch v.Type {
		case model.ValueInt:
			x = float64(v.Int)
		case model.ValueDouble:
			x = v.Double
		default:
			return false
		}
		return compare(c.op, x, c.lit.num)
	case llBool:
		if v.Type != model.ValueBool {
			return false
		}
		b := v.Int != 0
		switch c.op {
		case lopEq:
			return b == c.lit.b
		case lopNe:
			return b != c.lit.b
		}
	}
	return false
}

// compare applies an ordering operator (=, !=, <, <=, >, >=).
func compare[T cmp.Ordered](o logOp, a, b T) bool {
	switch o {
	case lopEq:
		return a == b
	case lopNe:
		return a != b
	case lopLt:
		return a < b
	case lopLe:
		return a <= b
	case lopGt:
		return a > b
	case lopGe:
		return a >= b
	}
	return false
}

// maxLogFilterLen bounds a filter's text; maxLogFilterDepth its nesting.
const (
	maxLogFilterLen   = 16 << 10
	maxLogFilterDepth = 64
)

// ParseLogFilter parses a log filter. An empty filter (or "{}") matches
// every record.
func ParseLogFilter(src string) (*LogFilter, error) {
	if len(src) > maxLogFilterLen {
		return nil, fmt.Errorf("log filter: %d bytes, at most %d", len(src), maxLogFilterLen)
	}
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("log filter: not valid UTF-8")
	}
	p := &logParser{src: src}
	if err := p.next(); err != nil {
		return nil, err
	}
	braced := p.tok.kind == ltLBrace
	if braced {
		if err := p.next(); err != nil {
			return nil, err
		}
	}
	var root logNode
	if !(p.tok.kind == ltEOF || braced && p.tok.kind == ltRBrace) {
		n, err := p.parseOr(0)
		if err != nil {
			return nil, err
		}
		root = n
	}
	if braced {
		if p.tok.kind != ltRBrace {
			return nil, p.errf("expected } or an operator, found %s", p.desc())
		}
		if err := p.next(); err != nil {
			return nil, err
		}
	}
	if p.tok.kind != ltEOF {
		return nil, p.errf("unexpected %s after the filter", p.desc())
	}
	return &LogFilter{root: root, src: src}, nil
}

type logTokKind uint8

const (
	ltEOF logTokKind = iota
	ltLBrace
	ltRBrace
	ltLParen
	ltRParen
	ltAnd
	ltOr
	ltNot
	ltOp
	ltString
	ltNumber
	ltIdent
)

type logToken struct {
	kind logTokKind
	pos  int
	text string // as written
	s    string // a string's value
	op   logOp
}

type logParser struct {
	src string
	i   int
	tok logToken
}

func (p *logParser) errf(format string, args ...any) error {
	return fmt.Errorf("log filter: position %d: %s", p.tok.pos+1, fmt.Sprintf(format, args...))
}

func (p *logParser) desc() string {
	if p.tok.kind == ltEOF {
		return "the end"
	}
	return strconv.Quote(p.tok.text)
}

func (p *logParser) parseOr(depth int) (logNode, error) {
	if depth > maxLogFilterDepth {
		return nil, p.errf("nested more than %d levels", maxLogFilterDepth)
	}
	return p.parseChain(ltOr, depth, p.parseAnd, func(a, b logNode) logNode { return &logOr{a, b} })
}

func (p *logParser) parseAnd(depth int) (logNode, error) {
	return p.parseChain(ltAnd, depth, p.parseUnary, func(a, b logNode) logNode { return &logAnd{a, b} })
}

// parseChain parses operands joined by the operator token sep, left to right.
func (p *logParser) parseChain(sep logTokKind, depth int, operand func(int) (logNode, error), join func(a, b logNode) logNode) (logNode, error) {
	a, err := operand(depth)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == sep {
		if err := p.next(); err != nil {
			return nil, err
		}
		b, err := operand(depth)
		if err != nil {
			return nil, err
		}
		a = join(a, b)
	}
	return a, nil
}

func (p *logParser) parseUnary(depth int) (logNode, error) {
	if depth > maxLogFilterDepth {
		return nil, p.errf("nested more than %d levels", maxLogFilterDepth)
	}
	switch p.tok.kind {
	case ltNot:
		if err := p.next(); err != nil {
			return nil, err
		}
		a, err := p.parseUnary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &logNot{a}, nil
	case ltLParen:
		if err := p.next(); err != nil {
			return nil, err
		}
		a, err := p.parseOr(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != ltRParen {
			return nil, p.errf("expected ) or an operator, found %s", p.desc())
		}
		return a, p.next()
	case ltIdent:
		return p.parseCond()
	}
	return nil, p.errf("expected a field (severity, body, service, resource.KEY, attr.KEY, .KEY, ...), found %s", p.desc())
}

func (p *logParser) parseField() (logField, error) {
	name := p.tok.text
	f := logField{name: name}
	prefixed := func(prefix string, kind logFieldKind) bool {
		if !strings.HasPrefix(name, prefix) {
			return false
		}
		f.kind, f.key = kind, name[len(prefix):]
		return true
	}
	switch name {
	case "severity":
		f.kind = lfSeverity
	case "severity_text":
		f.kind = lfSeverityText
	case "body":
		f.kind = lfBody
	case "service", "resource.service.name":
		f.kind = lfService
	case "event_name":
		f.kind = lfEventName
	case "trace_id":
		f.kind = lfTraceID
	case "span_id":
		f.kind = lfSpanID
	case "scope.name":
		f.kind = lfScopeName
	case "scope.version":
		f.kind = lfScopeVersion
	default:
		if !prefixed("body.", lfBodyKey) && !prefixed("resource.", lfResource) && !prefixed("attr.", lfAttr) && !prefixed(".", lfAny) {
			return f, p.errf("unknown field %q: use severity, severity_text, body, body.KEY, service, event_name, trace_id, span_id, scope.name, scope.version, resource.KEY, attr.KEY or .KEY", name)
		}
		if f.key == "" {
			return f, p.errf("field %q names no key", name)
		}
	}
	return f, nil
}

func (p *logParser) parseCond() (logNode, error) {
	f, err := p.parseField()
	if err != nil {
		return nil, err
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind != ltOp {
		return &logCond{f: f}, nil // presence
	}
	c := &logCond{f: f, op: p.tok.op}
	opText := p.tok.text
	if err := p.next(); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case ltString:
		c.lit = logLit{kind: llString, s: p.tok.s}
	case ltNumber:
		n, err := strconv.ParseFloat(p.tok.text, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, p.errf("bad number %s", p.desc())
		}
		c.lit = logLit{kind: llNumber, num: n, isInt: !strings.ContainsAny(p.tok.text, ".eE")}
	case ltIdent:
		switch t := p.tok.text; {
		case t == "true" || t == "false":
			c.lit = logLit{kind: llBool, b: t == "true"}
		case t == "nil":
			c.lit = logLit{kind: llNil}
		case f.kind == lfSeverity:
			c.lit = logLit{kind: llString, s: t}
		default:
			return nil, p.errf("expected a value after %s, found %s (quote strings: \"...\")", opText, p.desc())
		}
	default:
		return nil, p.errf("expected a value after %s, found %s", opText, p.desc())
	}
	if err := p.check(c, opText); err != nil {
		return nil, err
	}
	return c, p.next()
}

// check validates a condition's operator against its value and field and
// prepares it (severity names to numbers, regular expressions compiled).
func (p *logParser) check(c *logCond, opText string) error {
	if c.lit.kind == llNil {
		if c.op != lopEq && c.op != lopNe {
			return p.errf("nil compares only with = or !=")
		}
		return nil
	}
	if c.f.kind == lfSeverity {
		if c.op == lopRe || c.op == lopNre || c.lit.kind == llBool {
			return p.errf("severity compares with a number or a name (warn, error, info2) by =, !=, <, <=, >, >=")
		}
		if c.lit.kind == llString {
			n, ok := otlp.ParseSeverity(c.lit.s)
			if !ok || n < 1 || n > 24 {
				return p.errf("severity %q: want a number from 1 to 24 or a name (trace, debug, info, warn, error, fatal, with an optional step 2-4: info2)", c.lit.s)
			}
			c.lit = logLit{kind: llNumber, num: float64(n), isInt: true}
		}
		if c.lit.kind != llNumber || c.op == lopRe || c.op == lopNre {
			return p.errf("severity compares with a number or a name (warn, error, info2) by =, !=, <, <=, >, >=")
		}
		return nil
	}
	switch c.op {
	case lopRe, lopNre:
		if c.lit.kind != llString {
			return p.errf("%s takes a regular expression in quotes", opText)
		}
		re, err := regexp.Compile("^(?s:" + c.lit.s + ")$")
		if err != nil {
			return p.errf("regular expression %q: %v", c.lit.s, err)
		}
		c.lit.re = re
	case lopLt, lopLe, lopGt, lopGe:
		if c.lit.kind == llBool {
			return p.errf("%s does not apply to booleans", opText)
		}
	}
	if c.f.kind == lfTraceID || c.f.kind == lfSpanID {
		c.lit.s = strings.ToLower(c.lit.s) // ids are written in lower-case hex
	}
	if c.lit.kind != llString {
		switch c.f.kind {
		case lfSeverityText, lfService, lfEventName, lfTraceID, lfSpanID, lfScopeName, lfScopeVersion:
			return p.errf("%s is a string: compare it with a quoted value", c.f.name)
		}
	}
	return nil
}

func (p *logParser) next() error {
	src := p.src
	for p.i < len(src) && (src[p.i] == ' ' || src[p.i] == '\t' || src[p.i] == '\n' || src[p.i] == '\r') {
		p.i++
	}
	start := p.i
	p.tok = logToken{pos: start}
	if p.i >= len(src) {
		p.tok.kind = ltEOF
		return nil
	}
	two := ""
	if p.i+1 < len(src) {
		two = src[p.i : p.i+2]
	}
	set := func(k logTokKind, n int, o logOp) {
		p.tok.kind, p.tok.text, p.tok.op = k, src[start:start+n], o
		p.i += n
	}
	switch two {
	case "&&":
		set(ltAnd, 2, lopPresent)
		return nil
	case "||":
		set(ltOr, 2, lopPresent)
		return nil
	case "!=":
		set(ltOp, 2, lopNe)
		return nil
	case "<=":
		set(ltOp, 2, lopLe)
		return nil
	case ">=":
		set(ltOp, 2, lopGe)
		return nil
	case "=~":
		set(ltOp, 2, lopRe)
		return nil
	case "!~":
		set(ltOp, 2, lopNre)
		return nil
	}
	c := src[p.i]
	switch c {
	case '{':
		set(ltLBrace, 1, lopPresent)
	case '}':
		set(ltRBrace, 1, lopPresent)
	case '(':
		set(ltLParen, 1, lopPresent)
	case ')':
		set(ltRParen, 1, lopPresent)
	case '!':
		set(ltNot, 1, lopPresent)
	case '=':
		set(ltOp, 1, lopEq)
	case '<':
		set(ltOp, 1, lopLt)
	case '>':
		set(ltOp, 1, lopGt)
	case '"', '`':
		end := p.i + 1
		for end < len(src) && src[end] != c {
			if c == '"' && src[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(src) {
			return p.errf("unterminated string")
		}
		text := src[p.i : end+1]
		s := text[1 : len(text)-1]
		if c == '"' {
			var err error
			if s, err = strconv.Unquote(text); err != nil {
				return p.errf("bad string %s: %v", text, err)
			}
		}
		p.tok.kind, p.tok.text, p.tok.s = ltString, text, s
		p.i = end + 1
	default:
		switch {
		case c == '-' || c >= '0' && c <= '9':
			end := p.i + 1
			for end < len(src) && (src[end] >= '0' && src[end] <= '9' || src[end] == '.' || src[end] == 'e' || src[end] == 'E' ||
				(src[end] == '-' || src[end] == '+') && (src[end-1] == 'e' || src[end-1] == 'E')) {
				end++
			}
			p.tok.kind, p.tok.text = ltNumber, src[p.i:end]
			p.i = end
		case c == '.' || isIdentStart(c):
			end := p.i + 1
			for end < len(src) && (isIdentByte(src[end]) || src[end] == '.' || src[end] == '-' || src[end] == '/' || src[end] == ':' || src[end] >= utf8.RuneSelf) {
				end++
			}
			p.tok.kind, p.tok.text = ltIdent, src[p.i:end]
			p.i = end
		default:
			r, _ := utf8.DecodeRuneInString(src[p.i:])
			p.tok.text = string(r)
			return p.errf("unexpected character %q", r)
		}
	}
	return nil
}
