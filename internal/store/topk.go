package store

import "slices"

// FirstPositions returns the positions of the first k of n items in the
// strict order before, sorted: a bounded heap, so that a page of groups or
// sessions does not sort them all.
func FirstPositions(n, k int, before func(i, j int32) bool) []int32 {
	k = min(k, n)
	if k <= 0 {
		return nil
	}
	// h is a max-heap (by before) of the k best positions seen.
	h := make([]int32, 0, k)
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && before(h[c], h[c+1]) {
				c++
			}
			if !before(h[i], h[c]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for p := range int32(n) {
		switch {
		case len(h) < k:
			h = append(h, p)
			for i := len(h) - 1; i > 0 && before(h[(i-1)/2], h[i]); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
		case before(p, h[0]):
			h[0] = p
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int32) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	return h
}
