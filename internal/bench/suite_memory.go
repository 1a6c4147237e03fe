package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "memory",
		Summary:      "resident memory (from the OS) on open, during a compaction and after; query latency uncompacted and compacted; ingest during compaction",
		DefaultSpans: 10_000_000,
		Plan:         planMemory,
		Method: `Each run builds a store and measures the server's memory from the operating system, in a fresh child process.
(1) The real ` + "`rastro serve --compaction=false`" + ` (wal durability; ` + "`--seal-bytes`" + ` as in the table: the server default, or
smaller when the default would leave fewer than about 16 segments to compact) ingests the canonical corpus over OTLP/HTTP protobuf (4 workers, 429s retried as an OTLP
exporter does), is stopped gracefully and its data directory measured; a copy of the directory is kept for step 6.
(2) The server is started again: RSS on open is VmRSS of the child from ` + "`/proc/PID/status`" + ` as soon as ` + "`/readyz`" + ` answers
200, with VmHWM and the Go heap in use (` + "`go_memstats_heap_inuse_bytes`" + `). (3) Uncompacted queries: trace by id and the
canonical suite's selective attribute filter (` + "`{ span.user.id = \"u-NNN\" }`" + `, limit 20), 10 warm-ups then ` + "`--samples`" + ` timed
queries each, exact nearest-rank percentiles. (4) VmHWM is reset (` + "`/proc/PID/clear_refs`" + `), then ` + "`POST /api/v1/admin/compact`" + `
runs compaction to completion while VmRSS is sampled every 20 ms; the peak sample, the series and VmHWM after are
recorded. (5) After compaction: RSS, the same query kinds (new samples), the segment count; the server is stopped, the
directory measured and RSS on open read once more. (6) Ingest during compaction, on the copy of the uncompacted
store: a fresh pool of spans (a tenth of the corpus, new trace ids) is ingested with no compaction running (the
server runs with ` + "`--compaction=false`" + `, so none can), the server is stopped and started again, a compaction is requested,
and a second fresh pool of the same size is ingested while it runs. The overlap is certain by construction: the timed
ingest starts only once the data directory has changed size after the request (the idle server writes nothing else:
its buffer is empty, checked), and it is cut off the moment the compaction answers, so the whole timed window lies
inside the compaction; the pool ends it earlier only if the compaction outlasts it. The ratio is the accepted rate in
that window over the rate with no compaction. Every answer is checked: a trace returns exactly its spans, a filter
returns min(20, matches) distinct corpus spans that all carry the user, stored counts never move through a
compaction, and the compaction must leave fewer segments than it found. A wrong answer refuses the run.`,
		Columns: []Column{
			{Title: "Seal bytes", Param: "seal_bytes"},
			{Title: "RSS on open MiB (min-max)", Metric: "rss_open_mib", Spread: true, Digits: 1},
			{Title: "Peak RSS in compaction MiB (min-max)", Metric: "compact_peak_rss_mib", Spread: true, Digits: 1},
			{Title: "VmHWM in compaction MiB", Metric: "compact_hwm_mib", Digits: 1},
			{Title: "RSS after MiB", Metric: "rss_after_mib", Digits: 1},
			{Title: "Segments before", Metric: "segments_before"},
			{Title: "Segments after", Metric: "segments_after"},
			{Title: "Filter p95 ms before", Metric: "filter_before_p95_ms", Digits: 3},
			{Title: "Filter p95 ms after (min-max)", Metric: "filter_after_p95_ms", Spread: true, Digits: 3},
			{Title: "By id p95 ms before", Metric: "trace_before_p95_ms", Digits: 3},
			{Title: "By id p95 ms after (min-max)", Metric: "trace_after_p95_ms", Spread: true, Digits: 3},
			{Title: "Compaction s", Metric: "compact_seconds", Digits: 1},
			{Title: "Ingest during / without compaction (min-max)", Metric: "ingest_ratio", Spread: true, Digits: 2},
		},
		Targets: memoryTargets,
		Detail:  memoryDetail,
	})
}

// Targets of the memory suite (issue 6), set for 10M spans of the canonical
// corpus on a 2-core machine.
const (
	MemoryTargetSpans          = 10_000_000
	MemoryOpenTargetMiB        = 150.0
	MemoryCompactionTargetMiB  = 300.0
	MemoryFilterTargetP95MS    = 10.0
	MemoryTraceByIDTargetP95MS = 2.0
	MemoryIngestRatioTarget    = 0.70
)

