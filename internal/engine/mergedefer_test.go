package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// pressable is a Background whose ingest pressure the test sets.
type pressable struct{ pressed atomic.Bool }

func (p *pressable) RunMerge(busy func() bool, merge func()) { merge() }
func (p *pressable) MergesDone()                             {}
func (p *pressable) RunSeal(seal func())                     { seal() }
func (p *pressable) CommitLane() (func(func()), func())      { return runNow, func() {} }
func (p *pressable) Pressed() bool                           { return p.pressed.Load() }

// TestMergesWaitWhileIngestIsPressed: while ingest is pressed, a merge that
// is due waits (and is counted) as long as at most MergeDeferSegments
// segments are still to merge; beyond that bound, or once the pressure
// ends, merges run; Compact never waits.
func TestMergesWaitWhileIngestIsPressed(t *testing.T) {
	bg := &pressable{}
	e, err := Open(Options{Dir: t.TempDir(), Background: bg, CompactionFanout: 2, MergeDeferSegments: 3,
		SealAge: time.Hour, LifecycleInterval: time.Hour, MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g := newGen(21)
	seal := func(n int) {
		t.Helper()
		for range n {
			appendSpans(t, e, "p", g.spans(20))
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	bg.pressed.Store(true)
	seal(3)
	e.lifecycleOnce(ctx)
	if n, c := e.segmentCount(), e.Counters(); n != 3 || c.Merges != 0 || c.MergesDeferred == 0 {
		t.Fatalf("pressed, 3 segments (bound 3): %d segments, %d merges, %d deferred; want 3 segments, none merged, the wait counted", n, c.Merges, c.MergesDeferred)
	}
	bg.pressed.Store(false)
	e.lifecycleOnce(ctx)
	if n, c := e.segmentCount(), e.Counters(); c.Merges == 0 || n >= 3 {
		t.Fatalf("no pressure: %d segments after %d merges; want the due merges done", n, c.Merges)
	}
	bg.pressed.Store(true)
	before := e.Counters().Merges
	for e.segmentCount() <= 3 { // past the bound
		seal(1)
	}
	e.lifecycleOnce(ctx)
	if n, c := e.segmentCount(), e.Counters(); c.Merges == before || n > 3 {
		t.Fatalf("pressed, past the bound of 3: %d segments after %d merges; want merges back within it", n, c.Merges-before)
	}
	// Compact, asked for, does not wait.
	bg.pressed.Store(true)
	seal(2)
	res, err := e.Compact(ctx)
	if err != nil || res.SegmentsAfter != 1 {
		t.Fatalf("Compact while pressed: %+v, %v; want one segment", res, err)
	}
}
