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
