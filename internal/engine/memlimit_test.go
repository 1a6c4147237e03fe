package engine

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestMemoryLimitDefault: an open engine holds the soft memory limit derived
// from its buffer sizes when the process has none, gives it back when the
// last engine closes, and leaves an operator's limit alone.
func TestMemoryLimitDefault(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Fatal("run without GOMEMLIMIT: the test checks the engine's own default")
	}
	// Engines other tests left open (crash tests abandon theirs) hold the
	// limit: start from a process with none, and put things back after.
	memLimit.mu.Lock()
	users, set := memLimit.users, memLimit.set
	memLimit.users = 0
	memLimit.mu.Unlock()
	orig := debug.SetMemoryLimit(math.MaxInt64)
	defer func() {
		debug.SetMemoryLimit(orig)
		memLimit.mu.Lock()
		memLimit.users, memLimit.set = users, set
		memLimit.mu.Unlock()
	}()
	e1, err := Open(Options{Dir: t.TempDir(), SealBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(2*(8<<20) + memoryLimitHeadroom)
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("limit while open: %d, want %d (2 x seal bytes + headroom)", got, want)
	}
	// A second engine keeps the first one's limit; the limit stays until
	// both are closed.
	e2, err := Open(Options{Dir: t.TempDir(), SealBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	e1.Close()
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("limit with one engine still open: %d, want %d", got, want)
	}
	e2.Close()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after the last engine closed: %d, want none", got)
	}

	// Someone else's limit is left alone, and so is MemoryLimit < 0.
	debug.SetMemoryLimit(1 << 40)
	e3, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Fatalf("an existing limit became %d", got)
	}
	e3.Close()
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Fatalf("closing the engine changed an existing limit to %d", got)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	e4, err := Open(Options{Dir: t.TempDir(), MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e4.Close()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("MemoryLimit -1 set a limit of %d", got)
	}
}
