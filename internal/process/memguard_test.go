package process

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// TestMemGuardHoldsLimitNearLiveHeap: while one merge runs the soft memory
// limit sits at about the live heap plus the headroom, follows the live heap
// as it grows, never rises above an operator's GOMEMLIMIT, stands aside while
// ingest is active, and is restored when the merge ends.
func TestMemGuardHoldsLimitNearLiveHeap(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)

	debug.SetMemoryLimit(math.MaxInt64)
	runtime.GC()
	const headroom = 64 << 20
	release := holdMemory(headroom, nil)
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
	refresh()
	if grown := debug.SetMemoryLimit(-1); grown < first+100<<20 {
		t.Fatalf("after the live heap grew by 128 MiB the limit is %d, was %d: it must follow the live heap", grown, first)
	}
	runtime.KeepAlive(keep)
	release()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after the merge %d, want the previous %d", got, int64(math.MaxInt64))
	}

	// An operator's lower limit is never raised.
	const operator = 32 << 20
	debug.SetMemoryLimit(operator)
	release = holdMemory(headroom, nil)
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Fatalf("limit during a merge with GOMEMLIMIT=%d: %d, want it unchanged", operator, got)
	}
	release()
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Fatalf("limit after the merge %d, want the operator's %d", got, operator)
	}

	// While ingest is active the guard stands aside, and takes over again
	// once ingest is idle.
	debug.SetMemoryLimit(math.MaxInt64)
	var busy atomic.Bool
	busy.Store(true)
	release = holdMemory(headroom, busy.Load)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit during a merge under ingest %d, want the previous one", got)
	}
	busy.Store(false)
	refresh()
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
		t.Fatal("limit after ingest went idle: unchanged, want the live heap plus the headroom")
	}
	release()

	// Off: nothing changes.
	debug.SetMemoryLimit(math.MaxInt64)
	holdMemory(-1, nil)()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit with the guard off %d, want unchanged", got)
	}
}

// refresh runs the guard's periodic update now.
func refresh() {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	updateLocked()
}

// TestMemGuardLeasesCompose: two merges (two stores) hold the guard at once,
// in either order of ending: while both run the limit carries both
// headrooms, either one's busy ingest makes the guard stand aside, and once
// both have ended the limit in force before them is back. A guard per merge
// (each restoring the limit it found) left the first merge's limit in force
// when the merges ended in the order they started.
func TestMemGuardLeasesCompose(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	const before = math.MaxInt64 - 1 // a limit no guard would compute
	const headroom = 64 << 20
	for _, firstEndsFirst := range []bool{true, false} {
		debug.SetMemoryLimit(before)
		runtime.GC()
		releaseA := holdMemory(headroom, nil)
		onlyA := debug.SetMemoryLimit(-1)
		if onlyA == before {
			t.Fatal("one merge: the limit was not lowered")
		}
		var busyB atomic.Bool
		releaseB := holdMemory(headroom, busyB.Load)
		both := debug.SetMemoryLimit(-1)
		if both < onlyA+headroom/2 {
			t.Fatalf("two merges: limit %d, want about one more headroom above one merge's %d", both, onlyA)
		}
		busyB.Store(true)
		refresh()
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Fatalf("second store's ingest busy: limit %d, want the limit before the merges %d", got, before)
		}
		busyB.Store(false)
		refresh()
		if firstEndsFirst {
			releaseA()
			if got := debug.SetMemoryLimit(-1); got == before {
				t.Fatal("one of two merges ended: the other still runs, the guard must hold")
			}
			releaseB()
		} else {
			releaseB()
			releaseA()
		}
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Fatalf("both merges ended (first ends first: %v): limit %d, want %d", firstEndsFirst, got, before)
		}
		// A later merge starts from the restored limit, not a stale one.
		release := holdMemory(headroom, nil)
		release()
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Fatalf("after a later merge: limit %d, want %d", got, before)
		}
	}
}

// TestBackgroundMergesAtOnce runs merges through one policy from several
// goroutines, each held until all are inside, many times over: the ticker
// updates the limit throughout, and at the end the limit before them is in
// force.
func TestBackgroundMergesAtOnce(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	const before = math.MaxInt64 - 3
	debug.SetMemoryLimit(before)
	bg := &Background{MergeHeadroom: 32 << 20, MergeNice: DefaultMergeNice}
	const merges = 3
	for round := 0; round < 20; round++ {
		var inside sync.WaitGroup
		inside.Add(merges)
		all := make(chan struct{})
		var done sync.WaitGroup
		for i := 0; i < merges; i++ {
			done.Add(1)
			go func() {
				defer done.Done()
				bg.RunMerge(nil, func() {
					inside.Done()
					<-all
					_ = make([]byte, 1<<20) // some garbage while the guard holds
				})
			}()
		}
		inside.Wait()
		if got := debug.SetMemoryLimit(-1); got == before {
			t.Fatalf("round %d: %d merges inside, limit not lowered", round, merges)
		}
		close(all)
		done.Wait()
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Fatalf("round %d: merges ended, limit %d, want %d", round, got, before)
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemGuardFollowsTheBaseLimit: while a merge holds the guard, the
// limit's owner (the engines, raising it as their buffers grow) changes the
// base limit: with ingest busy it is in force at once, with ingest idle the
// guard's lower limit stays under it, and when the merge ends it is the
// limit restored. A stale owner's swap changes nothing. Before, the guard
// kept the limit it found when the merge began, and under a flood (merges
// back to back, ingest always busy) the engines' limit never rose.
func TestMemGuardFollowsTheBaseLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	const before, raised = 1 << 40, 2 << 40
	debug.SetMemoryLimit(before)
	var busy atomic.Bool
	busy.Store(true)
	release := holdMemory(64<<20, busy.Load)
	if got := BaseMemoryLimit(); got != before {
		t.Fatalf("base limit under a merge: %d, want %d", got, before)
	}
	if CompareAndSwapBaseMemoryLimit(before+1, raised) {
		t.Fatal("a swap from a base that is not in force succeeded")
	}
	if !CompareAndSwapBaseMemoryLimit(before, raised) {
		t.Fatal("the owner's swap failed")
	}
	if got := debug.SetMemoryLimit(-1); got != raised {
		t.Fatalf("ingest busy under a merge: limit %d, want the owner's new limit %d", got, raised)
	}
	busy.Store(false)
	refresh()
	if got := debug.SetMemoryLimit(-1); got >= raised {
		t.Fatalf("ingest idle under a merge: limit %d, want the guard's lower limit", got)
	}
	release()
	if got := debug.SetMemoryLimit(-1); got != raised {
		t.Fatalf("after the merge: limit %d, want the owner's %d", got, raised)
	}
	if !CompareAndSwapBaseMemoryLimit(raised, before) || debug.SetMemoryLimit(-1) != before {
		t.Fatal("without a merge the owner's swap is the limit in force")
	}
}
