package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// dialect is the attribute vocabulary an instrumentation library emits.
type dialect int

const (
	dialectOTel          dialect = iota // OTel GenAI semconv, current names (gen_ai.provider.name, gen_ai.usage.input_tokens, gen_ai.input.messages)
	dialectOTelLegacy                   // OTel GenAI semconv <= 1.27 (gen_ai.system, prompt_tokens, gen_ai.content.* events)
	dialectOTelEvents                   // OTel GenAI semconv 1.28-1.36 (gen_ai.system, input_tokens, gen_ai.user.message / gen_ai.choice events)
	dialectOpenInference                // Arize OpenInference (llm.*, input.value, openinference.span.kind)
	dialectOpenLLMetry                  // Traceloop OpenLLMetry (gen_ai.prompt.{i}.*, traceloop.*)
)

type llmModel struct {
	provider int // index into llmProviders
	name     string
	response string
}

// llmProviders: name per dialect family [otel current, otel legacy, openinference provider, openllmetry system].
var llmProviders = [][4]string{
	{"openai", "openai", "openai", "OpenAI"},
	{"anthropic", "anthropic", "anthropic", "Anthropic"},
	{"gcp.gemini", "vertex_ai", "google", "VertexAI"},
	{"mistral_ai", "mistral_ai", "mistralai", "MistralAI"},
}

var llmModels = []llmModel{
	{0, "gpt-4o", "gpt-4o-2024-08-06"},
	{0, "gpt-4o-mini", "gpt-4o-mini-2024-07-18"},
	{1, "claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20241022"},
	{1, "claude-3-5-haiku-20241022", "claude-3-5-haiku-20241022"},
	{2, "gemini-1.5-pro", "gemini-1.5-pro-002"},
	{3, "mistral-large-latest", "mistral-large-2411"},
}

var llmServices = []struct {
	name    string
	lang    string
	dialect dialect
	scope   string
}{
	{"support-agent", "python", dialectOTel, "opentelemetry.instrumentation.openai_v2"},
	{"research-agent", "python", dialectOpenInference, "openinference.instrumentation.langchain"},
	{"code-assistant", "python", dialectOpenLLMetry, "opentelemetry.instrumentation.anthropic"},
	{"rag-api", "python", dialectOTelLegacy, "opentelemetry.instrumentation.openai"},
	{"chat-frontend", "nodejs", dialectOTel, "@opentelemetry/instrumentation-openai"},
	{"summarizer", "go", dialectOTelEvents, "go.opentelemetry.io/contrib/genai"},
	{"eval-runner", "python", dialectOpenLLMetry, "opentelemetry.instrumentation.langchain"},
	{"tool-gateway", "python", dialectOpenInference, "openinference.instrumentation.mcp"},
}

var llmTools = []string{"search_docs", "get_order", "lookup_customer", "run_sql", "fetch_url", "create_ticket", "calculator", "send_email"}

var llmErrors = []string{"429 Too Many Requests: rate limit exceeded", "context length exceeded", "upstream timeout", "invalid tool arguments"}

// llmCall is one model invocation, before it is spelled in a dialect.
type llmCall struct {
	model               llmModel
	inTokens, outTokens int64
	system, prompt      string
	completion          string
	content             bool
	session, user       string
	temperature         float64
}

// genLLM: agent / tool / LLM-call span trees from 8 services in four
// attribute dialects; 6 models from 4 providers; one session per about 40
// spans; about 20% of spans carry a prompt and a completion of about 60
// words each, most sharing one of a few long system prompts.
func genLLM(o CorpusOptions) []model.Span {
	g := newGen(o, 2)
	svcs := make([]*service, len(llmServices))
	for i, s := range llmServices {
		svcs[i] = newService(s.name, "0.9."+fmt.Sprint(i), s.lang, s.scope)
	}
	users := numbered("user-", 200, 4)
	curve := func(t time.Time) float64 { return dailyCurve(t) }
	starts := g.startTimes(o.Spans/10+2, curve)
	var session, user string
	sessionSpans := 40
	agent := 0
	for ti := 0; !g.full(); ti++ {
		start := starts[min(ti, len(starts)-1)].Add(time.Duration(max(0, ti-len(starts)+1)) * time.Millisecond)
		if sessionSpans >= 40 {
			session = fmt.Sprintf("sess-%08x", g.r.Uint32())
			user = g.pick(users)
			agent = g.r.IntN(len(svcs) - 1) // tool-gateway is never the agent
			sessionSpans = 0
		}
		sessionSpans += g.llmTrace(svcs, agent, start, session, user)
	}
	return g.out
}

