package valuestore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// text returns n bytes of word-like, compressible text seeded by seed.
func text(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	words := []string{"the", "model", "refund", "tool", "user", "assistant", "système", "запрос", "日本語", "🙂", "order", "status", "please"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func mustGet(t testing.TB, s *Store, ref Ref, want []byte) {
	t.Helper()
	got, err := s.Get(ref)
	if err != nil {
		t.Fatalf("get %s: %v", ref, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %s: %d bytes differ from the %d put", ref, len(got), len(want))
	}
}

func TestRoundTripAndRestart(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{0, 1, 63, 64, 65, 1000, 1024, 4096, 100_000, 1 << 20, 16 << 20}
	var vals [][]byte
	for i, n := range sizes {
		vals = append(vals, text(uint64(i), n), randomBytes(uint64(i), n))
	}
	s := mustOpen(t, Options{Dir: dir, PackBytes: 1 << 20})
	refs := make([]Ref, len(vals))
	for i, v := range vals {
		ref, fresh, err := s.Put(v)
		if err != nil {
			t.Fatal(err)
		}
		if ref != RefOf(v) {
			t.Fatalf("ref of value %d is not its SHA-256", i)
		}
		if !fresh && len(v) > 0 {
			t.Fatalf("value %d (%d bytes) reported as already stored", i, len(v))
		}
		refs[i] = ref
		mustGet(t, s, ref, v) // readable before Sync
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Values != len(vals)-1 { // the two empty values are one
		t.Fatalf("Values = %d, want %d", st.Values, len(vals)-1)
	}
	if st.Packs < 2 {
		t.Fatalf("Packs = %d: 1 MiB packs did not rotate", st.Packs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(refs[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}

	s = mustOpen(t, Options{Dir: dir, PackBytes: 1 << 20})
	defer s.Close()
	if c := s.Corruptions(); len(c) != 0 {
		t.Fatalf("clean reopen reported %v", c)
	}
	if os := s.OpenStats(); os.RecordsScanned != 0 {
		t.Fatalf("reopen after Close scanned %d records; indexes should cover every pack", os.RecordsScanned)
	}
	for i, v := range vals {
		mustGet(t, s, refs[i], v)
	}
	if _, err := s.Get(RefOf([]byte("never stored"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an unknown ref: %v, want ErrNotFound", err)
	}
	if s.Has(RefOf([]byte("never stored"))) || !s.Has(refs[3]) {
		t.Fatal("Has disagrees with what was stored")
	}
	// Appends continue after a restart and survive another one.
	extra := text(99, 5000)
	ref, fresh, err := s.Put(extra)
	if err != nil || !fresh {
		t.Fatalf("put after reopen: fresh=%v err=%v", fresh, err)
	}
	if _, fresh, _ := s.Put(vals[5]); fresh {
		t.Fatal("value stored before the restart was stored again")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, Options{Dir: dir, PackBytes: 1 << 20})
	mustGet(t, s2, ref, extra)
	mustGet(t, s2, refs[7], vals[7])
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDedup(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	v := text(1, 8<<10)
	var first Ref
	for i := range 10_000 {
		ref, fresh, err := s.Put(v)
		if err != nil {
			t.Fatal(err)
		}
		if fresh != (i == 0) {
			t.Fatalf("put %d: fresh = %v", i, fresh)
		}
		if i == 0 {
			first = ref
		} else if ref != first {
			t.Fatal("same value, different refs")
		}
	}
	st := s.Stats()
	if st.Values != 1 || st.DedupHits != 9_999 {
		t.Fatalf("Values=%d DedupHits=%d, want 1 and 9999", st.Values, st.DedupHits)
	}
	if st.DiskBytes > int64(len(v))+512 {
		t.Fatalf("10,000 copies of an %d-byte value take %d bytes on disk", len(v), st.DiskBytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if _, fresh, err := s.Put(v); err != nil || fresh {
		t.Fatalf("put after restart: fresh=%v err=%v; dedup must survive restart", fresh, err)
	}
	if st := s.Stats(); st.Values != 1 {
		t.Fatalf("Values after restart = %d", st.Values)
	}
}

func TestConcurrentPutGetCollect(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), PackBytes: 64 << 10})
	defer s.Close()
	var (
		regMu sync.Mutex
		reg   = map[Ref][]byte{} // registered before Put: the "published" set
	)
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				v := text(uint64(i%150), 200+i%7*300) // overlapping values between workers
				regMu.Lock()
				reg[RefOf(v)] = v
				regMu.Unlock()
				ref, _, err := s.Put(v)
				if err != nil {
					errc <- err
					return
				}
				got, err := s.Get(ref)
				if err != nil || !bytes.Equal(got, v) {
					errc <- fmt.Errorf("worker %d get %d: %v", w, i, err)
					return
				}
				if i%50 == 0 {
					if err := s.Sync(); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			_, err := s.Collect(func(yield func(Ref) bool) {
				regMu.Lock()
				refs := make([]Ref, 0, len(reg))
				for r := range reg {
					refs = append(refs, r)
				}
				regMu.Unlock()
				for _, r := range refs {
					if !yield(r) {
						return
					}
				}
			})
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for r, v := range reg {
		mustGet(t, s, r, v)
	}
}
