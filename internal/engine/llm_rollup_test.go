package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
)

// rollupCorpus: LLM calls of many sessions (some without a session, some
// with several users), models, services and agents, in traces of five
// spans. Spans start in [start, start+2h) or [start+2h+2m, start+4h): a
// retention cutoff in the gap splits them without ambiguity. Trace ids
// follow the order of the spans and only traces of the second half are
// newer, so that a segment's blocks (in trace order) expire whole.
func rollupCorpus(seed uint64, n int, start time.Time) []model.Span {
	r := rand.New(rand.NewPCG(seed, 7))
	res := map[string]*model.Resource{}
	for _, svc := range []string{"chatbot", "planner"} {
		res[svc] = &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(svc)}}}
	}
	models := []string{"gpt-4o", "gpt-4o-mini", "claude-3-5-sonnet-20241022"}
	out := make([]model.Span, n)
	for i := range out {
		s := &out[i]
		trace := i / 5
		s.TraceID = model.TraceID{7, byte(seed), byte(trace >> 16), byte(trace >> 8), byte(trace), 1}
		s.SpanID = model.SpanID{8, byte(i >> 16), byte(i >> 8), byte(i), 1}
		at := time.Duration(r.Int64N(int64(2 * time.Hour)))
		if trace%2 == 0 && trace*5 >= n/2 { // most traces of the second half are newer: whole blocks expire
			at += 2*time.Hour + 2*time.Minute
		}
		s.StartTimeUnixNano = uint64(start.Add(at).UnixNano())
		s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(r.Int64N(int64(4*time.Second))) + 1
		s.Name, s.Kind = "chat", model.KindClient
		svc := []string{"chatbot", "planner"}[r.IntN(2)]
		s.Resource, s.Service = res[svc], svc
		if r.IntN(8) == 0 {
			s.StatusCode = model.StatusError
		}
		m := models[r.IntN(len(models))]
		system := "openai"
		if m[0] == 'c' {
			system = "anthropic"
		}
		s.Attributes = []model.KeyValue{
			{Key: "gen_ai.system", Value: model.StringValue(system)},
			{Key: "gen_ai.request.model", Value: model.StringValue(m)},
			{Key: "gen_ai.usage.prompt_tokens", Value: model.IntValue(int64(r.IntN(3000)))},
			{Key: "gen_ai.usage.completion_tokens", Value: model.IntValue(int64(r.IntN(500)))},
		}
		if r.IntN(10) != 0 {
			sess := r.IntN(n/25 + 1)
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "session.id", Value: model.StringValue(fmt.Sprintf("sess-%d", sess))})
			if r.IntN(5) != 0 {
				u := fmt.Sprintf("user-%d", (sess+r.IntN(2))%40) // a session has one or two users
				s.Attributes = append(s.Attributes, model.KeyValue{Key: "user.id", Value: model.StringValue(u)})
			}
		}
		if r.IntN(3) == 0 {
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "gen_ai.agent.name", Value: model.StringValue("researcher")})
		}
	}
	return out
}

// sessionWant is a brute-force session summary.
type sessionWant struct {
	spans, errors, counted, in, out, cost int64
	minStart, maxEnd, maxLatency          uint64
	users                                 []string
}

// bruteSessions recomputes the sessions of the LLM spans of spans matching
// f (spans enriched), keyed by session id ("" included).
func bruteSessions(spans []model.Span, f *query.Filter) map[string]*sessionWant {
	return bruteBy(spans, f, func(s *model.Span) string { return s.LLM.SessionID })
}

