package llm

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

func msgs(pairs ...string) []Message {
	var out []Message
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Message{Role: pairs[i], Content: pairs[i+1]})
	}
	return out
}

func checkMessages(t *testing.T, s *model.Span, wantIn, wantOut []Message) {
	t.Helper()
	in, out := Messages(s)
	if !reflect.DeepEqual(in, wantIn) {
		t.Errorf("input:\n got  %+v\n want %+v", in, wantIn)
	}
	if !reflect.DeepEqual(out, wantOut) {
		t.Errorf("output:\n got  %+v\n want %+v", out, wantOut)
	}
}

func TestMessagesIndexOrder(t *testing.T) {
	// Twelve prompts added in reverse order: .10 and .11 must come after .9.
	var attrs []model.KeyValue
	var want []Message
	for i := 11; i >= 0; i-- {
		attrs = append(attrs, kv(fmt.Sprintf("gen_ai.prompt.%d.content", i), fmt.Sprintf("p%d", i)), kv(fmt.Sprintf("gen_ai.prompt.%d.role", i), "user"))
	}
	for i := 0; i < 12; i++ {
		want = append(want, Message{Role: "user", Content: fmt.Sprintf("p%d", i)})
	}
	attrs = append(attrs, kv("gen_ai.completion.1.role", "assistant"), kv("gen_ai.completion.1.content", "second choice"),
		kv("gen_ai.completion.0.role", "assistant"), kv("gen_ai.completion.0.content", "first choice"),
		kv("gen_ai.prompt.x.content", "not an index"))
	checkMessages(t, spanWith(attrs...), want, msgs("assistant", "first choice", "assistant", "second choice"))
}

func TestMessagesOTelStructured(t *testing.T) {
	part := func(typ, content string) model.Value {
		return model.KvListValue([]model.KeyValue{kv("type", typ), kv("content", content)})
	}
	msg := func(role string, parts ...model.Value) model.Value {
		return model.KvListValue([]model.KeyValue{kv("role", role), {Key: "parts", Value: model.ArrayValue(parts)}})
	}
	s := spanWith(
		model.KeyValue{Key: "gen_ai.input.messages", Value: model.ArrayValue([]model.Value{msg("user", part("text", "hello"), part("text", "world"))})},
		model.KeyValue{Key: "gen_ai.output.messages", Value: model.ArrayValue([]model.Value{msg("assistant", part("text", "hi"))})},
	)
	checkMessages(t, s, msgs("user", "hello\nworld"), msgs("assistant", "hi"))
}

func TestMessagesOpenInferenceValueFallback(t *testing.T) {
	s := spanWith(kv("openinference.span.kind", "CHAIN"), kv("input.value", "question"), kv("output.value", `{"answer": 42}`))
	checkMessages(t, s, msgs("user", "question"), msgs("assistant", `{"answer": 42}`))
}

func TestMessagesLegacyJSONAttributes(t *testing.T) {
	s := spanWith(kv("gen_ai.prompt", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`),
		kv("gen_ai.completion", "plain text answer"))
	checkMessages(t, s, msgs("user", "a\nb"), msgs("assistant", "plain text answer"))
}

func TestMessagesEvents(t *testing.T) {
	s := spanWith(kv("gen_ai.system", "openai"))
	s.Events = []model.Event{
		{Name: "gen_ai.user.message", Attributes: []model.KeyValue{kv("content", "q1")}},
		{Name: "gen_ai.assistant.message", Attributes: []model.KeyValue{kv("content", "a1")}},
		{Name: "gen_ai.tool.message", Attributes: []model.KeyValue{kv("content", "42"), kv("id", "call_9")}},
		{Name: "gen_ai.choice", Attributes: []model.KeyValue{kv("index", 0), kv("message", `{"role":"assistant","content":"final"}`)}},
	}
	want := []Message{{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"}, {Role: "tool", Content: "42", ToolCallID: "call_9"}}
	checkMessages(t, s, want, msgs("assistant", "final"))

	// The inference-details event of newer conventions carries the same attributes as the span.
	s = spanWith(kv("gen_ai.operation.name", "chat"))
	s.Events = []model.Event{{Name: "gen_ai.client.inference.operation.details", Attributes: []model.KeyValue{
		kv("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"x"}]}]`),
		kv("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"y"}]}]`),
	}}}
	checkMessages(t, s, msgs("user", "x"), msgs("assistant", "y"))
}

func TestMessagesNone(t *testing.T) {
	checkMessages(t, spanWith(kv("http.request.method", "GET")), nil, nil)
	// Malformed JSON in the OTel attribute falls through to other dialects.
	s := spanWith(kv("gen_ai.input.messages", "{not json"), kv("input.value", "raw"))
	checkMessages(t, s, msgs("user", "raw"), nil)
}
