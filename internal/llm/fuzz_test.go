package llm

import (
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// FuzzExtract feeds arbitrary token values, usage/cost JSON and message JSON
// to Extract and Messages: they must not panic, and the normalised counts
// must keep their invariants (input includes cache, output includes
// reasoning, no negative cost).
func FuzzExtract(f *testing.F) {
	f.Add("1200", "300", "1024", "0", "1500", `{"input":400,"output":120,"cache_read_input_tokens":2000,"total":2520}`, `{"total":0.001}`,
		`[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, "gpt-4o")
	f.Add("812.0", "95", "512", "12", "", `{}`, `{"input":"x"}`, `{"role":"user"}`, "claude-3-5-sonnet-20241022")
	f.Add("-5", "1e308", "NaN", "99999999999999999999", "7", `[1,2]`, `null`, `not json`, "")
	f.Add("0", "0", "0", "0", "0", `{"input":1e30}`, `{"total":-1}`, `[{"role":"tool","parts":[{"type":"tool_call_response","id":1,"response":{"a":[1]}}]}]`, "*")
	prices := DefaultPrices()
	at := uint64(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	f.Fuzz(func(t *testing.T, in, out, cache, reasoning, total, usage, cost, messages, modelName string) {
		s := &model.Span{StartTimeUnixNano: at, Attributes: []model.KeyValue{
			kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", modelName),
			kv("llm.token_count.prompt", in), kv("llm.token_count.completion", out),
			kv("llm.token_count.prompt_details.cache_read", cache), kv("llm.token_count.completion_details.reasoning", reasoning),
			kv("llm.token_count.total", total), kv("langfuse.observation.usage_details", usage),
			kv("langfuse.observation.cost_details", cost), kv("gen_ai.input.messages", messages),
			kv("gen_ai.output.messages", messages), kv("langfuse.observation.output", messages),
			kv("gen_ai.prompt."+in+".content", messages), kv("langfuse.observation.completion_start_time", total),
		}}
		for _, kvs := range [][]model.KeyValue{s.Attributes, s.Attributes[2:]} {
			s.Attributes = kvs
			l := Extract(s, prices)
			if l == nil {
				t.Fatal("nil LLM for a span with gen_ai attributes")
			}
			if l.InputTokens >= 0 && l.InputTokens < max(l.CacheReadTokens, 0)+max(l.CacheCreationTokens, 0) {
				t.Errorf("input %d excludes cache %d+%d", l.InputTokens, l.CacheReadTokens, l.CacheCreationTokens)
			}
			if l.OutputTokens >= 0 && l.OutputTokens < l.ReasoningTokens {
				t.Errorf("output %d excludes reasoning %d", l.OutputTokens, l.ReasoningTokens)
			}
			if l.CostNanoUSD < 0 {
				t.Errorf("negative cost %d", l.CostNanoUSD)
			}
			_, _ = Messages(s)
		}
	})
}

func TestPricesConcurrent(t *testing.T) {
	p := DefaultPrices()
	at := day("2025-06-01")
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if _, ok := p.Cost("openai", "gpt-4o-mini", at, 10, 10, 0, 0); !ok {
					t.Error("gpt-4o-mini not priced")
					return
				}
				_, _ = p.Cost("openai", "unknown-"+string(rune('a'+i%26)), at, 10, 10, 0, 0)
			}
		}()
	}
	wg.Wait()
}