const (
	memoryScenario      = "memory-canonical"
	memoryClients       = 4
	memoryWarmups       = 10
	memorySamplePeriod  = 20 * time.Millisecond
	memoryFilterLimit   = 20
	memoryMinSegments   = 16
	memoryDefaultSeal   = 64 << 20 // rastro serve's default --seal-bytes
	memorySpanEstimate  = 565      // the engine's resident estimate of one canonical span, for seal planning
	memoryStopTimeout   = 5 * time.Minute
	memoryStartTimeout  = 5 * time.Minute
	memoryCompactPath   = "/api/v1/admin/compact"
	memoryCompactAbsent = "the server has no compaction endpoint (issue 6 item 1 not built into this binary)"
)

type memoryPlan struct {
	spans     int
	sealBytes int64 // passed as --seal-bytes; 0 leaves the server default
	payloads  []Payload
	perTrace  map[model.TraceID]int
	userSpans map[string]int // spans per user.id value in the corpus
	// Query samples (warm-ups first), drawn separately for before and after
	// compaction so that no cache entry of the first set serves the second.
	tracesBefore, tracesAfter []model.TraceID
	usersBefore, usersAfter   []string
	// Two fresh pools of the same size for step 6: without and during compaction.
	poolSpans        int
	poolWithout      []Payload
	poolDuring       []Payload
	poolWithoutSpans int
	poolDuringSpans  int
}

// memorySealBytes returns the --seal-bytes for a store of spans spans: the
// server default unless that would leave fewer than memoryMinSegments
// segments to compact, then the size giving about that many (at least 256 KiB).
func memorySealBytes(spans int) int64 {
	est := int64(spans) * memorySpanEstimate
	if est/memoryDefaultSeal >= memoryMinSegments {
		return 0
	}
	return max(est/memoryMinSegments, 256<<10)
}

func planMemory(ctx context.Context, cfg Config) ([]Scenario, error) {
	// At 10M spans the generated corpus is gigabytes: collect garbage more
	// often while planning, so that the harness's peak stays near its live heap.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	start := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: start, Window: 25 * time.Minute})
	if err != nil {
		return nil, err
	}
	p := &memoryPlan{spans: len(spans), sealBytes: memorySealBytes(len(spans)), perTrace: map[model.TraceID]int{}, userSpans: map[string]int{}}
	var ids []model.TraceID
	for i := range spans {
		s := &spans[i]
		if p.perTrace[s.TraceID] == 0 {
			ids = append(ids, s.TraceID)
		}
		p.perTrace[s.TraceID]++
		if v, ok := s.Attr("user.id"); ok {
			p.userSpans[v.Str]++
		}
	}
	if p.payloads, err = prepareChunked(spans, cfg.Batch); err != nil {
		return nil, err
	}
	spans = nil // the payloads and the answer key are all the runs need
	r := rand.New(rand.NewPCG(cfg.Seed, 77))
	n := cfg.Samples + memoryWarmups
	users := CanonicalUsers()
	drawUsers := func() []string {
		var out []string
		for len(out) < n {
			if u := users[r.IntN(len(users))]; p.userSpans[u] > 0 {
				out = append(out, u)
			}
		}
		return out
	}
	drawTraces := func() []model.TraceID {
		out := make([]model.TraceID, n)
		for i := range out {
			out[i] = ids[r.IntN(len(ids))]
		}
		return out
	}
	p.tracesBefore, p.usersBefore = drawTraces(), drawUsers()
	p.tracesAfter, p.usersAfter = drawTraces(), drawUsers()

	// The pools: new seeds give new trace and span ids; newer timestamps, as
	// live traffic arriving at a store has.
	p.poolSpans = min(p.spans, max(p.spans/10, 10*cfg.Batch))
	pool := func(seed uint64) ([]Payload, int, error) {
		s, err := Generate(CorpusCanonical, CorpusOptions{Seed: seed, Spans: p.poolSpans, Start: start.Add(26 * time.Minute), Window: 3 * time.Minute})
		if err != nil {
			return nil, 0, err
		}
		pl, err := prepareChunked(s, cfg.Batch)
		return pl, len(s), err
	}
	if p.poolWithout, p.poolWithoutSpans, err = pool(cfg.Seed + 1_000_003); err != nil {
		return nil, fmt.Errorf("ingest pool without compaction: %w", err)
	}
	if p.poolDuring, p.poolDuringSpans, err = pool(cfg.Seed + 2_000_003); err != nil {
		return nil, fmt.Errorf("ingest pool during compaction: %w", err)
	}
	seal := "server default (64MiB)"
	if p.sealBytes > 0 {
		seal = fmt.Sprintf("%.1f MiB", float64(p.sealBytes)/mib)
	}
	return []Scenario{{
		Name: memoryScenario,
		Params: map[string]string{
			"seal_bytes": seal, "durability": "wal", "compaction": "--compaction=false; POST " + memoryCompactPath,
			"compaction_caps": "server defaults (--compaction-max-segment-bytes 1GiB, --compaction-fanout 8)",
			"pool_spans":      strconv.Itoa(p.poolSpans),
		},
		Run: func(ctx context.Context, env *RunEnv) Result { return runMemory(ctx, env, p) },
	}}, nil
}

