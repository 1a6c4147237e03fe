package parallel

import (
	"runtime"
	"sync"
	"testing"
)

// TestPartsCoversEachIndexOnce checks that the ranges cover [0, n) exactly
// once, inline for small work and split for large work, for n smaller and
// larger than the number of parts.
func TestPartsCoversEachIndexOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, n := range []int{0, 1, 2, 3, 5, 1000} {
		for _, work := range []int{0, MinWork} {
			var mu sync.Mutex
			seen := make([]int, n)
			calls := 0
			Parts(n, work, func(lo, hi int) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d work=%d: index %d covered %d times", n, work, i, c)
				}
			}
			want := 1
			if work >= MinWork && n >= 2 {
				want = min(4, n)
			}
			if calls != want {
				t.Fatalf("n=%d work=%d: %d calls, want %d", n, work, calls, want)
			}
		}
	}
}

// TestPartsCappedAtCPUs: a process with more Ps than CPUs (rastro serve)
// splits work into no more parts than its CPUs, and still covers it.
func TestPartsCappedAtCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(5))
	defer SetCPUs(0)
	for _, c := range []int{1, 2, 3} {
		SetCPUs(c)
		var mu sync.Mutex
		calls, covered := 0, 0
		Parts(1000, MinWork, func(lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			covered += hi - lo
		})
		if calls != c || covered != 1000 {
			t.Fatalf("SetCPUs(%d) with 5 Ps: %d calls covering %d indexes, want %d covering 1000", c, calls, covered, c)
		}
	}
}
