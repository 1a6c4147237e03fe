package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "llm",
		Summary:      "LLM statistics and sessions: cold and warm query latency over the llm corpus, and the same queries during ingest",
		DefaultSpans: 1_000_000,
		Plan:         planLLM,
		Method: `The ` + "`llm`" + ` corpus is sent to the real ` + "`rastro serve`" + ` (wal durability, fresh data directory) by
8 concurrent OTLP/HTTP protobuf clients, each retrying a 429 after a backoff as an OTLP exporter does (the
retries are counted, not refused: this suite builds a store to query). The batches are cut into 8 contiguous eighths of the corpus and sent
interleaved (one batch from each eighth in turn), so at any moment the server receives spans from across the whole
time range and every sealed segment overlaps most of it: no segment lies inside a query window, which is the hard
case for answering windows from stored aggregates. The corpus covers 6 hours; the 10% and 1% windows are that share
of its time range, centred on its middle, passed as absolute ` + "`since`/`until`" + ` nanoseconds.

**After ingest** (scenario ` + "`llm-after-ingest`" + `): the server is stopped gracefully (it seals its buffer), then
for each query kind it is started again on the same directory and the first request of that kind is the cold
figure (one sample per run: a new process with empty caches; the OS page cache stays warm, as it would after a
service restart). Two more requests warm up, then 20 timed requests give the warm p50/p95 (exact nearest-rank).
The table shows the median across runs. **During ingest** (scenario ` + "`llm-during-ingest`" + `): on a fresh
server, one client fires the same queries in turn, back to back, for the whole of the ingest, while the server
seals and (with its default background compaction) merges segments.

Every answer is checked against an answer key computed from the generated spans with the server's own LLM
attribute extraction and built-in price table (` + "`internal/llm`" + `): per-model span and counted-span totals for each
window; for group by session (the route's default page of 1,000 groups), that the page holds the 1,000 costliest
sessions in order (cost, spans, id) with their span counts, the number of session values, and totals and ` + "`others`" + `
that account for every LLM span; and that the sessions page holds the 50 most recent sessions. During ingest each
answer must stay within the key and never shrink from one request of a kind to the next. A wrong answer, a non-200
response or a short stored count refuses the run.`,
		Columns: []Column{
			{Title: "Phase", Param: "phase"},
			{Title: "Ingest spans/s (min-max)", Metric: "spans_per_s", Spread: true},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "LLM spans", Metric: "llm_spans"},
			{Title: "Segments (at the queries)", Metric: "segments"},
			{Title: "Unsealed spans (at the queries)", Metric: "buffer_spans"},
			{Title: "Queries during ingest", Metric: "ingest_queries"},
			{Title: "Seals seen during ingest", Metric: "seals_observed"},
		},
		Targets: llmTargets,
		Detail:  llmDetail,
	})
}

// The llm suite's shape: clients, warm-up and timed requests per query kind,
// the sessions page size, the corpus time range and the cold target.
const (
	llmClients        = 8
	llmWarmups        = 2
	llmWarmRequests   = 20
	llmSessionsLimit  = 50
	llmCorpusWindow   = 6 * time.Hour
	LLMColdTargetMS   = 60.0 // every query kind's first request after a restart
	llmAfterScenario  = "llm-after-ingest"
	llmDuringScenario = "llm-during-ingest"
)

// llmKind is one timed query of the llm suite.
type llmKind struct {
	name   string  // metric prefix
	title  string  // row title
	target float64 // warm p95 target in ms; 0 = reported without a target
	traza  string  // traza's figures for the same query, for context
	path   string
	post   []byte // when set, the query is a POST of this JSON body (an MCP call)
	// check verifies a response body. With exact set the settled store must
	// give the answer key exactly; otherwise (during ingest) the answer must
	// stay within the key. It returns what the answer counts (spans or
	// sessions), which must not shrink while spans are only added.
	check func(body []byte, exact bool) (int64, error)
}

// llmWindowKey is the answer key of group_by=model over [lo, hi).
type llmWindowKey struct {
	lo, hi  uint64 // nanoseconds; 0 = unbounded
	spans   int64  // LLM spans (spans with any LLM field) starting in the window
	counted int64  // of those, spans whose usage counts
	byModel map[string]int64
}

