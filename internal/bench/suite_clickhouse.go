package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chserver"
	"github.com/rastro-dev/rastro/internal/llm"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "clickhouse",
		Summary:      "the canonical corpus on the embedded engine and on ClickHouse side by side: ingest, trace by id, selective filter, LLM statistics, bytes on disk",
		DefaultSpans: 200_000,
		Plan:         planClickHouse,
		Method: `Two scenarios on the same corpus: the canonical corpus and, for a tenth of the spans, the llm corpus. **engine-wal**: the real ` + "`rastro serve`" + ` with the embedded engine (wal
durability) on a fresh data directory. **clickhouse**: a real ` + "`clickhouse-server`" + ` (Debian's package, started by the
harness on a free loopback port with a temporary configuration and data directory, stopped after the run) and the
real ` + "`rastro serve --storage clickhouse`" + ` on a fresh database of it, acknowledging a request once ClickHouse acknowledged
its insert. **clickhouse-wal**: the same with ` + "`--durability wal`" + `: a request is acknowledged once fsynced in a local WAL
and inserted into ClickHouse in large blocks behind it; its ingest rate runs until ClickHouse's ` + "`count()`" + ` holds every
span (the acknowledgements' own rate is shown beside it, and the time ClickHouse took after the last one). Each run ingests the corpus over OTLP/HTTP protobuf (4
workers, closed loop; a 429 is retried after a backoff, as an exporter does, and counted), checks the stored count
(the engine's ` + "`/api/v1/stats`" + `; ClickHouse's ` + "`count()`" + ` of its spans table), stops rastro gracefully and measures the
bytes on disk (the data directory; for ClickHouse the active parts of the database's tables, ` + "`system.parts`" + `, after
` + "`OPTIMIZE TABLE ... FINAL`" + ` of each: the size its background merges reach), starts rastro again on the same store, then times from one client: trace by id (each answer checked for
the trace's span count), the selective filter ` + "`{ span.user.id = \"u-NNN\" }`" + ` (about 1% of spans, limit 20, non-empty) and
LLM statistics by model over the whole corpus (` + "`GET /api/v1/llm/stats?group_by=model`" + `, its spans checked against the
corpus). Ten warm-up queries of each kind are not timed; percentiles are exact nearest-rank; tables show medians
across runs. Issue 19's targets are for 10M spans (` + "`--spans 10000000`" + `); the default corpus is smaller.`,
		Columns: []Column{
			{Title: "Ingest spans/s (min-max)", Metric: "spans_per_s", Spread: true},
			{Title: "Acknowledged spans/s", Metric: "accepted_spans_per_s"},
			{Title: "WAL drain s", Metric: "drain_s", Digits: 1},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "Disk B/span", Metric: "disk_bytes_per_span", Digits: 1},
			{Title: "By id p50 ms", Metric: "trace_p50_ms", Digits: 2},
			{Title: "By id p95 ms (min-max)", Metric: "trace_p95_ms", Spread: true, Digits: 2},
			{Title: "Filter p50 ms", Metric: "filter_p50_ms", Digits: 2},
			{Title: "Filter p95 ms (min-max)", Metric: "filter_p95_ms", Spread: true, Digits: 2},
			{Title: "LLM by model p50 ms", Metric: "llm_p50_ms", Digits: 2},
			{Title: "LLM by model p95 ms (min-max)", Metric: "llm_p95_ms", Spread: true, Digits: 2},
		},
		Targets: clickhouseTargets,
	})
}

// Issue 19's targets for ClickHouse (at 10M canonical spans).
const (
	clickhouseIngestTarget   = 100_000.0
	clickhouseTraceTargetMS  = 20.0
	clickhouseFilterTargetMS = 50.0
	clickhouseLLMTargetMS    = 100.0
	clickhouseDatabase       = "rastro_bench"
)

