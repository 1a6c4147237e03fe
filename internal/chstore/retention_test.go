package chstore

import (
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/llm"
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

// retentionCase is TestRetention's settings and spans: at noon of today
// (far from day boundaries), a default retention of 7 days, 2 days for
// project a, b on the default, c kept forever, and groups of spans of each
// project at several ages, some expired.
type retentionCase struct {
	now    time.Time
	opts   Options // the retention settings and clock
	groups []*retentionGroup
	want   map[string]int // spans kept, per project
}

type retentionGroup struct {
	project string
	age     time.Duration
	kept    bool // not expired
	spans   []model.Span
}

func newRetentionCase(t *testing.T) *retentionCase {
	day := 24 * time.Hour
	now := time.Now().UTC().Truncate(day).Add(12 * time.Hour)
	rc := &retentionCase{now: now, want: map[string]int{},
		opts: Options{Retention: 7 * day, ProjectRetention: map[string]time.Duration{"a": 2 * day, "c": 0},
			RetentionEvery: time.Hour, Now: func() time.Time { return now }}}
	rc.groups = []*retentionGroup{
		{project: "a", age: 10 * day}, {project: "b", age: 10 * day}, // a partition of expired spans only
		{project: "a", age: 12 * day}, {project: "c", age: 12 * day, kept: true}, // shared with a project kept forever
		{project: "a", age: 3 * day}, {project: "b", age: 3 * day, kept: true}, // a's retention is shorter
		{project: "a", age: time.Hour, kept: true}, {project: "b", age: time.Hour, kept: true}, {project: "c", age: time.Hour, kept: true},
	}
	for i, g := range rc.groups {
		g.spans = spansAt(t, uint64(100+i), 60, now.Add(-g.age))
		if g.project == "a" {
			// LLM spans too, so that the LLM rollups hold rows of a to expire.
			calls, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: uint64(200 + i), Spans: 30, Start: now.Add(-g.age), Window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			llm.Enrich(calls, llm.DefaultPrices())
			g.spans = append(g.spans, calls...)
		}
		if g.kept {
			rc.want[g.project] += len(g.spans)
		}
	}
	return rc
}

// cutA is the cutoff of the delete the sweep starts for project a: its
// retention cutoff rounded down to a day.
func (rc *retentionCase) cutA() uint64 {
	return uint64(rc.now.Add(-2*24*time.Hour).UnixNano()) / dayNanos * dayNanos
}

// visible: s shows each project's kept spans and no expired one, by
// search and by trace id.
func (rc *retentionCase) visible(t *testing.T, when string, s *Store) {
	t.Helper()
	for _, p := range []string{"a", "b", "c"} {
		got, _, _, err := s.SearchSpans(t.Context(), p, &query.Filter{}, 10_000, nil)
		if err != nil || len(got) != rc.want[p] {
			t.Fatalf("%s: project %s shows %d spans (%v), want %d", when, p, len(got), err, rc.want[p])
		}
	}
	for _, g := range rc.groups {
		tr, _, err := s.Trace(t.Context(), g.project, g.spans[0].TraceID)
		if err != nil || (len(tr) > 0) != g.kept {
			t.Fatalf("%s: trace of %s aged %v: %d spans (%v), want found=%v", when, g.project, g.age, len(tr), err, g.kept)
		}
	}
}

// checkSweep: sw is the first sweep of rc's spans: it dropped the day
// partition of 10 days ago and started one delete, a's.
func (rc *retentionCase) checkSweep(t *testing.T, sw RetentionSweep, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.PartitionsDropped) != 1 {
		t.Fatalf("sweep dropped partitions %v, want the one of 10 days ago", sw.PartitionsDropped)
	}
	if len(sw.Deletes) != 1 || sw.Deletes["a"] != rc.cutA() {
		t.Fatalf("sweep started deletes %v, want one for a below %d", sw.Deletes, rc.cutA())
	}
}

// testRetention is TestRetention on the Store open makes (a single node
// or a cluster).
func testRetention(t *testing.T, open func(Options) *Store) {
	rc := newRetentionCase(t)
	s := open(rc.opts)
	ctx := t.Context()
	for _, g := range rc.groups {
		appendAll(t, s, g.project, slices.Clone(g.spans))
	}
	want := rc.want
	rc.visible(t, "before the sweep", s)
	// The rollups hold rows the sweep must remove (checked after it).
	for _, table := range []string{"llm_rollup2", "llm_rollup_hour2"} {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+table+" WHERE project = 'a'").Scan(&n); err != nil || n == 0 {
			t.Fatalf("%s holds %d rows of project a before the sweep (%v)", table, n, err)
		}
	}

	sw, err := s.SweepRetention(ctx)
	rc.checkSweep(t, sw, err)
	cutA := rc.cutA()
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
	rc.visible(t, "after the sweep", s)
	// The project's expired rows of the trace index, the rollups and the
	// attribute index go too; the partition dropped went from all.
	for _, c := range []struct{ table, cond string }{
		{"trace_index", "project = 'a' AND start_max < ?"},
		{"attr_index", "project = 'a' AND start < ?"},
		{"llm_rollup2", "project = 'a' AND minute * 60000000000 < ?"},
		{"llm_rollup_hour2", "project = 'a' AND (hour + 1) * 3600000000000 <= ?"},
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
