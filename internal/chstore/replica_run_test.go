package chstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

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

// TestClusterReplicasQuorum, on a real cluster of 1 shard of 2 replicas:
// with insert_quorum=2 in the URL every acknowledged span is in both
// replicas' local tables (spans, and spans_by_trace, filled by a view) the
// moment Append returns; queries through the other replica answer as one
// node does; with a replica stopped a quorum insert fails and says why,
// (over OTLP/HTTP: 503, naming it), while an insert without quorum
// succeeds; the replica, started again,
// catches up, and quorum inserts succeed again.
func TestClusterReplicasQuorum(t *testing.T) {
	c := chcluster.SharedReplicas(t)
	db := c.Database(t)
	fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 9, Spans: 1500, Start: fixed, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	corpus = bench.Moved(corpus, start.Sub(fixed))
	single := open(t, Options{})
	appendAll(t, single, "p", slices.Clone(corpus))

	if _, err := Open(t.Context(), Options{URL: c.URL(0, db) + "?insert_quorum=3", Cluster: c.Name}); err == nil || !strings.Contains(err.Error(), "has 2 replicas") {
		t.Fatalf("a quorum of 3 on shards of 2 replicas: %v", err)
	}
	quorum := openNode(t, c, db, 0, "?insert_quorum=2", Options{})
	other := openNode(t, c, db, 1, "", Options{})
	if quorum.opts.Inserters != 1 {
		t.Errorf("%d inserters with a quorum, want 1", quorum.opts.Inserters)
	}
	// Requests from several goroutines at once (one quorum insert at a
	// time: they queue, and may share an insert).
	for at := 0; at < len(corpus); at += 300 {
		part := corpus[at:min(at+300, len(corpus))]
		errs := make(chan error, 3)
		for k := range 3 {
			go func() {
				chunk := part[k*len(part)/3 : (k+1)*len(part)/3]
				errs <- quorum.Append(t.Context(), &store.Write{Project: "p", Spans: slices.Clone(chunk)})
			}()
		}
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		acked := uint64(at + len(part))
		for i := range c.Nodes {
			for _, table := range []string{"spans", "spans_by_trace"} {
				if n := localCount(t, c, db, i, table); n != acked {
					t.Fatalf("after %d spans acknowledged with quorum 2, replica %d holds %d rows in %s_local", acked, i+1, n, table)
				}
			}
		}
	}
	sameAnswers(t, corpus, start, single, other)

	// Replica 2 down.
	if err := c.Nodes[1].Down(); err != nil {
		t.Fatal(err)
	}
	up := false
	t.Cleanup(func() {
		if !up {
			c.Nodes[1].Up()
		}
	})
	more := bench.Moved(corpus[:200], time.Minute)
	for i := range more {
		more[i].TraceID[0] ^= 0xff // new traces
	}
	err = quorum.Append(t.Context(), &store.Write{Project: "p", Spans: slices.Clone(more)})
	if err == nil || !strings.Contains(err.Error(), "is less than requested quorum") || !strings.Contains(err.Error(), "insert_quorum=2: fewer replicas of a shard are alive") {
		t.Fatalf("a quorum insert with a replica down: %v", err)
	}
	// Over OTLP/HTTP, the API answers 503 and names the cause.
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(quorum)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	resp, err := http.Post("http://"+srv.HTTPAddr()+"/v1/traces", "application/x-protobuf", bytes.NewReader(otlp.EncodeProto(more)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "is less than requested quorum") || !strings.Contains(string(body), "insert_quorum=2") {
		t.Fatalf("OTLP/HTTP with a replica down: %d %s", resp.StatusCode, body)
	}
	plain := openNode(t, c, db, 0, "", Options{})
	if err := plain.Append(t.Context(), &store.Write{Project: "p", Spans: slices.Clone(more)}); err != nil {
		t.Fatalf("an insert without quorum with a replica down: %v", err)
	}
	want := uint64(len(corpus) + len(more))
	if n := localCount(t, c, db, 0, "spans"); n != want {
		t.Fatalf("replica 1 holds %d spans, want %d", n, want)
	}

	// Back: it fetches what it missed, and quorum inserts succeed again.
	if err := c.Nodes[1].Up(); err != nil {
		t.Fatal(err)
	}
	up = true
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.WaitZooKeeper(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for n := uint64(0); n != want; time.Sleep(100 * time.Millisecond) {
		if n, err = c.Nodes[1].QueryUint(ctx, "SELECT count() FROM "+db+".spans_local"); err != nil && ctx.Err() != nil {
			t.Fatalf("replica 2 after its restart: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("replica 2 holds %d spans a minute after its restart, want %d", n, want)
		}
	}
	last := bench.Moved(corpus[:100], 2*time.Minute)
	for i := range last {
		last[i].TraceID[1] ^= 0xff
	}
	if err := quorum.Append(t.Context(), &store.Write{Project: "p", Spans: slices.Clone(last)}); err != nil {
		t.Fatalf("a quorum insert after the replica came back: %v", err)
	}
	want += uint64(len(last))
	for i := range c.Nodes {
		if n := localCount(t, c, db, i, "spans"); n != want {
			t.Errorf("replica %d holds %d spans after a quorum insert, want %d", i+1, n, want)
		}
	}
}

// TestQuorumNeedsACluster: insert_quorum on a single node, or not a
// number, is refused at Open.
func TestQuorumNeedsACluster(t *testing.T) {
	url := chtest.URL(t)
	for q, want := range map[string]string{"?insert_quorum=2": "is for a cluster", "?insert_quorum=two": "give a number of replicas"} {
		if _, err := Open(t.Context(), Options{URL: url + q}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", q, err, want)
		}
	}
}

// TestClusterImport: a data directory imported through node 1 of a 2-shard
// cluster answers through node 2 as the engine does; an import killed
// between a page's insert and its checkpoint, resumed through node 2, skips
// that page's spans and copies the rest once.
func TestClusterImport(t *testing.T) {
	c := chcluster.Shared(t)
	eng, erased := importSource(t)
	opts := ImportOptions{Source: "dir", Projects: []string{"p", "q"}, BatchSpans: 300}

	db := c.Database(t)
	a := openCluster(t, c, db, 0)
	prog, err := a.Import(t.Context(), eng, opts)
	if err != nil || len(prog) != 2 || !prog[0].Done || !prog[1].Done {
		t.Fatalf("import: %+v %v", prog, err)
	}
	assertImported(t, eng, openCluster(t, c, db, 1), openClusterWith(t, c, db, 1, Options{NoRollups: true}), erased)
	for i := range c.Nodes {
		if n := localCount(t, c, db, i, "spans"); n == 0 {
			t.Errorf("shard %d holds no imported span", i+1)
		}
	}

	db = c.Database(t)
	a = openCluster(t, c, db, 0)
	errKilled := errors.New("killed between insert and checkpoint")
	killed := opts
	killed.afterInsert = func(project string, page int) error {
		if project == "p" && page == 2 {
			return errKilled
		}
		return nil
	}
	if _, err := a.Import(t.Context(), eng, killed); !errors.Is(err, errKilled) {
		t.Fatalf("first run: %v", err)
	}
	b := openCluster(t, c, db, 1)
	prog, err = b.Import(t.Context(), eng, opts)
	if err != nil || !prog[0].Resumed || !prog[0].Done || prog[0].Skipped != 300 {
		t.Fatalf("resumed through node 2: %+v %v, want 300 spans skipped", prog, err)
	}
	assertImported(t, eng, b, openClusterWith(t, c, db, 1, Options{NoRollups: true}), erased)
}

// TestClusterImportRefusedWithReplicas: copying a backend's spans into a
// cluster whose shards have replicas is refused, and says why.
func TestClusterImportRefusedWithReplicas(t *testing.T) {
	c := chcluster.SharedReplicas(t)
	s := openNode(t, c, c.Database(t), 0, "", Options{})
	_, err := s.Import(t.Context(), memstore.New(memstore.Options{}), ImportOptions{Source: "test", Projects: []string{"p"}})
	if err == nil || !strings.Contains(err.Error(), "up to 2 replicas") || !strings.Contains(err.Error(), "copy those spans twice") {
		t.Fatalf("import into a cluster of replicas: %v", err)
	}
}
