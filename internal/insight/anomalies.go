package insight

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Anomaly kinds.
const (
	KindLatency     = "latency"      // an operation's p95 rose
	KindErrorRate   = "error_rate"   // an operation's error rate rose
	KindTrafficDrop = "traffic_drop" // an operation's rate fell
	KindNewError    = "new_error"    // an error group absent from the baseline
)

// Anomaly is an operation that moved far from its previous window or its
// recent baseline.
type Anomaly struct {
	Rank      int    `json:"rank"`
	Kind      string `json:"kind"`
	Service   string `json:"service"`
	Operation string `json:"operation"`
	// Score measures how far the operation moved, in units of the default
	// reporting threshold: 1 is just reported at sensitivity 1, 3 is three
	// times as strong. Anomalies are ranked by score.
	Score    float64 `json:"score"`
	Summary  string  `json:"summary"`  // one line: what moved, by how much
	Baseline string  `json:"baseline"` // what it was compared with: "previous window" or "baseline (4 windows)"
	// Current and Reference are the operation in the current window and in
	// the reference it was compared with (rate per second over the
	// reference's own length). Absent for new_error.
	Current   *Stat       `json:"current,omitempty"`
	Reference *Stat       `json:"reference,omitempty"`
	Error     *ErrorGroup `json:"error_group,omitempty"` // new_error: the group
	Why       string      `json:"why"`                   // how the score was computed
	NextStep  string      `json:"next_step"`             // what to do next, concretely
	Next      Links       `json:"next"`
}

// ServiceAnomalies counts the anomalies of one service (all of them, not
// only those listed): one incident often moves many operations, and this
// says where they concentrate.
type ServiceAnomalies struct {
	Service  string         `json:"service"`
	Count    int            `json:"count"`
	TopScore float64        `json:"top_score"`
	Kinds    map[string]int `json:"kinds"` // kind -> count
}

// byService rolls anomalies up per service, the strongest first.
func byService(all []Anomaly) []ServiceAnomalies {
	idx := map[string]int{}
	out := []ServiceAnomalies{}
	for _, a := range all {
		i, ok := idx[a.Service]
		if !ok {
			i = len(out)
			idx[a.Service] = i
			out = append(out, ServiceAnomalies{Service: a.Service, TopScore: a.Score, Kinds: map[string]int{}})
		}
		out[i].Count++
		out[i].Kinds[a.Kind]++
	}
	// all is sorted by score, so the first seen is the strongest; ties
	// go to the service with more anomalies.
	slices.SortStableFunc(out, func(a, b ServiceAnomalies) int {
		return cmp.Or(cmp.Compare(b.TopScore, a.TopScore), cmp.Compare(b.Count, a.Count))
	})
	return out
}

// AnomalyReport is the answer of /api/v1/anomalies.
type AnomalyReport struct {
	Window      Window             `json:"window"`
	Sensitivity float64            `json:"sensitivity"`
	Threshold   float64            `json:"threshold"` // scores at or above it are reported: 1 / sensitivity
	Services    []ServiceAnomalies `json:"services"`  // where the anomalies are, per service
	Anomalies   []Anomaly          `json:"anomalies"`
	More        int                `json:"more,omitempty"`
	Method      string             `json:"method"`
	Warnings    []string           `json:"warnings,omitempty"`
}

// Method explains the scoring in one paragraph (part of every anomaly
// answer, so a reader need not look it up).
const Method = "Each operation with at least 20 spans is compared with the previous window of the same length and with " +
	"its baseline (the 4 windows before this one); the stronger move counts. Latency: score = log2(p95 ratio) x n/(n+30) / log2(1.5), " +
	"only for rises of at least 1 ms (1 = p95 up 1.5x on plenty of spans). Error rate: score = z/3, z the two-proportion z-test " +
	"of the error rates, only for rises of at least 1 point (1 = three standard errors). Traffic drop: score = log2(expected/actual spans) " +
	"x n/(n+30), only when at most half the expected spans came (1 = halved). New error: an error group with at least 10 spans in this " +
	"window and none in the baseline, score = log2(count/5). Anomalies scoring at least 1/sensitivity are reported, highest first."

