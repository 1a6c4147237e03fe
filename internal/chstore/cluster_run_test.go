package chstore

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/store"
)

// The set-up of the tests on real clusters (package chcluster), shared by
// this file and replica_run_test.go.

// openNode opens a Store on database db of cluster c through node i, with
// query the URL's query string ("" or "?insert_quorum=2").
func openNode(t *testing.T, c *chcluster.Cluster, db string, i int, query string, opts Options) *Store {
	t.Helper()
	opts.URL, opts.Cluster, opts.BatchWindow = c.URL(i, db)+query, c.Name, time.Millisecond
	s, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("open on cluster through node %d: %v\n%s", i+1, err, c.Logs())
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// localCount is the rows of table's local table on node i.
func localCount(t *testing.T, c *chcluster.Cluster, db string, i int, table string) uint64 {
	t.Helper()
	n, err := c.Nodes[i].QueryUint(t.Context(), "SELECT count() FROM "+db+"."+table+"_local")
	if err != nil {
		t.Fatalf("count %s_local on node %d: %v", table, i+1, err)
	}
	return n
}

// clusterCorpus is an LLM corpus of n spans over one hour, generated at a
// fixed start (what the corpus holds depends on the hour it starts at) and
// moved to start two hours ago; it returns the corpus and its start.
func clusterCorpus(t *testing.T, seed uint64, n int) ([]model.Span, time.Time) {
	t.Helper()
	fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: seed, Spans: n, Start: fixed, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	return bench.Moved(corpus, start.Sub(fixed)), start
}

// downNode stops node i of c, keeping its data; the function it returns
// starts it again and waits until it reads ZooKeeper and every replicated
// table on it is writable with all its replicas active (so that a quorum
// insert can succeed); done at the test's end if the test does not.
func downNode(t *testing.T, c *chcluster.Cluster, i int) (up func()) {
	t.Helper()
	if err := c.Nodes[i].Down(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var err error
	up = func() {
		once.Do(func() {
			if err = c.Nodes[i].Up(); err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err = c.WaitZooKeeper(ctx, i); err != nil {
				return
			}
			for {
				var n uint64
				n, err = c.Nodes[i].QueryUint(ctx, "SELECT count() FROM system.replicas WHERE is_readonly OR active_replicas < total_replicas")
				if err == nil && n == 0 {
					return
				}
				if ctx.Err() != nil {
					err = fmt.Errorf("%d replicated tables not all active a minute after the start (%v)", n, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		if err != nil {
			t.Fatalf("node %d up again: %v\n%s", i+1, err, c.Logs())
		}
	}
	t.Cleanup(up)
	return up
}

// mutationsOf describes the mutations and replication queue of the node s
// is connected to (for a failure's message).
func mutationsOf(s *Store) string {
	var b strings.Builder
	for _, q := range []string{
		"SELECT concat(table, ' ', mutation_id, ' ', command, ' done=', toString(is_done), ' parts_to_do=', toString(parts_to_do)) FROM system.mutations WHERE database = currentDatabase()",
		"SELECT concat(table, ' ', type, ' ', new_part_name, ' tries=', toString(num_tries), ' ', last_exception, ' ', postpone_reason) FROM system.replication_queue WHERE database = currentDatabase()",
	} {
		rows, err := s.conn.Query(context.Background(), q)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", q, err)
			continue
		}
		for rows.Next() {
			var line string
			rows.Scan(&line)
			b.WriteString(line + "\n")
		}
		rows.Close()
	}
	return b.String()
}

// serve starts the real HTTP server over b and returns its address.
func serve(t *testing.T, b store.Backend) string {
	t.Helper()
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(b)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.HTTPAddr()
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
	// One table or view per statement, less the views of the first LLM
	// rollups, which migration 9 drops on an empty database.
	for i, n := range c.Nodes {
		got, err := n.QueryUint(t.Context(), "SELECT count() FROM system.tables WHERE database = '"+db+"'")
		if err != nil {
			t.Fatal(err)
		}
		if got != uint64(len(want)-2) {
			t.Errorf("node %d has %d tables and views, want %d (one per statement, less 2 dropped views)", i+1, got, len(want)-2)
		}
		old, err := n.QueryUint(t.Context(), "SELECT count() FROM system.tables WHERE database = '"+db+"' AND name IN ('llm_rollup_mv', 'llm_rollup_hour_mv')")
		if err != nil {
			t.Fatal(err)
		}
		if old != 0 {
			t.Errorf("node %d still has %d views of the first LLM rollups", i+1, old)
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
	corpus, start := clusterCorpus(t, 5, 3000)
	single := open(t, Options{})
	a := openNode(t, c, db, 0, "", Options{})
	b := openNode(t, c, db, 1, "", Options{})
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
		r := localCount(t, c, db, i, "spans")
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
	for i := range c.Nodes {
		r := localCount(t, c, db, i, "spans")
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
// starting at start); and LLM statistics (sameLLM).
func sameAnswers(t *testing.T, corpus []model.Span, start time.Time, single, got *Store) {
	t.Helper()
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
	agree(t, corpus, 61, filters, single, got)
	sameLLM(t, "", single, got)
}

// agree: got answers as want does, in project p holding corpus: trace by
// id for every step-th span's trace, and for each filter span search
// walked page by page and trace search (each finds something).
func agree(t *testing.T, corpus []model.Span, step int, filters map[string]url.Values, want, got store.Reader) {
	t.Helper()
	ctx := t.Context()
	for i := 0; i < len(corpus); i += step {
		id := corpus[i].TraceID
		w, _, err1 := want.Trace(ctx, "p", id)
		g, _, err2 := got.Trace(ctx, "p", id)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if len(g) != len(w) || len(g) == 0 {
			t.Fatalf("trace %s: %d spans, want %d", id, len(g), len(w))
		}
		for j := range w {
			if a, b := spanText(&g[j]), spanText(&w[j]); a != b {
				t.Fatalf("trace %s span %d:\n got %s\nwant %s", id, j, a, b)
			}
		}
	}
	for name, v := range filters {
		f, err := query.FromValues(v, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		g, w := walkFilter(t, name, got, &f), walkFilter(t, name, want, &f)
		t.Logf("%s: %d spans", name, len(w))
		if len(w) == 0 || !slices.Equal(g, w) {
			t.Errorf("search %s: %d spans, want %d (first difference at %d)", name, len(g), len(w), firstDiff(g, w))
		}
		gt, _, err1 := got.SearchTraces(ctx, "p", &f, 15)
		wt, _, err2 := want.SearchTraces(ctx, "p", &f, 15)
		if err1 != nil || err2 != nil {
			t.Fatal(name, err1, err2)
		}
		if fmt.Sprint(gt) != fmt.Sprint(wt) {
			t.Errorf("trace search %s:\n got %v\nwant %v", name, gt, wt)
		}
	}
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
	testRetention(t, func(o Options) *Store { return openNode(t, c, db, 0, "", o) })
}
