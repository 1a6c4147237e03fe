package insight_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/insight"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// corpus returns api and llm spans spread over [start, start+window), with
// some error spans whose messages normalise together.
func corpus(t *testing.T, seed uint64, n int, start time.Time, window time.Duration) []model.Span {
	t.Helper()
	api, err := bench.Generate(bench.CorpusAPI, bench.CorpusOptions{Seed: seed, Spans: n, Start: start, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	llmSpans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: seed, Spans: n / 3, Start: start, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	spans := append(api, llmSpans...)
	llm.Enrich(spans, llm.DefaultPrices()) // as the engine does at ingest
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range spans {
		if rng.IntN(50) == 0 {
			spans[i].StatusCode = model.StatusError
			spans[i].StatusMessage = fmt.Sprintf("upstream timed out after %d ms", rng.IntN(5000))
		}
	}
	return spans
}

// load appends spans to a fresh engine, sealing now and then so that
// answers come from segments, blocks and the write buffer together.
func load(t *testing.T, spans []model.Span) *engine.Engine {
	t.Helper()
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), BlockSpans: 500})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	for i := 0; i < len(spans); i += 1000 {
		b := spans[i:min(i+1000, len(spans))]
		w := &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(b), Spans: slices.Clone(b)}
		if err := e.Append(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		if (i/1000)%3 == 2 {
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e
}

type brute struct {
	spans, errors int64
	durs          []float64
}

// exactQ is the sketch's reference quantile: the value of rank
// floor(q*(n-1)).
func exactQ(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// near reports whether a quantile in ms is within the sketch's 1% (and the
// summary's rounding) of the exact one.
func near(got float64, sorted []float64, q float64) bool {
	want := exactQ(sorted, q) / 1e6
	return math.Abs(got-want) <= want*0.011+0.001
}

// TestSummaryMatchesBruteForce checks every figure of the summary against a
// computation span by span over random corpora and windows.
func TestSummaryMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			start := time.Now().Add(-12 * time.Hour).Truncate(time.Minute)
			spans := corpus(t, seed, 9000, start, 10*time.Hour)
			e := load(t, spans)
			for round := range 3 {
				l := time.Duration(30+rng.IntN(90)) * time.Minute
				from := start.Add(5*l/2 + time.Duration(rng.Int64N(int64(10*time.Hour-5*l/2-l))))
				p := insight.Params{Start: uint64(from.UnixNano()), End: uint64(from.Add(l).UnixNano()), Limit: 50, UIBase: "http://ui"}
				if round == 2 {
					p.Service = spans[rng.IntN(len(spans))].Service
				}
				s, err := insight.Summarize(ctx, e, "p", p)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("round %d window %s+%v service %q", round, from.Format(time.RFC3339), l, p.Service)
				checkSummary(t, what, s, spans, p, l)
			}
		})
	}
}