// bruteBy recomputes the measures of the LLM spans matching f per key.
func bruteBy(spans []model.Span, f *query.Filter, key func(s *model.Span) string) map[string]*sessionWant {
	out := map[string]*sessionWant{}
	for i := range spans {
		s := &spans[i]
		if s.LLM == nil || !f.Match(s) {
			continue
		}
		w := out[key(s)]
		if w == nil {
			w = &sessionWant{minStart: s.StartTimeUnixNano}
			out[key(s)] = w
		}
		w.spans++
		if s.StatusCode == model.StatusError {
			w.errors++
		}
		if s.LLM.Counted {
			w.counted++
			w.in += max(s.LLM.InputTokens, 0)
			w.out += max(s.LLM.OutputTokens, 0)
			w.cost += max(s.LLM.CostNanoUSD, 0)
		}
		w.minStart = min(w.minStart, s.StartTimeUnixNano)
		w.maxEnd = max(w.maxEnd, s.EndTimeUnixNano)
		w.maxLatency = max(w.maxLatency, s.Duration())
		if u := s.LLM.UserID; u != "" && !slices.Contains(w.users, u) {
			w.users = append(w.users, u)
		}
	}
	for _, w := range out {
		slices.Sort(w.users)
	}
	return out
}

// checkSessions compares group by session and the sessions list with a
// brute-force recomputation over spans (the visible ones, enriched).
func checkSessions(t *testing.T, e *Engine, project, what string, spans []model.Span, f *query.Filter) {
	t.Helper()
	ctx := context.Background()
	want := bruteSessions(spans, f)
	st, err := e.LLMStats(ctx, project, &store.LLMQuery{Filter: *f, GroupBy: []string{"session"}})
	if err != nil || len(st.Warnings) > 0 {
		t.Fatalf("%s: group by session: %v %v", what, err, st.Warnings)
	}
	if len(st.Groups) != len(want) {
		t.Fatalf("%s: group by session: %d groups, want %d", what, len(st.Groups), len(want))
	}
	for _, g := range st.Groups {
		w, m := want[g.Key["session"]], g.M
		if w == nil {
			t.Fatalf("%s: group by session: unexpected session %q", what, g.Key["session"])
		}
		got := sessionWant{spans: m.Spans, errors: m.Errors, counted: m.Counted, in: m.InputTokens, out: m.OutputTokens,
			cost: m.CostNanoUSD, minStart: m.MinStart, maxEnd: m.MaxEnd, users: w.users}
		if m.Latency != nil && math.Abs(m.Latency.Max-float64(w.maxLatency)) <= 1e-9*float64(w.maxLatency) {
			got.maxLatency = w.maxLatency // the sketch's maximum is exact, as a float64
		}
		if fmt.Sprint(got) != fmt.Sprint(*w) {
			t.Fatalf("%s: group by session %q:\n got %+v\nwant %+v", what, g.Key["session"], got, *w)
		}
	}
	checkTop(t, e, project, what, want, f)
	sess, res, err := e.Sessions(ctx, project, f)
	if err != nil || len(res.Warnings) > 0 {
		t.Fatalf("%s: sessions: %v %v", what, err, res.Warnings)
	}
	n := len(want)
	if want[""] != nil {
		n--
	}
	if len(sess) != n {
		t.Fatalf("%s: %d sessions, want %d", what, len(sess), n)
	}
	for _, s := range sess {
		w, m := want[s.ID], s.M
		if w == nil || s.ID == "" {
			t.Fatalf("%s: unexpected session %q", what, s.ID)
		}
		got := sessionWant{spans: m.Spans, errors: m.Errors, counted: m.Counted, in: m.InputTokens, out: m.OutputTokens,
			cost: m.CostNanoUSD, minStart: m.MinStart, maxEnd: m.MaxEnd, maxLatency: w.maxLatency, users: s.Users}
		if fmt.Sprint(got) != fmt.Sprint(*w) {
			t.Fatalf("%s: session %q:\n got %+v\nwant %+v", what, s.ID, got, *w)
		}
	}
	// The model-level statistics (coarse rollups where segments lie inside
	// the window).
	byModel := bruteBy(spans, f, func(s *model.Span) string { return s.LLM.Model() + "|" + s.Service })
	ms, err := e.LLMStats(ctx, project, &store.LLMQuery{Filter: *f, GroupBy: []string{"model", "service"}})
	if err != nil || len(ms.Warnings) > 0 {
		t.Fatalf("%s: group by model: %v %v", what, err, ms.Warnings)
	}
	if len(ms.Groups) != len(byModel) {
		t.Fatalf("%s: group by model: %d groups, want %d", what, len(ms.Groups), len(byModel))
	}
	for _, g := range ms.Groups {
		k := g.Key["model"] + "|" + g.Key["service"]
		w, m := byModel[k], g.M
		if w == nil {
			t.Fatalf("%s: group by model: unexpected group %q", what, k)
		}
		got := sessionWant{spans: m.Spans, errors: m.Errors, counted: m.Counted, in: m.InputTokens, out: m.OutputTokens,
			cost: m.CostNanoUSD, minStart: m.MinStart, maxEnd: m.MaxEnd, users: w.users}
		if m.Latency != nil && math.Abs(m.Latency.Max-float64(w.maxLatency)) <= 1e-9*float64(w.maxLatency) {
			got.maxLatency = w.maxLatency
		}
		if fmt.Sprint(got) != fmt.Sprint(*w) {
			t.Fatalf("%s: model %s:\n got %+v\nwant %+v", what, k, got, *w)
		}
	}
}