// prepareChunked is Prepare(Batches(spans, batch), otlp-proto) without
// holding a second copy of every span: at 10M spans that copy is gigabytes.
func prepareChunked(spans []model.Span, batch int) ([]Payload, error) {
	chunk := batch * 256
	out := make([]Payload, 0, (len(spans)+batch-1)/batch)
	for i := 0; i < len(spans); i += chunk {
		pl, err := Prepare(Batches(spans[i:min(i+chunk, len(spans))], batch), ProtoOTLPProto, false)
		if err != nil {
			return nil, err
		}
		out = append(out, pl...)
	}
	return out, nil
}

func (p *memoryPlan) serverOptions(dir string) ServerOptions {
	args := []string{"--compaction=false"}
	if p.sealBytes > 0 {
		args = append(args, "--seal-bytes", strconv.FormatInt(p.sealBytes, 10))
	}
	return ServerOptions{DataDir: dir, Durability: "wal", ExtraArgs: args, StartTimeout: memoryStartTimeout}
}

// memoryStart starts the server of a memory run, naming the likely cause
// when the binary does not know --compaction.
func memoryStart(ctx context.Context, env *RunEnv, p *memoryPlan, dir string) (*Server, error) {
	o := p.serverOptions(dir)
	o.Binary = env.Binary
	srv, err := StartServer(ctx, o)
	if err != nil && strings.Contains(err.Error(), "flag provided but not defined") {
		return nil, fmt.Errorf("%s: %w", memoryCompactAbsent, err)
	}
	return srv, err
}

// compactResult is the answer of POST /api/v1/admin/compact.
type compactResult struct {
	Merges         int     `json:"merges"`
	SegmentsBefore int     `json:"segments_before"`
	SegmentsAfter  int     `json:"segments_after"`
	BytesWritten   int64   `json:"bytes_written"`
	TookMS         float64 `json:"took_ms"`
}

