package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The npm package ships its price data inside its JavaScript bundle
// (dist/index.js) as one array literal, `const E = [ {id: "anthropic", ...},
// ... ]`, written by a minifier: unquoted keys, `!0` for true, template
// literals for long descriptions. parseJS reads that subset of JavaScript
// (objects, arrays, strings, numbers, true/false/null, !0/!1, void 0) and
// refuses anything else, so a package that changed the shape fails loudly
// rather than being half read.

// jsNumber is a number literal as written, kept as text so prices are not
// rounded through float64 before they are written out.
type jsNumber string

// MarshalJSON writes the literal as a JSON number (for -dump-json).
func (n jsNumber) MarshalJSON() ([]byte, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return nil, err
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// jsUndefined is `void 0`: the key is treated as absent.
type jsUndefined struct{}

// dataStart finds the provider array: the first top-level `const X = [`
// followed by an object with an `id`.
var dataStart = regexp.MustCompile(`(?m)^const [A-Za-z_$][A-Za-z0-9_$]* = \[\s*\{\s*id:`)

// extractProviders parses the provider array out of the bundle.
func extractProviders(bundle string) ([]any, error) {
	loc := dataStart.FindStringIndex(bundle)
	if loc == nil {
		return nil, errors.New("no `const X = [{ id: ...` provider array found (the bundle's layout changed)")
	}
	start := strings.IndexByte(bundle[loc[0]:], '[') + loc[0]
	p := &jsParser{src: bundle, pos: start}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, errors.New("provider data is not an array")
	}
	return arr, nil
}

type jsParser struct {
	src string
	pos int
}

func (p *jsParser) errf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	return fmt.Errorf("index.js line %d: %s", line, fmt.Sprintf(format, args...))
}

func (p *jsParser) skipSpace() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				p.pos = len(p.src)
				return
			}
			p.pos += end + 4
		case strings.HasPrefix(p.src[p.pos:], "//"):
			end := strings.IndexByte(p.src[p.pos:], '\n')
			if end < 0 {
				p.pos = len(p.src)
				return
			}
			p.pos += end
		default:
			return
		}
	}
}

func (p *jsParser) value() (any, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return nil, p.errf("unexpected end of file")
	}
	rest := p.src[p.pos:]
	switch c := rest[0]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"' || c == '\'':
		return p.str(c)
	case c == '`':
		return p.template()
	case c == '-' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	case strings.HasPrefix(rest, "!0"):
		p.pos += 2
		return true, nil
	case strings.HasPrefix(rest, "!1"):
		p.pos += 2
		return false, nil
	case strings.HasPrefix(rest, "void 0"):
		p.pos += len("void 0")
		return jsUndefined{}, nil
	}
	id := p.ident()
	switch id {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "null":
		return nil, nil
	}
	return nil, p.errf("unsupported JavaScript in the data: %.40q", rest)
}

func (p *jsParser) ident() string {
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (p.pos > start && c >= '0' && c <= '9') {
			p.pos++
			continue
		}
		break
	}
	return p.src[start:p.pos]
}

func (p *jsParser) object() (map[string]any, error) {
	p.pos++ // {
	obj := map[string]any{}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.errf("unterminated object")
		}
		if p.src[p.pos] == '}' {
			p.pos++
			return obj, nil
		}
		var key string
		switch c := p.src[p.pos]; c {
		case '"', '\'':
			k, err := p.str(c)
			if err != nil {
				return nil, err
			}
			key = k
		default:
			key = p.ident()
			if key == "" {
				return nil, p.errf("expected an object key, found %.20q", p.src[p.pos:])
			}
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errf("expected ':' after key %q", key)
		}
		p.pos++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[key]; dup {
			return nil, p.errf("duplicate key %q", key)
		}
		if _, undef := v.(jsUndefined); !undef {
			obj[key] = v
		}
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			continue
		}
		return nil, p.errf("expected ',' or '}' in object")
	}
}

func (p *jsParser) array() ([]any, error) {
	p.pos++ // [
	arr := []any{}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.errf("unterminated array")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return arr, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			continue
		}
		return nil, p.errf("expected ',' or ']' in array")
	}
}

func (p *jsParser) number() (jsNumber, error) {
	start := p.pos
	for p.pos < len(p.src) && strings.IndexByte("0123456789.eE+-", p.src[p.pos]) >= 0 {
		p.pos++
	}
	lit := p.src[start:p.pos]
	if _, err := strconv.ParseFloat(lit, 64); err != nil {
		return "", p.errf("bad number %q", lit)
	}
	return jsNumber(lit), nil
}

// str reads a '...' or "..." literal with JavaScript escapes.
func (p *jsParser) str(quote byte) (string, error) {
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", p.errf("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == quote:
			p.pos++
			return b.String(), nil
		case c == '\n':
			return "", p.errf("newline in string")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			r, n := utf8.DecodeRuneInString(p.src[p.pos:])
			b.WriteRune(r)
			p.pos += n
		}
	}
}

// template reads a `...` literal without substitutions.
func (p *jsParser) template() (string, error) {
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", p.errf("unterminated template literal")
		}
		c := p.src[p.pos]
		switch {
		case c == '`':
			p.pos++
			return b.String(), nil
		case c == '$' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '{':
			return "", p.errf("template literal with a substitution")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			r, n := utf8.DecodeRuneInString(p.src[p.pos:])
			b.WriteRune(r)
			p.pos += n
		}
	}
}

func (p *jsParser) escape(b *strings.Builder) error {
	p.pos++ // backslash
	if p.pos >= len(p.src) {
		return p.errf("unterminated escape")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'v':
		b.WriteByte('\v')
	case '0':
		b.WriteByte(0)
	case '\n':
		// line continuation
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
			if p.pos < len(p.src) && p.src[p.pos] == '{' {
				end := strings.IndexByte(p.src[p.pos:], '}')
				if end < 0 {
					return p.errf("bad \\u{} escape")
				}
				v, err := strconv.ParseUint(p.src[p.pos+1:p.pos+end], 16, 32)
				if err != nil {
					return p.errf("bad \\u{} escape")
				}
				b.WriteRune(rune(v))
				p.pos += end + 1
				return nil
			}
		}
		if p.pos+n > len(p.src) {
			return p.errf("bad \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return p.errf("bad \\%c escape", c)
		}
		p.pos += n
		r := rune(v)
		// A UTF-16 surrogate pair written as two \u escapes.
		if r >= 0xD800 && r < 0xDC00 && strings.HasPrefix(p.src[p.pos:], `\u`) && p.pos+6 <= len(p.src) {
			if lo, err := strconv.ParseUint(p.src[p.pos+2:p.pos+6], 16, 32); err == nil && lo >= 0xDC00 && lo < 0xE000 {
				r = 0x10000 + (r-0xD800)<<10 + (rune(lo) - 0xDC00)
				p.pos += 6
			}
		}
		b.WriteRune(r)
	default:
		// \\ \" \' \` \/ and any other identity escape.
		p.pos--
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		b.WriteRune(r)
		p.pos += n
	}
	return nil
}