func (w *llmWindowKey) add(start uint64, l *model.LLM) {
	if w.lo != 0 && start < w.lo || w.hi != 0 && start >= w.hi {
		return
	}
	w.spans++
	if l.Counted {
		w.counted++
	}
	w.byModel[l.Model()]++
}

// llmKey is the answer key of every query kind, computed from the generated
// spans with the extraction the server applies at ingest.
type llmKey struct {
	all, w10, w1       llmWindowKey
	minStart, maxStart uint64
	bySession          map[string]int64 // LLM spans per session value ("" included)
	sessionCost        map[string]int64 // cost of the counted spans per session value, nano-USD
	// sessionRank: every session value ("" included) in the order of
	// /api/v1/llm/stats?group_by=session (cost, spans, descending, then id).
	sessionRank []string
	sessionEnd  map[string]uint64 // latest span end per non-empty session
	sessions    int64             // distinct non-empty sessions
	// pageFloor is the last_seen of the llmSessionsLimit-th most recent
	// session: every session on the first page ends at or after it.
	pageFloor uint64
}

func newLLMKey(spans []model.Span) (*llmKey, error) {
	if len(spans) == 0 {
		return nil, errors.New("llm answer key: no spans")
	}
	k := &llmKey{minStart: spans[0].StartTimeUnixNano, bySession: map[string]int64{}, sessionEnd: map[string]uint64{},
		sessionCost: map[string]int64{}}
	prices := llm.DefaultPrices() // the server's built-in table: costs as the server computes them
	for i := range spans {
		k.minStart = min(k.minStart, spans[i].StartTimeUnixNano)
		k.maxStart = max(k.maxStart, spans[i].StartTimeUnixNano)
	}
	k.all = llmWindowKey{byModel: map[string]int64{}}
	k.w10 = middleWindow(k.minStart, k.maxStart, 10)
	k.w1 = middleWindow(k.minStart, k.maxStart, 100)
	for i := range spans {
		s := &spans[i]
		l := llm.Extract(s, prices)
		if l == nil {
			continue
		}
		if l.Counted {
			k.sessionCost[l.SessionID] += max(l.CostNanoUSD, 0)
		}
		k.all.add(s.StartTimeUnixNano, l)
		k.w10.add(s.StartTimeUnixNano, l)
		k.w1.add(s.StartTimeUnixNano, l)
		k.bySession[l.SessionID]++
		if l.SessionID != "" {
			k.sessionEnd[l.SessionID] = max(k.sessionEnd[l.SessionID], s.EndTimeUnixNano)
		}
	}
	if k.all.spans == 0 {
		return nil, errors.New("llm answer key: the corpus has no LLM spans")
	}
	k.sessions = int64(len(k.sessionEnd))
	for id := range k.bySession {
		k.sessionRank = append(k.sessionRank, id)
	}
	slices.SortFunc(k.sessionRank, func(a, b string) int {
		return cmp.Or(cmp.Compare(k.sessionCost[b], k.sessionCost[a]), cmp.Compare(k.bySession[b], k.bySession[a]), strings.Compare(a, b))
	})
	ends := make([]uint64, 0, len(k.sessionEnd))
	for _, e := range k.sessionEnd {
		ends = append(ends, e)
	}
	slices.Sort(ends)
	slices.Reverse(ends)
	if len(ends) > 0 {
		k.pageFloor = ends[min(llmSessionsLimit, len(ends))-1]
	}
	return k, nil
}

// middleWindow returns the window of 1/div of [lo, hi] centred on its
// middle, at least one nanosecond wide.
func middleWindow(lo, hi uint64, div uint64) llmWindowKey {
	width := max((hi-lo)/div, 1)
	start := lo + (hi-lo)/2 - width/2
	return llmWindowKey{lo: start, hi: start + width, byModel: map[string]int64{}}
}

// interleave reorders payloads so that consecutive payloads come from k
// contiguous slices of the input in turn: with k concurrent senders drawing
// from the result in order, each advances through its own part of the
// corpus's time range.
func interleave(p []Payload, k int) []Payload {
	k = max(1, min(k, len(p)))
	bounds := make([]int, k+1)
	for c := range bounds {
		bounds[c] = c * len(p) / k
	}
	out := make([]Payload, 0, len(p))
	for i := 0; len(out) < len(p); i++ {
		for c := 0; c < k; c++ {
			if j := bounds[c] + i; j < bounds[c+1] {
				out = append(out, p[j])
			}
		}
	}
	return out
}