// postCompact runs a compaction to completion. It has no client timeout: a
// compaction of a large store takes minutes; ctx bounds it.
func postCompact(ctx context.Context, srv *Server) (compactResult, error) {
	var cr compactResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.HTTPURL()+memoryCompactPath, nil)
	if err != nil {
		return cr, err
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return cr, fmt.Errorf("POST %s: %w", memoryCompactPath, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return cr, fmt.Errorf("POST %s: read answer: %w", memoryCompactPath, err)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return cr, fmt.Errorf("POST %s answered %s: %s", memoryCompactPath, resp.Status, memoryCompactAbsent)
	case resp.StatusCode != http.StatusOK:
		return cr, fmt.Errorf("POST %s answered %s: %.300s", memoryCompactPath, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &cr); err != nil {
		return cr, fmt.Errorf("POST %s: bad JSON %.200q: %w", memoryCompactPath, body, err)
	}
	return cr, nil
}

// checkCompaction checks a compaction's answer against the segment counts
// the server reported before and after it.
func checkCompaction(cr compactResult, before, after int64) error {
	switch {
	case int64(cr.SegmentsBefore) != before:
		return fmt.Errorf("compaction says it found %d segments, the server served %d", cr.SegmentsBefore, before)
	case int64(cr.SegmentsAfter) != after:
		return fmt.Errorf("compaction says it left %d segments, the server serves %d", cr.SegmentsAfter, after)
	case before > 1 && (cr.Merges == 0 || after >= before):
		return fmt.Errorf("compaction of %d segments merged nothing (%d merges, %d segments after)", before, cr.Merges, after)
	case cr.Merges > 0 && cr.BytesWritten <= 0:
		return fmt.Errorf("compaction reports %d merges but %d bytes written", cr.Merges, cr.BytesWritten)
	}
	return nil
}

const mib = 1 << 20

func runMemory(ctx context.Context, env *RunEnv, p *memoryPlan) Result {
	dir, spare := filepath.Join(env.Dir, "store"), filepath.Join(env.Dir, "store-uncompacted")
	res := Result{Metrics: map[string]float64{}}
	m := res.Metrics
	fail := func(format string, a ...any) Result {
		res.Refusals = append(res.Refusals, fmt.Sprintf(format, a...))
		return res
	}

	// (1) Build the uncompacted store.
	srv, err := memoryStart(ctx, env, p, dir)
	if err != nil {
		return fail("start server: %v", err)
	}
	defer func() { // whichever server is current when the run ends; a failed start leaves nil
		if srv != nil {
			srv.Kill()
		}
	}()
	lr, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: memoryClients, KeepAlive: true, Retry429: true}, p.payloads)
	if err != nil {
		return fail("load: %v", err)
	}
	m["spans_per_s"], m["retried_429"] = lr.SpansPerSecond, float64(lr.Retried429)
	facts := RunFacts{Load: lr, Expected: int64(p.spans), Stored: -1, RestartStored: -1, Restarted: true}
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
	}
	if err := srv.Stop(memoryStopTimeout); err != nil {
		return fail("stop server after ingest: %v", err)
	}
	disk, err := dirBytes(dir)
	if err != nil {
		return fail("measure data directory: %v", err)
	}
	m["disk_bytes_per_span_before"] = float64(disk) / float64(p.spans)
	if err := copyTree(dir, spare); err != nil {
		return fail("keep a copy of the uncompacted store: %v", err)
	}

	// (2) RSS on open.
	if srv, err = memoryStart(ctx, env, p, dir); err != nil {
		return fail("restart server: %v", err)
	}
	pid := srv.cmd.Process.Pid
	open, err := readProcMemory(pid)
	if err != nil {
		return fail("%v", err)
	}
	m["rss_open_mib"], m["hwm_open_mib"] = float64(open.RSS)/mib, float64(open.HWM)/mib
	if mt, err := srv.Metrics(ctx); err == nil {
		m["heap_open_mib"] = metricValue(mt, "go_memstats_heap_inuse_bytes") / mib
	}
	st, err := srv.Stats(ctx)
	if err != nil {
		return fail("%v", err)
	}
	facts.RestartStored = st.Spans
	if res.Refusals = Refusals(facts); len(res.Refusals) > 0 {
		return res
	}
	segBefore := st.Segments
	m["segments_before"] = float64(segBefore)

	// (3) Uncompacted queries.
	if err := memoryQueries(ctx, srv, p, p.tracesBefore, p.usersBefore, "before", m); err != nil {
		return fail("uncompacted: %v", err)
	}

	// (4) Compaction, sampled.
	hwmReset := resetPeakRSS(pid) == nil
	smp := startProcessSampler(pid, memorySamplePeriod)
	t0 := time.Now()
	cr, cerr := postCompact(ctx, srv)
	took := time.Since(t0)
	series := smp.stop()
	if cerr != nil {
		return fail("%v", cerr)
	}
	if series.Samples == 0 {
		return fail("no RSS sample during the compaction: %v", series.FirstErr)
	}
	after, err := readProcMemory(pid)
	if err != nil {
		return fail("%v", err)
	}
	m["compact_peak_rss_mib"], m["compact_rss_p50_mib"], m["compact_rss_mean_mib"] = float64(series.Peak)/mib, float64(series.P50)/mib, series.Mean/mib
	m["compact_rss_min_mib"], m["compact_rss_samples"], m["compact_rss_max_gap_ms"] = float64(series.Min)/mib, float64(series.Samples), float64(series.MaxGap)/float64(time.Millisecond)
	if hwmReset {
		m["compact_hwm_mib"] = float64(after.HWM) / mib
	}
	m["compact_seconds"], m["compact_server_ms"] = took.Seconds(), cr.TookMS
	m["merges"], m["merge_bytes_written"] = float64(cr.Merges), float64(cr.BytesWritten)
	m["rss_after_mib"] = float64(after.RSS) / mib
	if mt, err := srv.Metrics(ctx); err == nil {
		m["heap_after_mib"] = metricValue(mt, "go_memstats_heap_inuse_bytes") / mib
	}

	// (5) After compaction.
	if st, err = srv.Stats(ctx); err != nil {
		return fail("%v", err)
	}
	if st.Spans != int64(p.spans) {
		return fail("after compaction the store holds %d spans, want %d", st.Spans, p.spans)
	}
	if err := checkCompaction(cr, segBefore, st.Segments); err != nil {
		return fail("%v", err)
	}
	m["segments_after"] = float64(st.Segments)
	if err := memoryQueries(ctx, srv, p, p.tracesAfter, p.usersAfter, "after", m); err != nil {
		return fail("compacted: %v", err)
	}
	if err := srv.Stop(memoryStopTimeout); err != nil {
		return fail("stop server after compaction: %v", err)
	}
	if disk, err = dirBytes(dir); err != nil {
		return fail("measure data directory: %v", err)
	}
	m["disk_bytes_per_span_after"] = float64(disk) / float64(p.spans)
	if srv, err = memoryStart(ctx, env, p, dir); err != nil {
		return fail("restart compacted server: %v", err)
	}
	if mem, err := readProcMemory(srv.cmd.Process.Pid); err == nil {
		m["rss_open_compacted_mib"] = float64(mem.RSS) / mib
	}
	if st, err = srv.Stats(ctx); err != nil || st.Spans != int64(p.spans) {
		return fail("compacted store after restart holds %d spans (%v), want %d", st.Spans, err, p.spans)
	}
	if err := srv.Stop(memoryStopTimeout); err != nil {
		return fail("stop compacted server: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil { // disk space for step 6
		return fail("remove compacted store: %v", err)
	}

	// (6) Ingest without and during compaction, on the uncompacted copy.
	if srv, err = memoryStart(ctx, env, p, spare); err != nil {
		return fail("start server on the uncompacted copy: %v", err)
	}
	if err := memoryIngestRatio(ctx, env, p, spare, &srv, m); err != nil {
		return fail("%v", err)
	}
	return res
}

