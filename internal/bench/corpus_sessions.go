package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// sessionSystemPrompts are long instructions with a tool schema, 2-8 KiB
// each, shared by many sessions, as chat and agent applications send them
// on every call.
var sessionSystemPrompts = func() []string {
	r := rand.New(rand.NewPCG(11, 11))
	out := make([]string, 12)
	for i := range out {
		var b strings.Builder
		b.WriteString("You are a careful assistant for team " + fmt.Sprint(i) + ". ")
		b.WriteString(sentence(r, 250+r.IntN(900)))
		b.WriteString("\nTools:\n")
		for j, t := range llmTools {
			fmt.Fprintf(&b, `{"type":"function","function":{"name":%q,"description":%q,"parameters":{"type":"object","properties":{"arg%d":{"type":"string"}}}}}`+"\n",
				t, sentence(r, 12+r.IntN(10)), j)
		}
		out[i] = b.String()
	}
	return out
}()

// convMessage is one message of a conversation.
type convMessage struct{ role, content string }

// conversation is a session in progress: every call carries all of it.
type conversation struct {
	id, user string
	system   string
	svc      int // index into llmServices (its dialect spells the messages)
	model    llmModel
	turns    int // turns left
	messages []convMessage
}

// genLLMSessions: conversations as chat and agent applications record them.
// About 1,000 sessions are open at any time, interleaved; each has 5-30
// turns, and each turn's model call carries the session's shared system
// prompt and tool schema (2-8 KiB), every earlier message and the new user
// message, spelled in its service's dialect (OpenAI-style message arrays,
// or one attribute per message). A turn is a trace: the agent span and the
// model call, sometimes a tool call between them.
func genLLMSessions(o CorpusOptions) []model.Span {
	g := newGen(o, 5)
	g.llmSessions()
	return g.out
}

// StreamLLMSessions generates the llm-sessions corpus that Generate returns
// for o, the same spans in the same order, but hands it to fn chunk spans
// at a time instead of holding it all (a million of its spans are about 8
// GB of attribute text). fn must not keep the slice; its first error ends
// the corpus and is returned.
func StreamLLMSessions(o CorpusOptions, chunk int, fn func([]model.Span) error) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if chunk <= 0 {
		return fmt.Errorf("corpus: chunk of %d spans", chunk)
	}
	g := newGen(CorpusOptions{Seed: o.Seed}, 5) // the seed alone: no room for o.Spans
	g.o, g.sink, g.chunk, g.out = o, fn, chunk, make([]model.Span, 0, chunk)
	g.llmSessions()
	g.flush()
	return g.err
}

// llmSessions emits the conversations of genLLMSessions.
func (g *gen) llmSessions() {
	o := g.o
	svcs := make([]*service, len(llmServices))
	for i, s := range llmServices {
		svcs[i] = newService(s.name, "0.9."+fmt.Sprint(i), s.lang, s.scope)
	}
	users := numbered("user-", 400, 4)
	starts := g.startTimes(o.Spans/2+2, nil)
	open := make([]*conversation, 0, 1000)
	newConv := func() *conversation {
		return &conversation{
			id: fmt.Sprintf("conv-%08x", g.r.Uint32()), user: g.pick(users),
			system: sessionSystemPrompts[g.r.IntN(len(sessionSystemPrompts))],
			svc:    g.r.IntN(len(llmServices) - 1), model: llmModels[g.r.IntN(len(llmModels))],
			turns: 5 + g.r.IntN(26),
		}
	}
	for ti := 0; !g.full(); ti++ {
		for len(open) < 1000 {
			open = append(open, newConv())
		}
		i := g.r.IntN(len(open))
		c := open[i]
		start := starts[min(ti, len(starts)-1)]
		g.conversationTurn(svcs, c, start)
		if c.turns--; c.turns == 0 {
			open[i] = open[len(open)-1]
			open = open[:len(open)-1]
		}
	}
}