type llmPlan struct {
	spans    int
	payloads []Payload // interleaved
	key      *llmKey
	kinds    []llmKind
}

func planLLM(ctx context.Context, cfg Config) ([]Scenario, error) {
	start := time.Now().Add(-llmCorpusWindow - 10*time.Minute).Truncate(time.Minute)
	spans, err := Generate(CorpusLLM, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: start, Window: llmCorpusWindow})
	if err != nil {
		return nil, err
	}
	key, err := newLLMKey(spans)
	if err != nil {
		return nil, err
	}
	pl, err := Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false)
	if err != nil {
		return nil, err
	}
	p := &llmPlan{spans: len(spans), payloads: interleave(pl, llmClients), key: key}
	p.kinds = llmKinds(key)
	windows := map[string]string{
		"llm_spans":      strconv.FormatInt(key.all.spans, 10),
		"window_10pct":   fmt.Sprintf("%s (%d LLM spans)", time.Duration(key.w10.hi-key.w10.lo), key.w10.spans),
		"window_1pct":    fmt.Sprintf("%s (%d LLM spans)", time.Duration(key.w1.hi-key.w1.lo), key.w1.spans),
		"sessions":       strconv.FormatInt(key.sessions, 10),
		"ingest_clients": strconv.Itoa(llmClients),
	}
	params := func(phase string) map[string]string {
		m := map[string]string{"phase": phase}
		for k, v := range windows {
			m[k] = v
		}
		return m
	}
	return []Scenario{
		{
			Name:   llmAfterScenario,
			Params: params("after ingest: restart, cold, then warm"),
			Run:    func(ctx context.Context, env *RunEnv) Result { return runLLMAfterIngest(ctx, env, p) },
		},
		{
			Name:   llmDuringScenario,
			Params: params("during ingest, seals and merges"),
			Run:    func(ctx context.Context, env *RunEnv) Result { return runLLMDuringIngest(ctx, env, p) },
		},
	}, nil
}

// llmKinds returns the timed queries and their checks against key.
func llmKinds(key *llmKey) []llmKind {
	win := func(w *llmWindowKey) string {
		return fmt.Sprintf("&since=%d&until=%d", w.lo, w.hi)
	}
	return []llmKind{
		{name: "model_all", title: "stats group_by=model, whole corpus", target: 5, traza: "41 / 152",
			path:  "/api/v1/llm/stats?group_by=model",
			check: func(b []byte, exact bool) (int64, error) { return checkModelStats(b, &key.all, exact) }},
		{name: "model_10pct", title: "stats group_by=model, 10% window", target: 20, traza: "324 / 497",
			path:  "/api/v1/llm/stats?group_by=model" + win(&key.w10),
			check: func(b []byte, exact bool) (int64, error) { return checkModelStats(b, &key.w10, exact) }},
		{name: "model_1pct", title: "stats group_by=model, 1% window", target: 10, traza: "69 / 223",
			path:  "/api/v1/llm/stats?group_by=model" + win(&key.w1),
			check: func(b []byte, exact bool) (int64, error) { return checkModelStats(b, &key.w1, exact) }},
		{name: "session_all", title: "stats group_by=session, whole corpus (page of 1,000)", target: 40, traza: "110 / 247",
			path:  "/api/v1/llm/stats?group_by=session",
			check: func(b []byte, exact bool) (int64, error) { return checkSessionStats(b, key, exact) }},
		{name: "sessions_50", title: fmt.Sprintf("sessions list (limit %d, by last seen)", llmSessionsLimit), target: 20, traza: "95 / 210",
			path:  fmt.Sprintf("/api/v1/sessions?sort=last_seen&limit=%d", llmSessionsLimit),
			check: func(b []byte, exact bool) (int64, error) { return checkSessionsPage(b, key, exact) }},
		{name: "timeseries_1h", title: "timeseries step=1h, whole corpus", traza: "-",
			path:  fmt.Sprintf("/api/v1/llm/timeseries?group_by=model&step=1h&since=%d&until=%d", key.minStart, key.maxStart+1),
			check: func(b []byte, exact bool) (int64, error) { return checkTimeseries(b, key, exact) }},
	}
}

