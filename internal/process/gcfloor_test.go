package process

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 32 * mib, 100},        // nothing measured yet
		{8 * mib, 32 * mib, 400},  // next collection at 8 + 32 MiB
		{32 * mib, 32 * mib, 100}, // at the floor: the default
		{64 * mib, 32 * mib, 100}, // above it: the default
		{10 << 10, 32 * mib, maxFloorPercent},
	} {
		if got := floorPercent(c.live, c.floor); got != c.want {
			t.Errorf("floorPercent(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// gogc reads the collector's current GOGC.
func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestGCFloorFollowsCollections: with a small live heap the floor raises
// GOGC after collections, and stopping it restores the default.
func TestGCFloorFollowsCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	const floor = 1 << 30 // far above this test binary's live heap
	stop := StartGCFloor(floor)
	debug.SetGCPercent(100) // as if the live heap had been large: the next collection re-reads it
	deadline := time.Now().Add(10 * time.Second)
	for gogc() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed at %d with a live heap far below the floor", gogc())
		}
		runtime.GC() // the floor re-reads the live heap after each collection
		runtime.Gosched()
	}
	stop()
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d after stop, want 100", got)
	}
	runtime.GC()
	runtime.GC() // a finalizer armed before stop must not raise it again
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d after stop and two collections, want 100", got)
	}
}

func TestGCFloorLeavesOperatorGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	stop := StartGCFloor(1 << 30)
	defer stop()
	runtime.GC()
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d with the operator's GOGC=100 set, want 100", got)
	}
}