func checkSummary(t *testing.T, what string, s *insight.Summary, spans []model.Span, p insight.Params, l time.Duration) {
	t.Helper()
	in := func(sp *model.Span, a, b uint64) bool {
		return sp.StartTimeUnixNano >= a && sp.StartTimeUnixNano < b && (p.Service == "" || sp.Service == p.Service)
	}
	prevStart := p.Start - uint64(l)
	baseStart := p.Start - insight.BaselineWindows*uint64(l)
	cur, prev := map[string]*brute{}, map[string]*brute{}
	ops := map[[2]string]*brute{}
	type egKey struct{ svc, op, typ, msg string }
	groups, baseGroups := map[egKey]int64{}, map[egKey]int64{}
	type llmKey struct{ model, provider string }
	type llmSum struct{ calls, in, out, cost int64 }
	llms := map[llmKey]*llmSum{}
	add := func(m map[string]*brute, k string, sp *model.Span) {
		b := m[k]
		if b == nil {
			b = &brute{}
			m[k] = b
		}
		b.spans++
		if sp.StatusCode == model.StatusError {
			b.errors++
		}
		b.durs = append(b.durs, float64(sp.Duration()))
	}
	for i := range spans {
		sp := &spans[i]
		switch {
		case in(sp, p.Start, p.End):
			add(cur, sp.Service, sp)
			k := [2]string{sp.Service, sp.Name}
			if ops[k] == nil {
				ops[k] = &brute{}
			}
			ops[k].spans++
			if sp.StatusCode == model.StatusError {
				ops[k].errors++
				typ, msg := sp.ErrorGroup()
				groups[egKey{sp.Service, sp.Name, typ, msg}]++
			}
			if l := sp.LLM; l != nil {
				k := llmKey{l.Model(), l.Provider}
				if llms[k] == nil {
					llms[k] = &llmSum{}
				}
				if l.Counted {
					llms[k].calls++
					llms[k].in += l.InputTokens
					llms[k].out += l.OutputTokens
					llms[k].cost += l.CostNanoUSD
				}
			}
		case in(sp, prevStart, p.Start):
			add(prev, sp.Service, sp)
		}
		if in(sp, baseStart, p.Start) && sp.StatusCode == model.StatusError {
			typ, msg := sp.ErrorGroup()
			baseGroups[egKey{sp.Service, sp.Name, typ, msg}]++
		}
	}
	if len(cur) == 0 {
		t.Fatalf("%s: the brute force found no spans; the test is broken", what)
	}
	// Services.
	if len(s.Services) != len(cur) {
		t.Fatalf("%s: %d services, brute force %d", what, len(s.Services), len(cur))
	}
	var total, totalErr int64
	for _, sv := range s.Services {
		b := cur[sv.Service]
		if b == nil || sv.Current.Spans != b.spans || sv.Current.Errors != b.errors {
			t.Fatalf("%s: service %s: %d spans %d errors, brute force %+v", what, sv.Service, sv.Current.Spans, sv.Current.Errors, b)
		}
		total += b.spans
		totalErr += b.errors
		slices.Sort(b.durs)
		for _, c := range []struct {
			got float64
			q   float64
		}{{sv.Current.P50Ms, 0.5}, {sv.Current.P95Ms, 0.95}, {sv.Current.P99Ms, 0.99}} {
			if !near(c.got, b.durs, c.q) {
				t.Fatalf("%s: service %s p%v = %v ms, exact %v ms", what, sv.Service, c.q*100, c.got, exactQ(b.durs, c.q)/1e6)
			}
		}
		if want := float64(b.spans) / l.Seconds(); math.Abs(sv.Current.RatePerSec-want) > want*1e-3 {
			t.Fatalf("%s: service %s rate %v/s, want %v", what, sv.Service, sv.Current.RatePerSec, want)
		}
		pb := prev[sv.Service]
		switch {
		case pb == nil && sv.Previous != nil, pb != nil && (sv.Previous == nil || sv.Previous.Spans != pb.spans || sv.Previous.Errors != pb.errors):
			t.Fatalf("%s: service %s previous %+v, brute force %+v", what, sv.Service, sv.Previous, pb)
		}
	}
	if s.Totals.Spans != total || s.Totals.Errors != totalErr {
		t.Fatalf("%s: totals %+v, brute force %d spans %d errors", what, s.Totals, total, totalErr)
	}
	// Error groups: counts, baseline counts, order.
	if len(s.ErrorGroups)+s.MoreErrorGroups != len(groups) {
		t.Fatalf("%s: %d error groups, brute force %d", what, len(s.ErrorGroups)+s.MoreErrorGroups, len(groups))
	}
	for i, g := range s.ErrorGroups {
		k := egKey{g.Service, g.Operation, g.Type, g.Message}
		if g.Count != groups[k] || g.BaselineCount != baseGroups[k] || g.New != (baseGroups[k] == 0) {
			t.Fatalf("%s: error group %+v: brute force count %d baseline %d", what, g, groups[k], baseGroups[k])
		}
		if i > 0 && g.Count > s.ErrorGroups[i-1].Count {
			t.Fatalf("%s: error groups out of order", what)
		}
		if !strings.HasPrefix(g.Links.TraceURL, "http://ui/traces/"+g.Links.TraceID) {
			t.Fatalf("%s: error group link %q", what, g.Links.TraceURL)
		}
	}
	// Slowest operations: counts exact, order by p95, the slowest first.
	for i, op := range s.SlowestOperations {
		b := ops[[2]string{op.Service, op.Operation}]
		if b == nil || b.spans != op.Current.Spans || b.errors != op.Current.Errors || b.spans < 5 {
			t.Fatalf("%s: slow operation %s %s: %+v, brute force %+v", what, op.Service, op.Operation, op.Current, b)
		}
		if i > 0 && op.Current.P95Ms > s.SlowestOperations[i-1].Current.P95Ms {
			t.Fatalf("%s: slowest operations out of order", what)
		}
	}
	// LLM usage by model.
	var llmCalls int64
	for _, b := range llms {
		llmCalls += b.calls
	}
	if (llmCalls > 0) != (s.LLM != nil) {
		t.Fatalf("%s: LLM usage %+v, brute force %d calls", what, s.LLM, llmCalls)
	}
	if s.LLM != nil {
		if s.LLM.Calls != llmCalls {
			t.Fatalf("%s: %d LLM calls, brute force %d", what, s.LLM.Calls, llmCalls)
		}
		for _, m := range s.LLM.Models {
			name := m.Model
			if name == "(none)" {
				name = ""
			}
			b := llms[llmKey{name, m.Provider}]
			if b == nil || b.calls != m.Calls || b.in != m.InputTokens || b.out != m.OutputTokens || math.Abs(float64(b.cost)/1e9-m.CostUSD) > 1e-3*float64(b.cost)/1e9+1e-9 {
				t.Fatalf("%s: model %s/%s %+v, brute force %+v", what, m.Model, m.Provider, m, b)
			}
		}
	}
}

