// Package insight answers the first question of an investigation, "where
// should I look?", from the stored aggregates of any store.Backend: a
// summary of a window compared with the window before it (per service rate,
// errors and latency; error groups; slowest operations; LLM usage and cost by
// model) and a ranked list of anomalies, each with its evidence and a next
// step. It reads only the backend's aggregate routes (store.ServiceReader,
// store.LLM), never span by span, so its cost does not grow with the spans
// in the window; the few trace ids it quotes come from error-group samples
// and, for latency anomalies, one bounded span search each.
//
// The types carry JSON tags: the HTTP API (/api/v1/summary,
// /api/v1/anomalies), the CLI and the MCP tools all speak them.
package insight

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// BaselineWindows is how many windows of the same length, ending where the
// current one starts, make an operation's recent baseline.
const BaselineWindows = 4

// Params selects what a summary covers.
type Params struct {
	Start, End  uint64        // the current window [Start, End), unix ns; End must be set (now, usually)
	Service     string        // one service; "" = every service
	Filter      *query.Filter // a further span filter (the API's q); nil = none. It makes the service part read spans.
	Sensitivity float64       // anomalies: 1 is the default; 2 reports moves half as strong, 0.5 twice as strong
	Limit       int           // entries per list (services excepted); 0 = 5 (anomalies: 10)
	// Links: the web UI's base URL ("http://host:4318") for the links in the
	// answer; "" leaves links out (the UI is off or the base is unknown).
	UIBase string
	// TraceSamples is how many latency anomalies get a sample slow trace
	// (one span search each); 0 = 3.
	TraceSamples int
}

// Window describes the compared windows.
type Window struct {
	Since         string  `json:"since"`          // current window start, RFC 3339
	Until         string  `json:"until"`          // current window end (exclusive)
	Seconds       float64 `json:"seconds"`        // its length
	PreviousSince string  `json:"previous_since"` // the previous window is [previous_since, since)
	BaselineSince string  `json:"baseline_since"` // the baseline is [baseline_since, since): the BaselineWindows windows before this one
}

// Stat is the rate, errors and latency of a set of spans over a window.
type Stat struct {
	Spans      int64   `json:"spans"`
	RatePerSec float64 `json:"rate_per_sec"` // spans per second over the window
	Errors     int64   `json:"errors"`
	ErrorRate  float64 `json:"error_rate"` // errors / spans, 0..1
	P50Ms      float64 `json:"p50_ms"`
	P95Ms      float64 `json:"p95_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
}

// Change compares a Stat with the previous window's. Percentages are
// relative changes (+50 = one and a half times); ErrorRatePoints is the
// difference of the error rates in percentage points. A member is absent
// when the previous value was zero.
type Change struct {
	RatePct         *float64 `json:"rate_pct,omitempty"`
	ErrorRatePoints float64  `json:"error_rate_points"`
	P50Pct          *float64 `json:"p50_pct,omitempty"`
	P95Pct          *float64 `json:"p95_pct,omitempty"`
	P99Pct          *float64 `json:"p99_pct,omitempty"`
}

// Series is one service (or one service's operation) in both windows.
type Series struct {
	Service   string  `json:"service"`
	Operation string  `json:"operation,omitempty"`
	Current   Stat    `json:"current"`
	Previous  *Stat   `json:"previous,omitempty"` // absent: no spans in the previous window
	Change    *Change `json:"change,omitempty"`
	Links     *Links  `json:"links,omitempty"`
}

// Links are where to look next: a TraceQL filter for the span search, and
// the web UI's pages when the server has one.
type Links struct {
	Filter    string `json:"filter,omitempty"`     // TraceQL for /api/v1/spans?q= or the search_spans tool
	SearchURL string `json:"search_url,omitempty"` // the UI's search with that filter and window
	TraceID   string `json:"trace_id,omitempty"`   // a sample trace to open
	SpanID    string `json:"span_id,omitempty"`
	TraceURL  string `json:"trace_url,omitempty"`
}

// ErrorGroup is an error group of the window with its count in the
// baseline windows.
type ErrorGroup struct {
	Service       string `json:"service"`
	Operation     string `json:"operation"`
	Type          string `json:"type,omitempty"`
	Message       string `json:"message"`
	Count         int64  `json:"count"`
	BaselineCount int64  `json:"baseline_count"` // in the BaselineWindows windows before
	New           bool   `json:"new"`            // not seen in the baseline windows
	First         string `json:"first"`
	Last          string `json:"last"`
	Links         Links  `json:"links"`
}

// LLMModel is the LLM usage of one model (and provider) in both windows.
type LLMModel struct {
	Model        string   `json:"model"`
	Provider     string   `json:"provider,omitempty"`
	Calls        int64    `json:"calls"` // LLM spans counted for usage
	Errors       int64    `json:"errors"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CostUSD      float64  `json:"cost_usd"`
	P95Ms        float64  `json:"p95_ms"`
	Previous     *LLMPrev `json:"previous,omitempty"`
	CostPct      *float64 `json:"cost_change_pct,omitempty"`
	CallsPct     *float64 `json:"calls_change_pct,omitempty"`
}

