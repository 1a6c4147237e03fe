package engine

import (
	"context"
	"math"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/process"
)

// overlapping runs merges through the process policy, holding the first two
// merges until both are inside it, then ending the first before the second:
// two engines' merges overlap for sure, in the order in which a guard per
// merge (each restoring the limit it found) left a stale limit behind.
type overlapping struct {
	bg        *process.Background
	mu        sync.Mutex
	arrived   int
	both      chan struct{} // closed when two merges are inside the guard
	firstDone chan struct{} // closed when the first has left it
	lowered   []bool        // per merge: was the memory limit below the one before, inside the guard
	limitPre  int64
}

func wait(ch chan struct{}) {
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
	}
}

func (o *overlapping) RunMerge(busy func() bool, merge func()) {
	var order int
	o.bg.RunMerge(busy, func() {
		o.mu.Lock()
		o.arrived++
		order = o.arrived
		if order == 2 {
			close(o.both)
		}
		o.mu.Unlock()
		if order <= 2 {
			wait(o.both)
		}
		if order == 2 {
			wait(o.firstDone)
		}
		o.mu.Lock()
		o.lowered = append(o.lowered, debug.SetMemoryLimit(-1) < o.limitPre)
		o.mu.Unlock()
		merge()
	})
	if order == 1 {
		close(o.firstDone) // after RunMerge: the first lease is given back
	}
}

func (o *overlapping) MergesDone() { o.bg.MergesDone() }

func (o *overlapping) RunSeal(seal func()) { o.bg.RunSeal(seal) }

// TestTwoEnginesMergingAtOnceLeaveNoStaleLimit: two engines in one process
// share the process's merge policy and compact at the same moment (a traces
// engine and a logs engine, say). While they merge the soft memory limit is
// held below the operator's; when both are done the operator's limit is in
// force again, whichever merge ends first. (With a guard per merge, each
// restoring the limit it found, the second merge restored the first one's
// lowered limit and left it in force.)
func TestTwoEnginesMergingAtOnceLeaveNoStaleLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	const operator = math.MaxInt64 - 7
	debug.SetMemoryLimit(operator)
	o := &overlapping{bg: &process.Background{MergeHeadroom: 16 << 20, MergeNice: process.DefaultMergeNice},
		both: make(chan struct{}), firstDone: make(chan struct{}), limitPre: operator}
	var engines []*Engine
	var stored []int64
	for i := 0; i < 2; i++ {
		e, err := Open(Options{Dir: t.TempDir(), NoCompaction: true, Background: o})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		g := newGen(uint64(10 + i))
		var n int64
		for j := 0; j < 4; j++ {
			spans := g.spans(200)
			n += int64(len(spans))
			appendSpans(t, e, "default", spans)
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
		e.lastAppend.Store(0) // ingest idle: the guard holds the limit
		engines = append(engines, e)
		stored = append(stored, n)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(engines))
	merges := make([]int, len(engines))
	for i, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Compact(context.Background())
			errs[i], merges[i] = err, res.Merges
		}()
	}
	wg.Wait()
	for i := range engines {
		if errs[i] != nil || merges[i] == 0 {
			t.Fatalf("engine %d: compact: %d merges, %v", i, merges[i], errs[i])
		}
		if st := testStats(engines[i], "default"); st.Spans != stored[i] || st.Segments != 1 {
			t.Fatalf("engine %d after compaction: %d spans in %d segments, want %d in 1", i, st.Spans, st.Segments, stored[i])
		}
	}
	select {
	case <-o.both:
	default:
		t.Fatal("the two engines' merges never ran at the same time")
	}
	for i, low := range o.lowered {
		if !low {
			t.Fatalf("merge %d ran with the operator's limit: the guard did not hold", i)
		}
	}
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Fatalf("after both engines merged the memory limit is %d, want the operator's %d", got, operator)
	}
}
