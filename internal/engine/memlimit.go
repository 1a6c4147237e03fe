package engine

import (
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"sync"

	"github.com/rastro-dev/rastro/internal/process"
)

// The default soft memory limit is the write buffers plus a headroom for
// the rest of the heap: the seal's working set, requests being decoded,
// segment indexes, caches, and the garbage the collector lets accumulate
// between cycles. The headroom follows the rest of the live heap, measured
// after each collection: that heap plus as much again for garbage (Go's
// own pacing, GOGC=100, for the part of the heap that is not the buffers),
// at least minMemoryHeadroom in all and at most maxMemoryGarbage of
// garbage.
//
// Why it follows the heap: a fixed 96 MiB bounded sustained ingest into a
// fresh store at about 236 MiB, but once the query caches of a 1M-span store
// filled the heap the collector ran almost without pause (queries 2-3x
// slower); a fixed 256 MiB did not, and let sustained ingest peak at 367 MiB
// (docs/operations.md, docs/benchmarks/ingest.md). A fixed headroom below
// the rest of the live heap (a large store's indexes and a full block
// cache) would leave the collector running without pause too.
const (
	minMemoryHeadroom = 96 << 20
	maxMemoryGarbage  = 128 << 20
)

// memoryHeadroom is the headroom for other bytes of live heap besides the
// write buffers.
func memoryHeadroom(other int64) int64 {
	other = max(other, 0)
	return max(other+min(other, maxMemoryGarbage), minMemoryHeadroom)
}

// memLimit is the process's one soft memory limit as the open engines hold
// it: each holder asks for a limit, and the largest is set, as long as
// nobody else changed the limit since the engines last set it.
var memLimit struct {
	mu      sync.Mutex
	holders map[*memLimitHold]struct{}
	set     int64 // the limit the engines last set
	// extra is memory other stores of the process hold (the log store's
	// write buffers, ReserveMemory), added to the holders' limit.
	extra int64
	// headroom is the current memoryHeadroom, measured after each
	// collection while any engine holds the limit (stopHook stops that).
	headroom int64
	// others are the last collections' measures of the other bytes
	// (a ring, next is the slot to write).
	others   [otherMeasures]int64
	next     int
	stopHook func()
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
	// fixed is a limit asked for outright (Options.MemoryLimit > 0), 0 for
	// the default; room is what the default leaves the buffers at least
	// (two seals' worth: the active buffer and one being sealed).
	fixed, room int64
	// buffered reports the bytes the engine's write buffers hold now.
	buffered func() int64
	once     sync.Once
}

// want is the limit the holder asks for while its buffers hold buffered
// bytes.
func (h *memLimitHold) want(buffered, headroom int64) int64 {
	if h.fixed > 0 {
		return max(h.fixed, buffered+headroom)
	}
	return max(h.room, buffered) + headroom
}

// holdMemoryLimit holds the process's soft memory limit while the engine is
// open, unless the process already has a limit that the engines did not set
// (GOMEMLIMIT, or other code) or fixed is negative: then it returns nil, and
// nil's methods do nothing. fixed > 0 asks for that limit (raised while the
// buffers and the headroom need more); 0 for the buffers (at least room)
// plus the headroom. The last holder to let go restores "no limit", unless
// someone else changed it.
//
// Why a default at all: with Go's default GOGC the heap grows to about twice
// the live heap before a collection, and the write buffers are most of the
// live heap while ingest runs. The buffers hold no pointers
// (memtable_codec.go), so a collection forced by the limit marks little, and
// the limit bounds the peak near the live heap instead (measured in
// docs/benchmarks/ingest.md).
func holdMemoryLimit(fixed, room int64, buffered func() int64) *memLimitHold {
	if fixed < 0 || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	if len(memLimit.holders) == 0 {
		if process.BaseMemoryLimit() != math.MaxInt64 {
			return nil // someone else's limit: leave it
		}
		memLimit.holders = map[*memLimitHold]struct{}{}
		memLimit.set = math.MaxInt64
		// Until a collection has measured the heap, a wide headroom: a
		// store that opens with large indexes must not start with the
		// collector running without pause.
		memLimit.headroom = 2 * maxMemoryGarbage
		for i := range memLimit.others {
			memLimit.others[i] = math.MaxInt64
		}
		memLimit.stopHook = process.AfterEachGC(measureHeadroom)
	}
	h := &memLimitHold{fixed: fixed, room: room, buffered: buffered}
	memLimit.holders[h] = struct{}{}
	applyMemoryLimitLocked()
	return h
}

// update sets the limit again for the bytes the buffers hold now: while
// seals are behind and they hold more than room, the limit rises with them
// so that a live heap above it does not make the collector run without
// pause; it falls back as they drain. The engine's seal loop calls it every
// second and on every kick; collections update it too.
func (h *memLimitHold) update() {
	if h == nil {
		return
	}
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	if _, ok := memLimit.holders[h]; ok {
		applyMemoryLimitLocked()
	}
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
		if len(memLimit.holders) == 0 && memLimit.stopHook != nil {
			memLimit.stopHook()
			memLimit.stopHook = nil
		}
		applyMemoryLimitLocked()
	})
}

// otherMeasures is how many collections' measures of the other bytes the
// headroom follows (their smallest).
const otherMeasures = 4

// liveHeap is the runtime metric measureHeadroom reads.
const liveHeap = "/gc/heap/live:bytes"

// measureHeadroom runs after each collection: the live heap the collection
// left, less the write buffers and the other stores' reserved bytes, sets
// the headroom, and the limit is set again. The smallest of the last
// otherMeasures measures counts: a seal holds its decoded buffer and the
// segment it builds for a second or so (under sustained ingest, jumps of
// 55-60 MiB over two collections, every seal), and a limit that doubled
// those for the next cycle would let the peak grow by as much again; a real
// rise (caches filling) counts a few collections later, and until then the
// collector runs more often, as it does while a seal lasts.
func measureHeadroom() {
	s := []metrics.Sample{{Name: liveHeap}}
	metrics.Read(s)
	live := int64(s[0].Value.Uint64())
	memLimit.mu.Lock()
	defer memLimit.mu.Unlock()
	if len(memLimit.holders) == 0 {
		return
	}
	other := live - memLimit.extra
	for h := range memLimit.holders {
		other -= h.buffered()
	}
	memLimit.others[memLimit.next] = other
	memLimit.next = (memLimit.next + 1) % otherMeasures
	memLimit.headroom = memoryHeadroom(slices.Min(memLimit.others[:]))
	applyMemoryLimitLocked()
}

// applyMemoryLimitLocked sets the largest limit the holders ask for (none
// without holders) as the process's base limit, unless that is no longer
// the one the engines set (an operator's). While merges hold the process's
// memory guard, the guard applies it: at once while ingest is busy, as the
// ceiling of its own lower limit while ingest is idle.
func applyMemoryLimitLocked() {
	want := int64(math.MaxInt64)
	if len(memLimit.holders) > 0 {
		want = 0
		for h := range memLimit.holders {
			want = max(want, h.want(h.buffered(), memLimit.headroom))
		}
		want += memLimit.extra
	}
	if process.CompareAndSwapBaseMemoryLimit(memLimit.set, want) {
		memLimit.set = want
	}
}