// llmMeasures is the part of a group, point or session the checks read.
type llmMeasures struct {
	Spans   int64 `json:"spans"`
	Counted int64 `json:"counted_spans"`
}

func checkModelStats(body []byte, w *llmWindowKey, exact bool) (int64, error) {
	var r struct {
		Groups []struct {
			Key map[string]string `json:"key"`
			llmMeasures
		} `json:"groups"`
		Totals llmMeasures `json:"totals"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("bad JSON: %v", err)
	}
	var sum, counted int64
	for _, g := range r.Groups {
		m, ok := g.Key["model"]
		if !ok {
			return 0, fmt.Errorf("group %v has no model key", g.Key)
		}
		want, known := w.byModel[m]
		switch {
		case !known:
			return 0, fmt.Errorf("model %q is not in the corpus's window", m)
		case exact && g.Spans != want, g.Spans > want:
			return 0, fmt.Errorf("model %q: %d spans, the corpus has %d", m, g.Spans, want)
		}
		sum += g.Spans
		counted += g.Counted
	}
	switch {
	case r.Totals.Spans != sum || r.Totals.Counted != counted:
		return 0, fmt.Errorf("totals (%d spans, %d counted) disagree with the groups (%d, %d)", r.Totals.Spans, r.Totals.Counted, sum, counted)
	case exact && len(r.Groups) != len(w.byModel):
		return 0, fmt.Errorf("%d model groups, the corpus's window has %d", len(r.Groups), len(w.byModel))
	case exact && (sum != w.spans || counted != w.counted):
		return 0, fmt.Errorf("%d LLM spans (%d counted), the corpus's window has %d (%d counted)", sum, counted, w.spans, w.counted)
	case sum > w.spans || counted > w.counted:
		return 0, fmt.Errorf("%d LLM spans (%d counted), more than the corpus's window has (%d, %d)", sum, counted, w.spans, w.counted)
	}
	return sum, nil
}

// llmSessionGroups is the page size /api/v1/llm/stats?group_by=session
// answers by default (the server's default top).
const llmSessionGroups = 1000

// checkSessionStats checks the default page of group by session: the
// llmSessionGroups costliest sessions in the server's order with their
// span counts, total_groups, and totals and others that account for every
// LLM span. During ingest every figure must stay within the key.
func checkSessionStats(body []byte, key *llmKey, exact bool) (int64, error) {
	var r struct {
		Groups []struct {
			Key map[string]string `json:"key"`
			llmMeasures
		} `json:"groups"`
		TotalGroups *int64       `json:"total_groups"`
		Totals      llmMeasures  `json:"totals"`
		Others      *llmMeasures `json:"others"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("bad JSON: %v", err)
	}
	if r.TotalGroups == nil {
		return 0, errors.New("no total_groups")
	}
	total := int64(len(key.bySession))
	var sum int64
	for i, g := range r.Groups {
		id, ok := g.Key["session"]
		if !ok {
			return 0, fmt.Errorf("group %v has no session key", g.Key)
		}
		want, known := key.bySession[id]
		switch {
		case !known:
			return 0, fmt.Errorf("session %q is not in the corpus", id)
		case exact && g.Spans != want, g.Spans > want:
			return 0, fmt.Errorf("session %q: %d spans, the corpus has %d", id, g.Spans, want)
		case exact && id != key.sessionRank[i]:
			return 0, fmt.Errorf("group %d is session %q, the corpus ranks %q there (cost, spans, id)", i, id, key.sessionRank[i])
		}
		sum += g.Spans
	}
	var others int64
	if r.Others != nil {
		others = r.Others.Spans
	}
	switch {
	case exact && *r.TotalGroups != total, *r.TotalGroups > total:
		return 0, fmt.Errorf("total_groups %d, the corpus has %d session values", *r.TotalGroups, total)
	case int64(len(r.Groups)) != min(*r.TotalGroups, llmSessionGroups):
		return 0, fmt.Errorf("%d session groups on the page, want %d (total_groups %d)", len(r.Groups), min(*r.TotalGroups, llmSessionGroups), *r.TotalGroups)
	case (r.Others != nil) != (int64(len(r.Groups)) < *r.TotalGroups):
		return 0, fmt.Errorf("others given: %v, with %d of %d groups on the page", r.Others != nil, len(r.Groups), *r.TotalGroups)
	case sum+others != r.Totals.Spans:
		return 0, fmt.Errorf("the page (%d spans) and others (%d) do not add up to the totals (%d)", sum, others, r.Totals.Spans)
	case exact && r.Totals.Spans != key.all.spans, r.Totals.Spans > key.all.spans:
		return 0, fmt.Errorf("totals hold %d LLM spans, the corpus has %d", r.Totals.Spans, key.all.spans)
	}
	return r.Totals.Spans, nil
}

