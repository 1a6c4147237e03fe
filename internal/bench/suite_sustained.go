package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The sustained-ingest target of issue 17: SustainedSpans unique canonical
// spans over OTLP/HTTP protobuf from SustainedWorkers closed-loop workers,
// every one accepted, at a rate and a peak RSS the seals keep up with.
const (
	SustainedSpans             = 3_000_000
	SustainedWorkers           = 4
	SustainedTargetSpansPerSec = 300_000
	SustainedTargetPeakRSSMiB  = 256
)

const sustainedScenarioName = "sustained"

// sustainedServerArgs are the serve flags of the sustained run besides the
// data directory, the HTTP address and --durability wal: no gRPC listener
// and no MCP server, as in the records measured by hand before the harness
// had the scenario. Every other flag is left at its default.
var sustainedServerArgs = []string{"--grpc-addr", "", "--mcp=false"}

// sustainedStopTimeout bounds the graceful stop that ends a sustained run
// (its final seal).
const sustainedStopTimeout = 2 * time.Minute

// sustainedScenario is the ingest suite's sustained run: SustainedSpans, or
// the count given with --spans.
func sustainedScenario(cfg Config) Scenario {
	spans := SustainedSpans
	if cfg.spansGiven {
		spans = cfg.Spans
	}
	return Scenario{
		Name: sustainedScenarioName,
		Params: map[string]string{"protocol": string(ProtoOTLPProto), "route": ProtoOTLPProto.Route(), "durability": "wal",
			"keepalive": "true", "concurrency": strconv.Itoa(SustainedWorkers), "spans": strconv.Itoa(spans)},
		Run: func(ctx context.Context, env *RunEnv) Result { return runSustained(ctx, env, spans) },
	}
}

// runSustained is one sustained run: a fresh server with its defaults (wal
// durability), then `rastro load` of the harness binary in a process of its
// own, sending spans unique canonical spans closed loop from
// SustainedWorkers workers in env.Batch-span batches; a batch answered 429
// is counted and not re-sent. The server's CPU time is read and its VmHWM
// reset before the load process starts (it generates its corpus before its
// clock starts), and both are read when it has had its last answer; then the
// stored count is checked against the spans acknowledged and the server is
// stopped gracefully.
func runSustained(ctx context.Context, env *RunEnv, spans int) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal", ExtraArgs: sustainedServerArgs})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	pid := srv.cmd.Process.Pid
	before, err := srv.Metrics(ctx)
	if err != nil {
		return refused("%v", err)
	}
	cpu0, err := readProcCPU(pid)
	if err != nil {
		return refused("%v", err)
	}
	if err := resetPeakRSS(pid); err != nil {
		return refused("%v", err)
	}
	gen, err := StartLoadProcess(ctx, LoadProcess{Binary: env.Harness, Corpus: CorpusCanonical, Batch: env.Batch,
		Options: CorpusOptions{Seed: env.Seed, Spans: spans, Start: time.Now().Add(-time.Hour), Window: time.Hour},
		Load:    LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: SustainedWorkers, KeepAlive: true}})
	if err != nil {
		return refused("load: %v", err)
	}
	lr, err := gen.Wait()
	cpu1, cpuErr := readProcCPU(pid)
	mem, memErr := readProcMemory(pid)
	switch {
	case err != nil:
		return refused("load: %v", err)
	case cpuErr != nil:
		return refused("%v", cpuErr)
	case memErr != nil:
		return refused("%v", memErr)
	}
	facts := RunFacts{Load: lr, Expected: int64(spans), Stored: -1}
	st, err := srv.Stats(ctx)
	if err == nil {
		facts.Stored = st.Spans
	}
	res := Result{Metrics: map[string]float64{
		"spans_per_s":         lr.SpansPerSecond,
		"status_429":          float64(lr.Status429),
		"spans_accepted":      float64(lr.AcceptedSpans),
		"spans_stored":        float64(facts.Stored),
		"wall_s":              lr.Elapsed.Seconds(),
		"p50_ms":              lr.Latency.P50,
		"p95_ms":              lr.Latency.P95,
		"p99_ms":              lr.Latency.P99,
		"max_ms":              lr.Latency.Max,
		"wire_bytes_per_span": float64(lr.WireBytes) / float64(max(lr.SentSpans, 1)),
		"cpu_us_per_span":     microsPerSpan(cpu1-cpu0, lr.AcceptedSpans),
		"peak_rss_mib":        float64(mem.HWM) / mib,
	}}
	if err == nil {
		res.Metrics["buffer_spans_end"] = float64(st.BufferSpans)
	}
	if after, err := srv.Metrics(ctx); err == nil {
		p := string(ProtoOTLPProto)
		ns1, ok1 := after.Sum("rastro_decode_ns_total", "protocol", p)
		n1, ok2 := after.Sum("rastro_ingest_spans_total", "protocol", p)
		ns0, _ := before.Sum("rastro_decode_ns_total", "protocol", p)
		n0, _ := before.Sum("rastro_ingest_spans_total", "protocol", p)
		if ok1 && ok2 && n1 > n0 {
			res.Metrics["decode_ns_per_span"] = (ns1 - ns0) / (n1 - n0)
		}
		s1, ok := after.Sum("rastro_seals_total")
		s0, _ := before.Sum("rastro_seals_total")
		if ok {
			res.Metrics["seals"] = s1 - s0
		}
	}
	res.Refusals = sustainedRefusals(facts)
	if err := srv.Stop(sustainedStopTimeout); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	return res
}

