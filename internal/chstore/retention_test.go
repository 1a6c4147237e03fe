package chstore

import (
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// spansAt generates n canonical spans (a stream of its own per seed) whose
// traces start within a minute after at.
func spansAt(t testing.TB, seed uint64, n int, at time.Time) []model.Span {
	t.Helper()
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: seed, Spans: n, Start: at, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

// TestRetention: with the engine's settings (a default, a shorter
// retention for one project, one project kept forever), expired spans are
// hidden from queries at once; the sweep drops a day partition whose every
// span has expired and starts one delete for the expired spans of a project
// sharing partitions with others, which removes exactly them; a second sweep
// starts nothing new.
func TestRetention(t *testing.T) { testRetention(t, func(o Options) *Store { return open(t, o) }) }

// testRetention is TestRetention on the Store open makes (a single node
// or a cluster).
func testRetention(t *testing.T, open func(Options) *Store) {
	day := 24 * time.Hour
	now := time.Now().UTC().Truncate(day).Add(12 * time.Hour) // noon: far from day boundaries
	s := open(Options{Retention: 7 * day, ProjectRetention: map[string]time.Duration{"a": 2 * day, "c": 0},
		RetentionEvery: time.Hour, Now: func() time.Time { return now }})
	ctx := t.Context()
	type group struct {
		project string
		age     time.Duration
		kept    bool // not expired
		spans   []model.Span
	}
	groups := []*group{
		{project: "a", age: 10 * day}, {project: "b", age: 10 * day}, // a partition of expired spans only
		{project: "a", age: 12 * day}, {project: "c", age: 12 * day, kept: true}, // shared with a project kept forever
		{project: "a", age: 3 * day}, {project: "b", age: 3 * day, kept: true}, // a's retention is shorter
		{project: "a", age: time.Hour, kept: true}, {project: "b", age: time.Hour, kept: true}, {project: "c", age: time.Hour, kept: true},
	}
	want := map[string]int{}
	for i, g := range groups {
		g.spans = spansAt(t, uint64(100+i), 60, now.Add(-g.age))
		appendAll(t, s, g.project, slices.Clone(g.spans))
		if g.kept {
			want[g.project] += len(g.spans)
		}
	}
	visible := func(when string) {
		t.Helper()
		for _, p := range []string{"a", "b", "c"} {
			got, _, _, err := s.SearchSpans(ctx, p, &query.Filter{}, 10_000, nil)
			if err != nil || len(got) != want[p] {
				t.Fatalf("%s: project %s shows %d spans (%v), want %d", when, p, len(got), err, want[p])
			}
		}
		for _, g := range groups {
			tr, _, err := s.Trace(ctx, g.project, g.spans[0].TraceID)
			if err != nil || (len(tr) > 0) != g.kept {
				t.Fatalf("%s: trace of %s aged %v: %d spans (%v), want found=%v", when, g.project, g.age, len(tr), err, g.kept)
			}
		}
	}
	visible("before the sweep")

	sw, err := s.SweepRetention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.PartitionsDropped) != 1 {
		t.Fatalf("sweep dropped partitions %v, want the one of 10 days ago", sw.PartitionsDropped)
	}
	cutA := uint64(now.Add(-2*day).UnixNano()) / dayNanos * dayNanos
	if len(sw.Deletes) != 1 || sw.Deletes["a"] != cutA {
		t.Fatalf("sweep started deletes %v, want one for a below %d", sw.Deletes, cutA)
	}
	rows := func() map[string]int {
		out := map[string]int{}
		r, err := s.conn.Query(ctx, "SELECT project, count() FROM spans GROUP BY project")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for r.Next() {
			var p string
			var n uint64
			if err := r.Scan(&p, &n); err != nil {
				t.Fatal(err)
			}
			out[p] = int(n)
		}
		return out
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := rows()
		if got["a"] == want["a"] && got["b"] == want["b"] && got["c"] == want["c"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows stored after 30s: %v, want %v", got, want)
		}
	}
	visible("after the sweep")
	// The project's expired rows of the trace index, the rollups and the
	// attribute index go too; the partition dropped went from all.
	for _, c := range []struct{ table, cond string }{
		{"trace_index", "project = 'a' AND start_max < ?"},
		{"attr_index", "project = 'a' AND start < ?"},
		{"llm_rollup", "project = 'a' AND minute * 60000000000 < ?"},
		{"ops_rollup", "project = 'a' AND minute * 60000000000 < ?"},
		{"ops_rollup", "project = 'b' AND minute * 60000000000 < ? - 6 * 86400000000000"},
		{"attr_index", "project = 'b' AND start < ? - 6 * 86400000000000"},
	} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var n uint64
			if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+c.table+" WHERE "+c.cond, cutA).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d expired rows of %s where %s left after 30s", n, c.table, c.cond)
			}
		}
	}
	var indexed uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM attr_index WHERE project = 'a'").Scan(&indexed); err != nil || indexed == 0 {
		t.Fatalf("no attribute index rows of a's kept spans (%v): the check above tests nothing", err)
	}
	sw, err = s.SweepRetention(ctx)
	if err != nil || len(sw.PartitionsDropped) != 0 || len(sw.Deletes) != 0 {
		t.Fatalf("second sweep: %+v %v, want nothing to do", sw, err)
	}
}

func TestRetentionOptionsRefused(t *testing.T) {
	for _, o := range []Options{
		{URL: "clickhouse://127.0.0.1:9000/x", Retention: -time.Hour},
		{URL: "clickhouse://127.0.0.1:9000/x", ProjectRetention: map[string]time.Duration{"p": -time.Second}},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
}
