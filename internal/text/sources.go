package text

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// DefaultMinLen is the default length, in bytes, from which a string
// attribute that is not a known text source is searchable.
const DefaultMinLen = 32

// Source labels passed to the emit function of Sources.
const (
	SourceInput     = "input"     // LLM prompt: input messages, system instructions, input.value, tool call arguments
	SourceOutput    = "output"    // LLM completion: output messages, output.value, tool call results
	SourceException = "exception" // exception.message, exception.type, exception.stacktrace
	SourceStatus    = "status"    // the span's status message
	SourceEvent     = "event"     // any other string attribute of an event
	SourceAttribute = "attribute" // any other span string attribute of at least minLen bytes
)

// sourceFunc receives one text: see walk.
type sourceFunc = func(label, text string, escaped bool) bool

// maxDepth bounds the nesting of JSON documents and structured values that
// are searched; deeper documents are searched as plain text.
const maxDepth = 64

// Sources calls emit for each searchable text of s with its source label
// (the Source* constants), in attribute order: span attributes, then event
// attributes, then the status message. See the package documentation for
// which attributes are searched. A string attribute holding a JSON object or
// array is searched by its string values (not its keys, nor the values of
// the structural keys role, type, finish_reason, id and tool_call_id), each
// emitted as a text of its own with JSON escapes decoded. minLen <= 0 means
// DefaultMinLen. Empty texts are not emitted.
func Sources(s *model.Span, minLen int, emit func(source, text string)) {
	walk(s, minLen, func(label, text string, escaped bool) bool {
		if escaped {
			text = unescape(text)
		}
		emit(label, text)
		return true
	})
}

// walk calls emit for each searchable text of s. With escaped, text is the
// raw inside of a JSON string literal (escapes not decoded). emit returns
// false to stop; walk then returns false.
func walk(s *model.Span, minLen int, emit func(label, text string, escaped bool) bool) bool {
	return walkMode(s, minLen, false, emit)
}

// walkMode is walk; with rawJSON, a JSON document holding no backslash is
// emitted whole instead of string by string. Its strings are then
// substrings of it bounded by quotes (separators), so whatever is a token or
// substring of one is one of the whole: a superset, for the prefilter, which
// so skips parsing the document.
func walkMode(s *model.Span, minLen int, rawJSON bool, emit func(label, text string, escaped bool) bool) bool {
	if minLen <= 0 {
		minLen = DefaultMinLen
	}
	for i := range s.Attributes {
		kv := &s.Attributes[i]
		switch kv.Value.Type {
		case model.ValueString:
			if len(kv.Value.Str) < minLen && !mayBeText(kv.Key) {
				continue // the common case for a plain span: no key lookup
			}
			label, always := classify(kv.Key)
			if !always && len(kv.Value.Str) < minLen {
				continue
			}
			if label == "" {
				label = SourceAttribute
			}
			if !textSource(label, kv.Value.Str, rawJSON, emit) {
				return false
			}
		case model.ValueArray, model.ValueKvList:
			if label, always := classify(kv.Key); always {
				if !walkValue(label, &kv.Value, 0, rawJSON, emit) {
					return false
				}
			}
		}
	}
	for i := range s.Events {
		e := &s.Events[i]
		evLabel := eventLabel(e.Name)
		for j := range e.Attributes {
			kv := &e.Attributes[j]
			if structural(kv.Key) {
				continue
			}
			label, _ := classify(kv.Key)
			if label == "" {
				label = evLabel
			}
			if !walkValue(label, &kv.Value, 0, rawJSON, emit) {
				return false
			}
		}
	}
	if s.StatusMessage != "" {
		return emit(SourceStatus, s.StatusMessage, false)
	}
	return true
}

// IsMessageKey reports the attribute keys that hold prompt or completion
// text in the LLM dialects (gen_ai.input.messages, gen_ai.prompt.0.content,
// llm.output_messages.0.message.content, input.value, ...): the values a
// conversation repeats on every call.
func IsMessageKey(k string) bool {
	label, _ := classify(k)
	return label == SourceInput || label == SourceOutput
}

// mayBeText is a cheap test that rules out most keys classify would not
// recognise.
func mayBeText(k string) bool {
	if len(k) < len("input.value") {
		return false
	}
	switch k[0] {
	case 'g', 'l', 'i', 'o', 'e':
		return true
	}
	return false
}

// classify returns the label of a known text attribute, and whether it is
// searched whatever its length.
func classify(k string) (label string, always bool) {
	if !mayBeText(k) {
		return "", false
	}
	switch k {
	case "gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.prompt", "gen_ai.tool.call.arguments",
		"input.value", "langfuse.observation.input", "langfuse.trace.input":
		return SourceInput, true
	case "gen_ai.output.messages", "gen_ai.completion", "gen_ai.tool.call.result",
		"output.value", "langfuse.observation.output", "langfuse.trace.output":
		return SourceOutput, true
	case "exception.message", "exception.type", "exception.stacktrace":
		return SourceException, true
	}
	switch {
	case strings.HasPrefix(k, "gen_ai.prompt.") && contentKey(k), strings.HasPrefix(k, "llm.input_messages.") && contentKey(k):
		return SourceInput, true
	case strings.HasPrefix(k, "gen_ai.completion.") && contentKey(k), strings.HasPrefix(k, "llm.output_messages.") && contentKey(k):
		return SourceOutput, true
	}
	return "", false
}

// contentKey reports flattened message keys that hold text:
// gen_ai.prompt.0.content, llm.input_messages.0.message.content,
// llm.input_messages.0.message.contents.1.message_content.text,
// gen_ai.completion.0.tool_calls.0.arguments.
func contentKey(k string) bool {
	return strings.HasSuffix(k, ".content") || strings.HasSuffix(k, ".text") || strings.HasSuffix(k, ".arguments")
}

