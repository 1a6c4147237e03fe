package llm

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// Message is one chat message of an LLM call, normalised from any dialect.
type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolName   string `json:"tool_name,omitempty"`    // tool called (assistant) or answering (tool), when present
	ToolCallID string `json:"tool_call_id,omitempty"` // id of the tool call, when present
}

// Messages returns the input (prompt) and output (completion) messages of an
// LLM span, from the first dialect that carries them, in this order:
//   - gen_ai.input.messages / gen_ai.output.messages (OTel current; a JSON
//     string or structured value), with gen_ai.system_instructions first;
//   - gen_ai.prompt.{i}.* / gen_ai.completion.{i}.* (OpenLLMetry, legacy);
//   - llm.input_messages.{i}.message.* / llm.output_messages.{i}.message.*
//     (OpenInference);
//   - span events: gen_ai.content.prompt / gen_ai.content.completion (OTel
//     <= 1.27), gen_ai.system.message, gen_ai.user.message,
//     gen_ai.assistant.message, gen_ai.tool.message, gen_ai.choice (OTel
//     1.28-1.36), or an event carrying gen_ai.input.messages;
//   - langfuse.observation.input / .output, gen_ai.prompt / gen_ai.completion
//     JSON attributes;
//   - input.value / output.value (OpenInference) as one user / assistant
//     message.
//
// Input and output are looked up independently. Indexed attributes are
// ordered by their numeric index (.10 after .9).
func Messages(s *model.Span) (input, output []Message) {
	var a msgAttrs
	a.collect(s.Attributes)
	input = a.input(s)
	output = a.output(s)
	return input, output
}

type indexed struct {
	i   int
	key string // rest of the key after "prefix.{i}."
	v   model.Value
}

type msgAttrs struct {
	inMessages, outMessages, system  model.Value
	hasIn, hasOut, hasSystem         bool
	lfIn, lfOut, promptJSON, complJS string
	inValue, outValue                string
	prompt, completion               []indexed // gen_ai.prompt.{i}.*
	oiIn, oiOut                      []indexed // llm.input_messages.{i}.*
}

func (a *msgAttrs) collect(kvs []model.KeyValue) {
	for _, kv := range kvs {
		k := kv.Key
		switch k {
		case "gen_ai.input.messages":
			a.inMessages, a.hasIn = kv.Value, true
		case "gen_ai.output.messages":
			a.outMessages, a.hasOut = kv.Value, true
		case "gen_ai.system_instructions":
			a.system, a.hasSystem = kv.Value, true
		case "langfuse.observation.input":
			a.lfIn = kv.Value.AsString()
		case "langfuse.observation.output":
			a.lfOut = kv.Value.AsString()
		case "gen_ai.prompt":
			a.promptJSON = kv.Value.AsString()
		case "gen_ai.completion":
			a.complJS = kv.Value.AsString()
		case "input.value":
			a.inValue = kv.Value.AsString()
		case "output.value":
			a.outValue = kv.Value.AsString()
		default:
			if ix, ok := index(k, "gen_ai.prompt."); ok {
				a.prompt = append(a.prompt, indexed{ix.i, ix.key, kv.Value})
			} else if ix, ok := index(k, "gen_ai.completion."); ok {
				a.completion = append(a.completion, indexed{ix.i, ix.key, kv.Value})
			} else if ix, ok := index(k, "llm.input_messages."); ok {
				a.oiIn = append(a.oiIn, indexed{ix.i, ix.key, kv.Value})
			} else if ix, ok := index(k, "llm.output_messages."); ok {
				a.oiOut = append(a.oiOut, indexed{ix.i, ix.key, kv.Value})
			}
		}
	}
}