// LLMPrev is a model's usage in the previous window.
type LLMPrev struct {
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	P95Ms        float64 `json:"p95_ms"`
}

// LLMUsage is the window's LLM usage: totals and the top models by cost.
type LLMUsage struct {
	Calls        int64      `json:"calls"`
	InputTokens  int64      `json:"input_tokens"`
	OutputTokens int64      `json:"output_tokens"`
	CostUSD      float64    `json:"cost_usd"`
	PreviousCost float64    `json:"previous_cost_usd"`
	Models       []LLMModel `json:"models"`
	MoreModels   int        `json:"more_models,omitempty"` // models left out of the list
}

// Totals are the window's spans and errors over every service, with the
// previous window's.
type Totals struct {
	Spans           int64    `json:"spans"`
	RatePerSec      float64  `json:"rate_per_sec"`
	Errors          int64    `json:"errors"`
	ErrorRate       float64  `json:"error_rate"`
	PreviousSpans   int64    `json:"previous_spans"`
	PreviousErrors  int64    `json:"previous_errors"`
	RatePct         *float64 `json:"rate_change_pct,omitempty"`
	ErrorRatePoints float64  `json:"error_rate_change_points"`
}

// Summary is the answer of /api/v1/summary.
type Summary struct {
	Window            Window       `json:"window"`
	Totals            Totals       `json:"totals"`
	Services          []Series     `json:"services"`
	ErrorGroups       []ErrorGroup `json:"error_groups"`
	MoreErrorGroups   int          `json:"more_error_groups,omitempty"`
	SlowestOperations []Series     `json:"slowest_operations"`
	LLM               *LLMUsage    `json:"llm,omitempty"` // absent: no LLM spans in either window
	Anomalies         []Anomaly    `json:"anomalies"`
	MoreAnomalies     int          `json:"more_anomalies,omitempty"`
	// AnomalyServices says where all the anomalies are, per service.
	AnomalyServices []ServiceAnomalies `json:"anomaly_services"`
	Warnings        []string           `json:"warnings,omitempty"`
}

// minCalls is the fewest spans an operation needs in a window (current and
// reference) before its latency or error rate is compared.
const minCalls = 20

// slowMinCalls is the fewest spans of an operation listed among the
// slowest: a one-off span is not a slow operation.
const slowMinCalls = 5

// fetched is what a summary reads from the backend.
type fetched struct {
	svcCur, svcPrev       []store.REDSeries
	opCur, opPrev, opBase []store.REDSeries
	errCur, errBase       []store.ErrorGroup
	llmCur, llmPrev       store.LLMStats
	llmErr                error
	warnings              []string
}

// ErrUnsupported is returned when the backend lacks the aggregate routes a
// summary needs.
var ErrUnsupported = errors.New("this storage backend does not support summaries (it has no service aggregates)")

func (p *Params) check() error {
	if p.End == 0 || p.Start >= p.End {
		return fmt.Errorf("%w: the window is empty: since must be before until", store.ErrBadRequest)
	}
	if p.Sensitivity == 0 {
		p.Sensitivity = 1
	}
	if !(p.Sensitivity > 0 && p.Sensitivity <= 100) {
		return fmt.Errorf("%w: sensitivity must be a number above 0 and at most 100 (1 is the default; higher reports smaller moves)", store.ErrBadRequest)
	}
	if p.Limit < 0 {
		return fmt.Errorf("%w: limit must not be negative", store.ErrBadRequest)
	}
	if p.TraceSamples == 0 {
		p.TraceSamples = 3
	}
	return nil
}

