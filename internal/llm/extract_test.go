package llm

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func kv(k string, v any) model.KeyValue {
	switch x := v.(type) {
	case string:
		return model.KeyValue{Key: k, Value: model.StringValue(x)}
	case int:
		return model.KeyValue{Key: k, Value: model.IntValue(int64(x))}
	case float64:
		return model.KeyValue{Key: k, Value: model.DoubleValue(x)}
	}
	panic("kv: unsupported type")
}

func spanWith(attrs ...model.KeyValue) *model.Span {
	return &model.Span{StartTimeUnixNano: uint64(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()), Attributes: attrs}
}

// TestInclusionRules checks that InputTokens always includes the cache
// tokens and OutputTokens the reasoning tokens exactly once, whatever the
// dialect's own convention and whether a total is given with its parts.
func TestInclusionRules(t *testing.T) {
	cases := []struct {
		name             string
		attrs            []model.KeyValue
		in, out, cr, cw  int64
		reasoning, total int64
	}{
		{"otel: cache read inside input_tokens", []model.KeyValue{
			kv("gen_ai.operation.name", "chat"), kv("gen_ai.usage.input_tokens", 5000), kv("gen_ai.usage.cache_read.input_tokens", 4000), kv("gen_ai.usage.output_tokens", 10),
		}, 5000, 10, 4000, -1, -1, 0},
		{"otel: reasoning inside output_tokens", []model.KeyValue{
			kv("gen_ai.operation.name", "chat"), kv("gen_ai.usage.input_tokens", 10), kv("gen_ai.usage.output_tokens", 800), kv("gen_ai.usage.reasoning.output_tokens", 600),
		}, 10, 800, -1, -1, 600, 0},
		{"otel: cache larger than input cannot be inside it", []model.KeyValue{
			kv("gen_ai.operation.name", "chat"), kv("gen_ai.usage.input_tokens", 50), kv("gen_ai.usage.cache_read.input_tokens", 3000), kv("gen_ai.usage.cache_creation.input_tokens", 200), kv("gen_ai.usage.output_tokens", 10),
		}, 3250, 10, 3000, 200, -1, 0},
		{"otel: reasoning larger than output is added", []model.KeyValue{
			kv("gen_ai.operation.name", "chat"), kv("gen_ai.usage.input_tokens", 10), kv("gen_ai.usage.output_tokens", 100), kv("gen_ai.usage.reasoning.output_tokens", 300),
		}, 10, 400, -1, -1, 300, 0},
		{"openinference: total given with parts, cache inside prompt", []model.KeyValue{
			kv("openinference.span.kind", "LLM"), kv("llm.token_count.prompt", 4000), kv("llm.token_count.prompt_details.cache_read", 1000),
			kv("llm.token_count.completion", 100), kv("llm.token_count.total", 4100),
		}, 4000, 100, 1000, -1, -1, 0},
		{"openinference: total says prompt excluded the cache (Anthropic usage copied as is)", []model.KeyValue{
			kv("openinference.span.kind", "LLM"), kv("llm.token_count.prompt", 4000), kv("llm.token_count.prompt_details.cache_read", 1000),
			kv("llm.token_count.completion", 100), kv("llm.token_count.total", 5100),
		}, 5000, 100, 1000, -1, -1, 0},
		{"openinference: total says completion excluded reasoning", []model.KeyValue{
			kv("openinference.span.kind", "LLM"), kv("llm.token_count.prompt", 10), kv("llm.token_count.completion", 100),
			kv("llm.token_count.completion_details.reasoning", 50), kv("llm.token_count.total", 160),
		}, 10, 150, -1, -1, 50, 0},
		{"openllmetry: total with parts is not added again", []model.KeyValue{
			kv("gen_ai.system", "openai"), kv("llm.request.type", "chat"), kv("gen_ai.usage.prompt_tokens", 70), kv("gen_ai.usage.completion_tokens", 30), kv("llm.usage.total_tokens", 100),
		}, 70, 30, -1, -1, -1, 0},
		{"langfuse: disjoint keys are summed", []model.KeyValue{
			kv("langfuse.observation.type", "generation"),
			kv("langfuse.observation.usage_details", `{"input":100,"input_cached_tokens":900,"output":40,"output_reasoning_tokens":60,"total":1100}`),
		}, 1000, 100, 900, -1, 60, 0},
		{"langfuse: input already holding the cache, as total shows", []model.KeyValue{
			kv("langfuse.observation.type", "generation"),
			kv("langfuse.observation.usage_details", `{"input":1000,"cache_read_input_tokens":900,"output":100,"total":1100}`),
		}, 1000, 100, 900, -1, -1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := Extract(spanWith(c.attrs...), nil)
			if l == nil {
				t.Fatal("Extract returned nil")
			}
			if l.InputTokens != c.in || l.OutputTokens != c.out || l.CacheReadTokens != c.cr || l.CacheCreationTokens != c.cw || l.ReasoningTokens != c.reasoning {
				t.Errorf("got in=%d out=%d cacheRead=%d cacheWrite=%d reasoning=%d, want %d %d %d %d %d",
					l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheCreationTokens, l.ReasoningTokens,
					c.in, c.out, c.cr, c.cw, c.reasoning)
			}
			if !l.Counted {
				t.Error("an LLM call must be counted")
			}
		})
	}
}

