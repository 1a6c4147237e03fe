package segment

import (
	"math/rand/v2"
	"testing"
)

// TestFuseMapsEveryKeyToItsValue checks the property the token map and the
// block filters rely on: every key of the set decodes to exactly its value,
// for set sizes from empty to large and slot widths from 1 to 32 bits, and
// keys outside the set decode to valid values at about the designed rate.
func TestFuseMapsEveryKeyToItsValue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 31, 100, 1000, 15000, 70000} {
		for _, w := range []uint32{1, 7, 8, 13, 18, 32} {
			keys := make([]uint64, n)
			vals := make([]uint32, n)
			seen := map[uint64]bool{}
			for i := range keys {
				k := r.Uint64()
				for seen[k] {
					k = r.Uint64()
				}
				seen[k] = true
				keys[i] = k
				vals[i] = uint32(r.Uint64()) & uint32(1<<w-1)
			}
			s, pages, err := buildFuse(keys, vals, w)
			if err != nil {
				t.Fatalf("n=%d w=%d: %v", n, w, err)
			}
			if len(pages) != s.pages()*fusePageBytes {
				t.Fatalf("n=%d w=%d: %d page bytes for %d pages", n, w, len(pages), s.pages())
			}
			for i, k := range keys {
				if got := fuseLookup(&s, pages, k); got != vals[i] {
					t.Fatalf("n=%d w=%d: key %d decodes to %d, want %d", n, w, i, got, vals[i])
				}
			}
			if n >= 1000 && w == 7 {
				// Outside keys decode to 0 (a filter's "present") about 1/128 of the time.
				hits, tries := 0, 200000
				for j := 0; j < tries; j++ {
					if fuseLookup(&s, pages, r.Uint64()) == 0 {
						hits++
					}
				}
				if rate := float64(hits) / float64(tries); rate < 0.5/128 || rate > 2.0/128 {
					t.Fatalf("n=%d w=7: false-positive rate %.4f, want about %.4f", n, rate, 1.0/128)
				}
			}
			if n > 1000 {
				if bpk := float64(len(pages)*8) / float64(n) / float64(w); bpk > 1.35 {
					t.Fatalf("n=%d w=%d: %.2f slot bits per key bit, want <= 1.35", n, w, bpk)
				}
			}
		}
	}
}

func TestFuseRefusesDuplicateKeys(t *testing.T) {
	if _, _, err := buildFuse([]uint64{5, 9, 5}, nil, 8); err == nil {
		t.Fatal("duplicate keys built a map")
	}
}
