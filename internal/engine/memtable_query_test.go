package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestBufferQueriesEqualBruteForce: with every span in write buffers (a
// frozen one and the active one, none sealed), searches, trace lookups and
// LLM statistics equal a brute-force evaluation over the newest copy of
// every span, checked while the buffer fills, across re-sends that change
// a span, and with another project's spans interleaved. (Statistics count
// stored rows: a span re-sent after its first copy left the active buffer
// counts once per buffer holding it, as it does once per segment.)
func TestBufferQueriesEqualBruteForce(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 64, SealAge: time.Hour, SealBytes: 1 << 40,
		MaxBufferBytes: 1 << 40, Durability: DurabilityBuffered})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g := newGen(3)
	r := rand.New(rand.NewPCG(8, 8))
	newest := map[spanKey]model.Span{}
	perBuffer := []map[spanKey]model.Span{{}} // the newest copy in each buffer, oldest buffer first
	var sent []model.Span
	models := []string{"gpt-4o", "gpt-4o-mini", "claude-3-5-sonnet"}
	ctx := context.Background()
	check := func(round int) {
		t.Helper()
		var corpus []model.Span
		for k, s := range newest {
			if k.project == "p1" {
				corpus = append(corpus, s)
			}
		}
		for i := range 15 {
			q := randomFilter(r)
			expr, err := query.ParseTraceQL(q)
			if err != nil {
				t.Fatalf("parse %s: %v", q, err)
			}
			f := query.Filter{Expr: expr}
			if i%3 == 0 {
				f.Start = g.base + uint64(r.Int64N(1_800_000_000_000))
				f.End = f.Start + uint64(r.Int64N(1_800_000_000_000))
			}
			want := bruteForce(corpus, &f)
			got := searchAll(t, e, "p1", &f, []int{5, 40, 1000}[r.IntN(3)])
			if !slices.Equal(keys(got), keys(want)) {
				t.Fatalf("round %d, filter %s (window %d..%d): got %d spans, want %d", round, q, f.Start, f.End, len(got), len(want))
			}
			for j := range got {
				if got[j].Name != want[j].Name || !slices.EqualFunc(got[j].Attributes, want[j].Attributes, sameKV) {
					t.Fatalf("round %d, filter %s: span %s is %q %v, its newest copy %q %v", round, q,
						got[j].SpanID, got[j].Name, got[j].Attributes, want[j].Name, want[j].Attributes)
				}
			}
		}
		// A trace lookup returns the newest copy of each of its spans.
		for range 10 {
			s := corpus[r.IntN(len(corpus))]
			spans, _, err := e.Trace(ctx, "p1", s.TraceID)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, w := range corpus {
				if w.TraceID == s.TraceID {
					n++
				}
			}
			if len(spans) != n {
				t.Fatalf("round %d: trace %s has %d spans, want %d", round, s.TraceID, len(spans), n)
			}
			for _, got := range spans {
				if w := newest[spanKey{"p1", got.TraceID, got.SpanID}]; got.Name != w.Name {
					t.Fatalf("round %d: trace lookup returns copy %q of span %s, want %q", round, got.Name, got.SpanID, w.Name)
				}
			}
		}
		// LLM statistics by model, over the whole buffer and a window.
		for _, f := range []query.Filter{{}, {Start: g.base + 900_000_000_000, End: g.base + 2_700_000_000_000}} {
			want := map[string][3]int64{}
			for _, buf := range perBuffer {
				for k, s := range buf {
					if k.project != "p1" || s.LLM == nil || !f.Match(&s) {
						continue
					}
					w := want[s.LLM.Model()]
					w[0]++
					w[1] += s.LLM.InputTokens
					w[2] += s.LLM.CostNanoUSD
					want[s.LLM.Model()] = w
				}
			}
			st, err := e.LLMStats(ctx, "p1", &store.LLMQuery{Filter: f, GroupBy: []string{"model"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Groups) != len(want) {
				t.Fatalf("round %d: LLM stats have %d models, want %d", round, len(st.Groups), len(want))
			}
			for _, gr := range st.Groups {
				if got := [3]int64{gr.M.Spans, gr.M.InputTokens, gr.M.CostNanoUSD}; got != want[gr.Key["model"]] {
					t.Fatalf("round %d: model %s: spans, input tokens, cost %v; want %v", round, gr.Key["model"], got, want[gr.Key["model"]])
				}
			}
		}
	}
	for round := range 8 {
		spans := g.spans(60)
		for i := range spans {
			s := &spans[i]
			if r.IntN(3) == 0 { // an LLM call
				s.Attributes = append(s.Attributes,
					model.KeyValue{Key: "gen_ai.system", Value: model.StringValue("openai")},
					model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue(models[r.IntN(len(models))])},
					model.KeyValue{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(r.Int64N(5000))},
					model.KeyValue{Key: "gen_ai.usage.output_tokens", Value: model.IntValue(r.Int64N(500))})
			}
		}
		// Re-send some spans sent before, changed: the newest copy wins.
		for range 20 {
			if len(sent) == 0 {
				break
			}
			s := sent[r.IntN(len(sent))]
			s.Name = names[r.IntN(len(names))]
			s.Attributes = append(slices.Clone(s.Attributes[:2]), model.KeyValue{Key: "resent", Value: model.IntValue(int64(round))})
			spans = append(spans, s)
		}
		// And spans of this round again, changed, in the same request of
		// hundreds of spans, far after their first copies.
		for range 5 {
			s := spans[r.IntN(100)]
			s.Name = names[r.IntN(len(names))]
			s.Attributes = append(slices.Clone(s.Attributes[:2]), model.KeyValue{Key: "again", Value: model.IntValue(int64(round))})
			spans = append(spans, s)
		}
		if len(spans) < 300 {
			t.Fatalf("a request of %d spans: the test wants hundreds", len(spans))
		}
		appendRequest(t, e, "p1", spans)
		appendSpans(t, e, "p2", newGen(uint64(100+round)).spans(10))
		llm.Enrich(spans, e.opts.Prices)
		for _, s := range spans {
			newest[spanKey{"p1", s.TraceID, s.SpanID}] = s
			perBuffer[len(perBuffer)-1][spanKey{"p1", s.TraceID, s.SpanID}] = s
			sent = append(sent, s)
		}
		if round == 3 {
			// Freeze without sealing: the first half now waits in a
			// frozen buffer, the rest goes to the new active one.
			if err := e.freeze(); err != nil {
				t.Fatal(err)
			}
			perBuffer = append(perBuffer, map[spanKey]model.Span{})
		}
		check(round)
	}
	if st := testStats(e, "p1"); st.Segments != 0 {
		t.Fatalf("%d segments; the test wants every span in the write buffers", st.Segments)
	}
	e.mu.RLock()
	frozen := len(e.frozen)
	e.mu.RUnlock()
	if frozen != 1 {
		t.Fatalf("%d frozen buffers, want 1", frozen)
	}
}

func sameKV(a, b model.KeyValue) bool {
	return a.Key == b.Key && a.Value.Type == b.Value.Type && fmt.Sprint(a.Value.AsString()) == fmt.Sprint(b.Value.AsString())
}