// conversationTurn emits one turn of c: a new user message and the model's
// answer, which joins the conversation.
func (g *gen) conversationTurn(svcs []*service, c *conversation, start time.Time) {
	svc, d := svcs[c.svc], llmServices[c.svc].dialect
	tid := g.ids.traceID()
	total := g.logNormal(4*time.Second, 0.4)
	root := g.span(svc, tid, model.SpanID{}, "", model.KindServer, start, total)
	root.Name, root.Attributes = agentAttrs(d, svc.name, c.id, c.user)
	if !g.emit(root) {
		return
	}
	c.messages = append(c.messages, convMessage{"user", sentence(g.r, 20+g.r.IntN(60))})
	answer := sentence(g.r, 30+g.r.IntN(90))
	call := g.span(svc, tid, root.SpanID, "", model.KindClient, start.Add(10*time.Millisecond), total*8/10)
	call.Name, call.Attributes = conversationAttrs(d, c, answer)
	if g.r.IntN(50) == 0 {
		call.StatusCode = model.StatusError
		call.StatusMessage = g.pick(llmErrors)
	}
	g.emit(call)
	c.messages = append(c.messages, convMessage{"assistant", answer})
}

// conversationAttrs spells a call carrying the whole conversation in
// dialect d. The dialects that log the conversation as events (the legacy
// OTel ones) are spelled as the current OTel one here.
func conversationAttrs(d dialect, c *conversation, answer string) (string, []model.KeyValue) {
	p := llmProviders[c.model.provider]
	words := len(strings.Fields(c.system)) + len(strings.Fields(answer))
	for _, m := range c.messages {
		words += len(strings.Fields(m.content))
	}
	in, out := int64(float64(words)*1.33), int64(float64(len(strings.Fields(answer)))*1.33)
	switch d {
	case dialectOpenInference:
		kv := []model.KeyValue{
			str("openinference.span.kind", "LLM"), str("llm.model_name", c.model.response), str("llm.provider", p[2]),
			integer("llm.token_count.prompt", in), integer("llm.token_count.completion", out),
			str("session.id", c.id), str("user.id", c.user),
			str("llm.input_messages.0.message.role", "system"), str("llm.input_messages.0.message.content", c.system),
		}
		for i, m := range c.messages {
			kv = append(kv, str(fmt.Sprintf("llm.input_messages.%d.message.role", i+1), m.role),
				str(fmt.Sprintf("llm.input_messages.%d.message.content", i+1), m.content))
		}
		kv = append(kv, str("llm.output_messages.0.message.role", "assistant"), str("llm.output_messages.0.message.content", answer))
		return "ChatCompletion", kv
	case dialectOpenLLMetry:
		kv := []model.KeyValue{
			str("gen_ai.system", p[3]), str("llm.request.type", "chat"), str("gen_ai.request.model", c.model.name),
			integer("gen_ai.usage.prompt_tokens", in), integer("gen_ai.usage.completion_tokens", out),
			str("traceloop.association.properties.session_id", c.id), str("traceloop.association.properties.user_id", c.user),
			str("gen_ai.prompt.0.role", "system"), str("gen_ai.prompt.0.content", c.system),
		}
		for i, m := range c.messages {
			kv = append(kv, str(fmt.Sprintf("gen_ai.prompt.%d.role", i+1), m.role), str(fmt.Sprintf("gen_ai.prompt.%d.content", i+1), m.content))
		}
		kv = append(kv, str("gen_ai.completion.0.role", "assistant"), str("gen_ai.completion.0.content", answer))
		return strings.ToLower(strings.ReplaceAll(p[3], " ", "")) + ".chat", kv
	}
	msgs := make([]map[string]any, 0, len(c.messages))
	for _, m := range c.messages {
		msgs = append(msgs, map[string]any{"role": m.role, "parts": []map[string]string{{"type": "text", "content": m.content}}})
	}
	kv := []model.KeyValue{
		str("gen_ai.operation.name", "chat"), str("gen_ai.provider.name", p[0]),
		str("gen_ai.request.model", c.model.name), str("gen_ai.response.model", c.model.response),
		integer("gen_ai.usage.input_tokens", in), integer("gen_ai.usage.output_tokens", out),
		str("gen_ai.conversation.id", c.id), str("user.id", c.user),
		str("gen_ai.system_instructions", jsonString([]map[string]string{{"type": "text", "content": c.system}})),
		str("gen_ai.input.messages", jsonString(msgs)),
		str("gen_ai.output.messages", jsonString([]map[string]any{{"role": "assistant", "finish_reason": "stop", "parts": []map[string]string{{"type": "text", "content": answer}}}})),
	}
	return "chat " + c.model.name, kv
}