func planClickHouse(ctx context.Context, cfg Config) ([]Scenario, error) {
	llmN := cfg.Spans / 10
	cfg.Spans -= llmN
	p, err := newCanonicalPlan(cfg)
	if err != nil {
		return nil, err
	}
	// A tenth of the spans come from the llm corpus, for the statistics.
	start := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	spans, err := Generate(CorpusLLM, CorpusOptions{Seed: cfg.Seed + 19, Spans: llmN, Start: start, Window: 25 * time.Minute})
	if err != nil {
		return nil, err
	}
	prices := llm.DefaultPrices()
	for i := range spans {
		if llm.Extract(&spans[i], prices) != nil {
			p.llmSpans++
		}
	}
	if p.llmSpans == 0 {
		return nil, fmt.Errorf("clickhouse: the corpus of %d spans has no LLM span to count", len(spans))
	}
	pl, err := Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false)
	if err != nil {
		return nil, err
	}
	p.payloads, p.spans = append(p.payloads, pl...), p.spans+len(spans)
	return []Scenario{
		{Name: "engine-wal", Params: map[string]string{"storage": "embedded", "durability": "wal"},
			Run: func(ctx context.Context, env *RunEnv) Result { return runBackendSideBySide(ctx, env, p, "") }},
		{Name: "clickhouse", Params: map[string]string{"storage": "clickhouse", "durability": "insert"},
			Run: func(ctx context.Context, env *RunEnv) Result { return runBackendSideBySide(ctx, env, p, "insert") }},
		{Name: "clickhouse-wal", Params: map[string]string{"storage": "clickhouse", "durability": "wal"},
			Run: func(ctx context.Context, env *RunEnv) Result { return runBackendSideBySide(ctx, env, p, "wal") }},
	}, nil
}