func checkSessionsPage(body []byte, key *llmKey, exact bool) (int64, error) {
	var r struct {
		Sessions []struct {
			ID       string `json:"session_id"`
			LastSeen string `json:"last_seen"`
			llmMeasures
		} `json:"sessions"`
		Total *int64 `json:"total"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("bad JSON: %v", err)
	}
	if r.Total == nil {
		return 0, errors.New("no total")
	}
	total := *r.Total
	switch {
	case exact && total != key.sessions, total > key.sessions:
		return 0, fmt.Errorf("total %d sessions, the corpus has %d", total, key.sessions)
	case int64(len(r.Sessions)) != min(total, llmSessionsLimit):
		return 0, fmt.Errorf("%d sessions on the page, want %d (total %d, limit %d)", len(r.Sessions), min(total, llmSessionsLimit), total, llmSessionsLimit)
	}
	seen := map[string]bool{}
	var prev time.Time
	for i, s := range r.Sessions {
		end, known := key.sessionEnd[s.ID]
		if !known || seen[s.ID] {
			return 0, fmt.Errorf("session %q is unknown or listed twice", s.ID)
		}
		seen[s.ID] = true
		t, err := time.Parse(time.RFC3339Nano, s.LastSeen)
		if err != nil {
			return 0, fmt.Errorf("session %q: last_seen %q: %v", s.ID, s.LastSeen, err)
		}
		if i > 0 && t.After(prev) {
			return 0, fmt.Errorf("sessions not sorted by last_seen: %q after %s", s.ID, prev.Format(time.RFC3339Nano))
		}
		prev = t
		if !exact {
			if s.Spans > key.bySession[s.ID] {
				return 0, fmt.Errorf("session %q: %d spans, the corpus has %d", s.ID, s.Spans, key.bySession[s.ID])
			}
			continue
		}
		switch {
		case s.Spans != key.bySession[s.ID]:
			return 0, fmt.Errorf("session %q: %d spans, the corpus has %d", s.ID, s.Spans, key.bySession[s.ID])
		case uint64(t.UnixNano()) != end:
			return 0, fmt.Errorf("session %q: last_seen %s, the corpus says %s", s.ID, s.LastSeen, time.Unix(0, int64(end)).UTC().Format(time.RFC3339Nano))
		case end < key.pageFloor:
			return 0, fmt.Errorf("session %q (last seen %s) is not among the %d most recent", s.ID, s.LastSeen, llmSessionsLimit)
		}
	}
	return total, nil
}

func checkTimeseries(body []byte, key *llmKey, exact bool) (int64, error) {
	var r struct {
		Step   int64 `json:"step_seconds"`
		Points []struct {
			Time string `json:"time"`
			llmMeasures
		} `json:"points"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("bad JSON: %v", err)
	}
	if r.Step != 3600 {
		return 0, fmt.Errorf("step_seconds %d, asked for 3600", r.Step)
	}
	var sum int64
	for _, p := range r.Points {
		t, err := time.Parse(time.RFC3339, p.Time)
		if err != nil {
			return 0, fmt.Errorf("point time %q: %v", p.Time, err)
		}
		if t.Unix()%3600 != 0 || uint64(t.Add(time.Hour).UnixNano()) <= key.minStart || uint64(t.UnixNano()) > key.maxStart {
			return 0, fmt.Errorf("point time %s is not an hour bucket of the corpus", p.Time)
		}
		sum += p.Spans
	}
	switch {
	case exact && sum != key.all.spans:
		return 0, fmt.Errorf("points hold %d LLM spans, the corpus has %d", sum, key.all.spans)
	case sum > key.all.spans:
		return 0, fmt.Errorf("points hold %d LLM spans, more than the corpus's %d", sum, key.all.spans)
	}
	return sum, nil
}

