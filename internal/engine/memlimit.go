package engine

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// memoryLimitHeadroom is what the default soft memory limit allows beyond
// the write buffers: the seal's working set, requests being decoded,
// segment indexes and caches. At 96 MiB the caches of a 1M-span store left
// the collector running almost without pause (queries 2-3x slower,
// docs/operations.md); 256 MiB does not.
const memoryLimitHeadroom = 256 << 20

// defaultMemoryLimit is the soft memory limit derived from the buffer
// sizes (Options.MemoryLimit 0): room for two buffers (the active one and
// one being sealed) and the headroom.
func defaultMemoryLimit(sealBytes int64) int64 { return 2*sealBytes + memoryLimitHeadroom }

// memLimit is the process's one soft memory limit as the open engines hold
// it: each holder asks for a limit, and the largest is set, as long as
// nobody else changed the limit since the engines last set it.
var memLimit struct {
	mu      sync.Mutex
	holders map[*memLimitHold]int64 // the limit each holder asks for
	set     int64                   // the limit the engines last set
	// extra is memory other stores of the process hold (the log store's
	// write buffers, ReserveMemory), added to the holders' limit.
	extra int64
}

// ReserveMemory adds delta bytes (negative: gives them back) to the soft
// memory limit the engines hold, for another store of the process whose
// buffers the limit must leave room for (the log store, internal/logstore):
// without it, logs filling their buffer would push the heap against a limit
// sized for the span buffers alone, and the collector would run without
// pause (measured: log ingest at half its rate, a rare-word search 7x
// slower). It does nothing while no engine holds a limit.
func ReserveMemory(delta int64) {
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	memLimit.extra = max(0, memLimit.extra+delta)
	if len(memLimit.holders) > 0 {
		applyMemoryLimitLocked()
	}
}

// memLimitHold is one engine's hold on the soft memory limit.
type memLimitHold struct {
	base int64
	once sync.Once
}

// holdMemoryLimit holds the process's soft memory limit at limit (at least)
// while the engine is open, unless the process already has a limit that
// the engines did not set (GOMEMLIMIT, or other code) or limit is not
// positive: then it returns nil, and nil's methods do nothing. The last
// holder to let go restores "no limit", unless someone else changed it.
//
// Why a default at all: with Go's default GOGC the heap grows to about twice
// the live heap before a collection, and the write buffers are most of the
// live heap while ingest runs. The buffers hold no pointers
// (memtable_codec.go), so a collection forced by the limit marks little, and
// the limit bounds the peak near the live heap instead (measured in
// docs/benchmarks/ingest.md).
func holdMemoryLimit(limit int64) *memLimitHold {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	if len(memLimit.holders) == 0 {
		if debug.SetMemoryLimit(-1) != math.MaxInt64 {
			return nil // someone else's limit: leave it
		}
		memLimit.holders = map[*memLimitHold]int64{}
		memLimit.set = math.MaxInt64
	}
	h := &memLimitHold{base: limit}
	memLimit.holders[h] = limit
	applyMemoryLimitLocked()
	return h
}

// update raises the limit the holder asks for while its buffers hold more
// than two seals' worth (seals behind, up to --max-buffer-bytes), so that a
// live heap above the base limit does not make the collector run without
// pause; it falls back to the base as they drain.
func (h *memLimitHold) update(bufferBytes int64) {
	if h == nil {
		return
	}
	want := max(h.base, bufferBytes+memoryLimitHeadroom)
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	if _, ok := memLimit.holders[h]; !ok || memLimit.holders[h] == want {
		return
	}
	memLimit.holders[h] = want
	applyMemoryLimitLocked()
}

// release lets go of the hold (once).
func (h *memLimitHold) release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		memLimit.mu.Lock()
		defer memLimit.mu.Unlock()
		delete(memLimit.holders, h)
		applyMemoryLimitLocked()
	})
}

// applyMemoryLimitLocked sets the largest limit the holders ask for (none
// without holders), unless the limit in force is not the one the engines
// set: a merge holding it lower (it restores the engines' limit when it
// ends), or an operator's.
func applyMemoryLimitLocked() {
	want := int64(math.MaxInt64)
	if len(memLimit.holders) > 0 {
		want = 0
		for _, l := range memLimit.holders {
			want = max(want, l)
		}
		want += memLimit.extra
	}
	if debug.SetMemoryLimit(-1) != memLimit.set {
		return
	}
	debug.SetMemoryLimit(want)
	memLimit.set = want
}