// inject builds a corpus over six one-hour windows and applies change to
// the spans of one busy operation in the last window.
func inject(t *testing.T, seed uint64, change func(sp *model.Span, rng *rand.Rand)) (spans []model.Span, p insight.Params, target [2]string) {
	t.Helper()
	start := time.Now().Add(-7 * time.Hour).Truncate(time.Hour)
	spans = corpus(t, seed, 48000, start, 6*time.Hour)
	cur := start.Add(5 * time.Hour)
	p = insight.Params{Start: uint64(cur.UnixNano()), End: uint64(cur.Add(time.Hour).UnixNano())}
	// The target: a busy operation, chosen at random among the ten busiest.
	count := map[[2]string]int{}
	for i := range spans {
		// The api corpus has an incident of its own in the orders path
		// (bench.IncidentWindow, here in the previous window and the
		// baseline): its operations are not targets.
		if sp := &spans[i]; sp.StartTimeUnixNano >= p.Start && sp.Service != "api-orders" && !strings.Contains(sp.Name, "/orders") {
			count[[2]string{sp.Service, sp.Name}]++
		}
	}
	var keys [][2]string
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return count[keys[i]] > count[keys[j]] || count[keys[i]] == count[keys[j]] && keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1]
	})
	rng := rand.New(rand.NewPCG(seed, 3))
	target = keys[rng.IntN(min(10, len(keys)))]
	if change != nil {
		for i := range spans {
			sp := &spans[i]
			if sp.StartTimeUnixNano >= p.Start && sp.Service == target[0] && sp.Name == target[1] {
				change(sp, rng)
			}
		}
	}
	return spans, p, target
}

func TestInjectedLatencyRegressionRanksFirst(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		spans, p, target := inject(t, seed, func(sp *model.Span, _ *rand.Rand) {
			sp.EndTimeUnixNano = sp.StartTimeUnixNano + 3*sp.Duration()
		})
		e := load(t, spans)
		r, err := insight.Anomalies(ctx, e, "p", p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Anomalies) == 0 {
			t.Fatalf("seed %d: no anomaly found for tripled latency of %v", seed, target)
		}
		top := r.Anomalies[0]
		if [2]string{top.Service, top.Operation} != target || top.Kind != insight.KindLatency || top.Rank != 1 {
			t.Fatalf("seed %d: top anomaly %s %s %s (score %v), want latency of %v; all: %v", seed, top.Kind, top.Service, top.Operation, top.Score, target, brief(r.Anomalies))
		}
		checkNext(t, ctx, e, &top, p)
		if top.Next.TraceID == "" {
			t.Fatalf("seed %d: the latency anomaly names no slow trace: %+v", seed, top.Next)
		}
		if len(r.Services) == 0 || r.Services[0].Service != target[0] || r.Services[0].Kinds[insight.KindLatency] == 0 {
			t.Fatalf("seed %d: by service %+v, want %s first", seed, r.Services, target[0])
		}
		sp, _, err := e.Trace(ctx, "p", mustTrace(t, top.Next.TraceID))
		if err != nil || !slices.ContainsFunc(sp, func(s model.Span) bool {
			return s.Service == target[0] && s.Name == target[1] && float64(s.Duration()) >= top.Current.P95Ms*1e6*0.98
		}) {
			t.Fatalf("seed %d: sample trace %s holds no slow span of the operation (err %v)", seed, top.Next.TraceID, err)
		}
		var text bytes.Buffer
		if err := r.WriteText(&text); err != nil || !strings.Contains(text.String(), "1. [latency") || !strings.Contains(text.String(), target[1]) {
			t.Fatalf("seed %d: text rendering:\n%s", seed, text.String())
		}
	}
}