// Anomalies computes the anomaly list of p's window for project.
func Anomalies(ctx context.Context, b store.Backend, project string, p Params) (*AnomalyReport, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	f, err := fetch(ctx, b, project, &p, true)
	if err != nil {
		return nil, err
	}
	prev, base := p.windows()
	all := p.anomalies(ctx, b, project, f)
	limit := cmp.Or(p.Limit, 10)
	r := &AnomalyReport{
		Window: Window{Since: rfc3339(p.Start), Until: rfc3339(p.End), Seconds: float64(p.End-p.Start) / 1e9,
			PreviousSince: rfc3339(prev), BaselineSince: rfc3339(base)},
		Sensitivity: p.Sensitivity, Threshold: round(1 / p.Sensitivity), Services: byService(all),
		Anomalies: all[:min(limit, len(all))], More: len(all) - min(limit, len(all)), Method: Method, Warnings: f.warnings,
	}
	return r, nil
}

// anomalies scores every operation of f and returns those at or above the
// threshold, ranked, with next steps.
func (p *Params) anomalies(ctx context.Context, b store.Backend, project string, f *fetched) []Anomaly {
	prev, base := p.windows()
	secs := float64(p.End-p.Start) / 1e9
	refs := []struct {
		name string
		idx  map[[2]string]*store.REDSeries
		secs float64
	}{
		{"previous window", index(f.opPrev), float64(p.Start-prev) / 1e9},
		{fmt.Sprintf("baseline (%d windows)", BaselineWindows), index(f.opBase), float64(p.Start-base) / 1e9},
	}
	threshold := 1 / p.Sensitivity
	best := map[[3]string]Anomaly{} // (service, operation, kind) -> strongest
	keep := func(a Anomaly) {
		if a.Score < threshold {
			return
		}
		k := [3]string{a.Service, a.Operation, a.Kind}
		if old, ok := best[k]; !ok || a.Score > old.Score {
			best[k] = a
		}
	}
	for i := range f.opCur {
		cur := &f.opCur[i]
		cs := stat(cur, secs)
		for _, ref := range refs {
			r := ref.idx[[2]string{cur.Service, cur.Operation}]
			if r == nil || ref.secs <= 0 {
				continue
			}
			rs := stat(r, ref.secs)
			mk := func(kind string, score float64, summary, why string) Anomaly {
				c, rr := cs, rs
				return Anomaly{Kind: kind, Service: cur.Service, Operation: cur.Operation, Score: round(score), Summary: summary,
					Baseline: ref.name, Current: &c, Reference: &rr, Why: why}
			}
			if a, ok := latencyAnomaly(cur, r); ok {
				keep(mk(KindLatency, a.score, fmt.Sprintf("p95 of %s %s rose %.3gx (%s -> %s) vs the %s",
					cur.Service, cur.Operation, a.ratio, fmtMs(r.Latency.P95), fmtMs(cur.Latency.P95), ref.name), a.why))
			}
			if a, ok := errorAnomaly(cur, r); ok {
				keep(mk(KindErrorRate, a.score, fmt.Sprintf("error rate of %s %s rose from %.3g%% to %.3g%% (%d errors in %d spans) vs the %s",
					cur.Service, cur.Operation, 100*a.p0, 100*a.p1, cur.Errors, cur.Calls, ref.name), a.why))
			}
			if a, ok := trafficAnomaly(cur.Calls, float64(r.Calls)*secs/ref.secs); ok {
				keep(mk(KindTrafficDrop, a.score, fmt.Sprintf("%s %s had %d spans where %.0f were expected from the %s",
					cur.Service, cur.Operation, cur.Calls, a.expected, ref.name), a.why))
			}
		}
	}
	// Operations that stopped altogether: in a reference, absent now.
	curIdx := index(f.opCur)
	for _, ref := range refs {
		for k, r := range ref.idx {
			if curIdx[k] != nil || ref.secs <= 0 || (p.Service != "" && k[0] != p.Service) {
				continue
			}
			if a, ok := trafficAnomaly(0, float64(r.Calls)*secs/ref.secs); ok {
				rs := stat(r, ref.secs)
				keep(Anomaly{Kind: KindTrafficDrop, Service: k[0], Operation: k[1], Score: round(a.score),
					Summary:  fmt.Sprintf("%s %s had no spans where %.0f were expected from the %s", k[0], k[1], a.expected, ref.name),
					Baseline: ref.name, Current: &Stat{}, Reference: &rs, Why: a.why})
			}
		}
	}
	// New error groups: only when the baseline holds spans at all (on a
	// store's first window every group is new).
	if len(f.opBase) > 0 {
		groups, _ := p.errorGroups(f, len(f.errCur))
		for i := range groups {
			g := &groups[i]
			if !g.New || g.Count < 10 {
				continue
			}
			score := min(5, math.Log2(float64(g.Count)/5))
			msg := g.Message
			if g.Type != "" {
				msg = g.Type + ": " + msg
			}
			keep(Anomaly{Kind: KindNewError, Service: g.Service, Operation: g.Operation, Score: round(score),
				Summary:  fmt.Sprintf("new error in %s %s: %q, %d times, none in the baseline", g.Service, g.Operation, clip(msg, 120), g.Count),
				Baseline: refs[1].name, Error: g,
				Why: fmt.Sprintf("score = log2(%d/5) = %.2f (capped at 5)", g.Count, score)})
		}
	}

	out := make([]Anomaly, 0, len(best))
	for _, a := range best {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Anomaly) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), strings.Compare(a.Service, b.Service),
			strings.Compare(a.Operation, b.Operation), strings.Compare(a.Kind, b.Kind))
	})
	samples := 0
	for i := range out {
		a := &out[i]
		a.Rank = i + 1
		a.Why += fmt.Sprintf("; ranked %d of %d by score (reported at >= %.3g, sensitivity %g)", i+1, len(out), round(threshold), p.Sensitivity)
		p.nextStep(ctx, b, project, f, a, &samples)
	}
	return out
}

