package engine

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// memoryLimitHeadroom is what the default soft memory limit allows beyond
// two write buffers (the active one and one being sealed): the seal's
// working set, requests being decoded, segment indexes and caches.
const memoryLimitHeadroom = 96 << 20

// defaultMemoryLimit is the soft memory limit derived from the buffer
// sizes (Options.MemoryLimit 0).
func defaultMemoryLimit(sealBytes int64) int64 { return 2*sealBytes + memoryLimitHeadroom }

// memLimit is the soft memory limit the open engines set: the process's one
// limit, held while any engine that set it is open.
var memLimit struct {
	mu    sync.Mutex
	users int
	set   int64 // the limit the engines set
}

// holdMemoryLimit sets the process's soft memory limit to limit while the
// engine is open, unless the process already has one (GOMEMLIMIT, or a limit
// set by other code) or limit is not positive. With several engines open
// the first one's limit stands. The returned function gives it back; the
// last engine to close restores "no limit", unless someone else changed it
// since.
//
// Why a default at all: with Go's default GOGC the heap grows to about twice
// the live heap before a collection, and the write buffers are most of the
// live heap while ingest runs. The buffers hold no pointers
// (memtable_codec.go), so a collection forced by the limit marks little, and
// the limit bounds the peak near the live heap instead (measured in
// docs/benchmarks/ingest.md).
func holdMemoryLimit(limit int64) (release func()) {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	if memLimit.users == 0 {
		if debug.SetMemoryLimit(-1) != math.MaxInt64 {
			return func() {} // someone else's limit: leave it
		}
		debug.SetMemoryLimit(limit)
		memLimit.set = limit
	}
	memLimit.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			memLimit.mu.Lock()
			defer memLimit.mu.Unlock()
			memLimit.users--
			if memLimit.users == 0 && debug.SetMemoryLimit(-1) == memLimit.set {
				debug.SetMemoryLimit(math.MaxInt64)
			}
		})
	}
}
