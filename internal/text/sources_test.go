package text_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

func str(k, v string) model.KeyValue { return model.KeyValue{Key: k, Value: model.StringValue(v)} }

type src struct{ label, text string }

func sources(s *model.Span, minLen int) []src {
	var out []src
	text.Sources(s, minLen, func(l, t string) { out = append(out, src{l, t}) })
	return out
}

func TestSourcesDialects(t *testing.T) {
	long := "SELECT * FROM orders WHERE id = 42 AND status = 'open'"
	cases := []struct {
		name string
		span model.Span
		want []src
	}{
		{"otel current", model.Span{Attributes: []model.KeyValue{
			str("gen_ai.system_instructions", `[{"type":"text","content":"Be brief."}]`),
			str("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"Caf\u00e9?"},{"type":"tool_call","id":"c1","name":"get_order","arguments":{"id":"42","note":"rush"}}]}]`),
			str("gen_ai.output.messages", `[{"role":"assistant","finish_reason":"stop","parts":[{"type":"text","content":"Oui."}]}]`),
			str("gen_ai.request.model", "gpt-4o"),
		}}, []src{{"input", "Be brief."}, {"input", "Café?"}, {"input", "get_order"}, {"input", "rush"}, {"output", "Oui."}}},
		{"otel structured value", model.Span{Attributes: []model.KeyValue{
			{Key: "gen_ai.input.messages", Value: model.ArrayValue([]model.Value{model.KvListValue([]model.KeyValue{
				str("role", "user"), str("content", "hi there")})})},
		}}, []src{{"input", "hi there"}}},
		{"openllmetry", model.Span{Attributes: []model.KeyValue{
			str("gen_ai.prompt.0.role", "system"), str("gen_ai.prompt.0.content", "sys"),
			str("gen_ai.prompt.1.content", "ask"), str("gen_ai.completion.0.content", "answer"),
			str("gen_ai.completion.0.tool_calls.0.arguments", `{"q":"x"}`), str("gen_ai.completion.0.finish_reason", "stop"),
		}}, []src{{"input", "sys"}, {"input", "ask"}, {"output", "answer"}, {"output", "x"}}},
		{"openinference", model.Span{Attributes: []model.KeyValue{
			str("openinference.span.kind", "LLM"),
			str("llm.input_messages.0.message.role", "user"), str("llm.input_messages.0.message.content", "q1"),
			str("llm.input_messages.1.message.contents.0.message_content.text", "q2"),
			str("llm.output_messages.0.message.content", "a1"),
			str("input.value", "q1"), str("output.value", `{"answer": "a2", "id": "x9"}`), str("input.mime_type", "text/plain"),
		}}, []src{{"input", "q1"}, {"input", "q2"}, {"output", "a1"}, {"input", "q1"}, {"output", "a2"}}},
		{"langfuse", model.Span{Attributes: []model.KeyValue{
			str("langfuse.observation.input", `{"messages":[{"role":"user","content":"lf in"}]}`),
			str("langfuse.observation.output", "lf out"), str("langfuse.trace.input", "[not json"),
		}}, []src{{"input", "lf in"}, {"output", "lf out"}, {"input", "[not json"}}},
		{"legacy events", model.Span{Events: []model.Event{
			{Name: "gen_ai.content.prompt", Attributes: []model.KeyValue{str("gen_ai.prompt", `[{"role":"user","content":"p"}]`)}},
			{Name: "gen_ai.content.completion", Attributes: []model.KeyValue{str("gen_ai.completion", `[{"role":"assistant","content":"c"}]`)}},
			{Name: "gen_ai.user.message", Attributes: []model.KeyValue{str("gen_ai.system", "openai"), str("content", "u")}},
			{Name: "gen_ai.choice", Attributes: []model.KeyValue{{Key: "index", Value: model.IntValue(0)}, str("finish_reason", "stop"), str("message.content", "m")}},
		}}, []src{{"input", "p"}, {"output", "c"}, {"input", "openai"}, {"input", "u"}, {"output", "m"}}},
		{"exception and status", model.Span{StatusMessage: "boom", Events: []model.Event{
			{Name: "exception", Attributes: []model.KeyValue{str("exception.type", "ValueError"), str("exception.message", "bad"),
				str("exception.stacktrace", "at main()"), {Key: "exception.escaped", Value: model.BoolValue(true)}}},
			{Name: "log", Attributes: []model.KeyValue{str("msg", "hi")}},
		}, Attributes: []model.KeyValue{str("exception.message", "on span")}},
			[]src{{"exception", "on span"}, {"exception", "ValueError"}, {"exception", "bad"}, {"exception", "at main()"}, {"event", "hi"}, {"status", "boom"}}},
		{"long attributes only", model.Span{Name: "a name that is quite long but never searched", Attributes: []model.KeyValue{
			str("db.query.text", long), str("http.route", "/api/v1/orders/{id}"), {Key: "n", Value: model.IntValue(5)},
			{Key: "tags", Value: model.ArrayValue([]model.Value{model.StringValue(long)})},
		}, Resource: &model.Resource{Attributes: []model.KeyValue{str("process.command_line", long)}}},
			[]src{{"attribute", long}}},
	}
	for _, c := range cases {
		if got := sources(&c.span, 0); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// minLen decides for other attributes.
	s := model.Span{Attributes: []model.KeyValue{str("http.route", "/api/v1/orders/{id}")}}
	if got := sources(&s, 10); len(got) != 1 || got[0].label != "attribute" {
		t.Errorf("minLen 10: got %q", got)
	}
}

// Every prompt and completion of the llm corpus, in all its dialects, is
// findable by its words and by a phrase cut from it.
func TestSourcesLLMCorpus(t *testing.T) {
	spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 11, Spans: 4000, Start: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	withText, dialects := 0, map[string]bool{}
	for i := range spans {
		s := &spans[i]
		in, out := llm.Messages(s)
		if len(in) == 0 && len(out) == 0 {
			continue
		}
		withText++
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Key, "messages") || strings.Contains(kv.Key, "prompt") || strings.HasSuffix(kv.Key, ".value") {
				dialects[strings.Split(kv.Key, ".")[0]] = true
			}
		}
		for _, e := range s.Events {
			dialects["event "+e.Name] = true
		}
		for _, m := range slices.Concat(in, out) {
			var toks []string
			text.Tokens(m.Content, func(tok string) { toks = append(toks, tok) })
			if len(toks) < 3 {
				continue
			}
			j := r.IntN(len(toks) - 2)
			qs := fmt.Sprintf(`%s %s "%s %s %s"`, toks[r.IntN(len(toks))], toks[r.IntN(len(toks))], toks[j], toks[j+1], toks[j+2])
			q, err := text.ParseQuery(qs)
			if err != nil {
				t.Fatalf("ParseQuery(%q): %v", qs, err)
			}
			if !q.Matches(s, 0) {
				t.Fatalf("span %d (%s): query %q built from its %s message does not match; sources %q", i, s.Name, qs, m.Role, sources(s, 0))
			}
			all := map[uint64]bool{}
			text.SpanTokens(s, 0, func(h uint64) { all[h] = true })
			for _, h := range q.Hashes() {
				if !all[h] {
					t.Fatalf("span %d: a hash of query %q is not among SpanTokens", i, qs)
				}
			}
		}
	}
	t.Logf("%d spans with messages; keys and events seen: %v", withText, dialects)
	if withText < 200 || len(dialects) < 5 {
		t.Fatalf("the corpus exercised too little: %d spans with text, dialects %v", withText, dialects)
	}
}

// SpanTokens reports each distinct token once, and exactly the tokens of
// the sources.
func TestSpanTokensDistinct(t *testing.T) {
	s := &model.Span{StatusMessage: "a a b", Attributes: []model.KeyValue{str("input.value", "B c \\u0041"), str("output.value", `["a","d"]`)}}
	want := map[uint64]bool{}
	for _, w := range []string{"a", "b", "c", "u0041", "d"} {
		want[text.Hash(w)] = true
	}
	got := map[uint64]int{}
	text.SpanTokens(s, 0, func(h uint64) { got[h]++ })
	for h, n := range got {
		if n != 1 || !want[h] {
			t.Errorf("hash %#x emitted %d times (wanted: %v)", h, n, want[h])
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d distinct hashes, want %d", len(got), len(want))
	}
	// Many distinct tokens: the set grows.
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "w%d ", i%3000)
	}
	big := &model.Span{Attributes: []model.KeyValue{str("input.value", b.String())}}
	n := 0
	text.SpanTokens(big, 0, func(uint64) { n++ })
	if n != 3000 {
		t.Errorf("got %d distinct tokens, want 3000", n)
	}
}
