// Package parallel splits one large piece of work (a query's series, an
// answer's encoding) across the CPUs, so that a big query on an idle server
// answers sooner. Small work runs inline: starting goroutines costs more
// than it saves below a few thousand items.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// MinWork is the work (in the caller's unit, about one sample or point)
// below which Parts runs inline.
const MinWork = 16 << 10

// maxParts caps the goroutines of one call: beyond a few, one query would
// take every CPU from the others.
const maxParts = 4

// cpus, when positive, caps the parts further (SetCPUs).
var cpus atomic.Int64

// SetCPUs caps the goroutines of one call at n CPUs (n <= 0: GOMAXPROCS
// alone). A process that runs with more Ps than CPUs (rastro serve, see
// cli/serve.go) sets it: more parts than CPUs would only take turns.
func SetCPUs(n int) { cpus.Store(int64(n)) }

// Parts calls fn on contiguous ranges [lo, hi) that cover [0, n), at the
// same time on up to min(GOMAXPROCS, SetCPUs's cap, 4) goroutines when
// work >= MinWork, else once, inline, with (0, n). fn must be safe to run
// concurrently on disjoint ranges. Parts returns when every call has
// returned.
func Parts(n, work int, fn func(lo, hi int)) {
	p := min(runtime.GOMAXPROCS(0), maxParts, n)
	if c := int(cpus.Load()); c > 0 {
		p = min(p, c)
	}
	if p < 2 || work < MinWork {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < p; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i*n/p, (i+1)*n/p)
		}()
	}
	fn(0, n/p)
	wg.Wait()
}
