package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// rastroBin is the rastro binary, built once (on first use) into binDir for
// the end-to-end tests; buildErr says why it could not be built.
var (
	binDir    string
	rastroBin string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rastro-bench-e2e-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// buildRastro builds ./cmd/rastro of this module into out.
func buildRastro(out string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/rastro")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/rastro: %v\n%s", err, b)
	}
	return nil
}

// builtRastro returns the path of the rastro binary, building it on first use.
func builtRastro(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		rastroBin = filepath.Join(binDir, "rastro")
		buildErr = buildRastro(rastroBin)
	})
	if buildErr != nil {
		t.Fatalf("the rastro binary is needed for this test and did not build: %v", buildErr)
	}
	return rastroBin
}

// runRastro runs the built binary and returns stdout, stderr and the error.
func runRastro(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(builtRastro(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// TestBenchEndToEnd runs `rastro bench` for real, tiny: it starts the real
// server binary, ingests, restarts, queries, and writes the report. It
// asserts that the harness works, never how fast anything is.
func TestBenchEndToEnd(t *testing.T) {
	out := t.TempDir()
	md := filepath.Join(out, "ingest.md")
	if err := os.WriteFile(md, []byte("# Ingest\n\nAnalysis that must survive.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runRastro(t, "bench", "--runs", "2", "--spans", "3000",
		"--only", "otlp-proto-wal-c1$,otlp-grpc-buffered-c4,direct-engine-wal", "--out-dir", out, "--tmp-dir", t.TempDir(), "ingest")
	if err != nil {
		t.Fatalf("rastro bench ingest: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	doc, _ := os.ReadFile(md)
	for _, want := range []string{"Analysis that must survive.", MarkerBegin, MarkerEnd, "| otlp-proto-wal-c1 | otlp-proto | /v1/traces | wal | true | 1 |", "| otlp-grpc-buffered-c4 |", "| direct-engine-wal |", "Ingest over OTLP/HTTP protobuf"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("ingest.md lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "FAILED") {
		t.Errorf("a scenario was refused:\n%s\nstderr:\n%s", doc, stderr)
	}
	rec := readRaw(t, out, "ingest")
	if len(rec.Scenarios) != 3 {
		t.Fatalf("raw record has %d scenarios, want 3", len(rec.Scenarios))
	}
	for _, sc := range rec.Scenarios {
		if len(sc.Runs) != 2 {
			t.Errorf("%s: %d runs, want 2", sc.Name, len(sc.Runs))
		}
		if sp := sc.Summary["spans_per_s"]; sc.Status != "ok" || sp.N != 2 || !(sp.Min > 0) {
			t.Errorf("%s: status %s, spans/s %+v, reasons %q", sc.Name, sc.Status, sp, sc.Reasons)
		}
	}
	if sc, _ := rec.Scenario("otlp-proto-wal-c1"); sc != nil && !(sc.Summary["wire_bytes_per_span"].Median > 0) {
		t.Errorf("no wire bytes per span recorded")
	}
	if sc, _ := rec.Scenario("otlp-proto-wal-c1"); sc != nil && runtime.GOOS == "linux" {
		// 3000 spans may take less than a 10 ms clock tick: the CPU
		// figure must be there, not above zero.
		if _, ok := sc.Summary["cpu_us_per_span"]; !ok || !(sc.Summary["peak_rss_mib"].Median > 0) {
			t.Errorf("server CPU per span or peak RSS not recorded: %+v", sc.Summary)
		}
	}
	// Round-robin rotation: the two runs of the 3 scenarios sit at different positions.
	if sc, _ := rec.Scenario("otlp-proto-wal-c1"); sc != nil && len(sc.Runs) == 2 && sc.Runs[0].Position == sc.Runs[1].Position {
		t.Errorf("scenario order was not rotated between rounds: %+v", sc.Runs)
	}
	if rec.Machine.CPUs == 0 || rec.Machine.GoVersion == "" || rec.Machine.Commit == "" || rec.LoadAvg.Samples == 0 {
		t.Errorf("machine or load average not recorded: %+v %+v", rec.Machine, rec.LoadAvg)
	}
}

func TestBenchCanonicalEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "canonical", "--runs", "1", "--spans", "3000", "--samples", "100", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench canonical: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "canonical")
	sc, ok := rec.Scenario("canonical-wal")
	if !ok || sc.Status != "ok" {
		t.Fatalf("canonical-wal not ok: %+v", sc)
	}
	for _, m := range []string{"trace_p95_ms", "filter_p95_ms", "disk_bytes_per_span"} {
		if !(sc.Summary[m].Median > 0) {
			t.Errorf("metric %s missing or zero: %+v", m, sc.Summary[m])
		}
	}
	if sc.Summary["samples"].Median != 100 {
		t.Errorf("samples = %v, want 100", sc.Summary["samples"].Median)
	}
	if len(rec.Targets) != 3 || rec.Targets[2].Status != "REPORT" {
		t.Errorf("targets = %+v", rec.Targets)
	}
	for _, tg := range rec.Targets[:2] {
		if tg.Status != "PASS" && tg.Status != "FAIL" {
			t.Errorf("target %q has status %q, want PASS or FAIL", tg.Name, tg.Status)
		}
	}
}

func readRaw(t *testing.T, dir, suite string) *Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "raw", suite+"-*.json"))
	if len(files) != 1 {
		t.Fatalf("want one raw record for %s, found %v", suite, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("raw record: %v", err)
	}
	return &rec
}

// TestBenchTailEndToEnd runs the tail suite small against the real binary:
// every scenario runs, every probe reaches its tail, and every error tail
// accounts for each error span of the corpus.
func TestBenchTailEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "tail", "--runs", "1", "--spans", "3000", "--samples", "100", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench tail: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "tail")
	for _, name := range []string{"tail-idle", "tail-under-load", "ingest-no-tail", "ingest-4-tails", "ingest-unfiltered-tail"} {
		sc, ok := rec.Scenario(name)
		if !ok || sc.Status != "ok" {
			t.Fatalf("%s not ok: %+v", name, sc)
		}
	}
	for _, name := range []string{"tail-idle", "tail-under-load"} {
		sc, _ := rec.Scenario(name)
		if sc.Summary["tail_spans"].Median != 100 || !(sc.Summary["event_p95_ms"].Median > 0) {
			t.Errorf("%s: %v probes seen, event p95 %v", name, sc.Summary["tail_spans"].Median, sc.Summary["event_p95_ms"].Median)
		}
	}
	sc, _ := rec.Scenario("ingest-4-tails")
	if errs, _ := strconv.Atoi(sc.Params["error_spans"]); errs == 0 || sc.Summary["tail_spans"].Median+sc.Summary["dropped"].Median < float64(errs) {
		t.Errorf("error tails: %v spans + %v dropped, corpus has %s error spans", sc.Summary["tail_spans"].Median, sc.Summary["dropped"].Median, sc.Params["error_spans"])
	}
	if len(rec.Targets) != 5 {
		t.Errorf("targets = %+v", rec.Targets)
	}
}