// index splits "prefix{i}.rest" into i and rest.
func index(k, prefix string) (indexed, bool) {
	if !strings.HasPrefix(k, prefix) {
		return indexed{}, false
	}
	rest := k[len(prefix):]
	num, tail, ok := strings.Cut(rest, ".")
	if !ok {
		return indexed{}, false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 {
		return indexed{}, false
	}
	return indexed{i: i, key: tail}, true
}

func (a *msgAttrs) input(s *model.Span) []Message {
	if a.hasIn {
		var out []Message
		if a.hasSystem {
			if c := partsText(toAny(a.system)); c != "" {
				out = append(out, Message{Role: "system", Content: c})
			}
		}
		out = append(out, otelMessages(toAny(a.inMessages))...)
		if len(out) > 0 {
			return out
		}
	}
	if m := flatMessages(a.prompt, traceloopFields); len(m) > 0 {
		return m
	}
	if m := flatMessages(a.oiIn, openInferenceFields); len(m) > 0 {
		return m
	}
	if m := eventMessages(s, true); len(m) > 0 {
		return m
	}
	for _, j := range [...]string{a.lfIn, a.promptJSON} {
		if m := jsonMessages(j, "user"); len(m) > 0 {
			return m
		}
	}
	if a.inValue != "" {
		return []Message{{Role: "user", Content: a.inValue}}
	}
	return nil
}

func (a *msgAttrs) output(s *model.Span) []Message {
	if a.hasOut {
		if m := otelMessages(toAny(a.outMessages)); len(m) > 0 {
			return m
		}
	}
	if m := flatMessages(a.completion, traceloopFields); len(m) > 0 {
		return m
	}
	if m := flatMessages(a.oiOut, openInferenceFields); len(m) > 0 {
		return m
	}
	if m := eventMessages(s, false); len(m) > 0 {
		return m
	}
	for _, j := range [...]string{a.lfOut, a.complJS} {
		if m := jsonMessages(j, "assistant"); len(m) > 0 {
			return m
		}
	}
	if a.outValue != "" {
		return []Message{{Role: "assistant", Content: a.outValue}}
	}
	return nil
}

// fieldNames says which flattened keys hold what, per dialect.
type fieldNames struct {
	role, content, name, toolCallID string
	toolCallName, toolCallIDInCall  string // suffixes under the tool-calls list
	toolCalls, contents, contentTxt string // list prefixes
}

var traceloopFields = fieldNames{
	role: "role", content: "content", name: "name", toolCallID: "tool_call_id",
	toolCalls: "tool_calls.", toolCallName: "name", toolCallIDInCall: "id",
}

var openInferenceFields = fieldNames{
	role: "message.role", content: "message.content", name: "message.name", toolCallID: "message.tool_call_id",
	toolCalls: "message.tool_calls.", toolCallName: "tool_call.function.name", toolCallIDInCall: "tool_call.id",
	contents: "message.contents.", contentTxt: "message_content.text",
}

// flatMessages builds messages from flattened, indexed attributes.
func flatMessages(items []indexed, f fieldNames) []Message {
	if len(items) == 0 {
		return nil
	}
	slices.SortStableFunc(items, func(x, y indexed) int { return x.i - y.i })
	var out []Message
	for start := 0; start < len(items); {
		end := start
		for end < len(items) && items[end].i == items[start].i {
			end++
		}
		var m Message
		var parts []indexed
		var callName, callID string
		firstCall := -1
		for _, it := range items[start:end] {
			switch it.key {
			case f.role:
				m.Role = it.v.AsString()
			case f.content:
				m.Content = it.v.AsString()
			case f.name:
				m.ToolName = it.v.AsString()
			case f.toolCallID:
				m.ToolCallID = it.v.AsString()
			default:
				if f.contents != "" {
					if ix, ok := index(it.key, f.contents); ok && ix.key == f.contentTxt {
						parts = append(parts, indexed{i: ix.i, v: it.v})
						continue
					}
				}
				if ix, ok := index(it.key, f.toolCalls); ok {
					if firstCall < 0 || ix.i < firstCall {
						firstCall, callName, callID = ix.i, "", ""
					}
					if ix.i == firstCall {
						switch ix.key {
						case f.toolCallName:
							callName = it.v.AsString()
						case f.toolCallIDInCall:
							callID = it.v.AsString()
						}
					}
				}
			}
		}
		if m.Content == "" && len(parts) > 0 {
			slices.SortStableFunc(parts, func(x, y indexed) int { return x.i - y.i })
			texts := make([]string, len(parts))
			for i, p := range parts {
				texts[i] = p.v.AsString()
			}
			m.Content = strings.Join(texts, "\n")
		}
		if m.ToolName == "" {
			m.ToolName = callName
		}
		if m.ToolCallID == "" {
			m.ToolCallID = callID
		}
		out = append(out, m)
		start = end
	}
	return out
}

// toAny turns an attribute value into what encoding/json would decode: a JSON
// string is parsed; structured values are converted.
func toAny(v model.Value) any {
	switch v.Type {
	case model.ValueString:
		var x any
		if json.Unmarshal([]byte(v.Str), &x) != nil {
			return v.Str
		}
		return x
	case model.ValueArray:
		out := make([]any, 0, len(v.Elems()))
		for _, e := range v.Elems() {
			out = append(out, valueAny(e))
		}
		return out
	case model.ValueKvList:
		return valueAny(v)
	}
	return v.AsString()
}

func valueAny(v model.Value) any {
	switch v.Type {
	case model.ValueArray:
		out := make([]any, 0, len(v.Elems()))
		for _, e := range v.Elems() {
			out = append(out, valueAny(e))
		}
		return out
	case model.ValueKvList:
		m := make(map[string]any, len(v.Fields()))
		for _, f := range v.Fields() {
			m[f.Key] = valueAny(f.Value)
		}
		return m
	case model.ValueInt:
		return float64(v.Int)
	case model.ValueDouble:
		return v.Double
	case model.ValueBool:
		return v.Bool()
	case model.ValueEmpty:
		return nil
	}
	return v.AsString()
}

// otelMessages reads the OTel GenAI message schema: [{role, parts: [{type,
// content | id, name, arguments | id, response}], finish_reason}]. Messages
// in the older {role, content} shape are accepted too.
func otelMessages(x any) []Message {
	list, ok := x.([]any)
	if !ok {
		return nil
	}
	var out []Message
	for _, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			continue
		}
		m := Message{Role: str(obj["role"])}
		if parts, ok := obj["parts"].([]any); ok {
			var texts []string
			for _, p := range parts {
				po, ok := p.(map[string]any)
				if !ok {
					continue
				}
				switch str(po["type"]) {
				case "tool_call":
					if m.ToolName == "" {
						m.ToolName, m.ToolCallID = str(po["name"]), str(po["id"])
					}
					if args, ok := po["arguments"]; ok {
						texts = append(texts, jsonText(args))
					}
				case "tool_call_response":
					if m.ToolCallID == "" {
						m.ToolCallID = strings.TrimSpace(str(po["id"]))
					}
					texts = append(texts, jsonText(first2(po["response"], po["result"])))
				default:
					if c, ok := po["content"]; ok {
						texts = append(texts, jsonText(c))
					} else if t, ok := po["text"]; ok {
						texts = append(texts, jsonText(t))
					}
				}
			}
			m.Content = strings.Join(texts, "\n")
		} else {
			m.Content = contentText(obj["content"])
			m.ToolCallID = str(obj["tool_call_id"])
			m.ToolName = str(obj["name"])
		}
		out = append(out, m)
	}
	return out
}