// memoryIngestRatio is step 6. srv is running on dir, uncompacted; it is
// replaced by the restarted server (the caller kills whatever *srv is).
func memoryIngestRatio(ctx context.Context, env *RunEnv, p *memoryPlan, dir string, srv **Server, m map[string]float64) error {
	base := int64(p.spans)
	lr, err := Load(ctx, LoadOptions{Endpoint: (*srv).HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: memoryClients, KeepAlive: true, Retry429: true}, p.poolWithout)
	if err != nil {
		return fmt.Errorf("ingest without compaction: %w", err)
	}
	if r := Refusals(RunFacts{Load: lr, Expected: int64(p.poolWithoutSpans), Stored: int64(p.poolWithoutSpans)}); len(r) > 0 {
		return fmt.Errorf("ingest without compaction: %s", strings.Join(r, "; "))
	}
	m["ingest_without_spans_per_s"], m["ingest_without_retried_429"] = lr.SpansPerSecond, float64(lr.Retried429)
	base += int64(p.poolWithoutSpans)
	if st, err := (*srv).Stats(ctx); err != nil || st.Spans != base {
		return fmt.Errorf("after the ingest without compaction the store holds %d spans (%v), want %d", st.Spans, err, base)
	}
	if err := (*srv).Stop(memoryStopTimeout); err != nil {
		return fmt.Errorf("stop server: %w", err)
	}
	s, err := memoryStart(ctx, env, p, dir)
	if err != nil {
		return fmt.Errorf("restart server: %w", err)
	}
	*srv = s
	st, err := s.Stats(ctx)
	switch {
	case err != nil:
		return err
	case st.BufferSpans != 0:
		return fmt.Errorf("the restarted server holds %d unsealed spans: a seal could be mistaken for the compaction starting", st.BufferSpans)
	case st.Spans != base:
		return fmt.Errorf("the restarted server holds %d spans, want %d", st.Spans, base)
	}
	segBefore := st.Segments
	size0, err := dirBytes(dir)
	if err != nil {
		return fmt.Errorf("measure data directory: %w", err)
	}

	type compactDone struct {
		cr  compactResult
		err error
	}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	doneCh := make(chan compactDone, 1)
	go func() { // owned by this function: it always receives from doneCh before returning
		cr, err := postCompact(cctx, s)
		doneCh <- compactDone{cr, err}
	}()
	wait := func() compactDone { return <-doneCh }
	// Wait for the compaction to show on disk.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for started := false; !started; {
		select {
		case d := <-doneCh:
			if d.err != nil {
				return d.err
			}
			return fmt.Errorf("the compaction (%d merges, %.0f ms) finished before the data directory changed: no window to ingest in", d.cr.Merges, d.cr.TookMS)
		case <-ctx.Done():
			ccancel()
			wait()
			return ctx.Err()
		case <-tick.C:
			n, err := dirBytes(dir)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				ccancel()
				wait()
				return fmt.Errorf("measure data directory: %w", err)
			}
			started = err == nil && n != size0
		}
	}
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	var d compactDone
	gotDone := make(chan struct{})
	go func() { // owned by this function: it waits on gotDone before returning
		defer close(gotDone)
		d = wait()
		lcancel() // the window ends with the compaction
	}()
	smp := startProcessSampler(s.cmd.Process.Pid, memorySamplePeriod)
	lr, lerr := Load(lctx, LoadOptions{Endpoint: s.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: memoryClients, KeepAlive: true, Retry429: true}, p.poolDuring)
	series := smp.stop()
	<-gotDone // the compaction must end before the store is checked
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case d.err != nil:
		return d.err
	case lerr != nil && !errors.Is(lerr, context.Canceled):
		return fmt.Errorf("ingest during compaction: %w", lerr)
	case lr.Status429+lr.Errors+lr.Shed > 0:
		return fmt.Errorf("ingest during compaction: %d batches answered 429, %d failed, %d connections shed: %s", lr.Status429, lr.Errors, lr.Shed, lr.FirstError)
	case lr.AcceptedSpans == 0:
		return fmt.Errorf("the compaction (%.0f ms) ended before one batch was acknowledged: no window to measure", d.cr.TookMS)
	}
	m["ingest_during_spans_per_s"], m["ingest_during_retried_429"] = lr.SpansPerSecond, float64(lr.Retried429)
	m["ingest_during_window_s"], m["ingest_during_spans"] = lr.Elapsed.Seconds(), float64(lr.AcceptedSpans)
	m["ingest_during_pool_exhausted"] = 0
	if lr.SentSpans >= int64(p.poolDuringSpans) {
		m["ingest_during_pool_exhausted"] = 1
	}
	m["ingest_ratio"] = lr.SpansPerSecond / m["ingest_without_spans_per_s"]
	m["ingest_compact_seconds"], m["ingest_compact_merges"] = d.cr.TookMS/1000, float64(d.cr.Merges)
	if series.Samples > 0 {
		m["ingest_compact_peak_rss_mib"] = float64(series.Peak) / mib
	}
	// Acknowledged spans are stored; requests cut off by the end of the
	// window may or may not have been.
	st, err = s.Stats(ctx)
	if err != nil {
		return err
	}
	if lo, hi := base+lr.AcceptedSpans, base+lr.SentSpans; st.Spans < lo || st.Spans > hi {
		return fmt.Errorf("after ingest during compaction the store holds %d spans, want %d..%d", st.Spans, lo, hi)
	}
	if d.cr.SegmentsBefore < int(segBefore) { // seals during the compaction may add segments, never remove them
		return fmt.Errorf("the compaction found %d segments, the server served %d before it", d.cr.SegmentsBefore, segBefore)
	}
	if segBefore > 1 && d.cr.Merges == 0 {
		return fmt.Errorf("the compaction during ingest merged nothing of %d segments", segBefore)
	}
	if err := s.Stop(memoryStopTimeout); err != nil {
		return fmt.Errorf("stop server: %w", err)
	}
	return nil
}

