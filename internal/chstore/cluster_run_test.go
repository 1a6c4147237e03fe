package chstore

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// openCluster opens a Store in a fresh database of the shared test cluster
// (2 shards) through node i.
func openCluster(t *testing.T, c *chcluster.Cluster, db string, node int) *Store {
	t.Helper()
	return openClusterWith(t, c, db, node, Options{})
}

// openClusterWith is openCluster with options.
func openClusterWith(t *testing.T, c *chcluster.Cluster, db string, node int, opts Options) *Store {
	t.Helper()
	opts.URL, opts.Cluster, opts.BatchWindow = c.URL(node, db), c.Name, time.Millisecond
	s, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("open on cluster through node %d: %v\n%s", node+1, err, c.Logs())
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestClusterMigrations: migrate --clickhouse-cluster creates every step's
// tables ON CLUSTER, records the steps once, and a second run (through the
// other node) applies nothing.
func TestClusterMigrations(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	feat, steps, ran, err := Migrate(t.Context(), c.URL(0, db), c.Name)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	if ran != len(migrations) || len(steps) != len(migrations) || feat.Version == "" {
		t.Fatalf("first run: %d applied, steps %+v, version %q", ran, steps, feat.Version)
	}
	if _, _, ran, err := Migrate(t.Context(), c.URL(1, db), c.Name); err != nil || ran != 0 {
		t.Fatalf("second run through node 2: %d applied, %v", ran, err)
	}
	want, err := ClusterSchema(c.Name, db)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		got, err := n.QueryUint(t.Context(), "SELECT count() FROM system.tables WHERE database = '"+db+"'")
		if err != nil {
			t.Fatal(err)
		}
		if got != uint64(len(want)) {
			t.Errorf("node %d has %d tables and views, want %d (one per statement)", i+1, got, len(want))
		}
	}
}