// TestSessionRollupsEqualBruteForce: group by session, the sessions list
// and group by model, answered from the segments' session tables and
// coarse rollups where whole segments lie in the window, equal a
// brute-force recomputation over the visible spans for random windows and
// filters: with data in segments and the write buffer, after a restart
// (nothing cached), after compaction, while an erasure hides traces and
// after its pass rewrote the segments, and after retention hid then
// removed the older half.
func TestSessionRollupsEqualBruteForce(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(start.Add(5 * time.Hour).UnixNano())
	dir := t.TempDir()
	opts := Options{Dir: dir, Durability: DurabilityBuffered, BlockSpans: 128, NoCompaction: true, Retention: 6 * time.Hour,
		EraseDelay: time.Hour, now: func() time.Time { return time.Unix(0, clock.Load()) }}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	spans := rollupCorpus(1, 6000, start)
	for i := 0; i < len(spans); i += 1200 {
		appendSpans(t, e, "default", spans[i:min(i+1200, len(spans))])
		if i < 4800 { // the last part stays in the write buffer
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	visible := slices.Clone(spans)
	llm.Enrich(visible, llm.DefaultPrices())
	r := rand.New(rand.NewPCG(3, 4))
	filters := []string{`{ status = error }`, `{ duration > 2s }`, `{ resource.service.name = "planner" }`}
	check := func(what string, iters int) {
		t.Helper()
		checkSessions(t, e, "default", what+", whole range", visible, &query.Filter{})
		for i := range iters {
			var f query.Filter
			if i%3 == 2 {
				if f.Expr, err = query.ParseTraceQL(filters[r.IntN(len(filters))]); err != nil {
					t.Fatal(err)
				}
			}
			if i%2 == 1 {
				f.Start = uint64(start.Add(time.Duration(r.Int64N(int64(4 * time.Hour)))).UnixNano())
				f.End = f.Start + uint64(r.Int64N(int64(2*time.Hour)))
			}
			checkSessions(t, e, "default", fmt.Sprintf("%s, iteration %d (window %d..%d, filter %v)", what, i, f.Start, f.End, f.Expr), visible, &f)
		}
	}
	check("segments and buffer", 12)
	before := e.Counters()
	check("segments and buffer, cached", 2)
	if c := e.Counters(); c.LLMAggSegments != before.LLMAggSegments {
		t.Fatalf("the repeated queries did not come from the result cache")
	}

	if err := e.Close(); err != nil { // restart: the buffer is sealed, nothing is cached
		t.Fatal(err)
	}
	if e, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	before = e.Counters()
	check("after a restart", 6)
	if c := e.Counters(); c.LLMAggSegments == before.LLMAggSegments {
		t.Fatalf("no whole segment was answered from stored aggregates")
	}
	for _, s := range e.view().segs {
		if !s.r.HasRollups() {
			t.Fatalf("segment %s was written without LLM rollups", s.name)
		}
	}

	if _, err := e.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after compaction", 6)

	// Erase three traces: hidden at once (their segments are read row by
	// row), then removed by the erasure pass.
	erased := map[model.TraceID]bool{}
	for _, i := range []int{5, 2500, 5995} {
		id := spans[i].TraceID
		if _, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", TraceID: &id}); err != nil {
			t.Fatal(err)
		}
		erased[id] = true
	}
	visible = slices.DeleteFunc(visible, func(s model.Span) bool { return erased[s.TraceID] })
	check("erasure hidden", 6)
	if err := e.EraseNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("erasure done", 6)

	// Retention: the cutoff moves into the gap of the corpus, then the
	// sweep rewrites the segments holding the expired half.
	clock.Store(start.Add(2*time.Hour + time.Minute + 6*time.Hour).UnixNano())
	cutoff := uint64(start.Add(2*time.Hour + time.Minute).UnixNano())
	visible = slices.DeleteFunc(visible, func(s model.Span) bool { return s.StartTimeUnixNano < cutoff })
	check("retention hidden", 6)
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("retention swept", 6)
	if c := e.Counters(); c.RetentionRewritten == 0 {
		t.Fatalf("no segment was rewritten by the retention sweep: %+v", c)
	}
}

// TestLLMCacheIgnoresEdgesOutsideSegments: a listing's default window
// (the last 24 hours) moves with the clock, so two requests never ask the
// same bounds. While no segment straddles an edge, the segments' part of
// the answer is the same and comes from the result cache; once an edge
// cuts a segment, or a segment leaves the window, the answer follows the
// window (equal to brute force) and is not taken from a part cached for
// other segments.
func TestLLMCacheIgnoresEdgesOutsideSegments(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	e, err := Open(Options{Dir: t.TempDir(), Durability: DurabilityBuffered, BlockSpans: 128, NoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	spans := rollupCorpus(5, 3000, start)
	for i := 0; i < len(spans); i += 1000 {
		appendSpans(t, e, "default", spans[i:i+1000])
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	visible := slices.Clone(spans)
	llm.Enrich(visible, llm.DefaultPrices())
	day := func(from time.Duration) *query.Filter { // a 24-hour window starting at start+from
		lo := start.Add(from)
		return &query.Filter{Start: uint64(lo.UnixNano()), End: uint64(lo.Add(24 * time.Hour).UnixNano())}
	}
	// The spans start in [start, start+4h5m).
	checkSessions(t, e, "default", "the first day", visible, day(-19*time.Hour))
	before := e.Counters()
	for i, from := range []time.Duration{-19*time.Hour + time.Second, -18 * time.Hour, -time.Minute} {
		checkSessions(t, e, "default", fmt.Sprintf("a later day %d", i), visible, day(from))
	}
	if c := e.Counters(); c.LLMAggSegments != before.LLMAggSegments || c.LLMRowBlocks != before.LLMRowBlocks {
		t.Fatalf("windows holding the same whole segments read them again: %+v, before %+v", c, before)
	}
	// Edges that cut the segments, and a window past all of them.
	for i, f := range []*query.Filter{day(-22 * time.Hour), day(time.Hour), day(5 * time.Hour)} {
		checkSessions(t, e, "default", fmt.Sprintf("an edge inside %d", i), visible, f)
	}
	if got, err := e.LLMStats(context.Background(), "default", &store.LLMQuery{Filter: *day(5 * time.Hour), GroupBy: []string{"session"}}); err != nil || len(got.Groups) != 0 {
		t.Fatalf("a window after every span: %d groups, %v", len(got.Groups), err)
	}
}

// TestSessionsOverSegmentsWithoutRollups: a segment written before the
// LLM rollups existed (a committed fixture: aggregates, no rollups) answers
// group by session and the sessions list from its project rollups, equal
// to a recomputation from its rows.
func TestSessionsOverSegmentsWithoutRollups(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	const fixture = "../segment/testdata/v1-llm.rseg"
	r, err := segment.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if r.HasRollups() || !r.HasAggregates() {
		r.Close()
		t.Fatalf("fixture: rollups %t, aggregates %t; want an old segment with aggregates only", r.HasRollups(), r.HasAggregates())
	}
	rows := map[string][]model.Span{}
	for i, b := range r.Blocks() {
		spans, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		rows[b.Project] = append(rows[b.Project], spans...)
	}
	r.Close()
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%016d.seg", man.NextSegment)
	if err := os.WriteFile(filepath.Join(dir, "segments", name), old, 0o644); err != nil {
		t.Fatal(err)
	}
	man.Segments, man.NextSegment = append(man.Segments, name), man.NextSegment+1
	if _, err := writeManifest(dir, man); err != nil {
		t.Fatal(err)
	}
	if e, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sessions := 0
	for project, spans := range rows {
		checkSessions(t, e, project, fmt.Sprintf("segment without rollups, project %q", project), spans, &query.Filter{})
		sessions += len(bruteSessions(spans, &query.Filter{}))
	}
	if sessions == 0 {
		t.Fatalf("the fixture has no LLM spans: nothing was compared")
	}
}

// checkTop compares group by session with a limit (LLMQuery.Top, each
// sort) with want, the brute-force sessions: the kept groups are the first
// in the sort's order (ties by cost, spans, then id) with their measures and
// latency maximum exact, and the number of groups and the totals cover
// every session.
func checkTop(t *testing.T, e *Engine, project, what string, want map[string]*sessionWant, f *query.Filter) {
	t.Helper()
	var total sessionWant
	ids := make([]string, 0, len(want))
	for id, w := range want {
		ids = append(ids, id)
		total.spans += w.spans
		total.errors += w.errors
		total.cost += w.cost
	}
	ranks := map[string]func(w *sessionWant) int64{
		"": func(w *sessionWant) int64 { return w.cost }, "spans": func(w *sessionWant) int64 { return w.spans },
		"errors": func(w *sessionWant) int64 { return w.errors },
	}
	for _, sortBy := range []string{"", "spans", "errors"} {
		rank := ranks[sortBy]
		slices.SortFunc(ids, func(a, b string) int {
			x, y := want[a], want[b]
			return cmp.Or(cmp.Compare(rank(y), rank(x)), cmp.Compare(y.cost, x.cost), cmp.Compare(y.spans, x.spans), strings.Compare(a, b))
		})
		for _, top := range []int{1, 3, len(want)/2 + 1, len(want) + 5} {
			st, err := e.LLMStats(context.Background(), project, &store.LLMQuery{Filter: *f, GroupBy: []string{"session"}, Top: top, Sort: sortBy})
			if err != nil || len(st.Warnings) > 0 {
				t.Fatalf("%s: top %d by %q: %v %v", what, top, sortBy, err, st.Warnings)
			}
			if st.TotalGroups != len(want) || len(st.Groups) != min(top, len(want)) {
				t.Fatalf("%s: top %d by %q: %d groups of %d, want %d of %d", what, top, sortBy, len(st.Groups), st.TotalGroups, min(top, len(want)), len(want))
			}
			if tt := st.Totals; tt.Spans != total.spans || tt.Errors != total.errors || tt.CostNanoUSD != total.cost {
				t.Fatalf("%s: top %d by %q: totals %+v, want %+v", what, top, sortBy, tt, total)
			}
			for i, g := range st.Groups {
				id := g.Key["session"]
				if id != ids[i] {
					t.Fatalf("%s: top %d by %q: group %d is %q, want %q", what, top, sortBy, i, id, ids[i])
				}
				w, m := want[id], g.M
				got := sessionWant{spans: m.Spans, errors: m.Errors, counted: m.Counted, in: m.InputTokens, out: m.OutputTokens,
					cost: m.CostNanoUSD, minStart: m.MinStart, maxEnd: m.MaxEnd, users: w.users}
				if m.Latency != nil && math.Abs(m.Latency.Max-float64(w.maxLatency)) <= 1e-9*float64(w.maxLatency) {
					got.maxLatency = w.maxLatency
				}
				if fmt.Sprint(got) != fmt.Sprint(*w) {
					t.Fatalf("%s: top %d by %q: session %q:\n got %+v\nwant %+v", what, top, sortBy, id, got, *w)
				}
			}
		}
	}
}
