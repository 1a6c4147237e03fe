// Package process holds Rastro's process-wide runtime policy: the settings of
// the Go runtime and the operating system that belong to the whole process,
// not to one store. cli/serve drives it; libraries such as the engine never
// change process-wide settings themselves, so that several stores can live in
// one process (a traces engine and, later, a logs engine) without undoing
// each other's settings.
//
//   - Background runs heavy background work (segment merges): on an OS
//     thread of its own at a lower scheduling priority, under the memory
//     guard, which holds the Go soft memory limit near the live heap while
//     merges run. Leases on the guard compose: concurrent merges never leave
//     a stale limit behind (memguard.go).
//   - StartGCFloor keeps the collector from running too often while the live
//     heap is small (gcfloor.go).
package process

import (
	"runtime"
	"runtime/debug"
)

// DefaultMergeNice is the default of Background.MergeNice: under full ingest
// load a merge yields the CPU (CFS weight 110 against 1024 for ingest's
// threads), and uses it all when the machine is otherwise idle.
const DefaultMergeNice = 10

// Background is the process's policy for heavy background work. The zero
// value runs merges as they come, with neither memory guard nor lowered
// priority (MergesDone still returns freed memory to the operating system).
// Its methods are safe for concurrent use; several stores may share one
// Background.
type Background struct {
	// MergeHeadroom: while a merge runs and its store's ingest is idle, the
	// collector runs once garbage reaches this much above the live heap (a
	// soft memory limit, never above GOMEMLIMIT). Not positive: off.
	MergeHeadroom int64
	// MergeNice is the nice value of the OS thread a merge runs on (Linux;
	// 0 leaves the priority alone).
	MergeNice int
}

// RunMerge runs merge under the policy and returns when it has returned. busy
// reports whether the merging store's ingest is active (the memory guard
// stands aside then); nil means never.
func (b *Background) RunMerge(busy func() bool, merge func()) {
	release := holdMemory(b.MergeHeadroom, busy)
	defer release()
	if b.MergeNice == 0 {
		merge()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Not unlocked: the thread ends with this goroutine, never handed
		// back to the scheduler with its priority lowered.
		runtime.LockOSThread()
		_ = lowerThreadPriority(b.MergeNice)
		merge()
	}()
	<-done
}

// MergesDone is called after a run of merges: the memory they used goes back
// to the operating system at once, not left to the background scavenger.
func (b *Background) MergesDone() { debug.FreeOSMemory() }
