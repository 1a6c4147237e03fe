package llm_test

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
)

// TestBenchCorpus: every LLM call the benchmark's llm corpus generates (in
// all its dialects) yields a model, a provider and tokens, is counted and
// priced by the built-in table; agent roots are not counted; messages are
// found whenever the corpus wrote content.
func TestBenchCorpus(t *testing.T) {
	spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 7, Spans: 20000, Start: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	llm.Enrich(spans, llm.DefaultPrices())
	var calls, agents, tools, withContent int
	services := map[string]bool{}
	for i := range spans {
		s := &spans[i]
		l := s.LLM
		isCall := s.Kind == model.KindClient && !hasAttr(s, "http.request.method") && !hasAttr(s, "db.system.name")
		if !isCall {
			if l != nil && l.Counted {
				t.Fatalf("span %q (%s) is not an LLM call but is counted: %+v", s.Name, s.Service, *l)
			}
			if l != nil && l.ToolName != "" {
				tools++
			}
			if l != nil && (l.Operation == "invoke_agent" || l.Operation == "invoke_workflow") {
				agents++
			}
			continue
		}
		calls++
		services[s.Service] = true
		if l == nil {
			t.Fatalf("LLM call %q (%s) has no LLM fields: %v", s.Name, s.Service, s.Attributes)
		}
		if l.Model() == "" || l.Provider == "" || l.InputTokens <= 0 || l.OutputTokens <= 0 || !l.Counted {
			t.Fatalf("LLM call %q (%s): incomplete %+v", s.Name, s.Service, *l)
		}
		if l.CostSource != model.CostComputed || l.CostNanoUSD <= 0 {
			t.Fatalf("LLM call %q (%s) model %q provider %q: not priced: %+v", s.Name, s.Service, l.Model(), l.Provider, *l)
		}
		if l.SessionID == "" || l.UserID == "" {
			t.Fatalf("LLM call %q (%s): no session or user: %+v", s.Name, s.Service, *l)
		}
		if hasContent(s) {
			withContent++
			in, out := llm.Messages(s)
			if len(in) == 0 || len(out) == 0 || in[len(in)-1].Content == "" || out[0].Content == "" {
				t.Fatalf("LLM call %q (%s): messages in=%+v out=%+v", s.Name, s.Service, in, out)
			}
		}
	}
	if calls < 1000 || agents == 0 || tools == 0 || withContent == 0 || len(services) < 7 {
		t.Errorf("corpus coverage too thin: %d calls from %d services, %d agents, %d tools, %d with content", calls, len(services), agents, tools, withContent)
	}
}

func hasAttr(s *model.Span, k string) bool {
	_, ok := s.Attr(k)
	return ok
}

func hasContent(s *model.Span) bool {
	for _, k := range []string{"gen_ai.input.messages", "gen_ai.prompt.0.content", "llm.input_messages.0.message.content"} {
		if hasAttr(s, k) {
			return true
		}
	}
	return len(s.Events) > 0
}