// TestClusterAgreesWithSingleNode: one corpus of many traces, written
// through one node of a real 2-shard cluster, and read through the other
// (as two rastro serve processes behind a load balancer): trace by id,
// span and trace search (filters the SQL expresses, and ones only Go
// can), and LLM statistics answer as the single-node backend does on the
// same corpus. The spans are spread over both shards, each trace's spans
// on one shard. An erasure through one node hides the traces from the
// other at once, and removes their rows from both shards.
func TestClusterAgreesWithSingleNode(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	// Generated at a fixed start and moved to two hours ago: what the
	// corpus holds depends on the hour it starts at.
	fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 5, Spans: 3000, Start: fixed, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	corpus = bench.Moved(corpus, start.Sub(fixed))
	single := open(t, Options{})
	a := openCluster(t, c, db, 0)
	b := openCluster(t, c, db, 1)
	appendAll(t, single, "p", slices.Clone(corpus))
	appendAll(t, a, "p", slices.Clone(corpus))
	ctx := t.Context()

	traces := map[model.TraceID]bool{}
	for i := range corpus {
		traces[corpus[i].TraceID] = true
	}
	// Spread: both shards hold spans, the shards' rows add up to the
	// corpus, and the shards' distinct trace ids add up to the corpus's
	// (a trace split over two shards would be counted twice).
	var rows, ids uint64
	perShard := make([]uint64, len(c.Nodes))
	for i, n := range c.Nodes {
		r, err := n.QueryUint(ctx, "SELECT count() FROM "+db+".spans_local")
		if err != nil {
			t.Fatal(err)
		}
		d, err := n.QueryUint(ctx, "SELECT uniqExact(trace_id) FROM "+db+".spans_local")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("shard %d: %d spans of %d traces", i+1, r, d)
		if r == 0 || r == uint64(len(corpus)) {
			t.Errorf("shard %d holds %d of the %d spans: not spread", i+1, r, len(corpus))
		}
		rows, ids, perShard[i] = rows+r, ids+d, r
	}
	if rows != uint64(len(corpus)) || ids != uint64(len(traces)) {
		t.Errorf("the shards hold %d spans of %d trace ids (summed per shard), want %d of %d", rows, ids, len(corpus), len(traces))
	}

	sameAnswers(t, corpus, start, single, b)
	if b.rollupReads.Load() == 0 {
		t.Error("the cluster's LLM rollup answered nothing")
	}

	// Erase a service's traces (on both shards) through a.
	sample := corpus[len(corpus)/2]
	q := fmt.Sprintf(`{ resource.service.name = "%s" }`, sample.Service)
	erased := map[model.TraceID]bool{}
	f, err := query.FromValues(url.Values{"q": {q}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := range corpus {
		if f.Match(&corpus[i]) {
			erased[corpus[i].TraceID] = true
		}
	}
	gone := 0
	for i := range corpus {
		if erased[corpus[i].TraceID] {
			gone++
		}
	}
	e, err := a.Erase(ctx, store.EraseRequest{Project: "p", Query: q})
	if err != nil || e.Traces != len(erased) || e.SpansErased != int64(gone) {
		t.Fatalf("erase on the cluster: %+v %v, want %d traces, %d spans", e, err, len(erased), gone)
	}
	if _, err := single.Erase(ctx, store.EraseRequest{Project: "p", Query: q}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Trace(ctx, "p", sample.TraceID); err != nil || len(got) != 0 {
		t.Fatalf("a trace erased through node 1 is served through node 2: %d spans, %v", len(got), err)
	}
	all := walkFilter(t, "after the erasure", b, &query.Filter{})
	if len(all) != len(corpus)-gone {
		t.Fatalf("after the erasure the cluster finds %d spans, want %d", len(all), len(corpus)-gone)
	}
	sameLLM(t, "after the erasure", single, b)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list, err := b.Erasures(ctx, "p")
		if err != nil || len(list) != 1 {
			t.Fatalf("erasures: %+v %v", list, err)
		}
		if list[0].State == store.EraseDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasure not done after 60s: %+v", list[0])
		}
	}
	// Each shard held some of the erased traces (the service has many),
	// and lost them.
	var left uint64
	for i, n := range c.Nodes {
		r, err := n.QueryUint(ctx, "SELECT count() FROM "+db+".spans_local")
		if err != nil {
			t.Fatal(err)
		}
		left += r
		if r >= perShard[i] {
			t.Errorf("shard %d holds %d rows after the erasure, %d before", i+1, r, perShard[i])
		}
	}
	if left != uint64(len(corpus)-gone) {
		t.Errorf("%d rows left on the shards, want %d", left, len(corpus)-gone)
	}
}

// walkFilter is every span r finds for f in project p, page by page.
func walkFilter(t *testing.T, name string, r store.Reader, f *query.Filter) []string {
	t.Helper()
	var out []string
	var cur *store.Cursor
	for page := 0; page < 1000; page++ {
		spans, next, _, err := r.SearchSpans(t.Context(), "p", f, 100, cur)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range spans {
			out = append(out, spanText(&spans[i]))
		}
		if next == nil {
			return out
		}
		cur = next
	}
	t.Fatalf("%s: more than 1000 pages", name)
	return nil
}

// sameAnswers: got (a store on a cluster) answers trace by id, span search
// walked page by page and trace search, for filters the SQL expresses and
// ones only Go can, as single (one node) does, on corpus (project p,
// starting at start).
func sameAnswers(t *testing.T, corpus []model.Span, start time.Time, single, got *Store) {
	t.Helper()
	ctx := t.Context()
	for i := 0; i < len(corpus); i += 61 {
		id := corpus[i].TraceID
		want, _, err1 := single.Trace(ctx, "p", id)
		got, _, err2 := got.Trace(ctx, "p", id)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("trace %s: %d spans on the cluster, %d on one node", id, len(got), len(want))
		}
		for j := range want {
			if g, w := spanText(&got[j]), spanText(&want[j]); g != w {
				t.Fatalf("trace %s span %d:\n got %s\nwant %s", id, j, g, w)
			}
		}
	}
	sample := corpus[len(corpus)/2]
	attr := sample.Attributes[0]
	root := rootSpan(corpus, len(corpus)/2)
	filters := map[string]url.Values{
		"all":       {},
		"service":   {"service": {sample.Service}},
		"errors":    {"status": {"error"}},
		"window":    {"since": {start.Add(20 * time.Minute).Format(time.RFC3339)}, "until": {start.Add(40 * time.Minute).Format(time.RFC3339)}},
		"attribute": {"q": {fmt.Sprintf(`{ span.%s = %s }`, attr.Key, quoteValue(attr.Value))}},
		"traceql":   {"q": {`{ kind = client && duration > 10ms }`}},
		"root":      {"q": {fmt.Sprintf(`{ rootServiceName = "%s" }`, root.Service)}},
	}
	for name, v := range filters {
		f, err := query.FromValues(v, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		g, w := walkFilter(t, name, got, &f), walkFilter(t, name, single, &f)
		if len(w) == 0 || !slices.Equal(g, w) {
			t.Errorf("search %s: %d spans on the cluster, %d on one node (first difference at %d)", name, len(g), len(w), firstDiff(g, w))
		}
		gt, _, err1 := got.SearchTraces(ctx, "p", &f, 15)
		wt, _, err2 := single.SearchTraces(ctx, "p", &f, 15)
		if err1 != nil || err2 != nil {
			t.Fatal(name, err1, err2)
		}
		if fmt.Sprint(gt) != fmt.Sprint(wt) {
			t.Errorf("trace search %s:\n got %v\nwant %v", name, gt, wt)
		}
	}
	sameLLM(t, "", single, got)
}

// sameLLM: LLM statistics and time series of project p through got equal
// single's.
func sameLLM(t *testing.T, when string, single, got *Store) {
	t.Helper()
	ctx := t.Context()
	for _, q := range []store.LLMQuery{{}, {GroupBy: []string{"model"}}, {GroupBy: []string{"service", "operation"}}} {
		g, err1 := got.LLMStats(ctx, "p", &q)
		w, err2 := single.LLMStats(ctx, "p", &q)
		if err1 != nil || err2 != nil {
			t.Fatal(when, err1, err2)
		}
		if len(w.Groups) == 0 || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: LLM statistics by %v on the cluster\n%+v\non one node\n%+v", when, q.GroupBy, g, w)
		}
		g, err1 = got.LLMTimeseries(ctx, "p", &q, 5*time.Minute)
		w, err2 = single.LLMTimeseries(ctx, "p", &q, 5*time.Minute)
		if err1 != nil || err2 != nil {
			t.Fatal(when, err1, err2)
		}
		if len(w.Groups) == 0 || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: LLM time series by %v on the cluster differs from one node's", when, q.GroupBy)
		}
	}
}

// TestClusterRetention: TestRetention on a 2-shard cluster: whole expired
// partitions are dropped from every shard's local tables, a project's
// other expired rows deleted from every shard (ON CLUSTER).
func TestClusterRetention(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	testRetention(t, func(o Options) *Store { return openClusterWith(t, c, db, 0, o) })
}
