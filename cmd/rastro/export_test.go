package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/export"
)

// TestExportInterruptedKeepsAValidFile interrupts `rastro export` (SIGINT,
// as Ctrl-C does) in the middle of an export from a real server: it exits
// 1, leaves a valid Parquet file of the spans written so far and prints the
// command that exports the rest; running that command writes the other
// spans, so the two files hold every span once.
func TestExportInterruptedKeepsAValidFile(t *testing.T) {
	srv := startChild(t, t.TempDir())
	defer srv.stop(t)
	// A fixed start, moved to two hours ago: the corpus's content depends
	// on its start's hour.
	fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 3, Spans: 3000, Start: fixed})
	if err != nil {
		t.Fatal(err)
	}
	spans = bench.Moved(spans, time.Now().Add(-2*time.Hour).Sub(fixed))
	for _, b := range bench.Batches(spans, 500) {
		if ok, err := post(context.Background(), http.DefaultClient, srv, "", b); !ok || err != nil {
			t.Fatalf("ingest: ok %v, %v", ok, err)
		}
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "part-1.parquet")
	// One span per request and per row group: slow enough to interrupt,
	// and the file grows as it goes.
	cmd := exec.Command(binary, "export", "--server", srv.base, "--since", "3h", "--out", first, "--page-spans", "1", "--row-group-spans", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the export to write rows", func() bool {
		tmps, _ := filepath.Glob(filepath.Join(dir, ".part-1.parquet.*.tmp"))
		if len(tmps) != 1 {
			return false
		}
		st, err := os.Stat(tmps[0])
		return err == nil && st.Size() > 64<<10
	})
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("interrupted export: %v, stderr %q (the export must still be running when interrupted: see the page size)", err, stderr.String())
	}
	rows, err := parquet.ReadFile[export.Row](first)
	if err != nil || len(rows) == 0 || len(rows) >= len(spans) {
		t.Fatalf("interrupted export's file: %d rows of %d, %v", len(rows), len(spans), err)
	}
	m := regexp.MustCompile(`more spans match; to export them: rastro (export .*) --out NEXT.parquet`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no resume line in %q", stdout.String())
	}
	rest := filepath.Join(dir, "part-2.parquet")
	args := append(strings.Fields(m[1]), "--out", rest)
	if out, err := exec.Command(binary, args...).CombinedOutput(); err != nil {
		t.Fatalf("resume %v: %v\n%s", args, err, out)
	}
	more, err := parquet.ReadFile[export.Row](rest)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range append(rows, more...) {
		seen[r.TraceID+"/"+r.SpanID]++
	}
	for i := range spans {
		if k := spans[i].TraceID.String() + "/" + spans[i].SpanID.String(); seen[k] != 1 {
			t.Fatalf("span %s is in the two files %d times, want once", k, seen[k])
		}
	}
	if len(seen) != len(spans) {
		t.Errorf("%d spans in the two files, %d sent", len(seen), len(spans))
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}