// llmTrace emits one agent turn and returns the number of spans emitted.
func (g *gen) llmTrace(svcs []*service, agent int, start time.Time, session, user string) int {
	before := len(g.out)
	tid := g.ids.traceID()
	d := llmServices[agent].dialect
	svc := svcs[agent]
	total := g.logNormal(6*time.Second, 0.5)
	root := g.span(svc, tid, model.SpanID{}, "", model.KindServer, start, total)
	root.Name, root.Attributes = agentAttrs(d, svc.name, session, user)
	g.emit(root)
	// Children run one after another inside the root.
	n := 7 + g.r.IntN(6)
	cursor := start.Add(20 * time.Millisecond)
	step := total / time.Duration(n+1)
	for i := 1; i < n && !g.full(); i++ {
		dur := time.Duration(float64(step) * (0.5 + 0.5*g.r.Float64()))
		switch k := g.r.IntN(100); {
		case k < 55 || i == n-1:
			g.emitLLM(svc, d, tid, root.SpanID, cursor, dur, session, user)
		default:
			tsvc, td := svc, d
			if g.r.IntN(10) < 3 {
				tsvc, td = svcs[len(svcs)-1], llmServices[len(svcs)-1].dialect
			}
			tool := g.pick(llmTools)
			ts := g.span(tsvc, tid, root.SpanID, "", model.KindInternal, cursor, dur)
			ts.Name, ts.Attributes = toolAttrs(td, tool, fmt.Sprintf("call_%06x", g.r.Uint32()&0xffffff))
			if !g.emit(ts) {
				break
			}
			// A tool does real work beneath it: an HTTP call or a query.
			if i+1 < n && g.r.IntN(2) == 0 {
				i++
				cs := g.span(tsvc, tid, ts.SpanID, "", model.KindClient, cursor.Add(dur/10), dur*7/10)
				if g.r.IntN(2) == 0 {
					cs.Name = "GET"
					cs.Attributes = []model.KeyValue{str("http.request.method", "GET"), str("url.full", "https://api.internal/v2/"+tool), integer("http.response.status_code", 200)}
				} else {
					cs.Name = "query qdrant"
					cs.Attributes = []model.KeyValue{str("db.system.name", "qdrant"), str("db.operation.name", "query"), str("db.collection.name", "docs")}
				}
				g.emit(cs)
			}
		}
		cursor = cursor.Add(dur)
	}
	return len(g.out) - before
}

func (g *gen) emitLLM(svc *service, d dialect, tid model.TraceID, parent model.SpanID, start time.Time, dur time.Duration, session, user string) {
	c := llmCall{
		model:       llmModels[g.r.IntN(len(llmModels))],
		session:     session,
		user:        user,
		temperature: float64(g.r.IntN(11)) / 10,
		content:     g.r.IntN(100) < 45,
	}
	if c.content {
		if g.r.IntN(10) < 8 {
			c.system = systemPrompts[g.r.IntN(len(systemPrompts))]
		}
		c.prompt = sentence(g.r, 45+g.r.IntN(31))
		c.completion = sentence(g.r, 45+g.r.IntN(31))
		c.inTokens = int64(float64(len(strings.Fields(c.system))+len(strings.Fields(c.prompt))) * 1.33)
		c.outTokens = int64(float64(len(strings.Fields(c.completion))) * 1.33)
	} else {
		c.inTokens = 200 + g.r.Int64N(3000)
		c.outTokens = 20 + g.r.Int64N(600)
	}
	s := g.span(svc, tid, parent, "", model.KindClient, start, dur)
	s.Name, s.Attributes, s.Events = llmAttrs(d, c, start.Add(dur))
	if g.r.IntN(50) == 0 {
		s.StatusCode = model.StatusError
		s.StatusMessage = g.pick(llmErrors)
		s.Attributes = append(s.Attributes, str("error.type", "provider_error"))
	}
	g.emit(s)
}