type latencyMove struct {
	score, ratio float64
	why          string
}

func latencyAnomaly(cur, ref *store.REDSeries) (latencyMove, bool) {
	if cur.Calls < minCalls || ref.Calls < minCalls || ref.Latency.P95 <= 0 || cur.Latency.P95-ref.Latency.P95 < 1e6 {
		return latencyMove{}, false
	}
	ratio := cur.Latency.P95 / ref.Latency.P95
	n := float64(min(cur.Calls, ref.Calls))
	w := n / (n + 30)
	score := math.Log2(ratio) * w / math.Log2(1.5)
	return latencyMove{score: score, ratio: ratio, why: fmt.Sprintf("score = log2(%.3g) x %.0f/(%.0f+30) / log2(1.5) = %.2f",
		ratio, n, n, score)}, true
}

type errorMove struct {
	score, p0, p1 float64
	why           string
}

func errorAnomaly(cur, ref *store.REDSeries) (errorMove, bool) {
	if cur.Calls < minCalls || ref.Calls < minCalls {
		return errorMove{}, false
	}
	n1, n0 := float64(cur.Calls), float64(ref.Calls)
	p1, p0 := float64(cur.Errors)/n1, float64(ref.Errors)/n0
	if p1-p0 < 0.01 {
		return errorMove{}, false
	}
	p := (float64(cur.Errors) + float64(ref.Errors)) / (n1 + n0)
	se := math.Sqrt(p * (1 - p) * (1/n1 + 1/n0))
	if se == 0 {
		return errorMove{}, false
	}
	z := (p1 - p0) / se
	score := min(10, z/3)
	return errorMove{score: score, p0: p0, p1: p1, why: fmt.Sprintf("two-proportion z = (%.4f - %.4f) / %.4f = %.1f; score = z/3 = %.2f (capped at 10)",
		p1, p0, se, z, score)}, true
}

