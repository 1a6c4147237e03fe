package chstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// recorded is erasure id of project as its status rows say (the newest
// version), without Erasures' check of the rows left: what Erase and the
// erasure pass wrote.
func recorded(t *testing.T, s *Store, project string, id uint64) store.Erasure {
	t.Helper()
	list, err := s.readErasures(t.Context(), "WHERE project = ? AND id = ?", "", project, id)
	if err != nil || len(list) != 1 {
		t.Fatalf("erasure %d as recorded: %+v %v", id, list, err)
	}
	return list[0]
}

// TestErasurePass: erasures recorded hidden whose removal never ran (as
// when an Erase fails to start it, or when a replicated cluster's mutations
// finished with rows left): reading them reports them hidden and writes
// nothing (no status row, no mutation); the erasure pass starts each
// removal once, and records the erasures done when their rows are gone.
func TestErasurePass(t *testing.T) {
	url := chtest.URL(t) // a database of its own
	testErasurePass(t, 1, func(_ int, o Options) *Store {
		o.URL = url
		return open(t, o)
	})
}

// testErasurePass is TestErasurePass on a database reached through nodes
// nodes (one, or the replicas of one shard): open opens a store through a
// node; the spans are written through node 1 without a quorum, and the
// test waits for every node to hold them.
func testErasurePass(t *testing.T, nodes int, open func(int, Options) *Store) {
	ctx := t.Context()
	// The readers' passes run once an hour (and when a read finds an
	// erasure done): they restart no removal during the test.
	readers := make([]*Store, nodes)
	for i := range readers {
		readers[i] = open(i, Options{ErasureEvery: time.Hour})
	}
	spans := benchSpans(t, 600)
	appendAll(t, readers[0], "p", spans)
	rowsOf := map[model.TraceID]int{}
	for i := range spans {
		rowsOf[spans[i].TraceID]++
	}
	victims := []model.TraceID{spans[0].TraceID}
	for i := range spans {
		if spans[i].TraceID != victims[0] {
			victims = append(victims, spans[i].TraceID)
			break
		}
	}
	// Two erasures, recorded hidden an hour ago, their removal never
	// started.
	at := time.Now().Add(-time.Hour).UTC()
	var ids []uint64
	for k, v := range victims {
		e := store.Erasure{ID: uint64(at.UnixMicro()) + uint64(k), Project: "p", TraceID: v.String(), State: store.EraseHidden,
			RequestedAt: at, HiddenAt: &at, Traces: 1, SpansErased: int64(rowsOf[v])}
		if err := readers[0].saveErasure(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := insertRow(ctx, readers[0].conn, 0, "INSERT INTO erased_traces (project, trace_id, erasure)", "p", string(v[:]), e.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	left := uint64(len(spans) - rowsOf[victims[0]] - rowsOf[victims[1]])
	// count is the rows of table on node i (its local table on a cluster).
	count := func(i int, table string) uint64 {
		t.Helper()
		if readers[i].target.cluster != "" {
			table += "_local"
		}
		var n uint64
		if err := readers[i].conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// waitRows waits until every node holds want rows of each table.
	waitRows := func(what string, want map[string]uint64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var got []string
			for i := range readers {
				for table, n := range want {
					if c := count(i, table); c != n {
						got = append(got, fmt.Sprintf("node %d: %d rows of %s, want %d", i+1, c, table, n))
					}
				}
			}
			if len(got) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s, after 30s: %v", what, got)
			}
		}
	}
	// mutations is the erasures' mutations node i knows of.
	mutations := func(i int) uint64 {
		t.Helper()
		var n uint64
		if err := readers[i].conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND position(command, 'erased_traces') > 0").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	all := uint64(len(spans))
	waitRows("the spans and erasures written", map[string]uint64{"spans": all, "spans_by_trace": all, "erasures": 2, "erased_traces": 2})

	for round := range 3 {
		for i, r := range readers {
			list, err := r.Erasures(ctx, "p")
			if err != nil || len(list) != 2 {
				t.Fatalf("erasures through node %d: %+v %v", i+1, list, err)
			}
			for _, e := range list {
				if e.State != store.EraseHidden || e.DoneAt != nil {
					t.Fatalf("read %d through node %d: erasure %d with its rows left reported %s (done at %v), want hidden", round+1, i+1, e.ID, e.State, e.DoneAt)
				}
			}
			for _, v := range victims {
				if got, _, err := r.Trace(ctx, "p", v); err != nil || len(got) != 0 {
					t.Fatalf("an erased trace is served through node %d: %d spans, %v", i+1, len(got), err)
				}
			}
		}
	}
	for i := range readers {
		if n, m := count(i, "erasures"), mutations(i); n != 2 || m != 0 {
			t.Fatalf("reading the erasures wrote: node %d holds %d erasure status rows (want 2) and %d erasure mutations (want 0)", i+1, n, m)
		}
	}

	// The pass, every 100 ms, through the last node.
	pass := open(nodes-1, Options{ErasureEvery: 100 * time.Millisecond})
	// Recorded done, as every node reads it (before that, a read through
	// a node could find the rows gone and report its own done time).
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		done := true
		for _, r := range readers {
			for _, id := range ids {
				done = done && recorded(t, r, "p", id).State == store.EraseDone
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasures not recorded done 45s after the pass started: %+v %+v; %d removals started again\n%s",
				recorded(t, readers[0], "p", ids[0]), recorded(t, readers[0], "p", ids[1]), pass.reRemovals.Load(), mutationsOf(pass))
		}
	}
	if n := pass.reRemovals.Load(); n != 2 {
		t.Errorf("the pass started %d removals, want 2 (one per erasure)", n)
	}
	for i, r := range readers {
		if n := r.reRemovals.Load(); n != 0 {
			t.Errorf("the pass of the store through node %d (every hour) started %d removals", i+1, n)
		}
	}
	waitRows("after the pass", map[string]uint64{"spans": left, "spans_by_trace": left})
	for i, r := range readers {
		list, err := r.Erasures(ctx, "p")
		if err != nil || len(list) != 2 {
			t.Fatalf("erasures through node %d: %+v %v", i+1, list, err)
		}
		for k, e := range list {
			if rec := recorded(t, r, "p", e.ID); e.State != store.EraseDone || e.DoneAt == nil || rec.DoneAt == nil || !e.DoneAt.Equal(*rec.DoneAt) {
				t.Errorf("erasure %d through node %d: %s at %v, recorded %s at %v; want done at the time recorded", k+1, i+1, e.State, e.DoneAt, rec.State, rec.DoneAt)
			}
		}
		for _, v := range victims {
			if got, _, err := r.Trace(ctx, "p", v); err != nil || len(got) != 0 {
				t.Fatalf("an erased trace is served through node %d: %d spans, %v", i+1, len(got), err)
			}
		}
		for id, n := range rowsOf {
			if id == victims[0] || id == victims[1] {
				continue
			}
			if got, _, err := r.Trace(ctx, "p", id); err != nil || len(got) != n {
				t.Fatalf("trace %s through node %d after the erasures: %d spans (%v), want %d", id, i+1, len(got), err, n)
			}
		}
	}
}
