package otlp

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxJSONDepth bounds object/array nesting, as protojson does, so hostile
// input cannot exhaust the stack.
const maxJSONDepth = 10000

// jreader is a small pull parser over a private copy of a JSON document.
// Strings without escapes alias the copy. It validates everything it reads,
// including values it skips, so an accepted document is valid JSON (except
// that invalid UTF-8 inside strings is let through for model.Normalize to repair).
type jreader struct {
	b     []byte
	i     int
	depth int
}

func newJReader(b []byte) *jreader { return &jreader{b: append([]byte(nil), b...)} }

func (r *jreader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *jreader) fail(reason string) error { return newError(r.i, reason) }

// peek returns the next non-space byte, or 0 at the end of input.
func (r *jreader) peek() byte {
	r.ws()
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// what names the next value's JSON type for error messages.
func (r *jreader) what() string {
	switch c := r.peek(); c {
	case 0:
		return "end of input"
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return "number"
		}
		return "invalid character " + strconv.QuoteRune(rune(c))
	}
}

func (r *jreader) typeError(want string) error {
	return r.fail("expected " + want + ", got " + r.what())
}

// null consumes a null literal if one is next.
func (r *jreader) null() (bool, error) {
	if r.peek() != 'n' {
		return false, nil
	}
	return true, r.literal("null")
}

func (r *jreader) literal(lit string) error {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		return r.fail("invalid literal, expected " + lit)
	}
	r.i += len(lit)
	return nil
}

func (r *jreader) enter(open byte, want string) error {
	if r.peek() != open {
		return r.typeError(want)
	}
	if r.depth >= maxJSONDepth {
		return r.fail("JSON nested more than " + strconv.Itoa(maxJSONDepth) + " deep")
	}
	r.depth++
	r.i++
	return nil
}

// object starts reading an object; then call key until it reports false.
func (r *jreader) object() error { return r.enter('{', "object") }

// key reads the next member name and its colon; false at the closing brace.
func (r *jreader) key(first *bool) (string, bool, error) {
	c := r.peek()
	if c == '}' {
		r.i++
		r.depth--
		return "", false, nil
	}
	if !*first {
		if c != ',' {
			return "", false, r.fail("expected ',' or '}' in object")
		}
		r.i++
		c = r.peek()
	}
	*first = false
	if c != '"' {
		return "", false, r.fail("expected string for object key")
	}
	k, err := r.str()
	if err != nil {
		return "", false, err
	}
	if r.peek() != ':' {
		return "", false, r.fail("expected ':' after object key")
	}
	r.i++
	return k, true, nil
}

// array starts reading an array; then call elem until it reports false.
func (r *jreader) array() error { return r.enter('[', "array") }

func (r *jreader) elem(first *bool) (bool, error) {
	c := r.peek()
	if c == ']' {
		r.i++
		r.depth--
		return false, nil
	}
	if !*first {
		if c != ',' {
			return false, r.fail("expected ',' or ']' in array")
		}
		r.i++
		if r.peek() == ']' {
			return false, r.fail("trailing comma in array")
		}
	}
	*first = false
	return true, nil
}

// str reads a string value.
func (r *jreader) str() (string, error) {
	if r.peek() != '"' {
		return "", r.typeError("string")
	}
	start := r.i + 1
	for i := start; i < len(r.b); i++ {
		c := r.b[i]
		if c == '"' {
			r.i = i + 1
			if i == start {
				return "", nil
			}
			return unsafe.String(&r.b[start], i-start), nil
		}
		if c == '\\' {
			return r.strSlow(start, i)
		}
		if c < 0x20 {
			r.i = i
			return "", r.fail("control character in string")
		}
	}
	r.i = len(r.b)
	return "", r.fail("unterminated string")
}

func (r *jreader) strSlow(start, i int) (string, error) {
	out := append([]byte(nil), r.b[start:i]...)
	for i < len(r.b) {
		c := r.b[i]
		switch {
		case c == '"':
			r.i = i + 1
			return string(out), nil
		case c < 0x20:
			r.i = i
			return "", r.fail("control character in string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(r.b) {
			break
		}
		switch e := r.b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			c1, ok := hex4(r.b[i+2:])
			if !ok {
				r.i = i
				return "", r.fail("invalid \\u escape in string")
			}
			i += 6
			ru := rune(c1)
			if utf16.IsSurrogate(ru) {
				ru = utf8.RuneError
				if i+1 < len(r.b) && r.b[i] == '\\' && r.b[i+1] == 'u' {
					if c2, ok := hex4(r.b[i+2:]); ok {
						if p := utf16.DecodeRune(rune(c1), rune(c2)); p != utf8.RuneError {
							ru = p
							i += 6
						}
					}
				}
			}
			out = utf8.AppendRune(out, ru)
			continue
		default:
			r.i = i
			return "", r.fail("invalid escape in string")
		}
		i += 2
	}
	r.i = len(r.b)
	return "", r.fail("unterminated string")
}

func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var v uint16
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// number reads a number value and returns its text; isInt is false when it
// has a fraction or an exponent.
func (r *jreader) number() (text string, isInt bool, err error) {
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		return "", false, r.typeError("number")
	}
	start := r.i
	i := r.i
	if r.b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(r.b) && r.b[i] >= '0' && r.b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(r.b) && r.b[i] == '0' {
		i++
	} else if digits() == 0 {
		r.i = i
		return "", false, r.fail("invalid number")
	}
	isInt = true
	if i < len(r.b) && r.b[i] == '.' {
		i++
		isInt = false
		if digits() == 0 {
			r.i = i
			return "", false, r.fail("invalid number")
		}
	}
	if i < len(r.b) && (r.b[i] == 'e' || r.b[i] == 'E') {
		i++
		isInt = false
		if i < len(r.b) && (r.b[i] == '+' || r.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			r.i = i
			return "", false, r.fail("invalid number")
		}
	}
	r.i = i
	return unsafe.String(&r.b[start], i-start), isInt, nil
}

func (r *jreader) boolean() (bool, error) {
	switch r.peek() {
	case 't':
		return true, r.literal("true")
	case 'f':
		return false, r.literal("false")
	}
	return false, r.typeError("boolean")
}

// skip reads and discards one value of any type.
func (r *jreader) skip() error {
	switch r.peek() {
	case '{':
		if err := r.object(); err != nil {
			return err
		}
		for first := true; ; {
			_, ok, err := r.key(&first)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := r.skip(); err != nil {
				return err
			}
		}
	case '[':
		if err := r.array(); err != nil {
			return err
		}
		for first := true; ; {
			ok, err := r.elem(&first)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := r.skip(); err != nil {
				return err
			}
		}
	case '"':
		_, err := r.str()
		return err
	case 't', 'f':
		_, err := r.boolean()
		return err
	case 'n':
		return r.literal("null")
	}
	_, _, err := r.number()
	return err
}

// end checks that only whitespace follows the top-level value.
func (r *jreader) end() error {
	if r.peek() != 0 {
		return r.fail("unexpected data after the JSON value")
	}
	return nil
}