func TestInjectedErrorRateRanksFirst(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(4); seed <= 6; seed++ {
		spans, p, target := inject(t, seed, func(sp *model.Span, rng *rand.Rand) {
			if rng.IntN(100) < 20 {
				sp.StatusCode = model.StatusError
				sp.StatusMessage = fmt.Sprintf("upstream timed out after %d ms", rng.IntN(5000))
			}
		})
		e := load(t, spans)
		r, err := insight.Anomalies(ctx, e, "p", p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Anomalies) == 0 {
			t.Fatalf("seed %d: no anomaly found for the raised error rate of %v", seed, target)
		}
		top := r.Anomalies[0]
		if [2]string{top.Service, top.Operation} != target || top.Kind != insight.KindErrorRate {
			t.Fatalf("seed %d: top anomaly %s %s %s (score %v), want error_rate of %v; all: %v", seed, top.Kind, top.Service, top.Operation, top.Score, target, brief(r.Anomalies))
		}
		checkNext(t, ctx, e, &top, p)
		if top.Next.TraceID == "" {
			t.Fatalf("seed %d: the error anomaly names no sample trace", seed)
		}
	}
}

// TestNoInjectionNoRegression is the control: the same corpora without a
// change do not report the would-be target as a strong latency or error
// anomaly.
func TestNoInjectionNoRegression(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 6; seed++ {
		spans, p, target := inject(t, seed, nil)
		e := load(t, spans)
		r, err := insight.Anomalies(ctx, e, "p", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range r.Anomalies {
			// Noise can lift an unchanged operation just past the threshold
			// (score 1); an injected change scores about 2.5 and more.
			if [2]string{a.Service, a.Operation} == target && (a.Kind == insight.KindLatency || a.Kind == insight.KindErrorRate) && a.Score >= 1.5 {
				t.Fatalf("seed %d: unchanged operation %v reported: %+v", seed, target, a)
			}
		}
		// A lower sensitivity never reports more.
		r2, err := insight.Anomalies(ctx, e, "p", insight.Params{Start: p.Start, End: p.End, Sensitivity: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		if len(r2.Anomalies)+r2.More > len(r.Anomalies)+r.More {
			t.Fatalf("seed %d: sensitivity 0.5 reports %d anomalies, 1 reports %d", seed, len(r2.Anomalies)+r2.More, len(r.Anomalies)+r.More)
		}
	}
}

// checkNext runs the anomaly's filter: it parses and finds spans of the
// operation in the window.
func checkNext(t *testing.T, ctx context.Context, e *engine.Engine, a *insight.Anomaly, p insight.Params) {
	t.Helper()
	expr, err := query.ParseTraceQL(a.Next.Filter)
	if err != nil {
		t.Fatalf("next filter %q does not parse: %v", a.Next.Filter, err)
	}
	spans, _, _, err := e.SearchSpans(ctx, "p", &query.Filter{Expr: expr, Start: p.Start, End: p.End}, 10, nil)
	if err != nil || len(spans) == 0 {
		t.Fatalf("next filter %q finds nothing (err %v)", a.Next.Filter, err)
	}
	for _, s := range spans {
		if s.Service != a.Service || s.Name != a.Operation {
			t.Fatalf("next filter %q finds a span of %s %s", a.Next.Filter, s.Service, s.Name)
		}
	}
	if a.Why == "" || a.Baseline == "" || a.NextStep == "" || a.Reference == nil {
		t.Fatalf("anomaly lacks its explanation: %+v", a)
	}
}

func mustTrace(t *testing.T, s string) model.TraceID {
	t.Helper()
	id, err := model.ParseTraceID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func brief(as []insight.Anomaly) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "\n  %d %s %s %s %.3g (%s)", a.Rank, a.Kind, a.Service, a.Operation, a.Score, a.Summary)
	}
	return b.String()
}

func TestParamsRejected(t *testing.T) {
	e := load(t, nil)
	for _, p := range []insight.Params{{Start: 10, End: 5}, {Start: 1, End: 5, Sensitivity: -1}, {Start: 1, End: 5, Sensitivity: math.NaN()}, {Start: 1, End: 5, Limit: -1}} {
		if _, err := insight.Summarize(context.Background(), e, "p", p); err == nil || !strings.Contains(err.Error(), "bad request") {
			t.Fatalf("%+v: err %v, want a bad request", p, err)
		}
	}
}