// runBackendSideBySide runs one scenario: the embedded engine when chDurability
// is "", else ClickHouse with that --durability.
func runBackendSideBySide(ctx context.Context, env *RunEnv, p *canonicalPlan, chDurability string) Result {
	onClickHouse := chDurability != ""
	opts := ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"}
	var ch *chserver.Server
	if onClickHouse {
		var err error
		if ch, err = chserver.Start(); err != nil {
			return refused("start clickhouse-server: %v", err)
		}
		defer ch.Stop()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = ch.CreateDatabase(cctx, clickhouseDatabase)
		cancel()
		if err != nil {
			return refused("create the database: %v", err)
		}
		opts.Durability = chDurability
		opts.ExtraArgs = []string{"--storage", "clickhouse", "--clickhouse-url", ch.URL(clickhouseDatabase)}
	}
	stored := func(srv *Server) int64 {
		if ch == nil {
			if st, err := srv.Stats(ctx); err == nil {
				return st.Spans
			}
			return -1
		}
		n, err := ch.QueryUint(ctx, "SELECT count() FROM "+clickhouseDatabase+".spans")
		if err != nil {
			return -1
		}
		return int64(n)
	}
	srv, err := StartServer(ctx, opts)
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	lr, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: 4, KeepAlive: true, Retry429: true}, p.payloads)
	if err != nil {
		return refused("load: %v", err)
	}
	res := Result{Metrics: map[string]float64{"spans_per_s": lr.SpansPerSecond, "accepted_spans_per_s": lr.SpansPerSecond, "retried_429": float64(lr.Retried429)}}
	if chDurability == "wal" {
		// Acknowledged once in the local WAL: the ingest rate is up to the
		// moment ClickHouse holds every span, not the acknowledgements'.
		drained, err := waitStored(ctx, func() int64 { return stored(srv) }, int64(p.spans), 30*time.Minute)
		if err != nil {
			return refused("%v", err)
		}
		res.Metrics["spans_per_s"] = float64(lr.AcceptedSpans) / (lr.Elapsed + drained).Seconds()
		res.Metrics["drain_s"] = drained.Seconds()
	}
	facts := RunFacts{Load: lr, Expected: int64(p.spans), Stored: stored(srv), Restarted: true}
	if err := srv.Stop(2 * time.Minute); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	dir := env.Dir
	if ch != nil {
		// Measured once ClickHouse has merged each table's parts, as it does
		// in the background over time (unmerged, the many small parts of a
		// fresh ingest take several times the bytes).
		octx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := ch.OptimizeAll(octx, clickhouseDatabase)
		cancel()
		if err != nil {
			res.Refusals = append(res.Refusals, "merge the database's parts: "+err.Error())
		}
	}
	disk, err := dirBytes(dir)
	if ch != nil {
		// The active parts: the parts a merge replaced stay on disk for
		// minutes (old_parts_lifetime) and are not the store's size.
		var n uint64
		n, err = ch.QueryUint(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '"+clickhouseDatabase+"' AND active")
		disk = int64(n)
	}
	if err == nil {
		res.Metrics["disk_bytes_per_span"] = float64(disk) / float64(p.spans)
	} else {
		res.Refusals = append(res.Refusals, "measure the store's size: "+err.Error())
	}
	if srv, err = StartServer(ctx, opts); err != nil {
		return refused("restart server: %v", err)
	}
	defer srv.Kill()
	facts.RestartStored = stored(srv)
	res.Refusals = append(Refusals(facts), res.Refusals...)
	if len(res.Refusals) > 0 {
		return res
	}
	byID, filter, err := timeByIDAndFilter(ctx, srv, p.traces, p.perTrace, p.users)
	if err != nil {
		return refused("%v", err)
	}
	var llm []time.Duration
	for i := range len(p.traces) {
		t0 := time.Now()
		code, body, err := srv.Get(ctx, "/api/v1/llm/stats?group_by=model&since=2h")
		d := time.Since(t0)
		if err != nil || code != http.StatusOK {
			return refused("LLM statistics: status %d, err %v: %.200s", code, err, body)
		}
		var st struct {
			Groups []struct {
				Spans int64 `json:"spans"`
			} `json:"groups"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return refused("LLM statistics: bad JSON: %v", err)
		}
		var n int64
		for _, g := range st.Groups {
			n += g.Spans
		}
		if n != int64(p.llmSpans) {
			return refused("LLM statistics count %d spans, the corpus has %d", n, p.llmSpans)
		}
		if i >= 10 {
			llm = append(llm, d)
		}
	}
	for name, ds := range map[string][]time.Duration{"trace": byID, "filter": filter, "llm": llm} {
		s := SummarizeLatency(ds)
		res.Metrics[name+"_p50_ms"], res.Metrics[name+"_p95_ms"] = s.P50, s.P95
	}
	if err := srv.Stop(2 * time.Minute); err != nil {
		res.Refusals = append(res.Refusals, "stop restarted server: "+err.Error())
	}
	return res
}

func clickhouseTargets(rec *Record) []Target {
	line := func(scenario, name, metric, want string, ok func(float64) bool, digits int) Target {
		return scenarioTarget(rec, scenario, name, metric, want, "", ok, digits)
	}
	below := func(x float64) func(float64) bool { return func(v float64) bool { return v < x } }
	at := fmt.Sprintf(" (issue 19's target is for 10M spans; this record has %d)", rec.Spans)
	return []Target{
		line("clickhouse", "ClickHouse ingest over OTLP/HTTP protobuf"+at, "spans_per_s", fmt.Sprintf(">= %.0f spans/s", clickhouseIngestTarget),
			func(v float64) bool { return v >= clickhouseIngestTarget }, 0),
		line("clickhouse", "ClickHouse trace by id p95"+at, "trace_p95_ms", fmt.Sprintf("< %g ms", clickhouseTraceTargetMS), below(clickhouseTraceTargetMS), 2),
		line("clickhouse", "ClickHouse selective filter p95"+at, "filter_p95_ms", fmt.Sprintf("< %g ms", clickhouseFilterTargetMS), below(clickhouseFilterTargetMS), 2),
		line("clickhouse", "ClickHouse LLM statistics by model p95"+at, "llm_p95_ms", fmt.Sprintf("< %g ms", clickhouseLLMTargetMS), below(clickhouseLLMTargetMS), 2),
		line("clickhouse-wal", "ClickHouse behind the local WAL (--durability wal): ingest until ClickHouse holds every span"+at, "spans_per_s",
			fmt.Sprintf(">= %.0f spans/s", clickhouseIngestTarget), func(v float64) bool { return v >= clickhouseIngestTarget }, 0),
		line("clickhouse", "ClickHouse bytes on disk per span", "disk_bytes_per_span", "report", nil, 1),
		line("engine-wal", "Embedded engine bytes on disk per span", "disk_bytes_per_span", "report", nil, 1),
	}
}

// waitStored polls count until it reaches want and reports how long that
// took; it fails after limit, or at once if count goes past want.
func waitStored(ctx context.Context, count func() int64, want int64, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		n := count()
		switch {
		case n == want:
			return time.Since(start), nil
		case n > want:
			return 0, fmt.Errorf("ClickHouse holds %d spans, more than the %d sent", n, want)
		case time.Since(start) > limit:
			return 0, fmt.Errorf("ClickHouse holds %d of the %d acknowledged spans after %s", n, want, limit)
		case ctx.Err() != nil:
			return 0, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
}
