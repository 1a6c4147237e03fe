package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchClickHouseEndToEnd runs `rastro bench clickhouse` once on a small
// corpus: a real clickhouse-server started by the harness and the real
// server on it (acknowledging at ClickHouse's insert, and behind a local
// WAL), beside the embedded engine. Every scenario must be accepted
// (every answer checked: stored counts, trace span counts, filter pages,
// the LLM statistics' span count) and report every figure.
func TestBenchClickHouseEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "clickhouse", "--runs", "1", "--spans", "4000", "--samples", "100",
		"--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench clickhouse: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "clickhouse")
	for _, name := range []string{"engine-wal", "clickhouse", "clickhouse-wal"} {
		sc, ok := rec.Scenario(name)
		if !ok || sc.Status != "ok" {
			t.Fatalf("%s not ok: %+v", name, sc)
		}
		for _, m := range []string{"spans_per_s", "disk_bytes_per_span", "trace_p95_ms", "filter_p95_ms", "llm_p95_ms"} {
			if v := sc.Summary[m].Median; !(v > 0) {
				t.Errorf("%s: %s = %v, want a positive figure", name, m, v)
			}
		}
	}
	if len(rec.Targets) != 7 {
		t.Errorf("%d targets, want 7: %+v", len(rec.Targets), rec.Targets)
	}
	doc, err := os.ReadFile(filepath.Join(out, "clickhouse.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"| engine-wal |", "| clickhouse |", "| clickhouse-wal |", "ClickHouse trace by id p95"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("clickhouse.md lacks %q:\n%s", w, doc)
		}
	}
}