type trafficMove struct {
	score, expected float64
	why             string
}

func trafficAnomaly(actual int64, expected float64) (trafficMove, bool) {
	if expected < 2*minCalls || float64(actual) > expected/2 {
		return trafficMove{}, false
	}
	w := expected / (expected + 30)
	score := min(5, math.Log2(expected/math.Max(float64(actual), 1))*w)
	return trafficMove{score: score, expected: expected, why: fmt.Sprintf("score = log2(%.0f expected / %d spans) x %.0f/(%.0f+30) = %.2f (capped at 5)",
		expected, actual, expected, expected, score)}, true
}

// nextStep fills an anomaly's links and next step: a filter to search and,
// where one is at hand, a trace to open.
func (p *Params) nextStep(ctx context.Context, b store.Backend, project string, f *fetched, a *Anomaly, samples *int) {
	op := fmt.Sprintf(`resource.service.name = %s && name = %s`, quote(a.Service), quote(a.Operation))
	switch a.Kind {
	case KindLatency:
		a.Next = *p.links(fmt.Sprintf("{ %s && duration > %s }", op, durationLit(a.Reference.P95Ms*1e6)), p.Start, p.End)
		a.NextStep = fmt.Sprintf("Search the spans slower than the reference p95 (%s) with the filter, and compare them with fast ones: "+
			"what do the slow spans have in common (attributes, a child span, a dependency)?", fmtMs(a.Reference.P95Ms*1e6))
		if *samples < p.TraceSamples {
			*samples++
			fl := &query.Filter{Start: p.Start, End: p.End, Service: a.Service, Name: a.Operation, MinDuration: uint64(a.Current.P95Ms * 1e6)}
			if spans, _, _, err := b.SearchSpans(ctx, project, fl, 1, nil); err == nil && len(spans) > 0 {
				p.traceLink(&a.Next, spans[0].TraceID.String(), spans[0].SpanID.String())
				a.NextStep = fmt.Sprintf("Open trace %s (a %s span of this operation) and see where its time went; then ",
					spans[0].TraceID, fmtMs(float64(spans[0].Duration()))) + lowerFirst(a.NextStep)
			}
		}
	case KindErrorRate:
		a.Next = *p.links(fmt.Sprintf("{ %s && status = error }", op), p.Start, p.End)
		a.NextStep = "Search the failing spans with the filter and read their status messages and exception events."
		for _, g := range f.errCur { // largest first
			if g.Service == a.Service && g.Operation == a.Operation {
				p.traceLink(&a.Next, g.Trace.String(), g.Span.String())
				a.NextStep = fmt.Sprintf("The largest error group here is %q (%d spans): open trace %s for a sample, then search the failing spans with the filter.",
					clip(cmp.Or(g.Message, g.Type), 120), g.Count, g.Trace)
				break
			}
		}
	case KindTrafficDrop:
		a.Next = *p.links(fmt.Sprintf("{ %s }", op), p.Start, p.End)
		a.NextStep = "Find who calls this operation (the dependency graph, /api/v1/dependencies) and whether the callers' own traffic or errors changed; " +
			"a drop often follows an upstream failure or a deploy that renamed the span."
	case KindNewError:
		g := a.Error
		a.Next = g.Links
		a.NextStep = fmt.Sprintf("Open trace %s for the latest sample of this new error, and search the filter for the others (first seen %s).", g.Links.TraceID, g.First)
	}
}

func fmtMs(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3gs", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3gms", ns/1e6)
	}
	return fmt.Sprintf("%.3gus", ns/1e3)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
