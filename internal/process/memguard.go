package process

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// DefaultMergeHeadroom is the default of Background.MergeHeadroom.
const DefaultMergeHeadroom = 64 << 20

// memGuardInterval is how often the guard re-reads the live heap and ingest
// activity while merges run.
const memGuardInterval = 20 * time.Millisecond

// The memory guard bounds the garbage merges leave between collections. A
// merge decodes every span of its inputs and so allocates at a high rate,
// while what it keeps live is small (one decoded block per input and the
// output's index); with the Go default (GOGC=100) the heap grows to twice the
// live heap before a collection, so the peak follows the live heap's peaks.
// While a merge runs and ingest is idle, the guard holds the runtime's soft
// memory limit at the live heap (as of the last collection) plus a fixed
// headroom: the collector runs when the garbage reaches the headroom.
//
// While ingest is active the guard stands aside (the base limit applies:
// the one in force before the merges, as its owner changes it meanwhile):
// the live heap then holds the write buffer, a fixed
// headroom over it makes the collector run several times more often, and it
// takes the CPU from ingest (measured: ingest during a compaction fell from
// 0.76 to 0.40 of idle ingest with the limit held under ingest).
//
// The limit is process-wide, so the guard is one per process and merges take
// leases on it: several merges (of several engines: traces, later logs)
// compose. While any lease is held the limit is the live heap plus the sum of
// the held leases' headrooms; it stands aside while any lease's ingest is
// busy; it never rises above the base limit (the limit in force when the
// first lease was taken, an operator's GOMEMLIMIT or the engines' default,
// as its owner changes it meanwhile: CompareAndSwapBaseMemoryLimit), and
// that limit is restored when the last lease ends, whatever the order the
// leases end in.
// Its ticker runs at normal priority, so a merge thread at low priority does
// not delay its updates.
var guard struct {
	mu     sync.Mutex
	leases map[*lease]struct{}
	prev   int64         // the base limit: the one before the first lease, as its owner changed it since
	gen    uint64        // incremented when the last lease ends; a stale ticker writes nothing
	stop   chan struct{} // closed when the last lease ends
	exited chan struct{} // closed when the ticker has returned
	sample []metrics.Sample
}

// BaseMemoryLimit is the soft memory limit as its owner (an operator's
// GOMEMLIMIT, the engines' default) set it: the limit in force, or, while
// merges hold the guard, the limit the guard stands aside to and restores.
func BaseMemoryLimit() int64 {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if len(guard.leases) > 0 {
		return guard.prev
	}
	return debug.SetMemoryLimit(-1)
}

// CompareAndSwapBaseMemoryLimit sets the base limit (BaseMemoryLimit) to
// limit if it is old, and reports whether it did. While no merge holds the
// guard that is the limit in force; while merges do, the guard takes it as
// the limit it stands aside to while ingest is busy, never rises above, and
// restores when the last lease ends.
//
// Why: the engines raise their limit while the write buffers and the
// requests in flight grow, and before this the guard stood aside to the
// limit it found when its first lease was taken; under a flood, with merges
// following one another, the engines' limit stayed where it was when the
// merges began, below the live heap, and the collector ran without pause
// (docs/benchmarks/overload.md, 2026-12-04).
func CompareAndSwapBaseMemoryLimit(old, limit int64) bool {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if len(guard.leases) == 0 {
		if debug.SetMemoryLimit(-1) != old {
			return false
		}
		debug.SetMemoryLimit(limit)
		return true
	}
	if guard.prev != old {
		return false
	}
	guard.prev = limit
	updateLocked()
	return true
}

// lease is one merge's hold on the guard.
type lease struct {
	headroom int64
	busy     func() bool // reports ingest activity; nil = never busy
}

// holdMemory takes a lease on the guard for one merge and returns the
// function that gives it back. It does nothing when headroom is not positive.
func holdMemory(headroom int64, busy func() bool) (release func()) {
	if headroom <= 0 {
		return func() {}
	}
	l := &lease{headroom: headroom, busy: busy}
	guard.mu.Lock()
	if len(guard.leases) == 0 {
		if guard.leases == nil {
			guard.leases = map[*lease]struct{}{}
			guard.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"},
				{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
				{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		}
		guard.prev = debug.SetMemoryLimit(-1)
		guard.stop, guard.exited = make(chan struct{}), make(chan struct{})
		go tick(guard.gen, guard.stop, guard.exited)
	}
	guard.leases[l] = struct{}{}
	updateLocked()
	guard.mu.Unlock()

	var once sync.Once
	return func() { once.Do(func() { releaseLease(l) }) }
}

func releaseLease(l *lease) {
	guard.mu.Lock()
	delete(guard.leases, l)
	if len(guard.leases) > 0 {
		updateLocked()
		guard.mu.Unlock()
		return
	}
	debug.SetMemoryLimit(guard.prev)
	guard.gen++
	close(guard.stop)
	exited := guard.exited
	guard.mu.Unlock()
	<-exited // the ticker may be waiting for mu: wait after unlocking
}

// tick updates the limit every memGuardInterval until stop is closed.
func tick(gen uint64, stop, exited chan struct{}) {
	defer close(exited)
	t := time.NewTicker(memGuardInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			guard.mu.Lock()
			if guard.gen == gen {
				updateLocked()
			}
			guard.mu.Unlock()
		}
	}
}

// updateLocked sets the limit from the live heap measured by the last
// collection, or to the base limit while ingest is active.
// Callers hold guard.mu and at least one lease is held.
func updateLocked() {
	var headroom int64
	for l := range guard.leases {
		if l.busy != nil && l.busy() {
			debug.SetMemoryLimit(guard.prev)
			return
		}
		headroom += l.headroom
	}
	metrics.Read(guard.sample)
	v := func(i int) int64 {
		if guard.sample[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(min(guard.sample[i].Value.Uint64(), math.MaxInt64))
	}
	// The limit counts all the runtime's memory: add what is not heap
	// (stacks, GC metadata, runtime structures).
	nonHeap := v(1) - v(2) - v(3) - v(4) - v(5)
	limit := v(0) + max(nonHeap, 0) + headroom
	debug.SetMemoryLimit(min(limit, guard.prev))
}