func agentAttrs(d dialect, agent, session, user string) (string, []model.KeyValue) {
	switch d {
	case dialectOpenInference:
		return agent, []model.KeyValue{str("openinference.span.kind", "AGENT"), str("agent.name", agent), str("session.id", session), str("user.id", user)}
	case dialectOpenLLMetry:
		return agent + ".workflow", []model.KeyValue{
			str("traceloop.span.kind", "workflow"), str("traceloop.entity.name", agent), str("traceloop.workflow.name", agent),
			str("traceloop.association.properties.session_id", session), str("traceloop.association.properties.user_id", user),
		}
	case dialectOTel:
		return "invoke_agent " + agent, []model.KeyValue{
			str("gen_ai.operation.name", "invoke_agent"), str("gen_ai.agent.name", agent),
			str("gen_ai.conversation.id", session), str("session.id", session), str("user.id", user),
		}
	}
	return agent + " run", []model.KeyValue{str("session.id", session), str("user.id", user)}
}

func toolAttrs(d dialect, tool, callID string) (string, []model.KeyValue) {
	switch d {
	case dialectOpenInference:
		return tool, []model.KeyValue{str("openinference.span.kind", "TOOL"), str("tool.name", tool), str("tool.parameters", `{"query":"status"}`)}
	case dialectOpenLLMetry:
		return tool + ".tool", []model.KeyValue{str("traceloop.span.kind", "tool"), str("traceloop.entity.name", tool)}
	}
	return "execute_tool " + tool, []model.KeyValue{
		str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", tool),
		str("gen_ai.tool.call.id", callID), str("gen_ai.tool.type", "function"),
	}
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// llmAttrs spells one model call in dialect d: span name, attributes, events.
func llmAttrs(d dialect, c llmCall, end time.Time) (string, []model.KeyValue, []model.Event) {
	p := llmProviders[c.model.provider]
	total := c.inTokens + c.outTokens
	var kv []model.KeyValue
	var ev []model.Event
	switch d {
	case dialectOTel:
		kv = []model.KeyValue{
			str("gen_ai.operation.name", "chat"), str("gen_ai.provider.name", p[0]),
			str("gen_ai.request.model", c.model.name), str("gen_ai.response.model", c.model.response),
			float("gen_ai.request.temperature", c.temperature),
			integer("gen_ai.usage.input_tokens", c.inTokens), integer("gen_ai.usage.output_tokens", c.outTokens),
			{Key: "gen_ai.response.finish_reasons", Value: model.ArrayValue([]model.Value{model.StringValue("stop")})},
			str("gen_ai.conversation.id", c.session), str("user.id", c.user),
		}
		if c.content {
			if c.system != "" {
				kv = append(kv, str("gen_ai.system_instructions", jsonString([]map[string]string{{"type": "text", "content": c.system}})))
			}
			kv = append(kv,
				str("gen_ai.input.messages", jsonString([]map[string]any{{"role": "user", "parts": []map[string]string{{"type": "text", "content": c.prompt}}}})),
				str("gen_ai.output.messages", jsonString([]map[string]any{{"role": "assistant", "finish_reason": "stop", "parts": []map[string]string{{"type": "text", "content": c.completion}}}})),
			)
		}
		return "chat " + c.model.name, kv, nil
	case dialectOTelLegacy, dialectOTelEvents:
		kv = []model.KeyValue{
			str("gen_ai.system", p[1]), str("gen_ai.request.model", c.model.name), str("gen_ai.response.model", c.model.response),
			float("gen_ai.request.temperature", c.temperature), str("session.id", c.session), str("user.id", c.user),
		}
		at := uint64(end.UnixNano())
		if d == dialectOTelLegacy {
			kv = append(kv, str("gen_ai.operation.name", "chat"), integer("gen_ai.usage.prompt_tokens", c.inTokens), integer("gen_ai.usage.completion_tokens", c.outTokens))
			if c.content {
				msgs := []map[string]string{{"role": "user", "content": c.prompt}}
				if c.system != "" {
					msgs = append([]map[string]string{{"role": "system", "content": c.system}}, msgs...)
				}
				ev = []model.Event{
					{TimeUnixNano: at, Name: "gen_ai.content.prompt", Attributes: []model.KeyValue{str("gen_ai.prompt", jsonString(msgs))}},
					{TimeUnixNano: at, Name: "gen_ai.content.completion", Attributes: []model.KeyValue{str("gen_ai.completion", jsonString([]map[string]string{{"role": "assistant", "content": c.completion}}))}},
				}
			}
		} else {
			kv = append(kv, str("gen_ai.operation.name", "chat"), integer("gen_ai.usage.input_tokens", c.inTokens), integer("gen_ai.usage.output_tokens", c.outTokens))
			if c.content {
				if c.system != "" {
					ev = append(ev, model.Event{TimeUnixNano: at, Name: "gen_ai.system.message", Attributes: []model.KeyValue{str("gen_ai.system", p[1]), str("content", c.system)}})
				}
				ev = append(ev,
					model.Event{TimeUnixNano: at, Name: "gen_ai.user.message", Attributes: []model.KeyValue{str("gen_ai.system", p[1]), str("content", c.prompt)}},
					model.Event{TimeUnixNano: at, Name: "gen_ai.choice", Attributes: []model.KeyValue{str("gen_ai.system", p[1]), integer("index", 0), str("finish_reason", "stop"), str("message.content", c.completion)}},
				)
			}
		}
		return "chat " + c.model.name, kv, ev
	case dialectOpenInference:
		kv = []model.KeyValue{
			str("openinference.span.kind", "LLM"), str("llm.model_name", c.model.response), str("llm.provider", p[2]), str("llm.system", p[1]),
			integer("llm.token_count.prompt", c.inTokens), integer("llm.token_count.completion", c.outTokens), integer("llm.token_count.total", total),
			str("llm.invocation_parameters", fmt.Sprintf(`{"temperature":%g,"model":%q}`, c.temperature, c.model.name)),
			str("session.id", c.session), str("user.id", c.user),
		}
		if c.content {
			i := 0
			if c.system != "" {
				kv = append(kv, str("llm.input_messages.0.message.role", "system"), str("llm.input_messages.0.message.content", c.system))
				i = 1
			}
			kv = append(kv,
				str(fmt.Sprintf("llm.input_messages.%d.message.role", i), "user"), str(fmt.Sprintf("llm.input_messages.%d.message.content", i), c.prompt),
				str("llm.output_messages.0.message.role", "assistant"), str("llm.output_messages.0.message.content", c.completion),
				str("input.value", c.prompt), str("input.mime_type", "text/plain"),
				str("output.value", c.completion), str("output.mime_type", "text/plain"),
			)
		}
		return "ChatCompletion", kv, nil
	}
	// OpenLLMetry.
	kv = []model.KeyValue{
		str("gen_ai.system", p[3]), str("llm.request.type", "chat"),
		str("gen_ai.request.model", c.model.name), str("gen_ai.response.model", c.model.response),
		float("gen_ai.request.temperature", c.temperature),
		integer("gen_ai.usage.prompt_tokens", c.inTokens), integer("gen_ai.usage.completion_tokens", c.outTokens), integer("llm.usage.total_tokens", total),
		str("traceloop.association.properties.session_id", c.session), str("traceloop.association.properties.user_id", c.user),
	}
	if c.content {
		i := 0
		if c.system != "" {
			kv = append(kv, str("gen_ai.prompt.0.role", "system"), str("gen_ai.prompt.0.content", c.system))
			i = 1
		}
		kv = append(kv,
			str(fmt.Sprintf("gen_ai.prompt.%d.role", i), "user"), str(fmt.Sprintf("gen_ai.prompt.%d.content", i), c.prompt),
			str("gen_ai.completion.0.role", "assistant"), str("gen_ai.completion.0.content", c.completion),
			str("gen_ai.completion.0.finish_reason", "stop"),
		)
	}
	return strings.ToLower(strings.ReplaceAll(p[3], " ", "")) + ".chat", kv, nil
}
