package engine

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemoryLimitDefault: an open engine holds the soft memory limit derived
// from its buffer sizes when the process has none, raises it while its
// buffers hold more than two seals' worth and lowers it again, gives it back
// when the last engine closes, and leaves an operator's limit alone.
func TestMemoryLimitDefault(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Fatal("run without GOMEMLIMIT: the test checks the engine's own default")
	}
	// Engines other tests left open (crash tests abandon theirs) hold the
	// limit: start from a process with none, and put things back after.
	memLimit.mu.Lock()
	holders, set, stopHook := memLimit.holders, memLimit.set, memLimit.stopHook
	memLimit.holders, memLimit.stopHook = nil, nil
	memLimit.mu.Unlock()
	orig := debug.SetMemoryLimit(math.MaxInt64)
	defer func() {
		debug.SetMemoryLimit(orig)
		memLimit.mu.Lock()
		memLimit.holders, memLimit.set, memLimit.stopHook = holders, set, stopHook
		memLimit.mu.Unlock()
	}()
	limit := func() int64 { return debug.SetMemoryLimit(-1) }
	headroom := func() int64 {
		memLimit.mu.Lock()
		defer memLimit.mu.Unlock()
		return memLimit.headroom
	}

	e1, err := Open(Options{Dir: t.TempDir(), SealBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// The limit is two seals' worth plus the headroom in force, whatever
	// the collections have measured by now.
	base := func() int64 { return 2*(8<<20) + headroom() }
	if got, want := limit(), base(); got != want {
		t.Fatalf("limit while open: %d, want %d (2 x seal bytes + headroom)", got, want)
	}
	// Seals behind: the buffers hold 100 MiB, so the limit makes room for
	// them, and comes back down when they drain. (A hold of its own, as an
	// engine's seal loop updates it: e1's loop keeps asking for its base.)
	var buffered atomic.Int64
	h := holdMemoryLimit(0, 2*(8<<20), buffered.Load)
	buffered.Store(100 << 20)
	h.update()
	if got, want := limit(), 100<<20+headroom(); got != want {
		t.Fatalf("limit with 100 MiB buffered: %d, want %d", got, want)
	}
	buffered.Store(1 << 20)
	h.update()
	if got, want := limit(), base(); got != want {
		t.Fatalf("limit once the buffers drained: %d, want %d", got, want)
	}
	// A second engine: the larger of the two limits stands until both are
	// closed.
	e2, err := Open(Options{Dir: t.TempDir(), SealBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := limit(), 2*(32<<20)+headroom(); got != want {
		t.Fatalf("limit with two engines open: %d, want %d", got, want)
	}
	e2.Close()
	if got, want := limit(), base(); got != want {
		t.Fatalf("limit with the first engine still open: %d, want %d", got, want)
	}
	// A limit someone else sets meanwhile (a merge's guard) is not
	// overwritten by an update or a collection.
	prev := debug.SetMemoryLimit(50 << 20)
	buffered.Store(300 << 20)
	h.update()
	runtime.GC()
	if got := limit(); got != 50<<20 {
		t.Fatalf("an update overwrote another limit: %d", got)
	}
	debug.SetMemoryLimit(prev) // the guard restores what it found
	buffered.Store(1 << 20)
	h.update()
	h.release()
	e1.Close()
	if got := limit(); got != math.MaxInt64 {
		t.Fatalf("limit after the last engine closed: %d, want none", got)
	}
	runtime.GC() // the collection hook is gone with the last holder
	if got := limit(); got != math.MaxInt64 {
		t.Fatalf("limit after a collection with no engine open: %d, want none", got)
	}

	// An operator's limit is left alone, and so is MemoryLimit < 0.
	debug.SetMemoryLimit(1 << 40)
	e3, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := limit(); got != 1<<40 {
		t.Fatalf("an existing limit became %d", got)
	}
	e3.Close()
	if got := limit(); got != 1<<40 {
		t.Fatalf("closing the engine changed an existing limit to %d", got)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	e4, err := Open(Options{Dir: t.TempDir(), MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e4.Close()
	if got := limit(); got != math.MaxInt64 {
		t.Fatalf("MemoryLimit -1 set a limit of %d", got)
	}
}

// TestMemoryHeadroomFollowsTheHeap: after each collection the headroom is
// the live heap that is not in the write buffers plus as much garbage (at
// least 96 MiB in all, at most 128 MiB of garbage);
// live bytes the buffers hold do not raise it.
func TestMemoryHeadroomFollowsTheHeap(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Fatal("run without GOMEMLIMIT: the test checks the engine's own default")
	}
	for _, c := range []struct{ other, want int64 }{
		{-5 << 20, minMemoryHeadroom}, // buffers estimated above the live heap
		{10 << 20, minMemoryHeadroom},
		{60 << 20, 120 << 20},
		{200 << 20, 328 << 20}, // at most 128 MiB of garbage
		{400 << 20, 528 << 20}, // never below the live heap: no collection without pause

	} {
		if got := memoryHeadroom(c.other); got != c.want {
			t.Errorf("memoryHeadroom(%d MiB) = %d MiB, want %d MiB", c.other>>20, got>>20, c.want>>20)
		}
	}

	// A real hold and real collections: 80 MiB kept live raises the
	// headroom to about 160 MiB; the same 80 MiB reported as buffered
	// (the write buffers) brings it down near the floor; counted outside
	// the buffers again it rises; dropped, it falls.
	var buffered atomic.Int64
	h := holdMemoryLimit(1<<40, 0, buffered.Load) // far above any other holder's
	if h == nil {
		t.Fatalf("no hold: the process limit was %d", debug.SetMemoryLimit(-1))
	}
	defer h.release()
	headroom := func() int64 {
		memLimit.mu.Lock()
		defer memLimit.mu.Unlock()
		return memLimit.headroom
	}
	// waitHeadroom collects until the headroom the hook measured satisfies ok.
	waitHeadroom := func(what string, ok func(int64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(headroom()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: headroom %d MiB", what, headroom()>>20)
			}
			runtime.GC()
			runtime.Gosched()
		}
	}
	ballast := make([]byte, 80<<20)
	for i := range ballast {
		ballast[i] = 1 // touched, so it is not a lazily zeroed mapping only
	}
	waitHeadroom("80 MiB live outside the buffers", func(h int64) bool { return h >= 160<<20 })
	buffered.Store(int64(len(ballast)))
	waitHeadroom("the same 80 MiB as write buffers", func(h int64) bool { return h < 140<<20 })
	buffered.Store(0)
	waitHeadroom("the 80 MiB outside the buffers again", func(h int64) bool { return h >= 160<<20 })
	runtime.KeepAlive(ballast)
	ballast = nil
	waitHeadroom("the 80 MiB dropped", func(h int64) bool { return h < 140<<20 })
}

// Memory reserved by another store (the log store's buffers) is added to the
// limit the engines hold, and given back.
func TestReserveMemoryAddsToTheLimit(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Fatal("run without GOMEMLIMIT: the engines leave an operator's limit alone")
	}
	// A hold larger than any other engine's (tests before this one may
	// still hold theirs), so that the limit in force is this one's.
	const base = 1 << 40
	before := debug.SetMemoryLimit(-1)
	h := holdMemoryLimit(base, 0, func() int64 { return 0 })
	if h == nil {
		t.Fatalf("no hold: the process limit was %d before", before)
	}
	defer h.release()
	ReserveMemory(30 << 20)
	if got := debug.SetMemoryLimit(-1); got != base+30<<20 {
		t.Fatalf("limit with 30 MiB reserved: %d, want %d", got, base+30<<20)
	}
	ReserveMemory(-30 << 20)
	if got := debug.SetMemoryLimit(-1); got != base {
		t.Fatalf("limit after giving it back: %d, want %d", got, base)
	}
}
