package engine

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
)

// TestMemGuardHoldsLimitNearLiveHeap: while a merge runs the soft memory
// limit sits at about the live heap plus the headroom, follows the live heap
// as it grows, never rises above an operator's GOMEMLIMIT, stands aside while
// ingest is active, and is restored when the merge ends.
func TestMemGuardHoldsLimitNearLiveHeap(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)

	debug.SetMemoryLimit(math.MaxInt64)
	runtime.GC()
	const headroom = 64 << 20
	g := startMemGuard(headroom, nil)
	first := debug.SetMemoryLimit(-1)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if first < headroom || first > int64(ms.Sys)+headroom {
		t.Fatalf("limit during a merge %d, want between the headroom %d and runtime memory %d + headroom", first, headroom, ms.Sys)
	}
	// The live heap grows by 128 MiB (ingest, say): the limit follows.
	keep := make([][]byte, 128)
	for i := range keep {
		keep[i] = make([]byte, 1<<20)
		keep[i][0] = 1
	}
	runtime.GC()
	g.update()
	if grown := debug.SetMemoryLimit(-1); grown < first+100<<20 {
		t.Fatalf("after the live heap grew by 128 MiB the limit is %d, was %d: it must follow the live heap", grown, first)
	}
	runtime.KeepAlive(keep)
	g.stop()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after the merge %d, want the previous %d", got, int64(math.MaxInt64))
	}

	// An operator's lower limit is never raised.
	const operator = 32 << 20
	debug.SetMemoryLimit(operator)
	g = startMemGuard(headroom, nil)
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Fatalf("limit during a merge with GOMEMLIMIT=%d: %d, want it unchanged", operator, got)
	}
	g.stop()
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Fatalf("limit after the merge %d, want the operator's %d", got, operator)
	}

	// While ingest is active the guard stands aside, and takes over again
	// once ingest is idle.
	debug.SetMemoryLimit(math.MaxInt64)
	var busy atomic.Bool
	busy.Store(true)
	g = startMemGuard(headroom, busy.Load)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit during a merge under ingest %d, want the previous one", got)
	}
	busy.Store(false)
	g.update()
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
		t.Fatal("limit after ingest went idle: unchanged, want the live heap plus the headroom")
	}
	g.stop()

	// Off: nothing changes.
	debug.SetMemoryLimit(math.MaxInt64)
	if g := startMemGuard(-1, nil); g != nil {
		t.Fatal("a negative headroom must turn the guard off")
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit with the guard off %d, want unchanged", got)
	}
}
