package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "canonical",
		Summary:      "ingest the canonical corpus, then trace-by-id and attribute-filter query latency, bytes on disk per span",
		DefaultSpans: 100_000,
		Plan:         planCanonical,
		Method: `Each run starts the real ` + "`rastro serve`" + ` (wal durability) on a fresh data directory, ingests the canonical
corpus over OTLP/HTTP protobuf (4 workers, closed loop), stops the server gracefully and measures the data directory
(bytes on disk per span), restarts it and re-verifies the stored count, then times queries from one client:
trace by id (` + "`GET /api/v1/traces/{id}`" + `, traces drawn from the corpus, each answer checked for the right span count)
and a selective attribute filter (` + "`{ span.user.id = \"u-NNN\" }`" + `, about 1% of spans, limit 20, each answer checked to
be non-empty). Ten warm-up queries of each kind are not timed. Percentiles are exact nearest-rank over every timed
sample of a run; the table shows the median across runs (min-max for the headline figures). A wrong answer refuses
the run.`,
		Columns: []Column{
			{Title: "Ingest spans/s", Metric: "spans_per_s"},
			{Title: "Disk B/span (min-max)", Metric: "disk_bytes_per_span", Spread: true},
			{Title: "By id p50 ms", Metric: "trace_p50_ms", Digits: 3},
			{Title: "By id p95 ms (min-max)", Metric: "trace_p95_ms", Spread: true, Digits: 3},
			{Title: "By id p99 ms", Metric: "trace_p99_ms", Digits: 3},
			{Title: "Filter p50 ms", Metric: "filter_p50_ms", Digits: 3},
			{Title: "Filter p95 ms (min-max)", Metric: "filter_p95_ms", Spread: true, Digits: 3},
			{Title: "Filter p99 ms", Metric: "filter_p99_ms", Digits: 3},
			{Title: "Samples", Metric: "samples"},
		},
		Targets: canonicalTargets,
	})
}

// Query latency targets of the canonical suite.
const (
	TraceByIDTargetP95MS = 1.0
	FilterTargetP95MS    = 5.0
)

type canonicalPlan struct {
	spans    int
	payloads []Payload
	traces   []model.TraceID // sampled trace ids, in query order
	perTrace map[model.TraceID]int
	users    []string // filter values, in query order
	llmSpans int      // spans with LLM fields (those a plan added)
}

func planCanonical(ctx context.Context, cfg Config) ([]Scenario, error) {
	p, err := newCanonicalPlan(cfg)
	if err != nil {
		return nil, err
	}
	return []Scenario{{
		Name:   "canonical-wal",
		Params: map[string]string{"durability": "wal"},
		Run:    func(ctx context.Context, env *RunEnv) Result { return runCanonical(ctx, env, p) },
	}}, nil
}

// newCanonicalPlan generates the canonical corpus ending 5 minutes ago,
// encodes its batches and draws the traces and users queries ask for.
func newCanonicalPlan(cfg Config) (*canonicalPlan, error) {
	start := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: start, Window: 25 * time.Minute})
	if err != nil {
		return nil, err
	}
	pl, err := Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false)
	if err != nil {
		return nil, err
	}
	p := &canonicalPlan{spans: len(spans), payloads: pl, perTrace: map[model.TraceID]int{}}
	var ids []model.TraceID
	users := map[string]bool{}
	for _, s := range spans {
		if p.perTrace[s.TraceID] == 0 {
			ids = append(ids, s.TraceID)
		}
		p.perTrace[s.TraceID]++
		if v, ok := s.Attr("user.id"); ok {
			users[v.Str] = true
		}
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 99))
	n := cfg.Samples + 10
	for i := 0; i < n; i++ {
		p.traces = append(p.traces, ids[r.IntN(len(ids))])
	}
	all := CanonicalUsers()
	for i := 0; len(p.users) < n; i++ {
		if u := all[r.IntN(len(all))]; users[u] {
			p.users = append(p.users, u)
		}
	}
	return p, nil
}

func runCanonical(ctx context.Context, env *RunEnv, p *canonicalPlan) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	lr, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: 4, KeepAlive: true}, p.payloads)
	if err != nil {
		return refused("load: %v", err)
	}
	facts := RunFacts{Load: lr, Expected: int64(p.spans), Stored: -1, RestartStored: -1, Restarted: true}
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
	}
	res := Result{Metrics: map[string]float64{"spans_per_s": lr.SpansPerSecond}}
	if err := srv.Stop(60 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	if disk, err := dirBytes(env.Dir); err == nil {
		res.Metrics["disk_bytes_per_span"] = float64(disk) / float64(p.spans)
	} else {
		res.Refusals = append(res.Refusals, "measure data directory: "+err.Error())
	}
	srv, err = StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("restart server: %v", err)
	}
	defer srv.Kill()
	if st, err := srv.Stats(ctx); err == nil {
		facts.RestartStored = st.Spans
	}
	res.Refusals = append(Refusals(facts), res.Refusals...)
	if len(res.Refusals) > 0 {
		return res
	}
	byID, filter, err := timeByIDAndFilter(ctx, srv, p.traces, p.perTrace, p.users)
	if err != nil {
		return refused("%v", err)
	}
	a, b := SummarizeLatency(byID), SummarizeLatency(filter)
	res.Metrics["trace_p50_ms"], res.Metrics["trace_p95_ms"], res.Metrics["trace_p99_ms"] = a.P50, a.P95, a.P99
	res.Metrics["filter_p50_ms"], res.Metrics["filter_p95_ms"], res.Metrics["filter_p99_ms"] = b.P50, b.P95, b.P99
	res.Metrics["samples"] = float64(a.Samples)
	if err := srv.Stop(60 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop restarted server: "+err.Error())
	}
	return res
}

