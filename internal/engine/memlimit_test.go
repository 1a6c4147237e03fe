package engine

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
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
	holders, set := memLimit.holders, memLimit.set
	memLimit.holders = nil
	memLimit.mu.Unlock()
	orig := debug.SetMemoryLimit(math.MaxInt64)
	defer func() {
		debug.SetMemoryLimit(orig)
		memLimit.mu.Lock()
		memLimit.holders, memLimit.set = holders, set
		memLimit.mu.Unlock()
	}()
	limit := func() int64 { return debug.SetMemoryLimit(-1) }

	e1, err := Open(Options{Dir: t.TempDir(), SealBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	base := int64(2*(8<<20) + memoryLimitHeadroom)
	if got := limit(); got != base {
		t.Fatalf("limit while open: %d, want %d (2 x seal bytes + headroom)", got, base)
	}
	// Seals behind: the buffers hold 100 MiB, so the limit makes room for
	// them, and comes back down when they drain. (A hold of its own, as an
	// engine's seal loop updates it: e1's loop keeps asking for its base.)
	h := holdMemoryLimit(base)
	h.update(100 << 20)
	if got, want := limit(), int64(100<<20+memoryLimitHeadroom); got != want {
		t.Fatalf("limit with 100 MiB buffered: %d, want %d", got, want)
	}
	h.update(1 << 20)
	if got := limit(); got != base {
		t.Fatalf("limit once the buffers drained: %d, want %d", got, base)
	}
	// A second engine: the larger of the two limits stands until both are
	// closed.
	e2, err := Open(Options{Dir: t.TempDir(), SealBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	base2 := int64(2*(32<<20) + memoryLimitHeadroom)
	if got := limit(); got != base2 {
		t.Fatalf("limit with two engines open: %d, want %d", got, base2)
	}
	e2.Close()
	if got := limit(); got != base {
		t.Fatalf("limit with the first engine still open: %d, want %d", got, base)
	}
	// A limit someone else sets meanwhile (a merge's guard) is not
	// overwritten by an update.
	debug.SetMemoryLimit(50 << 20)
	h.update(300 << 20)
	if got := limit(); got != 50<<20 {
		t.Fatalf("an update overwrote another limit: %d", got)
	}
	debug.SetMemoryLimit(base) // the guard restores what it found
	h.update(1 << 20)
	h.release()
	e1.Close()
	if got := limit(); got != math.MaxInt64 {
		t.Fatalf("limit after the last engine closed: %d, want none", got)
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
	h := holdMemoryLimit(base)
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