// windows returns the previous window's and the baseline's starts.
func (p *Params) windows() (prev, base uint64) {
	l := p.End - p.Start
	sub := func(n uint64) uint64 {
		if p.Start < n {
			return 0
		}
		return p.Start - n
	}
	prev, base = sub(l), sub(BaselineWindows*l)
	if prev == 0 {
		prev = min(p.Start, 1) // [0, Start) would read "unbounded"
	}
	if base == 0 {
		base = min(p.Start, 1)
	}
	return prev, base
}

// step is a RED step that puts a window of length l in at most two buckets.
func step(l uint64) time.Duration {
	m := (time.Duration(l) + time.Minute - 1) / time.Minute
	return max(m, 1) * time.Minute
}

// fetch reads the windows' aggregates concurrently.
func fetch(ctx context.Context, b store.Backend, project string, p *Params, anomaliesOnly bool) (*fetched, error) {
	sr, ok := b.(store.ServiceReader)
	if !ok {
		return nil, ErrUnsupported
	}
	prev, base := p.windows()
	ops := func(start, end uint64, byOp bool) *store.OpsQuery {
		return &store.OpsQuery{Start: start, End: end, Service: p.Service, Step: step(end - start), ByOperation: byOp, Filter: p.Filter}
	}
	var (
		f    fetched
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	run := func(fn func() (store.Result, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := fn()
			mu.Lock()
			defer mu.Unlock()
			f.warnings = append(f.warnings, res.Warnings...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	red := func(dst *[]store.REDSeries, q *store.OpsQuery) {
		run(func() (r store.Result, err error) { *dst, r, err = sr.RED(ctx, project, q); return })
	}
	red(&f.opCur, ops(p.Start, p.End, true))
	red(&f.opPrev, ops(prev, p.Start, true))
	red(&f.opBase, ops(base, p.Start, true))
	run(func() (r store.Result, err error) {
		f.errCur, r, err = sr.ErrorGroups(ctx, project, ops(p.Start, p.End, false), 0)
		return
	})
	run(func() (r store.Result, err error) {
		f.errBase, r, err = sr.ErrorGroups(ctx, project, ops(base, p.Start, false), 0)
		return
	})
	if !anomaliesOnly {
		red(&f.svcCur, ops(p.Start, p.End, false))
		red(&f.svcPrev, ops(prev, p.Start, false))
		llm := func(dst *store.LLMStats, start, end uint64) {
			run(func() (store.Result, error) {
				fl := query.Filter{}
				if p.Filter != nil {
					fl = *p.Filter
				}
				fl.Start, fl.End = start, end
				if p.Service != "" {
					fl.Service = p.Service
				}
				st, err := b.LLMStats(ctx, project, &store.LLMQuery{Filter: fl, GroupBy: []string{"model", "provider"}})
				*dst = st
				if err != nil && errors.Is(err, store.ErrBadRequest) {
					mu.Lock()
					f.llmErr = err
					mu.Unlock()
					return st.Result, nil
				}
				return st.Result, err
			})
		}
		llm(&f.llmCur, p.Start, p.End)
		llm(&f.llmPrev, prev, p.Start)
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	slices.Sort(f.warnings)
	f.warnings = slices.Compact(f.warnings)
	return &f, nil
}

// Summarize computes the summary of p's window for project.
func Summarize(ctx context.Context, b store.Backend, project string, p Params) (*Summary, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	f, err := fetch(ctx, b, project, &p, false)
	if err != nil {
		return nil, err
	}
	prev, base := p.windows()
	secs := float64(p.End-p.Start) / 1e9
	limit := cmp.Or(p.Limit, 5)
	s := &Summary{
		Window: Window{Since: rfc3339(p.Start), Until: rfc3339(p.End), Seconds: secs,
			PreviousSince: rfc3339(prev), BaselineSince: rfc3339(base)},
		Warnings: f.warnings,
	}

	// Services: every one (a store has tens, not thousands), busiest first.
	prevBy := map[string]*store.REDSeries{}
	for i := range f.svcPrev {
		prevBy[f.svcPrev[i].Service] = &f.svcPrev[i]
	}
	var tot, totPrev store.REDSeries
	for i := range f.svcCur {
		cur := &f.svcCur[i]
		s.Services = append(s.Services, p.series(cur, prevBy[cur.Service], secs))
		tot.Calls += cur.Calls
		tot.Errors += cur.Errors
	}
	for i := range f.svcPrev {
		totPrev.Calls += f.svcPrev[i].Calls
		totPrev.Errors += f.svcPrev[i].Errors
	}
	cur, pr := stat(&tot, secs), stat(&totPrev, secs)
	s.Totals = Totals{Spans: cur.Spans, RatePerSec: cur.RatePerSec, Errors: cur.Errors, ErrorRate: cur.ErrorRate,
		PreviousSpans: pr.Spans, PreviousErrors: pr.Errors}
	if pr.Spans > 0 {
		c := change(&cur, &pr)
		s.Totals.RatePct, s.Totals.ErrorRatePoints = c.RatePct, c.ErrorRatePoints
	}
	if s.Services == nil {
		s.Services = []Series{}
	}

	// Slowest operations by p95, among operations with a few calls.
	opPrev := index(f.opPrev)
	var slow []*store.REDSeries
	for i := range f.opCur {
		if f.opCur[i].Calls >= slowMinCalls {
			slow = append(slow, &f.opCur[i])
		}
	}
	slices.SortFunc(slow, func(a, b *store.REDSeries) int {
		return cmp.Or(cmp.Compare(b.Latency.P95, a.Latency.P95), strings.Compare(a.Service, b.Service), strings.Compare(a.Operation, b.Operation))
	})
	s.SlowestOperations = []Series{}
	for _, op := range slow[:min(limit, len(slow))] {
		sr := p.series(op, opPrev[[2]string{op.Service, op.Operation}], secs)
		sr.Links = p.links(fmt.Sprintf(`{ resource.service.name = %s && name = %s && duration > %s }`,
			quote(op.Service), quote(op.Operation), durationLit(op.Latency.P95)), p.Start, p.End)
		s.SlowestOperations = append(s.SlowestOperations, sr)
	}

	// Error groups, with their counts in the baseline.
	s.ErrorGroups, s.MoreErrorGroups = p.errorGroups(f, limit)

	s.LLM = llmUsage(f, limit)
	if f.llmErr != nil {
		s.Warnings = append(s.Warnings, "llm: "+f.llmErr.Error())
	}

	all := p.anomalies(ctx, b, project, f)
	alimit := cmp.Or(p.Limit, 10)
	s.Anomalies = all[:min(alimit, len(all))]
	s.MoreAnomalies = len(all) - len(s.Anomalies)
	s.AnomalyServices = byService(all)
	return s, nil
}

func index(series []store.REDSeries) map[[2]string]*store.REDSeries {
	m := make(map[[2]string]*store.REDSeries, len(series))
	for i := range series {
		m[[2]string{series[i].Service, series[i].Operation}] = &series[i]
	}
	return m
}

func (p *Params) series(cur, prev *store.REDSeries, secs float64) Series {
	out := Series{Service: cur.Service, Operation: cur.Operation, Current: stat(cur, secs)}
	if prev != nil && prev.Calls > 0 {
		ps := stat(prev, secs)
		out.Previous = &ps
		out.Change = change(&out.Current, &ps)
	}
	return out
}

func stat(r *store.REDSeries, secs float64) Stat {
	s := Stat{Spans: r.Calls, Errors: r.Errors, RatePerSec: round(float64(r.Calls) / secs),
		P50Ms: ms(r.Latency.P50), P95Ms: ms(r.Latency.P95), P99Ms: ms(r.Latency.P99), MaxMs: ms(r.Latency.Max)}
	if r.Calls > 0 {
		s.ErrorRate = round(float64(r.Errors) / float64(r.Calls))
	}
	return s
}

func change(cur, prev *Stat) *Change {
	pct := func(a, b float64) *float64 {
		if b == 0 {
			return nil
		}
		v := round(100 * (a - b) / b)
		return &v
	}
	return &Change{RatePct: pct(cur.RatePerSec, prev.RatePerSec), ErrorRatePoints: round(100 * (cur.ErrorRate - prev.ErrorRate)),
		P50Pct: pct(cur.P50Ms, prev.P50Ms), P95Pct: pct(cur.P95Ms, prev.P95Ms), P99Pct: pct(cur.P99Ms, prev.P99Ms)}
}

func (p *Params) errorGroups(f *fetched, limit int) ([]ErrorGroup, int) {
	type key struct{ svc, op, typ, msg string }
	base := map[key]int64{}
	for _, g := range f.errBase {
		base[key{g.Service, g.Operation, g.Type, g.Message}] += g.Count
	}
	out := []ErrorGroup{}
	for _, g := range f.errCur[:min(limit, len(f.errCur))] {
		bc := base[key{g.Service, g.Operation, g.Type, g.Message}]
		eg := ErrorGroup{Service: g.Service, Operation: g.Operation, Type: g.Type, Message: g.Message, Count: g.Count,
			BaselineCount: bc, New: bc == 0, First: rfc3339(g.First), Last: rfc3339(g.Last)}
		eg.Links = *p.links(fmt.Sprintf(`{ resource.service.name = %s && name = %s && status = error }`, quote(g.Service), quote(g.Operation)), p.Start, p.End)
		p.traceLink(&eg.Links, g.Trace.String(), g.Span.String())
		out = append(out, eg)
	}
	return out, len(f.errCur) - len(out)
}

func llmUsage(f *fetched, limit int) *LLMUsage {
	if len(f.llmCur.Groups) == 0 && len(f.llmPrev.Groups) == 0 {
		return nil
	}
	u := &LLMUsage{Models: []LLMModel{}}
	prev := map[[2]string]*store.Measures{}
	for i := range f.llmPrev.Groups {
		g := &f.llmPrev.Groups[i]
		prev[[2]string{g.Key["model"], g.Key["provider"]}] = &g.M
		u.PreviousCost += usd(g.M.CostNanoUSD)
	}
	u.PreviousCost = round(u.PreviousCost)
	for i := range f.llmCur.Groups { // sorted by cost, then spans
		g := &f.llmCur.Groups[i]
		u.Calls += g.M.Counted
		u.InputTokens += g.M.InputTokens
		u.OutputTokens += g.M.OutputTokens
		u.CostUSD += usd(g.M.CostNanoUSD)
		if len(u.Models) >= limit {
			u.MoreModels++
			continue
		}
		m := LLMModel{Model: cmp.Or(g.Key["model"], "(none)"), Provider: g.Key["provider"], Calls: g.M.Counted, Errors: g.M.Errors,
			InputTokens: g.M.InputTokens, OutputTokens: g.M.OutputTokens, CostUSD: round(usd(g.M.CostNanoUSD))}
		if g.M.Latency != nil {
			m.P95Ms = ms(g.M.Latency.P95)
		}
		if pm := prev[[2]string{g.Key["model"], g.Key["provider"]}]; pm != nil {
			m.Previous = &LLMPrev{Calls: pm.Counted, InputTokens: pm.InputTokens, OutputTokens: pm.OutputTokens, CostUSD: round(usd(pm.CostNanoUSD))}
			if pm.Latency != nil {
				m.Previous.P95Ms = ms(pm.Latency.P95)
			}
			if pm.CostNanoUSD > 0 {
				v := round(100 * float64(g.M.CostNanoUSD-pm.CostNanoUSD) / float64(pm.CostNanoUSD))
				m.CostPct = &v
			}
			if pm.Counted > 0 {
				v := round(100 * float64(g.M.Counted-pm.Counted) / float64(pm.Counted))
				m.CallsPct = &v
			}
		}
		u.Models = append(u.Models, m)
	}
	u.CostUSD = round(u.CostUSD)
	return u
}

// links builds the links of a TraceQL filter over [start, end).
func (p *Params) links(filter string, start, end uint64) *Links {
	l := &Links{Filter: filter}
	if p.UIBase != "" {
		v := url.Values{"q": {filter}, "since": {rfc3339(start)}, "until": {rfc3339(end)}, "view": {"spans"}}
		l.SearchURL = p.UIBase + "/search?" + v.Encode()
	}
	return l
}

func (p *Params) traceLink(l *Links, trace, span string) {
	l.TraceID, l.SpanID = trace, span
	if p.UIBase != "" {
		l.TraceURL = p.UIBase + "/traces/" + trace + "?span=" + span
	}
}

func rfc3339(ns uint64) string {
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}

func ms(ns float64) float64 { return round(ns / 1e6) }

func usd(nano int64) float64 { return float64(nano) / 1e9 }

// round keeps four significant digits (at least three decimals below 1):
// enough for a reader, short in JSON.
func round(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	mag := math.Floor(math.Log10(math.Abs(v)))
	f := math.Pow(10, 3-mag)
	return math.Round(v*f) / f
}

// quote writes a TraceQL string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// durationLit writes ns as a TraceQL duration, rounded down to whole
// microseconds (milliseconds above a second).
func durationLit(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%dms", int64(ns/1e6))
	case ns >= 1e3:
		return fmt.Sprintf("%dus", int64(ns/1e3))
	}
	return fmt.Sprintf("%dns", int64(ns))
}
