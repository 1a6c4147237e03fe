package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

type sums struct {
	spans, errors, counted, in, out, cacheRead, reasoning, cost int64
}

func (s sums) String() string { return fmt.Sprintf("%+v", struct{ S sums }{s}) }

func groupValue(s *model.Span, dim string) string {
	l := s.LLM
	switch dim {
	case "model":
		return l.Model()
	case "provider":
		return l.Provider
	case "service":
		return s.Service
	case "operation":
		return l.Operation
	case "session":
		return l.SessionID
	case "user":
		return l.UserID
	case "agent":
		return l.AgentName
	case "hour":
		return time.Unix(0, int64(s.StartTimeUnixNano)).UTC().Truncate(time.Hour).Format(time.RFC3339)
	case "day":
		return time.Unix(0, int64(s.StartTimeUnixNano)).UTC().Truncate(24 * time.Hour).Format("2006-01-02")
	}
	panic(dim)
}

// TestLLMStatsEqualBruteForce: for random windows, filters and groupings,
// every group's counts and sums equal a direct recomputation over the raw
// spans, with data in several segments (answered from stored aggregates
// where blocks lie inside the window) and in the write buffer.
func TestLLMStatsEqualBruteForce(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 3, Spans: 12000, Start: start, Window: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Durability: engine.DurabilityBuffered, BlockSpans: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := 0; i < len(spans); i += 500 {
		body := otlp.EncodeProto(spans[i:min(i+500, len(spans))])
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}); err != nil {
			t.Fatal(err)
		}
		if i%3000 == 2500 {
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	llm.Enrich(spans, llm.DefaultPrices())
	withLLM := 0
	for i := range spans {
		if spans[i].LLM != nil {
			withLLM++
		}
	}
	if withLLM < len(spans)/4 {
		t.Fatalf("only %d of %d corpus spans have LLM fields", withLLM, len(spans))
	}
	dims := []string{"model", "provider", "service", "operation", "session", "user", "agent", "hour", "day"}
	filters := []string{"", `{ status = error }`, `{ duration > 500ms }`, `{ resource.service.name != "gateway" }`,
		`{ content = "the" }`, `{ content = "refund" }`}
	r := rand.New(rand.NewPCG(9, 9))
	for iter := range 60 {
		var f query.Filter
		if q := filters[r.IntN(len(filters))]; q != "" && iter%8 != 0 { // every 8th: no filter at all
			if f.Expr, err = query.ParseTraceQL(q); err != nil {
				t.Fatal(err)
			}
		}
		if iter%4 == 2 { // the content= parameter, outside the TraceQL expression
			if f.Content, err = text.ParseQuery([]string{"refund", "the", "weather"}[r.IntN(3)]); err != nil {
				t.Fatal(err)
			}
		}
		if iter%2 == 1 {
			f.Start = uint64(start.Add(time.Duration(r.Int64N(int64(5 * time.Hour)))).UnixNano())
			f.End = f.Start + uint64(r.Int64N(int64(3*time.Hour)))
		}
		gb := []string{dims[r.IntN(len(dims))]}
		if r.IntN(2) == 0 {
			gb = append(gb, dims[r.IntN(len(dims))])
			if gb[0] == gb[1] {
				gb = gb[:1]
			}
		}
		want := map[string]sums{}
		for i := range spans {
			s := &spans[i]
			if s.LLM == nil || !f.Match(s) {
				continue
			}
			k := ""
			for _, d := range gb {
				k += groupValue(s, d) + "|"
			}
			w := want[k]
			w.spans++
			if s.StatusCode == model.StatusError {
				w.errors++
			}
			if s.LLM.Counted {
				w.counted++
				w.in += max(s.LLM.InputTokens, 0)
				w.out += max(s.LLM.OutputTokens, 0)
				w.cacheRead += max(s.LLM.CacheReadTokens, 0)
				w.reasoning += max(s.LLM.ReasoningTokens, 0)
				w.cost += s.LLM.CostNanoUSD
			}
			want[k] = w
		}
		st, err := e.LLMStats(context.Background(), "default", &store.LLMQuery{Filter: f, GroupBy: gb})
		if err != nil {
			t.Fatal(err)
		}
		groups := st.Groups
		if len(groups) != len(want) {
			t.Fatalf("iter %d group_by %v: %d groups, want %d", iter, gb, len(groups), len(want))
		}
		for _, g := range groups {
			k := ""
			for _, d := range gb {
				k += g.Key[d] + "|"
			}
			m := g.M
			got := sums{m.Spans, m.Errors, m.Counted, m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.ReasoningTokens, m.CostNanoUSD}
			if got != want[k] {
				t.Fatalf("iter %d group_by %v key %q window %d..%d:\n got %v\nwant %v", iter, gb, k, f.Start, f.End, got, want[k])
			}
		}
	}
	// The sessions list over random windows (session tables where whole
	// segments lie inside them, block entries and rows elsewhere): every
	// session's span count, errors, cost and users.
	for iter := range 20 {
		var f query.Filter
		if iter%2 == 1 {
			f.Start = uint64(start.Add(time.Duration(r.Int64N(int64(5 * time.Hour)))).UnixNano())
			f.End = f.Start + uint64(r.Int64N(int64(3*time.Hour)))
		}
		type want struct {
			spans, errors, cost int64
			users               []string
		}
		ws := map[string]*want{}
		for i := range spans {
			s := &spans[i]
			if s.LLM == nil || s.LLM.SessionID == "" || !f.Match(s) {
				continue
			}
			w := ws[s.LLM.SessionID]
			if w == nil {
				w = &want{}
				ws[s.LLM.SessionID] = w
			}
			w.spans++
			if s.StatusCode == model.StatusError {
				w.errors++
			}
			if s.LLM.Counted {
				w.cost += s.LLM.CostNanoUSD
			}
			if u := s.LLM.UserID; u != "" && !slices.Contains(w.users, u) {
				w.users = append(w.users, u)
			}
		}
		got, _, err := e.Sessions(context.Background(), "default", &f)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ws) {
			t.Fatalf("sessions, window %d..%d: %d sessions, want %d", f.Start, f.End, len(got), len(ws))
		}
		for _, g := range got {
			w := ws[g.ID]
			if w == nil {
				t.Fatalf("sessions: unexpected session %q", g.ID)
			}
			slices.Sort(w.users)
			if g.M.Spans != w.spans || g.M.Errors != w.errors || g.M.CostNanoUSD != w.cost || !slices.Equal(g.Users, w.users) {
				t.Fatalf("session %q, window %d..%d: %d spans, %d errors, cost %d, users %v; want %+v",
					g.ID, f.Start, f.End, g.M.Spans, g.M.Errors, g.M.CostNanoUSD, g.Users, *w)
			}
		}
	}
	// Both paths were exercised: stored aggregates and rows.
	c := e.Counters()
	if c.LLMAggSegments == 0 || c.LLMAggBlocks == 0 || c.LLMRowBlocks == 0 {
		t.Fatalf("paths not all exercised: %d segments and %d blocks from aggregates, %d blocks from rows",
			c.LLMAggSegments, c.LLMAggBlocks, c.LLMRowBlocks)
	}
}

// TestLLMStatsCacheFollowsNewData: a repeated query (answered from the
// result cache) reflects spans appended and sealed after the first answer.
func TestLLMStatsCacheFollowsNewData(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	spans, err := bench.Generate("llm", bench.CorpusOptions{Seed: 5, Spans: 4000, Start: start, Window: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Durability: engine.DurabilityBuffered, BlockSpans: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	total := func() int64 {
		st, err := e.LLMStats(context.Background(), "default", &store.LLMQuery{GroupBy: []string{"model"}})
		if err != nil {
			t.Fatal(err)
		}
		g := st.Groups
		var n int64
		for i := range g {
			n += g[i].M.Spans
		}
		return n
	}
	llm.Enrich(spans, llm.DefaultPrices())
	var want int64
	for half := range 2 {
		part := spans[half*2000 : (half+1)*2000]
		body := otlp.EncodeProto(part)
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}); err != nil {
			t.Fatal(err)
		}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		for i := range part {
			if part[i].LLM != nil {
				want++
			}
		}
		for range 2 { // the second asks the cache
			if got := total(); got != want {
				t.Fatalf("after part %d: %d LLM spans, want %d", half, got, want)
			}
		}
	}
}
