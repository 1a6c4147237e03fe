package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// TelemetrygenIssueLoad is the ingest suite's telemetrygen load: 4 workers x
// 25,000 traces x (1 root + 1 child) = 200,000 spans, in 1000-span requests.
// --spans and --batch do not change it.
var TelemetrygenIssueLoad = TelemetrygenLoad{Workers: 4, Traces: 25_000, ChildSpans: 1, BatchSize: 1000}

// Targets of the telemetrygen scenario, measured through the seal of every
// span it sent.
const (
	TelemetrygenTargetCPUMicrosPerSpan = 3.5
	TelemetrygenTargetPeakRSSMiB       = 200
)

const telemetrygenScenarioName = "telemetrygen-otlp-proto-wal"

// telemetrygenStoredWait bounds the wait for the stored count once
// telemetrygen has exited (every request it made was answered by then).
const telemetrygenStoredWait = 30 * time.Second

func telemetrygenScenario() Scenario {
	l := TelemetrygenIssueLoad
	return Scenario{
		Name: telemetrygenScenarioName,
		Params: map[string]string{"protocol": "otlp-proto (telemetrygen)", "route": "/v1/traces", "durability": "wal",
			"keepalive": "true", "concurrency": "1", "command": l.Command("HOST:PORT"), "telemetrygen": TelemetrygenVersion},
		Run: func(ctx context.Context, env *RunEnv) Result { return runTelemetrygen(ctx, env, l) },
	}
}

// runTelemetrygen is one telemetrygen run: a fresh server with the default
// options (wal durability), the pinned telemetrygen against it, then a wait
// for the stored count and for the seal of every span. The server's CPU time
// and VmHWM are read before the load, when every span is stored (the load
// window) and when every span is sealed.
func runTelemetrygen(ctx context.Context, env *RunEnv, l TelemetrygenLoad) Result {
	bin, err := telemetrygenBinary(ctx, env.logf)
	if err != nil {
		return refused("%v", err)
	}
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	pid := srv.cmd.Process.Pid
	want := int64(l.Spans())
	cpu0, err := readProcCPU(pid)
	if err != nil {
		return refused("%v", err)
	}
	if err := resetPeakRSS(pid); err != nil {
		return refused("%v", err)
	}

	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, l.Args(srv.HTTPAddr)...)
	cmd.Env = l.Env(os.Environ())
	cmd.Stdout, cmd.Stderr = &out, &out
	bindToParent(cmd)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return refused("telemetrygen: %v: %s", err, lastLines(out.String(), 5))
	}
	st, err := awaitStats(ctx, srv, telemetrygenStoredWait, 5*time.Millisecond, func(st ServerStats) bool { return st.Spans >= want })
	wall := time.Since(start)
	cpuStored, cpuErr := readProcCPU(pid)
	memStored, memErr := readProcMemory(pid)
	switch {
	case err != nil:
		return refused("telemetrygen generated %d spans: %v", want, err)
	case st.Spans != want:
		return refused("the server stored %d spans, telemetrygen generated %d (%s)", st.Spans, want, lastLines(out.String(), 3))
	case cpuErr != nil:
		return refused("%v", cpuErr)
	case memErr != nil:
		return refused("%v", memErr)
	}

	// Every span is sealed by a graceful stop (the engine seals its buffer
	// on close, as at any shutdown), rather than by waiting a minute of
	// --seal-age: the kernel's accounting of the exited process gives the
	// CPU through that seal, and VmHWM read until the exit the peak RSS.
	// Scraped first, so the counters are the load's.
	var seals, decodeNs, wireBytes float64
	var haveDecode bool
	if m, err := srv.Metrics(ctx); err == nil {
		seals, _ = m.Sum("rastro_seals_total")
		ns, ok1 := m.Sum("rastro_decode_ns_total", "protocol", string(ProtoOTLPProto))
		b, ok2 := m.Sum("rastro_ingest_bytes_total", "protocol", string(ProtoOTLPProto))
		decodeNs, wireBytes, haveDecode = ns, b, ok1 && ok2
	}
	sealStart := time.Now()
	peakSealed, err := srv.StopWatchingPeak(2*time.Minute, memStored.HWM)
	if err != nil {
		return refused("stop the server (its final seal): %v", err)
	}
	sealWait := time.Since(sealStart)
	if strings.Contains(srv.Logs(), "final seal failed") {
		return refused("the final seal failed: %s", lastLines(srv.Logs(), 3))
	}
	cpuSealed, err := srv.ExitCPU()
	if err != nil {
		return refused("%v", err)
	}

	n := float64(want)
	res := Result{Metrics: map[string]float64{
		"spans_stored":           float64(st.Spans),
		"wall_s":                 wall.Seconds(),
		"spans_per_s":            n / wall.Seconds(),
		"cpu_us_per_span":        microsPerSpan(cpuStored-cpu0, want),
		"peak_rss_mib":           float64(memStored.HWM) / mib,
		"cpu_us_per_span_sealed": microsPerSpan(cpuSealed-cpu0, want),
		"peak_rss_sealed_mib":    float64(peakSealed) / mib,
		"seal_wait_s":            sealWait.Seconds(),
		"seals":                  seals + 1, // and the final one
	}}
	if haveDecode {
		res.Metrics["decode_ns_per_span"] = decodeNs / n
		res.Metrics["wire_bytes_per_span"] = wireBytes / n // telemetrygen does not compress
	}
	return res
}

