package chstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// importSource writes an LLM corpus into a data directory with the engine
// (two projects, part sealed into segments and part left in the WAL,
// re-sent spans, one erased trace), closes it and opens it again as
// `rastro migrate --from-data-dir` does. It returns the open engine and the
// erased trace.
func importSource(t *testing.T) (*engine.Engine, model.TraceID) {
	t.Helper()
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 7, Spans: 2400, Start: start, Window: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, eng, "p", corpus[:1500])
	appendAll(t, eng, "q", corpus[1500:1800])
	if err := eng.Seal(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, eng, "p", corpus[1500:])
	// Re-sent while their first copy is in the write buffer: the engine
	// answers and counts each once. (A span re-sent after its first copy
	// was sealed is counted twice by the engine's statistics until a merge,
	// docs/architecture.md; ClickHouse, given it once, counts it once.)
	appendAll(t, eng, "p", corpus[1500:1600])
	erased := corpus[700].TraceID
	if _, err := eng.Erase(t.Context(), store.EraseRequest{Project: "p", TraceID: &erased}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(engine.Options{Dir: dir, NoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, erased
}

// walkAll is every span of project, newest first, as the API shows them.
func walkAll(t *testing.T, b store.Reader, project string) []string {
	t.Helper()
	var out []string
	var cur *store.Cursor
	all := query.Filter{}
	for {
		spans, next, _, err := b.SearchSpans(t.Context(), project, &all, 400, cur)
		if err != nil {
			t.Fatal(err)
		}
		for i := range spans {
			out = append(out, spanText(&spans[i]))
		}
		if next == nil {
			return out
		}
		cur = next
	}
}

// llmText is an LLM statistics answer with what both backends count the
// same way (Traces is summed per storage part, so it is left out;
// percentiles are compared apart, within the sketch's error).
func llmText(st store.LLMStats) []string {
	var out []string
	for _, g := range st.Groups {
		m := g.M
		out = append(out, fmt.Sprintf("%v@%d spans=%d counted=%d errors=%d in=%d out=%d cr=%d cc=%d re=%d cost=%d start=%d end=%d",
			g.Key, g.Bucket, m.Spans, m.Counted, m.Errors, m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheCreationTokens,
			m.ReasoningTokens, m.CostNanoUSD, m.MinStart, m.MaxEnd))
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 0.02*math.Max(math.Abs(a), math.Abs(b)) }

// assertImported: ClickHouse answers trace by id, span search and LLM
// statistics (from the rollups and from spans alone) as the engine does,
// holds each span once, and none of the erased trace.
func assertImported(t *testing.T, eng *engine.Engine, ch, chSpans *Store, erased model.TraceID) {
	t.Helper()
	ctx := t.Context()
	for _, project := range []string{"p", "q"} {
		want := walkAll(t, eng, project)
		if got := walkAll(t, ch, project); !slices.Equal(got, want) {
			t.Fatalf("project %s: search walks %d spans, engine %d (first difference at %d)", project, len(got), len(want), firstDiff(got, want))
		}
		var rows uint64
		if err := ch.conn.QueryRow(ctx, "SELECT count() FROM spans WHERE project = ?", project).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != uint64(len(want)) {
			t.Fatalf("project %s: spans holds %d rows for %d spans", project, rows, len(want))
		}
	}
	all := query.Filter{}
	spans, _, _, err := eng.SearchSpans(ctx, "p", &all, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(spans); i += 37 {
		id := spans[i].TraceID
		want, _, err1 := eng.Trace(ctx, "p", id)
		got, _, err2 := ch.Trace(ctx, "p", id)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("trace %s: %d spans, engine %d", id, len(got), len(want))
		}
		for j := range want {
			if a, b := spanText(&got[j]), spanText(&want[j]); a != b {
				t.Fatalf("trace %s span %d:\n got %s\nwant %s", id, j, a, b)
			}
		}
	}
	if got, _, err := ch.Trace(ctx, "p", erased); err != nil || len(got) != 0 {
		t.Fatalf("erased trace %s: %d spans in ClickHouse (%v)", erased, len(got), err)
	}
	// Whole minutes: the rollups answer (a second copy of a span would be
	// counted there for good); chSpans answers from spans alone.
	now := time.Now().Truncate(time.Minute)
	for _, q := range []store.LLMQuery{
		{Filter: query.Filter{Start: uint64(now.Add(-6 * time.Hour).UnixNano()), End: uint64(now.UnixNano())}, GroupBy: []string{"model"}},
		{Filter: query.Filter{Start: uint64(now.Add(-6 * time.Hour).UnixNano()), End: uint64(now.UnixNano())}, GroupBy: []string{"service", "operation"}},
	} {
		want, err := eng.LLMStats(ctx, "p", &q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Groups) == 0 || want.Groups[0].M.Spans == 0 {
			t.Fatalf("LLM statistics by %v: the engine has no LLM span", q.GroupBy)
		}
		for name, b := range map[string]*Store{"rollups": ch, "spans": chSpans} {
			got, err := b.LLMStats(ctx, "p", &q)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := llmText(got), llmText(want); !slices.Equal(g, w) {
				t.Fatalf("LLM statistics by %v from %s:\n got %v\nwant %v", q.GroupBy, name, g, w)
			}
			for i := range want.Groups {
				a, b := got.Groups[i].M.Latency, want.Groups[i].M.Latency
				if (a == nil) != (b == nil) || a != nil && !(near(a.P50, b.P50) && near(a.P95, b.P95) && near(a.Max, b.Max)) {
					t.Fatalf("LLM latency by %v from %s, group %v: %+v, engine %+v", q.GroupBy, name, want.Groups[i].Key, a, b)
				}
			}
		}
	}
}

// openImport opens a Store on a fresh database and a second one on the
// same database answering statistics from spans alone.
func openImport(t *testing.T) (*Store, *Store) {
	url := chtest.URL(t)
	return open(t, Options{URL: url}), open(t, Options{URL: url, NoRollups: true})
}

func TestImportAgreesWithEngine(t *testing.T) {
	eng, erased := importSource(t)
	ch, chSpans := openImport(t)
	var last []ImportProgress
	prog, err := ch.Import(t.Context(), eng, ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: 300,
		Progress: func(p ImportProgress) { last = append(last, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) != 2 || !prog[0].Done || !prog[1].Done || prog[0].Resumed || prog[0].Skipped != 0 {
		t.Fatalf("progress %+v", prog)
	}
	if len(last) < 8 {
		t.Fatalf("%d progress reports for two projects in pages of 300", len(last))
	}
	assertImported(t, eng, ch, chSpans, erased)

	// Run again: every project is done; nothing is read or inserted.
	again, err := ch.Import(t.Context(), eng, ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: 300})
	if err != nil || !again[0].Done || !again[0].Resumed || again[0].Spans != prog[0].Spans {
		t.Fatalf("second run: %+v %v", again, err)
	}
	assertImported(t, eng, ch, chSpans, erased)
}

// TestImportResumes: an import interrupted at a page boundary, between a
// page's read and its insert, or between its insert and its checkpoint
// (the process killed there), then run again, leaves ClickHouse answering
// as the engine does: no span lost, none counted twice.
func TestImportResumes(t *testing.T) {
	eng, erased := importSource(t)
	errKilled := errors.New("killed between insert and checkpoint")
	for _, tc := range []struct {
		name string
		// interrupt sets up the first run's interruption.
		interrupt func(cancel context.CancelFunc, opts *ImportOptions) store.Reader
		wantErr   error
		// skipped: the resumed run finds the uncertain page in ClickHouse.
		skipped uint64
	}{
		{"page boundary", func(cancel context.CancelFunc, o *ImportOptions) store.Reader {
			o.Progress = func(p ImportProgress) {
				if p.Project == "p" && p.Spans == 900 {
					cancel()
				}
			}
			return eng
		}, context.Canceled, 0},
		{"page read and recorded as pending, not inserted", func(cancel context.CancelFunc, o *ImportOptions) store.Reader {
			o.beforeInsert = func(project string, page int) error {
				if project == "p" && page == 2 {
					cancel() // Append sees the end of ctx before it writes
				}
				return nil
			}
			return eng
		}, context.Canceled, 0},
		{"page inserted, not checkpointed", func(cancel context.CancelFunc, o *ImportOptions) store.Reader {
			o.afterInsert = func(project string, page int) error {
				if project == "p" && page == 2 {
					return errKilled
				}
				return nil
			}
			return eng
		}, errKilled, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, chSpans := openImport(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			opts := ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: 300}
			src := tc.interrupt(cancel, &opts)
			prog, err := ch.Import(ctx, src, opts)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("first run: %v, want %v", err, tc.wantErr)
			}
			if prog[0].Done || len(prog) != 1 {
				t.Fatalf("first run's progress %+v", prog)
			}
			prog, err = ch.Import(t.Context(), eng, ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: 300})
			if err != nil {
				t.Fatal(err)
			}
			assertImported(t, eng, ch, chSpans, erased)
			if !prog[0].Resumed || !prog[0].Done || prog[0].Skipped != tc.skipped {
				t.Fatalf("resumed run's progress %+v, want %d skipped", prog[0], tc.skipped)
			}
		})
	}
}

// TestImportResumesWithOtherPages: the uncertain page is looked up in
// ClickHouse even when the resumed run reads smaller or larger pages.
func TestImportResumesWithOtherPages(t *testing.T) {
	eng, erased := importSource(t)
	for _, batch := range []int{70, 1000} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			ch, chSpans := openImport(t)
			opts := ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: 300,
				afterInsert: func(project string, page int) error {
					if project == "p" && page == 1 {
						return errors.New("killed")
					}
					return nil
				}}
			if _, err := ch.Import(t.Context(), eng, opts); err == nil {
				t.Fatal("the first run was not interrupted")
			}
			prog, err := ch.Import(t.Context(), eng, ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: batch})
			if err != nil {
				t.Fatal(err)
			}
			if prog[0].Skipped != 300 {
				t.Fatalf("resumed run's progress %+v, want the 300 spans of the uncertain page skipped", prog[0])
			}
			assertImported(t, eng, ch, chSpans, erased)
		})
	}
}