func canonicalTargets(rec *Record) []Target {
	line := func(name, metric, want string, ok func(float64) bool, digits int) Target {
		return scenarioTarget(rec, "canonical-wal", name, metric, want, "", ok, digits)
	}
	return []Target{
		line("Trace by id p95 (median of runs)", "trace_p95_ms", fmt.Sprintf("< %g ms", TraceByIDTargetP95MS), func(v float64) bool { return v < TraceByIDTargetP95MS }, 3),
		line("Selective attribute filter p95 (median of runs)", "filter_p95_ms", fmt.Sprintf("< %g ms", FilterTargetP95MS), func(v float64) bool { return v < FilterTargetP95MS }, 3),
		line("Bytes on disk per span", "disk_bytes_per_span", "report (traza: ~67 B)", nil, 1),
	}
}

// timeByIDAndFilter times trace by id (GET /api/v1/traces/{id}, each
// answer checked for the trace's span count) over traces, then the
// selective filter { span.user.id = "u-NNN" } (limit 20, each answer
// checked non-empty) over users; the first ten of each are warm-ups, not
// timed. A wrong answer is an error.
func timeByIDAndFilter(ctx context.Context, srv *Server, traces []model.TraceID, perTrace map[model.TraceID]int, users []string) (byID, filter []time.Duration, err error) {
	for i, id := range traces {
		t0 := time.Now()
		code, body, err := srv.Get(ctx, "/api/v1/traces/"+id.String())
		d := time.Since(t0)
		if err != nil || code != http.StatusOK {
			return nil, nil, fmt.Errorf("trace %s: status %d, err %v: %.200s", id, code, err, body)
		}
		var tr struct {
			Spans []json.RawMessage `json:"spans"`
		}
		if err := json.Unmarshal(body, &tr); err != nil {
			return nil, nil, fmt.Errorf("trace %s: bad JSON: %v", id, err)
		}
		if len(tr.Spans) != perTrace[id] {
			return nil, nil, fmt.Errorf("trace %s returned %d spans, want %d", id, len(tr.Spans), perTrace[id])
		}
		if i >= 10 {
			byID = append(byID, d)
		}
	}
	for i, u := range users {
		q := fmt.Sprintf(`{ span.user.id = %q }`, u)
		t0 := time.Now()
		code, body, err := srv.Get(ctx, "/api/v1/spans?limit=20&q="+url.QueryEscape(q))
		d := time.Since(t0)
		if err != nil || code != http.StatusOK {
			return nil, nil, fmt.Errorf("query %s: status %d, err %v: %.200s", q, code, err, body)
		}
		var sr struct {
			Spans []json.RawMessage `json:"spans"`
		}
		if err := json.Unmarshal(body, &sr); err != nil {
			return nil, nil, fmt.Errorf("query %s: bad JSON: %v", q, err)
		}
		if len(sr.Spans) == 0 || len(sr.Spans) > 20 {
			return nil, nil, fmt.Errorf("query %s returned %d spans, want 1..20 (the corpus has matches)", q, len(sr.Spans))
		}
		if i >= 10 {
			filter = append(filter, d)
		}
	}
	return byID, filter, nil
}

// scenarioTarget is a target on the median of one scenario's metric: NOT
// RUN, FAIL for a refused scenario or a metric not measured, else the
// figure (with unit) checked by ok (nil: REPORT), with the busy-host note.
func scenarioTarget(rec *Record, scenario, name, metric, want, unit string, ok func(float64) bool, digits int) Target {
	t := Target{Name: name, Want: want}
	sr, ran := rec.Scenario(scenario)
	switch {
	case !ran:
		t.Got, t.Status = "not run", "NOT RUN"
	case sr.Status != "ok":
		t.Got, t.Status = sr.Status, "FAIL"
	default:
		v := rec.median(scenario, metric)
		t.Got = num(v, digits) + unit
		switch {
		case math.IsNaN(v):
			t.Got, t.Status = "n/a", "FAIL"
		case ok == nil:
			t.Status = "REPORT"
		case ok(v):
			t.Status = "PASS"
		default:
			t.Status = "FAIL"
		}
	}
	return withBusyNote(rec, t)
}