// memoryQueries times trace-by-id and the selective filter over the given
// samples (the first memoryWarmups of each untimed), checks every answer and
// records p50/p95/p99 as trace_<tag>_pNN_ms and filter_<tag>_pNN_ms.
func memoryQueries(ctx context.Context, srv *Server, p *memoryPlan, traces []model.TraceID, users []string, tag string, m map[string]float64) error {
	type span struct {
		TraceID    string         `json:"trace_id"`
		SpanID     string         `json:"span_id"`
		Attributes map[string]any `json:"attributes"`
	}
	var body struct {
		Spans []span `json:"spans"`
	}
	get := func(path string) (time.Duration, error) {
		t0 := time.Now()
		code, b, err := srv.Get(ctx, path)
		d := time.Since(t0)
		if err != nil || code != http.StatusOK {
			return d, fmt.Errorf("GET %s: status %d, err %v: %.200s", path, code, err, b)
		}
		body.Spans = nil
		if err := json.Unmarshal(b, &body); err != nil {
			return d, fmt.Errorf("GET %s: bad JSON: %w", path, err)
		}
		return d, nil
	}
	byID := make([]time.Duration, 0, len(traces))
	for i, id := range traces {
		d, err := get("/api/v1/traces/" + id.String())
		if err != nil {
			return err
		}
		want := p.perTrace[id]
		seen := map[string]bool{}
		for _, s := range body.Spans {
			if s.TraceID != id.String() || seen[s.SpanID] {
				return fmt.Errorf("trace %s: answer holds span %s/%s twice or of another trace", id, s.TraceID, s.SpanID)
			}
			seen[s.SpanID] = true
		}
		if len(body.Spans) != want {
			return fmt.Errorf("trace %s returned %d spans, want %d", id, len(body.Spans), want)
		}
		if i >= memoryWarmups {
			byID = append(byID, d)
		}
	}
	filter := make([]time.Duration, 0, len(users))
	for i, u := range users {
		q := fmt.Sprintf(`{ span.user.id = %q }`, u)
		d, err := get(fmt.Sprintf("/api/v1/spans?limit=%d&q=%s", memoryFilterLimit, url.QueryEscape(q)))
		if err != nil {
			return err
		}
		if err := checkFilterAnswer(p, u, body.Spans, func(s span) (string, string, any) { return s.TraceID, s.SpanID, s.Attributes["user.id"] }); err != nil {
			return fmt.Errorf("query %s: %w", q, err)
		}
		if i >= memoryWarmups {
			filter = append(filter, d)
		}
	}
	a, b := SummarizeLatency(byID), SummarizeLatency(filter)
	m["trace_"+tag+"_p50_ms"], m["trace_"+tag+"_p95_ms"], m["trace_"+tag+"_p99_ms"] = a.P50, a.P95, a.P99
	m["filter_"+tag+"_p50_ms"], m["filter_"+tag+"_p95_ms"], m["filter_"+tag+"_p99_ms"] = b.P50, b.P95, b.P99
	m["samples"] = float64(a.Samples)
	return nil
}