// llmGet fires one query of kind k, checks the answer and returns its
// client-observed duration.
func llmGet(ctx context.Context, srv *Server, k *llmKind, exact bool) (time.Duration, int64, error) {
	t0 := time.Now()
	var (
		code int
		body []byte
		err  error
	)
	if k.post != nil {
		code, body, err = srv.PostJSON(ctx, k.path, k.post)
	} else {
		code, body, err = srv.Get(ctx, k.path)
	}
	d := time.Since(t0)
	if err != nil {
		return d, 0, fmt.Errorf("%s: %w", k.name, err)
	}
	if code != http.StatusOK {
		return d, 0, fmt.Errorf("%s: status %d: %.300s", k.name, code, body)
	}
	n, err := k.check(body, exact)
	if err != nil {
		return d, 0, fmt.Errorf("%s: wrong answer: %w", k.name, err)
	}
	return d, n, nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// llmIngest sends the corpus with llmClients workers. A 429 is retried
// after a backoff, as an OTLP exporter would: this suite builds a store to
// query, and the server's back-pressure is reported (retried_429), not a
// failure.
func llmIngest(ctx context.Context, srv *Server, p *llmPlan) (LoadResult, error) {
	return Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: llmClients, KeepAlive: true, Retry429: true}, p.payloads)
}

// runLLMAfterIngest ingests, stops the server (sealing its buffer), then per
// query kind restarts it, times the first request (cold) and 20 more after
// two warm-ups (warm).
func runLLMAfterIngest(ctx context.Context, env *RunEnv, p *llmPlan) Result {
	return runAfterIngest(ctx, env, p, map[string]float64{"llm_spans": float64(p.key.all.spans)})
}

// runAfterIngest is the after-ingest scenario of the query suites (llm,
// services): ingest p's payloads, stop the server (sealing its buffer),
// then per query kind restart it, time the first request (cold) and
// llmWarmRequests more after llmWarmups (warm). extra joins the metrics.
func runAfterIngest(ctx context.Context, env *RunEnv, p *llmPlan, extra map[string]float64) Result {
	opts := ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"}
	srv, err := StartServer(ctx, opts)
	if err != nil {
		return refused("start server: %v", err)
	}
	defer func() { srv.Kill() }()
	lr, err := llmIngest(ctx, srv, p)
	if err != nil {
		return refused("load: %v", err)
	}
	facts := RunFacts{Load: lr, Expected: int64(p.spans), Stored: -1, RestartStored: -1, Restarted: true}
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
	}
	res := Result{Metrics: map[string]float64{"spans_per_s": lr.SpansPerSecond, "retried_429": float64(lr.Retried429)}}
	for k, v := range extra {
		res.Metrics[k] = v
	}
	if err := srv.Stop(120 * time.Second); err != nil {
		return refused("stop server after ingest: %v", err)
	}
	if r := Refusals(RunFacts{Load: lr, Expected: facts.Expected, Stored: facts.Stored}); len(r) > 0 {
		return Result{Refusals: r}
	}
	for i := range p.kinds {
		k := &p.kinds[i]
		next, err := StartServer(ctx, opts)
		if err != nil {
			return refused("restart server for %s: %v", k.name, err)
		}
		srv = next
		cold, _, err := llmGet(ctx, srv, k, true)
		if err != nil {
			return refused("cold %v", err)
		}
		res.Metrics[k.name+"_cold_ms"] = msOf(cold)
		if i == 0 {
			// The store's shape, read after the cold request so as not to
			// touch anything before it.
			st, err := srv.Stats(ctx)
			if err != nil {
				return refused("after restart: %v", err)
			}
			facts.RestartStored = st.Spans
			res.Metrics["segments"], res.Metrics["buffer_spans"] = float64(st.Segments), float64(st.BufferSpans)
		}
		warm := make([]time.Duration, 0, llmWarmRequests)
		for j := 0; j < llmWarmups+llmWarmRequests; j++ {
			d, _, err := llmGet(ctx, srv, k, true)
			if err != nil {
				return refused("warm %v", err)
			}
			if j >= llmWarmups {
				warm = append(warm, d)
			}
		}
		l := SummarizeLatency(warm)
		res.Metrics[k.name+"_warm_p50_ms"], res.Metrics[k.name+"_warm_p95_ms"] = l.P50, l.P95
		if err := srv.Stop(60 * time.Second); err != nil {
			return refused("stop server after %s: %v", k.name, err)
		}
	}
	res.Refusals = Refusals(facts)
	return res
}

