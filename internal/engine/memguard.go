package engine

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// DefaultMergeHeadroom is the default of Options.MergeHeadroom.
const DefaultMergeHeadroom = 64 << 20

// memGuardInterval is how often a guard re-reads the live heap and ingest
// activity while a merge runs.
const memGuardInterval = 20 * time.Millisecond

// ingestQuiet is how long after the last append a guard treats ingest as
// idle.
const ingestQuiet = time.Second

// memGuard bounds the garbage a merge leaves between collections. A merge
// decodes every span of its inputs and so allocates at a high rate, while
// what it keeps live is small (one decoded block per input and the output's
// index); with the Go default (GOGC=100) the heap grows to twice the live
// heap before a collection, so the peak follows the live heap's peaks. While
// a merge runs and ingest is idle, the guard holds the runtime's soft memory
// limit at the live heap (as of the last collection) plus a fixed headroom:
// the collector runs when the garbage reaches the headroom.
//
// While ingest is active the guard stands aside (the limit in force before
// the merge applies): the live heap then holds the write buffer, a fixed
// headroom over it makes the collector run several times more often, and it
// takes the CPU from ingest (measured: ingest during a compaction fell from
// 0.76 to 0.40 of idle ingest with the limit held under ingest).
//
// The guard never raises a limit set by the operator (GOMEMLIMIT), and
// restores the previous limit when the merge ends. Its ticker runs at normal
// priority, so a merge thread at low priority does not delay its updates.
// The limit is process-wide: at most one merge runs at a time (lcMu).
type memGuard struct {
	prev     int64 // the limit before the merge
	headroom int64
	busy     func() bool // reports ingest activity; nil = never busy
	sample   []metrics.Sample
	stopOnce sync.Once
	done     chan struct{}
	exited   chan struct{}
}

// startMemGuard starts a guard; it returns nil when headroom is not positive.
func startMemGuard(headroom int64, busy func() bool) *memGuard {
	if headroom <= 0 {
		return nil
	}
	g := &memGuard{prev: debug.SetMemoryLimit(-1), headroom: headroom, busy: busy,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
			{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}},
		done: make(chan struct{}), exited: make(chan struct{})}
	g.update()
	go func() {
		defer close(g.exited)
		t := time.NewTicker(memGuardInterval)
		defer t.Stop()
		for {
			select {
			case <-g.done:
				return
			case <-t.C:
				g.update()
			}
		}
	}()
	return g
}

// update sets the limit from the live heap measured by the last collection,
// or back to the previous limit while ingest is active.
func (g *memGuard) update() {
	if g.busy != nil && g.busy() {
		debug.SetMemoryLimit(g.prev)
		return
	}
	metrics.Read(g.sample)
	v := func(i int) int64 {
		if g.sample[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(min(g.sample[i].Value.Uint64(), math.MaxInt64))
	}
	// The limit counts all the runtime's memory: add what is not heap
	// (stacks, GC metadata, runtime structures).
	nonHeap := v(1) - v(2) - v(3) - v(4) - v(5)
	limit := v(0) + max(nonHeap, 0) + g.headroom
	debug.SetMemoryLimit(min(limit, g.prev))
}

// stop ends the guard and restores the limit in force before the merge.
func (g *memGuard) stop() {
	if g == nil {
		return
	}
	g.stopOnce.Do(func() {
		close(g.done)
		<-g.exited
		debug.SetMemoryLimit(g.prev)
	})
}