// TestAgentOverLLMCalls: an agent span that repeats its children's usage
// is not counted, so totals over Counted spans equal the children's sum,
// in every dialect that marks agents.
func TestAgentOverLLMCalls(t *testing.T) {
	agents := map[string][]model.KeyValue{
		"otel invoke_agent":   {kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "a")},
		"otel create_agent":   {kv("gen_ai.operation.name", "create_agent")},
		"openinference AGENT": {kv("openinference.span.kind", "AGENT")},
		"openinference CHAIN": {kv("openinference.span.kind", "CHAIN")},
		"traceloop workflow":  {kv("traceloop.span.kind", "workflow")},
		"traceloop task":      {kv("traceloop.span.kind", "task")},
		"traceloop agent":     {kv("traceloop.span.kind", "agent")},
		"langfuse agent":      {kv("langfuse.observation.type", "agent")},
		"langfuse chain":      {kv("langfuse.observation.type", "chain")},
		"langfuse span":       {kv("langfuse.observation.type", "span")},
	}
	child := func(in, out int) model.Span {
		return *spanWith(kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"), kv("gen_ai.request.model", "gpt-4o-mini"),
			kv("gen_ai.usage.input_tokens", in), kv("gen_ai.usage.output_tokens", out))
	}
	for name, marker := range agents {
		t.Run(name, func(t *testing.T) {
			agent := spanWith(append(marker, kv("gen_ai.usage.input_tokens", 300), kv("gen_ai.usage.output_tokens", 30),
				kv("llm.token_count.prompt", 300), kv("llm.token_count.completion", 30), kv("llm.cost.total", 0.5))...)
			spans := []model.Span{*agent, child(100, 10), child(200, 20)}
			Enrich(spans, DefaultPrices())
			var in, out, cost int64
			for _, s := range spans {
				if s.LLM == nil {
					t.Fatal("nil LLM")
				}
				if s.LLM.Counted {
					in += s.LLM.InputTokens
					out += s.LLM.OutputTokens
					cost += s.LLM.CostNanoUSD
				}
			}
			if spans[0].LLM.Counted {
				t.Errorf("agent span counted: %+v", *spans[0].LLM)
			}
			if spans[0].LLM.InputTokens != 300 || spans[0].LLM.CostSource != model.CostClient {
				t.Errorf("agent span lost its own report: %+v", *spans[0].LLM)
			}
			if in != 300 || out != 30 {
				t.Errorf("counted usage in=%d out=%d, want 300 30 (children only)", in, out)
			}
			// gpt-4o-mini: 0.15 / 0.60 USD per million: 300*150 + 30*600 nano-USD.
			if cost != 300*150+30*600 {
				t.Errorf("counted cost = %d nano-USD, want %d", cost, 300*150+30*600)
			}
		})
	}
}