// checkFilterAnswer checks a filter's page: min(limit, matches) distinct
// spans of corpus traces, each carrying user.id = user.
func checkFilterAnswer[S any](p *memoryPlan, user string, spans []S, fields func(S) (trace, span string, userAttr any)) error {
	want := min(memoryFilterLimit, p.userSpans[user])
	if len(spans) != want {
		return fmt.Errorf("returned %d spans, want %d (the corpus has %d matches)", len(spans), want, p.userSpans[user])
	}
	seen := map[string]bool{}
	for _, s := range spans {
		tr, sp, ua := fields(s)
		id, err := model.ParseTraceID(tr)
		if err != nil || p.perTrace[id] == 0 {
			return fmt.Errorf("span %s/%s is not of a corpus trace", tr, sp)
		}
		if seen[tr+"/"+sp] {
			return fmt.Errorf("span %s/%s returned twice", tr, sp)
		}
		seen[tr+"/"+sp] = true
		if ua != user {
			return fmt.Errorf("span %s/%s has user.id %v, want %q", tr, sp, ua, user)
		}
	}
	return nil
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return out.Close()
}

func memoryTargets(rec *Record) []Target {
	sr, ran := rec.Scenario(memoryScenario)
	scale := ""
	if rec.Spans != MemoryTargetSpans {
		scale = fmt.Sprintf(" at %s spans (target set at %s)", num(float64(rec.Spans), 0), num(MemoryTargetSpans, 0))
	}
	line := func(name, want string, v float64, digits int, ok func(float64) bool, note string) Target {
		t := Target{Name: name, Want: want}
		switch {
		case !ran:
			t.Got, t.Status = "not run", "NOT RUN"
		case sr.Status != "ok":
			t.Got, t.Status = sr.Status, "FAIL"
		case math.IsNaN(v):
			t.Got, t.Status = "not measured", "FAIL"
		default:
			t.Got = num(v, digits) + note + scale
			switch {
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
	med := func(metric string) float64 { return rec.median(memoryScenario, metric) }
	peak := med("compact_peak_rss_mib")
	peakNote := " MiB (peak of the 20 ms samples)"
	if hwm := med("compact_hwm_mib"); !math.IsNaN(hwm) && !math.IsNaN(peak) {
		peak = max(peak, hwm)
		peakNote = fmt.Sprintf(" MiB (max of the 20 ms samples, %s, and VmHWM, %s)", num(med("compact_peak_rss_mib"), 1), num(med("compact_hwm_mib"), 1))
	}
	lt := func(limit float64) func(float64) bool { return func(v float64) bool { return v < limit } }
	return []Target{
		line("RSS on open (median of runs)", fmt.Sprintf("< %g MiB", MemoryOpenTargetMiB), med("rss_open_mib"), 1, lt(MemoryOpenTargetMiB), " MiB"),
		line("Peak RSS during compaction, 1 GiB segment cap (median of runs)", fmt.Sprintf("< %g MiB", MemoryCompactionTargetMiB), peak, 1, lt(MemoryCompactionTargetMiB), peakNote),
		line("Attribute filter p95 after compaction (median of runs)", fmt.Sprintf("< %g ms", MemoryFilterTargetP95MS), med("filter_after_p95_ms"), 3, lt(MemoryFilterTargetP95MS), " ms"),
		line("Trace by id p95 after compaction (median of runs)", fmt.Sprintf("< %g ms", MemoryTraceByIDTargetP95MS), med("trace_after_p95_ms"), 3, lt(MemoryTraceByIDTargetP95MS), " ms"),
		line("Ingest during compaction / without (median of runs)", fmt.Sprintf(">= %.2f", MemoryIngestRatioTarget), med("ingest_ratio"), 2, func(v float64) bool { return v >= MemoryIngestRatioTarget },
			fmt.Sprintf(" (%s vs %s spans/s)", num(med("ingest_during_spans_per_s"), 0), num(med("ingest_without_spans_per_s"), 0))),
		line("Uncompacted: filter p95 / trace by id p95", "report", med("filter_before_p95_ms"), 3, nil, fmt.Sprintf(" ms / %s ms", num(med("trace_before_p95_ms"), 3))),
		line("Bytes on disk per span before / after compaction", "report", med("disk_bytes_per_span_before"), 1, nil, fmt.Sprintf(" / %s", num(med("disk_bytes_per_span_after"), 1))),
	}
}

func memoryDetail(rec *Record) string {
	sr, ok := rec.Scenario(memoryScenario)
	if !ok || sr.Status != "ok" {
		return ""
	}
	g := func(metric string, d int) string {
		s, ok := sr.Summary[metric]
		if !ok {
			return "n/a"
		}
		if s.N > 1 && s.Min != s.Max {
			return fmt.Sprintf("%s (%s-%s)", num(s.Median, d), num(s.Min, d), num(s.Max, d))
		}
		return num(s.Median, d)
	}
	rows := [][2]string{
		{"Ingest of the corpus, spans/s (429s retried)", g("spans_per_s", 0) + " (" + g("retried_429", 0) + ")"},
		{"On open: VmRSS / VmHWM / Go heap in use, MiB", g("rss_open_mib", 1) + " / " + g("hwm_open_mib", 1) + " / " + g("heap_open_mib", 1)},
		{"Compaction: client-observed s / server ms / merges / bytes written", g("compact_seconds", 1) + " / " + g("compact_server_ms", 0) + " / " + g("merges", 0) + " / " + g("merge_bytes_written", 0)},
		{"Compaction VmRSS samples: count / longest gap ms", g("compact_rss_samples", 0) + " / " + g("compact_rss_max_gap_ms", 1)},
		{"Compaction VmRSS MiB: min / p50 / mean / peak; VmHWM", g("compact_rss_min_mib", 1) + " / " + g("compact_rss_p50_mib", 1) + " / " + g("compact_rss_mean_mib", 1) + " / " + g("compact_peak_rss_mib", 1) + "; " + g("compact_hwm_mib", 1)},
		{"After compaction: VmRSS / Go heap in use, MiB; VmRSS on open of the compacted store", g("rss_after_mib", 1) + " / " + g("heap_after_mib", 1) + "; " + g("rss_open_compacted_mib", 1)},
		{"Trace by id p50 / p95 / p99 ms, before", g("trace_before_p50_ms", 3) + " / " + g("trace_before_p95_ms", 3) + " / " + g("trace_before_p99_ms", 3)},
		{"Trace by id p50 / p95 / p99 ms, after", g("trace_after_p50_ms", 3) + " / " + g("trace_after_p95_ms", 3) + " / " + g("trace_after_p99_ms", 3)},
		{"Filter p50 / p95 / p99 ms, before", g("filter_before_p50_ms", 3) + " / " + g("filter_before_p95_ms", 3) + " / " + g("filter_before_p99_ms", 3)},
		{"Filter p50 / p95 / p99 ms, after", g("filter_after_p50_ms", 3) + " / " + g("filter_after_p95_ms", 3) + " / " + g("filter_after_p99_ms", 3)},
		{"Disk bytes per span before / after", g("disk_bytes_per_span_before", 1) + " / " + g("disk_bytes_per_span_after", 1)},
		{"Ingest without compaction, spans/s (429s retried)", g("ingest_without_spans_per_s", 0) + " (" + g("ingest_without_retried_429", 0) + ")"},
		{"Ingest during compaction, spans/s (429s retried); window s; spans; pool ran out (1) or compaction ended (0)", g("ingest_during_spans_per_s", 0) + " (" + g("ingest_during_retried_429", 0) + "); " + g("ingest_during_window_s", 2) + "; " + g("ingest_during_spans", 0) + "; " + g("ingest_during_pool_exhausted", 0)},
		{"That compaction: s / merges / peak VmRSS MiB (with ingest)", g("ingest_compact_seconds", 1) + " / " + g("ingest_compact_merges", 0) + " / " + g("ingest_compact_peak_rss_mib", 1)},
	}
	var b strings.Builder
	b.WriteString("| Figure | Median (min-max) |\n|---|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
	}
	return b.String()
}