func first2(a, b any) any {
	if a != nil {
		return a
	}
	return b
}

// partsText joins the text of gen_ai.system_instructions parts.
func partsText(x any) string {
	switch v := x.(type) {
	case string:
		return v
	case []any:
		var texts []string
		for _, p := range v {
			if po, ok := p.(map[string]any); ok {
				texts = append(texts, contentText(first2(po["content"], po["text"])))
			} else if s, ok := p.(string); ok {
				texts = append(texts, s)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

func str(x any) string {
	switch v := x.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	return jsonText(x)
}

// jsonText renders a decoded JSON value as text: strings as they are, the
// rest as compact JSON.
func jsonText(x any) string {
	if s, ok := x.(string); ok {
		return s
	}
	if x == nil {
		return ""
	}
	b, err := json.Marshal(x)
	if err != nil {
		return ""
	}
	return string(b)
}

// contentText reads a message content that is a string or a list of parts
// ({type: text, text} as OpenAI and Anthropic send them).
func contentText(x any) string {
	if list, ok := x.([]any); ok {
		var texts []string
		for _, p := range list {
			if po, ok := p.(map[string]any); ok {
				if t, ok := po["text"]; ok {
					texts = append(texts, jsonText(t))
					continue
				}
				if t, ok := po["content"]; ok {
					texts = append(texts, jsonText(t))
					continue
				}
			}
			texts = append(texts, jsonText(p))
		}
		return strings.Join(texts, "\n")
	}
	return jsonText(x)
}

// jsonMessages reads a JSON list of {role, content} messages (or one such
// object). Any other JSON, or text, becomes one message with role def.
func jsonMessages(s, def string) []Message {
	if s == "" {
		return nil
	}
	var x any
	if json.Unmarshal([]byte(s), &x) != nil {
		return []Message{{Role: def, Content: s}}
	}
	if obj, ok := x.(map[string]any); ok {
		if msgs, ok := obj["messages"].([]any); ok {
			x = msgs
		} else if _, ok := obj["role"]; ok {
			x = []any{obj}
		}
	}
	if m := otelMessages(x); len(m) > 0 && m[0].Role != "" {
		return m
	}
	return []Message{{Role: def, Content: jsonText(x)}}
}

// eventMessages reads messages recorded as span events (OTel GenAI <= 1.36).
func eventMessages(s *model.Span, input bool) []Message {
	var out []Message
	for i := range s.Events {
		e := &s.Events[i]
		attr := func(k string) string {
			v, ok := model.Lookup(e.Attributes, k)
			if !ok {
				return ""
			}
			return v.AsString()
		}
		switch e.Name {
		case "gen_ai.content.prompt":
			if input {
				out = append(out, jsonMessages(attr("gen_ai.prompt"), "user")...)
			}
		case "gen_ai.content.completion":
			if !input {
				out = append(out, jsonMessages(attr("gen_ai.completion"), "assistant")...)
			}
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			if input {
				r := strings.TrimSuffix(strings.TrimPrefix(e.Name, "gen_ai."), ".message")
				m := Message{Role: first(attr("role"), r), Content: attr("content"), ToolCallID: attr("id")}
				if m.Content == "" {
					if v, ok := model.Lookup(e.Attributes, "message"); ok {
						m.Content = contentText(toAny(v))
					}
				}
				out = append(out, m)
			}
		case "gen_ai.choice":
			if !input {
				m := Message{Role: first(attr("message.role"), "assistant"), Content: attr("message.content")}
				if m.Content == "" {
					if v, ok := model.Lookup(e.Attributes, "message"); ok {
						if obj, ok := toAny(v).(map[string]any); ok {
							m.Role = first(str(obj["role"]), m.Role)
							m.Content = contentText(obj["content"])
						}
					}
				}
				out = append(out, m)
			}
		default:
			k := "gen_ai.output.messages"
			if input {
				k = "gen_ai.input.messages"
			}
			if v, ok := model.Lookup(e.Attributes, k); ok {
				out = append(out, otelMessages(toAny(v))...)
			}
		}
	}
	return out
}