// microsPerSpan is cpu per span in microseconds.
func microsPerSpan(cpu time.Duration, spans int64) float64 {
	return float64(cpu.Nanoseconds()) / 1e3 / float64(spans)
}

// awaitStats polls /api/v1/stats every interval until done accepts the
// answer, and returns that answer. It fails when timeout passes first (with
// the last answer in the error), the server exits, or ctx ends.
func awaitStats(ctx context.Context, srv *Server, timeout, every time.Duration, done func(ServerStats) bool) (ServerStats, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := srv.Stats(ctx)
		if err == nil && done(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return st, fmt.Errorf("not within %s: %w", timeout, err)
			}
			return st, fmt.Errorf("not within %s: last stats: %d spans stored, %d in the write buffer", timeout, st.Spans, st.BufferSpans)
		}
		select {
		case <-srv.exited:
			return st, fmt.Errorf("server exited (%v): %s", srv.waitErr, srv.Logs())
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(every):
		}
	}
}

// telemetrygenTargets are the issue's targets for the telemetrygen run:
// server CPU per span and peak RSS, both through the seal of every span.
func telemetrygenTargets(rec *Record) []Target {
	sr, ran := rec.Scenario(telemetrygenScenarioName)
	mk := func(name, want, metric string, limit float64, digits int) Target {
		t := Target{Name: name, Want: want}
		switch {
		case !ran:
			t.Got, t.Status = "not run", "NOT RUN"
		case sr.Status != "ok":
			t.Got, t.Status = "scenario "+sr.Status, "FAIL"
		default:
			v := rec.median(telemetrygenScenarioName, metric)
			t.Got, t.Status = num(v, digits), "FAIL"
			if v <= limit {
				t.Status = "PASS"
			}
			t = withBusyNote(rec, t)
		}
		return t
	}
	return []Target{
		mk("Server CPU per span, telemetrygen 200,000 spans over OTLP/HTTP, wal, including seals",
			"<= "+num(TelemetrygenTargetCPUMicrosPerSpan, 1)+" us/span", "cpu_us_per_span_sealed", TelemetrygenTargetCPUMicrosPerSpan, 2),
		mk("Server peak RSS (VmHWM), telemetrygen run, including seals",
			"<= "+num(TelemetrygenTargetPeakRSSMiB, 0)+" MiB", "peak_rss_sealed_mib", TelemetrygenTargetPeakRSSMiB, 1),
	}
}

// telemetrygenDetail renders the telemetrygen run's figures under the
// ingest table.
func telemetrygenDetail(rec *Record) string {
	sr, ok := rec.Scenario(telemetrygenScenarioName)
	if !ok {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "telemetrygen %s, `%s`; medians across runs (min-max).\n\n", TelemetrygenVersion, TelemetrygenIssueLoad.Command("HOST:PORT"))
	if sr.Status != "ok" {
		b.WriteString("The telemetrygen scenario was " + sr.Status + " (see above).\n")
		return b.String()
	}
	writeSpreadTable(&b, "telemetrygen run", sr, []spreadRow{
		{"Spans stored", "spans_stored", 0},
		{"Wall s, telemetrygen start to every span stored", "wall_s", 2},
		{"Spans/s", "spans_per_s", 0},
		{"Server CPU us/span, load window", "cpu_us_per_span", 2},
		{"Server CPU us/span, through the seal of every span", "cpu_us_per_span_sealed", 2},
		{"Server peak RSS MiB, load window", "peak_rss_mib", 1},
		{"Server peak RSS MiB, through the seal of every span", "peak_rss_sealed_mib", 1},
		{"Seals (with the final one at shutdown)", "seals", 0},
		{"Graceful stop (the final seal), s", "seal_wait_s", 2},
	})
	return b.String()
}
