package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestMigrateFromDataDirKilledAndResumed copies a data directory written by
// a real server into ClickHouse with `rastro migrate --from-data-dir`,
// SIGKILLs the process in the middle of the copy, interrupts the next run
// with SIGINT, and runs it a third time to the end: ClickHouse then answers
// span search and LLM statistics (from its rollups, which would count a
// span inserted twice for good) exactly as the engine does on the same
// directory.
func TestMigrateFromDataDirKilledAndResumed(t *testing.T) {
	dir := t.TempDir()
	srv := startChild(t, dir)
	spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 5, Spans: 6000, Start: time.Now().Add(-3 * time.Hour).Truncate(time.Minute), Window: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bench.Batches(spans, 500) {
		project := "" // the default project
		if i%4 == 3 {
			project = "other"
		}
		if ok, err := post(context.Background(), http.DefaultClient, srv, project, b); !ok || err != nil {
			t.Fatalf("ingest: ok %v, %v", ok, err)
		}
	}
	srv.stop(t)

	url := chtest.URL(t)
	opts, err := clickhouse.ParseDSN(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	copied := func() uint64 {
		var n uint64
		// The table appears with the first run; until then nothing is copied.
		if err := conn.QueryRow(context.Background(), "SELECT sum(spans) FROM (SELECT project, max(spans) AS spans FROM import_progress GROUP BY project)").Scan(&n); err != nil {
			return 0
		}
		return n
	}
	args := []string{"migrate", "--clickhouse-url", url, "--from-data-dir", dir, "--batch-spans", "40"}
	for _, stop := range []struct {
		sig   syscall.Signal
		after uint64
	}{{syscall.SIGKILL, 1000}, {syscall.SIGINT, 3000}} {
		cmd := exec.Command(binary, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 120*time.Second, fmt.Sprintf("%d spans copied", stop.after), func() bool { return copied() >= stop.after })
		cmd.Process.Signal(stop.sig)
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%v: the migration ended before the signal (%v): raise the corpus or lower --batch-spans", stop.sig, err)
		}
		if stop.sig == syscall.SIGINT && (ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "interrupted") || !strings.Contains(stderr.String(), "run the same command again")) {
			t.Fatalf("interrupted migration: %v, stderr %q", err, stderr.String())
		}
		if n := copied(); n >= uint64(len(spans)) {
			t.Fatalf("%v: %d spans copied before the signal: nothing left to resume", stop.sig, n)
		}
	}
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "resumed") || !strings.Contains(string(out), "copied 6000 spans of 2 projects") {
		t.Fatalf("resumed migration: %v\n%s", err, out)
	}
	t.Logf("resumed migration:\n%s", out)

	eng, err := engine.Open(engine.Options{Dir: dir, NoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ch, err := chstore.Open(t.Context(), chstore.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ctx := t.Context()
	for _, project := range []string{"default", "other"} {
		want, got := walk(t, eng, project), walk(t, ch, project)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("project %s: ClickHouse walks %d spans, the engine %d", project, len(got), len(want))
		}
		end := time.Now().Truncate(time.Minute)
		q := store.LLMQuery{Filter: query.Filter{Start: uint64(end.Add(-6 * time.Hour).UnixNano()), End: uint64(end.UnixNano())}, GroupBy: []string{"model"}}
		ws, err1 := eng.LLMStats(ctx, project, &q)
		gs, err2 := ch.LLMStats(ctx, project, &q)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if w, g := llmCounts(ws), llmCounts(gs); len(w) == 0 || !slices.Equal(g, w) {
			t.Fatalf("project %s: LLM statistics by model\n got %v\nwant %v", project, g, w)
		}
	}
}

func walk(t *testing.T, b store.Reader, project string) []string {
	var out []string
	var cur *store.Cursor
	all := query.Filter{}
	for {
		spans, next, _, err := b.SearchSpans(t.Context(), project, &all, 500, cur)
		if err != nil {
			t.Fatal(err)
		}
		for i := range spans {
			out = append(out, string(otlp.AppendSpanJSON(nil, &spans[i])))
		}
		if next == nil {
			return out
		}
		cur = next
	}
}

func llmCounts(st store.LLMStats) []string {
	var out []string
	for _, g := range st.Groups {
		m := g.M
		out = append(out, fmt.Sprintf("%v spans=%d counted=%d errors=%d in=%d out=%d cost=%d", g.Key, m.Spans, m.Counted, m.Errors, m.InputTokens, m.OutputTokens, m.CostNanoUSD))
	}
	return out
}
