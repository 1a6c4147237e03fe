package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchOverloadEndToEnd runs `rastro bench overload` for real, tiny and
// short: the real server, its saturation measured, then the noisy and quiet
// projects from `rastro load` processes of their own, held until both are
// generated. It asserts that the harness works and records every figure,
// never how fast anything is.
func TestBenchOverloadEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "overload", "--runs", "1", "--spans", "3000", "--batch", "100",
		"--ingest-for", "2s", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench overload: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "overload")
	for _, name := range []string{"overload-otlp-proto", "overload-otlp-grpc"} {
		sc, ok := rec.Scenario(name)
		if !ok || sc.Status != "ok" {
			t.Fatalf("%s not ok: %+v", name, sc)
		}
		m := func(k string) float64 {
			t.Helper()
			sp, ok := sc.Summary[k]
			if !ok {
				t.Errorf("%s: metric %s not recorded", name, k)
			}
			return sp.Median
		}
		// The loads ran in processes of their own at the default nice 10,
		// as read from their threads.
		if v := m("load_nice"); v != 10 {
			t.Errorf("%s: the load processes ran at nice %v, want 10", name, v)
		}
		// Each acknowledged request's answer time is part of its latency
		// from the due time, so no percentile of the first exceeds the
		// second's.
		for _, side := range []string{"noisy", "quiet"} {
			send, due := m(side+"_send_p99_ms"), m(side+"_p99_ms")
			if !(send > 0) || send > due {
				t.Errorf("%s %s: p99 %v ms from the send, %v ms from the due time; want 0 < send <= due", name, side, send, due)
			}
		}
		if m("noisy_send_p50_ms") > m("noisy_p50_ms") {
			t.Errorf("%s: noisy p50 from the send above p50 from the due time", name)
		}
		// Every batch the processes listed as acknowledged was read back,
		// and they listed some (the quiet project alone is never refused
		// at this size).
		if a, v := m("acked_batches"), m("verified_batches"); !(a > 0) || a != v {
			t.Errorf("%s: %v batches acknowledged, %v read back", name, a, v)
		}
		if !(m("noisy_requests") > 0) || !(m("quiet_requests") > 0) || !(m("accepted_spans_per_s") > 0) {
			t.Errorf("%s: no load recorded: %+v", name, sc.Summary)
		}
		// The server's counters over the window are recorded, 0 or not.
		for _, k := range []string{"paced_requests", "rejected_buffer_full", "rejected_overloaded", "rejected_project_buffer_share",
			"rejected_project_rate", "rejected_ingest_busy", "rejected_project_ingest_busy", "rejected_other", "noisy_late_sends", "noisy_send_lag_p99_ms", "noisy_unsent", "quiet_unsent"} {
			if v := m(k); v < 0 {
				t.Errorf("%s: %s = %v", name, k, v)
			}
		}
		if sc.Params["window"] != "2s" || sc.Params["calibration"] != "500ms" {
			t.Errorf("%s: window %q, calibration %q; want 2s and 500ms from --ingest-for", name, sc.Params["window"], sc.Params["calibration"])
		}
	}
	var reports int
	for _, tg := range rec.Targets {
		if tg.Status == "REPORT" {
			reports++
		}
		if strings.Contains(tg.Got, "NaN") || strings.Contains(tg.Got, "refused") {
			t.Errorf("target %q: got %q", tg.Name, tg.Got)
		}
	}
	if reports != 2 {
		t.Errorf("%d REPORT targets, want the send-time p99 of each scenario: %+v", reports, rec.Targets)
	}
	doc, err := os.ReadFile(filepath.Join(out, "overload.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"p99 ms noisy (send)", "| Requests the engine paced", "| 429 in-flight bytes", "| Batches acknowledged (distinct) / read back |"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("overload.md lacks %q:\n%s", w, doc)
		}
	}
	if strings.Contains(string(doc), "NaN") || strings.Contains(string(doc), "n/a") {
		t.Errorf("overload.md shows a missing figure:\n%s", doc)
	}
}