func TestCountedRoles(t *testing.T) {
	cases := []struct {
		name    string
		attrs   []model.KeyValue
		counted bool
		op      string
	}{
		{"otel embeddings", []model.KeyValue{kv("gen_ai.operation.name", "embeddings"), kv("gen_ai.usage.input_tokens", 5)}, true, "embeddings"},
		{"otel generate_content", []model.KeyValue{kv("gen_ai.operation.name", "generate_content")}, true, "generate_content"},
		{"otel text_completion", []model.KeyValue{kv("gen_ai.operation.name", "text_completion")}, true, "text_completion"},
		{"otel execute_tool", []model.KeyValue{kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", "x")}, false, "execute_tool"},
		{"openinference EMBEDDING", []model.KeyValue{kv("openinference.span.kind", "EMBEDDING")}, true, "embeddings"},
		{"openinference TOOL", []model.KeyValue{kv("openinference.span.kind", "TOOL"), kv("tool.name", "x")}, false, "execute_tool"},
		{"openinference RETRIEVER", []model.KeyValue{kv("openinference.span.kind", "RETRIEVER")}, false, "retrieval"},
		{"langfuse generation", []model.KeyValue{kv("langfuse.observation.type", "generation")}, true, "chat"},
		{"langfuse embedding", []model.KeyValue{kv("langfuse.observation.type", "embedding")}, true, "embeddings"},
		{"langfuse tool", []model.KeyValue{kv("langfuse.observation.type", "tool")}, false, "execute_tool"},
		{"traceloop tool", []model.KeyValue{kv("traceloop.span.kind", "tool"), kv("traceloop.entity.name", "x")}, false, "execute_tool"},
		{"openllmetry embedding request", []model.KeyValue{kv("gen_ai.system", "openai"), kv("llm.request.type", "embedding")}, true, "embeddings"},
		{"no marker, usage reported", []model.KeyValue{kv("gen_ai.system", "openai"), kv("gen_ai.usage.prompt_tokens", 1)}, true, ""},
		{"no marker, no usage, no model", []model.KeyValue{kv("gen_ai.conversation.id", "c")}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := Extract(spanWith(c.attrs...), nil)
			if l == nil {
				t.Fatal("nil LLM")
			}
			if l.Counted != c.counted || l.Operation != c.op {
				t.Errorf("Counted=%v Operation=%q, want %v %q", l.Counted, l.Operation, c.counted, c.op)
			}
		})
	}
}

func TestNumericForms(t *testing.T) {
	for _, c := range []struct {
		v    model.Value
		want int64
		ok   bool
	}{
		{model.IntValue(42), 42, true},
		{model.DoubleValue(42), 42, true},
		{model.DoubleValue(41.6), 42, true},
		{model.StringValue("42"), 42, true},
		{model.StringValue(" 42 "), 42, true},
		{model.StringValue("42.0"), 42, true},
		{model.StringValue("4.2e1"), 42, true},
		{model.IntValue(-1), 0, false},
		{model.DoubleValue(-3), 0, false},
		{model.StringValue("many"), 0, false},
		{model.StringValue("NaN"), 0, false},
		{model.BoolValue(true), 0, false},
	} {
		got, ok := count(c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("count(%s %q) = %d, %v; want %d, %v", c.v.Type, c.v.AsString(), got, ok, c.want, c.ok)
		}
	}
}

func TestNoLLMAttributes(t *testing.T) {
	s := spanWith(kv("http.request.method", "GET"), kv("session.id", "s"), kv("user.id", "u"), kv("agent.name", "x"),
		kv("traceloop.association.properties.session_id", "s"))
	s.Resource = &model.Resource{Attributes: []model.KeyValue{kv("service.name", "web"), kv("gen_ai.system", "openai")}}
	if l := Extract(s, DefaultPrices()); l != nil {
		t.Errorf("Extract = %+v, want nil: only generic attributes on the span", *l)
	}
	if l := Extract(&model.Span{}, nil); l != nil {
		t.Errorf("empty span: %+v", *l)
	}
}

func TestProviderAliases(t *testing.T) {
	for in, want := range map[string]string{
		"OpenAI": "openai", "Anthropic": "anthropic", "VertexAI": "gcp.vertex_ai", "vertex_ai": "gcp.vertex_ai",
		"google": "gcp.gemini", "gcp.gemini": "gcp.gemini", "MistralAI": "mistral_ai", "mistralai": "mistral_ai",
		"Bedrock": "aws.bedrock", "aws.bedrock": "aws.bedrock", "az.ai.openai": "azure.ai.openai", "SomethingNew": "somethingnew",
	} {
		if got := normalizeProvider(in); got != want {
			t.Errorf("normalizeProvider(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClientCostWins(t *testing.T) {
	base := []model.KeyValue{kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"), kv("gen_ai.request.model", "gpt-4o"),
		kv("gen_ai.usage.input_tokens", 1000), kv("gen_ai.usage.output_tokens", 100)}
	for name, c := range map[string]struct {
		attr model.KeyValue
		want int64
	}{
		"llm.cost.total":           {kv("llm.cost.total", 0.25), 250_000_000},
		"gen_ai.usage.cost":        {kv("gen_ai.usage.cost", "0.125"), 125_000_000},
		"langfuse cost_details":    {kv("langfuse.observation.cost_details", `{"input":0.1,"output":0.2}`), 300_000_000},
		"llm.cost prompt only":     {kv("llm.cost.prompt", 0.5), 500_000_000},
		"langfuse total preferred": {kv("langfuse.observation.cost_details", `{"input":0.1,"total":0.15}`), 150_000_000},
	} {
		t.Run(name, func(t *testing.T) {
			l := Extract(spanWith(append(base, c.attr)...), DefaultPrices())
			if l.CostSource != model.CostClient || l.CostNanoUSD != c.want {
				t.Errorf("cost %d source %d, want %d from the client", l.CostNanoUSD, l.CostSource, c.want)
			}
		})
	}
	l := Extract(spanWith(base...), DefaultPrices())
	if l.CostSource != model.CostComputed || l.CostNanoUSD != 1000*2500+100*10000 {
		t.Errorf("computed cost %d source %d, want %d", l.CostNanoUSD, l.CostSource, 1000*2500+100*10000)
	}
	l = Extract(spanWith(kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", "my-finetune"), kv("gen_ai.usage.input_tokens", 5)), DefaultPrices())
	if l.CostSource != model.CostNone || l.CostNanoUSD != 0 {
		t.Errorf("unknown model: cost %d source %d, want none", l.CostNanoUSD, l.CostSource)
	}
	l = Extract(spanWith(base...), nil)
	if l.CostSource != model.CostNone {
		t.Errorf("nil prices: cost source %d, want none", l.CostSource)
	}
}