// runLLMDuringIngest fires the query kinds in turn from one client for the
// whole of an ingest, checking that every answer stays within the answer key
// and never shrinks, then checks the settled answers exactly.
func runLLMDuringIngest(ctx context.Context, env *RunEnv, p *llmPlan) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	lat := make([][]time.Duration, len(p.kinds))
	var (
		qerr     error
		seals    int
		lastSegs int64 = -1
	)
	qctx, stop := context.WithCancel(ctx)
	defer stop()
	first, done := make(chan struct{}), make(chan struct{})
	var firstOnce sync.Once
	go func() { // the query client; owned by this run, stopped by stop(), waited for on done
		defer close(done)
		defer firstOnce.Do(func() { close(first) })
		last := make([]int64, len(p.kinds))
		for i := 0; qctx.Err() == nil; i++ {
			ki := i % len(p.kinds)
			k := &p.kinds[ki]
			d, n, err := llmGet(qctx, srv, k, false)
			if qctx.Err() != nil {
				return // the ingest ended mid-request: not a sample
			}
			if err != nil {
				qerr = err
				return
			}
			if n < last[ki] {
				qerr = fmt.Errorf("%s: the answer shrank from %d to %d while spans were only added", k.name, last[ki], n)
				return
			}
			last[ki] = n
			lat[ki] = append(lat[ki], d)
			firstOnce.Do(func() { close(first) })
			if ki == len(p.kinds)-1 {
				st, err := srv.Stats(qctx)
				if qctx.Err() != nil {
					return
				}
				if err != nil {
					qerr = err
					return
				}
				if lastSegs >= 0 && st.Segments > lastSegs {
					seals += int(st.Segments - lastSegs)
				}
				lastSegs = st.Segments
			}
		}
	}()
	// The first query runs before the first batch, so even a tiny corpus
	// has at least one query fired during its ingest.
	<-first
	var lr LoadResult
	var lerr error
	select {
	case <-done: // the query client failed before the ingest began
	default:
		lr, lerr = llmIngest(ctx, srv, p)
	}
	stop()
	<-done
	if qerr != nil {
		return refused("query during ingest: %v", qerr)
	}
	if lerr != nil {
		return refused("load: %v", lerr)
	}
	facts := RunFacts{Load: lr, Expected: int64(p.spans), Stored: -1}
	var bufferSpans int64 = -1
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
		if lastSegs >= 0 && st.Segments > lastSegs {
			seals += int(st.Segments - lastSegs)
		}
		lastSegs = st.Segments
		bufferSpans = st.BufferSpans
	}
	res := Result{Metrics: map[string]float64{"spans_per_s": lr.SpansPerSecond, "llm_spans": float64(p.key.all.spans), "retried_429": float64(lr.Retried429),
		"seals_observed": float64(seals), "segments": float64(lastSegs), "buffer_spans": float64(bufferSpans)}}
	queries := 0
	for i, k := range p.kinds {
		l := SummarizeLatency(lat[i])
		queries += l.Samples
		res.Metrics[k.name+"_ingest_n"] = float64(l.Samples)
		if l.Samples > 0 {
			res.Metrics[k.name+"_ingest_p50_ms"], res.Metrics[k.name+"_ingest_p95_ms"], res.Metrics[k.name+"_ingest_max_ms"] = l.P50, l.P95, l.Max
		}
	}
	res.Metrics["ingest_queries"] = float64(queries)
	res.Refusals = Refusals(facts)
	if len(res.Refusals) == 0 {
		for i := range p.kinds {
			if _, _, err := llmGet(ctx, srv, &p.kinds[i], true); err != nil {
				res.Refusals = append(res.Refusals, "settled answer after ingest: "+err.Error())
			}
		}
	}
	if err := srv.Stop(120 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	return res
}

