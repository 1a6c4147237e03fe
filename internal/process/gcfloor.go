package process

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultGCFloor is the default of StartGCFloor's floor.
const DefaultGCFloor = 32 << 20

// maxFloorPercent bounds the GOGC the floor sets (a live heap of a few
// hundred KiB would otherwise ask for a percentage in the tens of
// thousands; the runtime's own 4 MiB minimum heap covers that range).
const maxFloorPercent = 1000

// gcFloor keeps the collector from running more often than once per floor
// bytes allocated while the live heap is small. With the Go default
// (GOGC=100) a collection runs when the heap has grown by the live heap: a
// server that has just opened its store holds a few MiB live, so a query
// that allocates a few hundred KiB (decompressed columns, decoded rows)
// triggers a collection every few dozen queries, and on a small host each
// collection lands in the latency of the queries it overlaps (measured:
// 10 collections during 200 rare-word queries right after a restart). After
// every collection the floor sets GOGC to max(100, 100*floor/live), so the
// next one runs at live + max(live, floor): at most floor bytes of extra
// garbage, and nothing changes once the live heap exceeds the floor. A
// memory limit (GOMEMLIMIT, or the merge guard's) still bounds the heap.
// An operator's GOGC is left alone.
type gcFloor struct {
	floor   uint64
	stopped atomic.Bool
	mu      sync.Mutex
	sample  []metrics.Sample
}

// StartGCFloor starts the floor (process-wide) and returns the function that
// stops it and restores GOGC=100. It does nothing (and stop is a no-op)
// when floor is not positive or the GOGC environment variable is set.
func StartGCFloor(floor int64) (stop func()) {
	if floor <= 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	g := &gcFloor{floor: uint64(floor), sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	g.adjust()
	stopHook := AfterEachGC(g.adjust)
	return func() {
		if !g.stopped.Swap(true) {
			stopHook()
			g.mu.Lock()
			debug.SetGCPercent(100)
			g.mu.Unlock()
		}
	}
}

// adjust sets GOGC for the live heap the last collection left.
func (g *gcFloor) adjust() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped.Load() {
		return
	}
	metrics.Read(g.sample)
	debug.SetGCPercent(floorPercent(g.sample[0].Value.Uint64(), g.floor))
}

// floorPercent is the GOGC that puts the next collection at live +
// max(live, floor).
func floorPercent(live, floor uint64) int {
	if live == 0 || live >= floor {
		return 100
	}
	return int(min(floor*100/live, maxFloorPercent))
}
