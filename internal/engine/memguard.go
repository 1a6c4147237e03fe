package engine

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// DefaultMergeHeadroom is the default of Options.MergeHeadroom.
const DefaultMergeHeadroom = 64 << 20

// memGuard bounds the garbage a merge leaves between collections. A merge
// decodes every span of its inputs and so allocates at a high rate, while
// what it keeps live is small (one decoded block per input and the output's
// index); with the Go default (GOGC=100) the heap grows to twice the live
// heap before a collection, and the peak follows the live heap's peak. While
// a merge runs, the guard holds the runtime's soft memory limit at the live
// heap (as of the last collection) plus a fixed headroom, so the collector
// runs when the garbage reaches the headroom instead of the live heap's size.
// It never raises a limit set by the operator (GOMEMLIMIT) and restores it
// when the merge ends. The limit follows the live heap on every update, so
// ingest growing the heap during a merge does not make the collector run
// without pause.
type memGuard struct {
	prev     int64 // the limit before the merge
	headroom int64
	sample   []metrics.Sample
}

// startMemGuard returns nil when headroom is not positive.
func startMemGuard(headroom int64) *memGuard {
	if headroom <= 0 {
		return nil
	}
	g := &memGuard{prev: debug.SetMemoryLimit(-1), headroom: headroom,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
			{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}}
	g.update()
	return g
}

// update sets the limit from the live heap measured by the last collection.
// It is cheap enough to call once per block.
func (g *memGuard) update() {
	if g == nil {
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

// stop restores the limit in force before the merge.
func (g *memGuard) stop() {
	if g != nil {
		debug.SetMemoryLimit(g.prev)
	}
}