// llmTargets reads the targets off a record: warm p95 per query kind
// and the worst cold figure, from the after-ingest scenario's medians.
func llmTargets(rec *Record) []Target {
	sr, ran := rec.Scenario(llmAfterScenario)
	status := func(t Target, v float64, ok func(float64) bool, note string) Target {
		switch {
		case !ran:
			t.Got, t.Status = "not run", "NOT RUN"
		case sr.Status != "ok":
			t.Got, t.Status = sr.Status, "FAIL"
		case ok == nil:
			t.Got, t.Status = num(v, 2)+" ms"+note, "REPORT"
		case ok(v):
			t.Got, t.Status = num(v, 2)+" ms"+note, "PASS"
		default:
			t.Got, t.Status = num(v, 2)+" ms"+note, "FAIL"
		}
		return withBusyNote(rec, t)
	}
	var out []Target
	worst, at := -1.0, ""
	for _, k := range llmKinds(&llmKey{}) {
		v := rec.median(llmAfterScenario, k.name+"_warm_p95_ms")
		if k.target == 0 {
			out = append(out, status(Target{Name: "Warm p95, " + k.title + " (median of runs)", Want: "report"}, v, nil, ""))
			out = append(out, status(Target{Name: "Cold, " + k.title + " (median of runs)", Want: "report"}, rec.median(llmAfterScenario, k.name+"_cold_ms"), nil, ""))
			continue
		}
		target := k.target
		out = append(out, status(Target{Name: "Warm p95, " + k.title + " (median of runs)", Want: fmt.Sprintf("< %g ms", target)},
			v, func(x float64) bool { return x < target }, ""))
		if c := rec.median(llmAfterScenario, k.name+"_cold_ms"); c > worst {
			worst, at = c, k.title
		}
	}
	out = append(out, status(Target{Name: "Cold, every query with a target (worst kind, median of runs)", Want: fmt.Sprintf("< %g ms", LLMColdTargetMS)},
		worst, func(x float64) bool { return x < LLMColdTargetMS }, " ("+at+")"))
	dr, dran := rec.Scenario(llmDuringScenario)
	d := Target{Name: "p95 during ingest, stats group_by=model, whole corpus", Want: "report"}
	switch {
	case !dran:
		d.Got, d.Status = "not run", "NOT RUN"
	case dr.Status != "ok":
		d.Got, d.Status = dr.Status, "FAIL"
	default:
		d.Got, d.Status = num(rec.median(llmDuringScenario, "model_all_ingest_p95_ms"), 2)+" ms", "REPORT"
	}
	return append(out, d)
}

// llmDetail renders the per-query table: cold, warm and during-ingest
// figures side by side, medians across runs.
func llmDetail(rec *Record) string {
	var b strings.Builder
	b.WriteString("Per query kind, medians across runs (ms). Cold is one request per run; warm p50/p95 are over 20 requests; ")
	b.WriteString("during-ingest figures are over every request of that kind fired while the corpus was being ingested. ")
	b.WriteString("Traza's figures (warm p95 / cold from its published query benchmark: 1M-span llm corpus, 10 hardware threads) are for context only.\n\n")
	b.WriteString("| Query | Target warm p95 | Cold | Warm p50 | Warm p95 (min-max) | Cold/warm | During ingest p50 | During ingest p95 | During ingest max | Requests during ingest | Traza warm p95 / cold |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	get := func(scen, metric string) Spread {
		sr, ok := rec.Scenario(scen)
		if !ok || sr.Status != "ok" {
			return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
		}
		sp, ok := sr.Summary[metric]
		if !ok {
			return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
		}
		return sp
	}
	for _, k := range llmKinds(&llmKey{}) {
		target := "-"
		if k.target > 0 {
			target = fmt.Sprintf("< %g", k.target)
		}
		cold := get(llmAfterScenario, k.name+"_cold_ms").Median
		p50 := get(llmAfterScenario, k.name+"_warm_p50_ms").Median
		p95 := get(llmAfterScenario, k.name+"_warm_p95_ms")
		ratio := "n/a"
		if p50 > 0 && !math.IsNaN(cold) {
			ratio = num(cold/p50, 1) + "x"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s (%s-%s) | %s | %s | %s | %s | %s | %s |\n", k.title, target,
			num(cold, 2), num(p50, 2), num(p95.Median, 2), num(p95.Min, 2), num(p95.Max, 2), ratio,
			num(get(llmDuringScenario, k.name+"_ingest_p50_ms").Median, 2), num(get(llmDuringScenario, k.name+"_ingest_p95_ms").Median, 2),
			num(get(llmDuringScenario, k.name+"_ingest_max_ms").Median, 2), num(get(llmDuringScenario, k.name+"_ingest_n").Median, 0), k.traza)
	}
	return b.String()
}
