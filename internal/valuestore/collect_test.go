package valuestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCollectAgainstModel runs random Puts, Collects with random live sets
// and restarts, and compares the store with a map. Before a restart a dead
// value must be gone at once; with RewriteLiveFraction 1 it must stay gone
// after a restart too (its bytes were physically removed).
func TestCollectAgainstModel(t *testing.T) {
	for _, frac := range []float64{0.5, 1} {
		t.Run(fmt.Sprintf("rewrite-below-%g", frac), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(frac*10), 3))
			pool := make([][]byte, 120)
			for i := range pool {
				pool[i] = text(uint64(i), 100+rng.IntN(3000))
			}
			fs := newMemFS()
			opts := Options{Dir: "/vs", PackBytes: 8 << 10, RewriteLiveFraction: frac, FS: fs}
			s := mustOpen(t, opts)
			stored := map[int]bool{} // model: values the store must hold
			dead := map[int]bool{}   // collected and not put again
			for round := range 60 {
				for range rng.IntN(25) {
					id := rng.IntN(len(pool))
					_, fresh, err := s.Put(pool[id])
					if err != nil {
						t.Fatal(err)
					}
					if fresh == stored[id] {
						t.Fatalf("round %d: put %d fresh=%v but model says stored=%v", round, id, fresh, stored[id])
					}
					stored[id] = true
					delete(dead, id)
				}
				switch rng.IntN(4) {
				case 0:
					live := map[int]bool{}
					for id := range stored {
						if rng.IntN(3) > 0 {
							live[id] = true
						}
					}
					st, err := s.Collect(func(yield func(Ref) bool) {
						for id := range live {
							if !yield(RefOf(pool[id])) {
								return
							}
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					if st.Live != len(live) || st.Deleted != len(stored)-len(live) || st.Missing != 0 {
						t.Fatalf("round %d: stats %+v, model live %d of %d", round, st, len(live), len(stored))
					}
					for id := range stored {
						if !live[id] {
							delete(stored, id)
							dead[id] = true
						}
					}
				case 1:
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = mustOpen(t, opts)
					if c := s.Corruptions(); len(c) != 0 {
						t.Fatal(c)
					}
				}
				for id := range stored {
					mustGet(t, s, RefOf(pool[id]), pool[id])
				}
				for id := range dead {
					if s.Has(RefOf(pool[id])) {
						// Dead values may come back after a restart from a pack
						// that was kept, unless every pack with a dead value is
						// rewritten.
						if frac == 1 {
							t.Fatalf("round %d: dead value %d is readable", round, id)
						}
						stored[id] = true
						delete(dead, id)
					}
				}
				if st := s.Stats(); st.Values != len(stored) {
					t.Fatalf("round %d: store holds %d values, model %d", round, st.Values, len(stored))
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCollectBytesReclaimed: after the live set shrinks to nothing, the packs
// are gone from disk; refs yielded but not stored are counted as missing.
func TestCollectBytesReclaimed(t *testing.T) {
	fs := newMemFS()
	// A record a value, so that the sizes below are those of the values.
	s := mustOpen(t, Options{Dir: "/vs", PackBytes: 4 << 10, FrameBytes: 1, FS: fs})
	defer s.Close()
	var refs []Ref
	for i := range 50 {
		ref, _, err := s.Put(randomBytes(uint64(i), 1500))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	keep := refs[:5]
	st, err := s.Collect(func(yield func(Ref) bool) {
		for _, r := range append(keep, RefOf([]byte("dangling"))) {
			yield(r)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Missing != 1 || st.Deleted != 45 || st.Live != 5 {
		t.Fatalf("collect stats %+v", st)
	}
	if n := len(fs.names(packSuffix)); n > 2 {
		t.Fatalf("%d pack files left for 5 live values of 1.5 KiB", n)
	}
	if ds := s.Stats().DiskBytes; ds > 2*(16+3*1552)+1024 { // two packs of three records at most (v2 headers are shorter)
		t.Fatalf("disk bytes %d after collecting 45 of 50 values", ds)
	}
	for i, r := range refs {
		_, err := s.Get(r)
		if i < 5 && err != nil {
			t.Fatalf("live value %d: %v", i, err)
		}
		if i >= 5 && !errors.Is(err, ErrNotFound) {
			t.Fatalf("dead value %d: %v, want ErrNotFound", i, err)
		}
	}
}