// eventLabel is the label of the string attributes of an event that are not
// known text attributes themselves.
func eventLabel(name string) string {
	switch name {
	case "exception":
		return SourceException
	case "gen_ai.content.prompt", "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
		return SourceInput
	case "gen_ai.content.completion", "gen_ai.choice":
		return SourceOutput
	}
	return SourceEvent
}

// structural reports keys of JSON objects and structured values whose
// values are vocabulary, not text.
func structural(k string) bool {
	switch k {
	case "role", "type", "finish_reason", "id", "tool_call_id":
		return true
	}
	return false
}

// walkValue emits the strings of a (possibly structured) value.
func walkValue(label string, v *model.Value, depth int, rawJSON bool, emit func(label, text string, escaped bool) bool) bool {
	switch v.Type {
	case model.ValueString:
		return textSource(label, v.Str, rawJSON, emit)
	case model.ValueArray:
		if depth >= maxDepth {
			return true
		}
		elems := v.Elems()
		for i := range elems {
			if !walkValue(label, &elems[i], depth+1, rawJSON, emit) {
				return false
			}
		}
	case model.ValueKvList:
		if depth >= maxDepth {
			return true
		}
		fields := v.Fields()
		for i := range fields {
			if structural(fields[i].Key) {
				continue
			}
			if !walkValue(label, &fields[i].Value, depth+1, rawJSON, emit) {
				return false
			}
		}
	}
	return true
}

// textSource emits one string value: a JSON object or array by its string
// values, anything else as it is.
func textSource(label, s string, rawJSON bool, emit func(label, text string, escaped bool) bool) bool {
	if s == "" {
		return true
	}
	if rawJSON && strings.IndexByte(s, '\\') < 0 {
		return emit(label, s, false)
	}
	if j := firstNonSpace(s); j < len(s) && (s[j] == '{' || s[j] == '[') {
		if (&jsonScanner{s: s}).document(nil) {
			js := jsonScanner{s: s, label: label}
			js.document(emit)
			return !js.stopped
		}
	}
	return emit(label, s, false)
}

func firstNonSpace(s string) int {
	i := 0
	for i < len(s) && isJSONSpace(s[i]) {
		i++
	}
	return i
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// jsonScanner checks a JSON document and, when emit is set, emits its
// string values. It never allocates.
type jsonScanner struct {
	s       string
	i       int
	depth   int
	label   string
	stopped bool
}

// document reports whether s is one valid JSON value (nesting at most
// maxDepth) surrounded by white space. With a non-nil emit it emits the
// string values as it goes.
func (p *jsonScanner) document(emit sourceFunc) bool {
	if !p.value(false, emit) {
		return false
	}
	p.space()
	return p.i == len(p.s)
}

func (p *jsonScanner) space() {
	for p.i < len(p.s) && isJSONSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *jsonScanner) value(skip bool, emit sourceFunc) bool {
	p.space()
	if p.i >= len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		p.depth++
		if p.depth > maxDepth {
			return false
		}
		ok := p.container(c == '{', skip, emit)
		p.depth--
		return ok
	case c == '"':
		raw, escaped, ok := p.str()
		if ok && !skip && raw != "" && emit != nil && !p.stopped {
			if !emit(p.label, raw, escaped) {
				p.stopped = true
			}
		}
		return ok
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		for p.i < len(p.s) && strings.IndexByte("+-.0123456789eE", p.s[p.i]) >= 0 {
			p.i++
		}
		return p.i > start && p.s[p.i-1] >= '0' && p.s[p.i-1] <= '9'
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if strings.HasPrefix(p.s[p.i:], lit) {
			p.i += len(lit)
			return true
		}
	}
	return false
}

func (p *jsonScanner) container(object, skip bool, emit sourceFunc) bool {
	closer := byte(']')
	if object {
		closer = '}'
	}
	p.i++ // the opener
	p.space()
	if p.i < len(p.s) && p.s[p.i] == closer {
		p.i++
		return true
	}
	for {
		skipValue := skip
		if object {
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return false
			}
			key, _, ok := p.str()
			if !ok {
				return false
			}
			skipValue = skip || structural(key)
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return false
			}
			p.i++
		}
		if !p.value(skipValue, emit) {
			return false
		}
		p.space()
		if p.i >= len(p.s) {
			return false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case closer:
			p.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string literal at p.i and returns its raw inside.
func (p *jsonScanner) str() (raw string, escaped, ok bool) {
	start := p.i + 1
	for j := start; j < len(p.s); j++ {
		for j+8 <= len(p.s) && !jsonSpecial8(load64(p.s, j)) {
			j += 8 // eight bytes that are none of " \ and controls
		}
		if j >= len(p.s) {
			break
		}
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			return p.s[start:j], escaped, true
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return "", false, false
		}
	}
	return "", false, false
}

// jsonSpecial8 reports whether one of the 8 bytes of w may be a quote, a
// backslash or a control character (it may report other bytes too, never
// miss one).
func jsonSpecial8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(x uint64) uint64 { return (x - ones) &^ x & highs }
	return hasZero(w^(ones*'"'))|hasZero(w^(ones*'\\'))|((w-ones*0x20)&^w&highs) != 0
}

// load64 reads s[i:i+8] as a little-endian word.
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

// unescape decodes the JSON escapes of the raw inside of a string literal.
func unescape(raw string) string {
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			b = append(b, raw[i])
			i++
			continue
		}
		r, n := decodeEscape(raw, i)
		b = utf8.AppendRune(b, r)
		i += n
	}
	return string(b)
}