// sustainedRefusals are the reasons a sustained run does not count. A batch
// answered 429 is not one: it is counted (the target is none) and not
// re-sent, so the spans acknowledged are then fewer than those sent. Any
// other failed batch, a shed connection, a span not sent, a span rejected as
// partial success, or a stored count other than the spans acknowledged
// refuses the run.
func sustainedRefusals(f RunFacts) []string {
	var out []string
	l := f.Load
	if l.Errors > 0 {
		r := fmt.Sprintf("%d of %d batches failed with an error other than 429", l.Errors, l.Requests)
		if l.FirstError != "" {
			r += ": first failure: " + l.FirstError
		}
		out = append(out, r)
	}
	if l.Shed > 0 {
		out = append(out, fmt.Sprintf("server shed %d connections", l.Shed))
	}
	if l.SentSpans != f.Expected {
		out = append(out, fmt.Sprintf("%d of %d spans were sent", l.SentSpans, f.Expected))
	}
	if l.RejectedSpans > 0 {
		out = append(out, fmt.Sprintf("server rejected %d spans as partial success", l.RejectedSpans))
	}
	switch {
	case f.Stored < 0:
		out = append(out, "stored span count could not be read")
	case f.Stored != l.AcceptedSpans:
		out = append(out, fmt.Sprintf("stored count %d differs from the %d spans acknowledged", f.Stored, l.AcceptedSpans))
	}
	return out
}

// sustainedTargets are issue 17's sustained targets: accepted spans/s, no
// 429 in any run, peak RSS. A record of another span count or batch size
// shows its figures and marks them NOT RUN.
func sustainedTargets(rec *Record) []Target {
	sr, ran := rec.Scenario(sustainedScenarioName)
	var spans int
	if ran {
		spans, _ = strconv.Atoi(sr.Params["spans"])
	}
	mk := func(name, want, metric string, got func(Spread) (string, bool)) Target {
		t := Target{Name: name, Want: want}
		switch {
		case !ran:
			t.Got, t.Status = "not run", "NOT RUN"
			return t
		case sr.Status != "ok":
			t.Got, t.Status = "scenario "+sr.Status, "FAIL"
			return t
		}
		t.Got, t.Status = "n/a", "FAIL"
		if sp, ok := sr.Summary[metric]; ok {
			var met bool
			t.Got, met = got(sp)
			if met {
				t.Status = "PASS"
			}
		}
		if spans != SustainedSpans || rec.Batch != 1000 {
			t.Status = "NOT RUN"
			t.Got += fmt.Sprintf(", but %s spans in batches of %d", num(float64(spans), 0), rec.Batch)
		}
		return withBusyNote(rec, t)
	}
	return []Target{
		mk(fmt.Sprintf("Sustained: %s unique canonical spans over OTLP/HTTP protobuf, wal, %d workers, closed loop, 1000-span batches",
			num(SustainedSpans, 0), SustainedWorkers),
			">= "+num(SustainedTargetSpansPerSec, 0)+" spans/s accepted", "spans_per_s",
			func(sp Spread) (string, bool) { return num(sp.Median, 0), sp.Median >= SustainedTargetSpansPerSec }),
		mk("Sustained: requests answered 429 (not re-sent)", "0 in every run", "status_429",
			func(sp Spread) (string, bool) { return num(sp.Max, 0) + " in the worst run", sp.Max == 0 }),
		mk("Sustained: server peak RSS (VmHWM) over the load", "<= "+num(SustainedTargetPeakRSSMiB, 0)+" MiB", "peak_rss_mib",
			func(sp Spread) (string, bool) { return num(sp.Median, 1), sp.Median <= SustainedTargetPeakRSSMiB }),
	}
}

// sustainedDetail renders the sustained run's figures under the ingest
// table.
func sustainedDetail(rec *Record) string {
	sr, ok := rec.Scenario(sustainedScenarioName)
	if !ok {
		return ""
	}
	spans, _ := strconv.Atoi(sr.Params["spans"])
	var b strings.Builder
	fmt.Fprintf(&b, "Sustained run: %s unique canonical spans from `rastro load` in a process of its own, %d workers, closed loop; "+
		"medians across runs (min-max).\n\n", num(float64(spans), 0), SustainedWorkers)
	if sr.Status != "ok" {
		b.WriteString("The sustained scenario was " + sr.Status + " (see above).\n")
		return b.String()
	}
	writeSpreadTable(&b, "sustained run", sr, []spreadRow{
		{"Spans accepted", "spans_accepted", 0},
		{"Spans stored (must equal those accepted)", "spans_stored", 0},
		{"Requests answered 429 (counted, not re-sent)", "status_429", 0},
		{"Wall s, first request to last answer", "wall_s", 2},
		{"Spans/s accepted", "spans_per_s", 0},
		{"Server CPU us/span accepted, load window", "cpu_us_per_span", 2},
		{"Server peak RSS (VmHWM) MiB, load window", "peak_rss_mib", 1},
		{"Seals during the load", "seals", 0},
		{"Spans in the write buffers when the load ended", "buffer_spans_end", 0},
	})
	return b.String()
}

// ingestDetail is the ingest suite's text under its table: the sustained
// run's figures, then the telemetrygen run's.
func ingestDetail(rec *Record) string {
	var parts []string
	for _, d := range []string{sustainedDetail(rec), telemetrygenDetail(rec)} {
		if d = strings.TrimSpace(d); d != "" {
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, "\n\n")
}
