package logstore

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// The word index lists, for every word of a block, exactly the records
// that hold it (a superset only when two words share a key), and a search
// for several words gets the records that hold all of them.
func TestWordIndexListsTheRecordsOfEveryWord(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = BlockRecords
	// Words 0..299 as random hashes; words 300 and 301 share word 0's key.
	hashes := make([]uint64, 302)
	for i := range 300 {
		hashes[i] = r.Uint64()
	}
	hashes[300] = hashes[0]&^0xffffffff | 1
	hashes[301] = hashes[0]&^0xffffffff | 2
	has := make([][]int, n) // record -> words
	var pairs []uint64
	for rec := range n {
		for range 1 + r.IntN(12) {
			w := r.IntN(len(hashes))
			if !slices.Contains(has[rec], w) {
				has[rec] = append(has[rec], w)
				pairs = append(pairs, uint64(wordKey(hashes[w]))<<16|uint64(rec))
			}
		}
	}
	ix, _ := wordIndex(nil, pairs, nil)
	want := func(words ...int) []int {
		var out []int
		for rec := range n {
			all := true
			for _, w := range words {
				// Words sharing a key are indistinguishable.
				if !slices.ContainsFunc(has[rec], func(x int) bool { return wordKey(hashes[x]) == wordKey(hashes[w]) }) {
					all = false
				}
			}
			if all {
				out = append(out, rec)
			}
		}
		return out
	}
	for _, words := range [][]int{{1}, {2}, {299}, {0}, {300}, {1, 2}, {0, 5, 7}, {3, 3}} {
		q := make([]uint64, len(words))
		for i, w := range words {
			q[i] = hashes[w]
		}
		got, err := lookupWords(ix, q, n)
		if err != nil {
			t.Fatal(err)
		}
		if w := want(words...); !slices.Equal(got, w) {
			t.Errorf("words %v: records %v, want %v", words, got, w)
		}
	}
	if got, err := lookupWords(ix, []uint64{0x1234}, n); err != nil || got != nil {
		t.Errorf("a word in no record: %v, %v", got, err)
	}
	if got, err := lookupWords(first(wordIndex(nil, nil, nil)), []uint64{hashes[1]}, n); err != nil || got != nil {
		t.Errorf("an empty index: %v, %v", got, err)
	}
}

func first(b []byte, _ int) []byte { return b }

// A damaged word index is reported, never a crash or a wrong record index.
func TestDamagedWordIndexIsAnError(t *testing.T) {
	pairs := []uint64{7<<16 | 1, 7<<16 | 3, 9<<16 | 2}
	ix, _ := wordIndex(nil, pairs, nil)
	h := uint64(7) << 32
	for name, bad := range map[string][]byte{
		"truncated":           ix[:len(ix)-1],
		"empty":               nil,
		"huge word count":     append([]byte{0xff, 0xff, 0xff, 0x0f}, ix[1:]...),
		"extra bytes":         append(slices.Clone(ix), 0, 0),
		"record out of range": func() []byte { b := slices.Clone(ix); b[len(b)-6] = 0xff; return b }(),
	} {
		if _, err := lookupWords(bad, []uint64{h}, 4); !errors.Is(err, errWordIndex) {
			t.Errorf("%s: %v, want errWordIndex", name, err)
		}
	}
}

// FuzzLookupWords: any bytes as a word index give an error or record
// indexes within the block, ascending, never a panic.
func FuzzLookupWords(f *testing.F) {
	ix, _ := wordIndex(nil, []uint64{7<<16 | 1, 7<<16 | 3, 9<<16 | 2}, nil)
	f.Add(ix, uint64(7)<<32, 4)
	f.Add([]byte{}, uint64(0), 1)
	f.Fuzz(func(t *testing.T, ix []byte, h uint64, n int) {
		n = 1 + (n&0x7fffffff)%BlockRecords
		got, err := lookupWords(ix, []uint64{h}, n)
		if err != nil {
			return
		}
		for k, i := range got {
			if i < 0 || i >= n || (k > 0 && got[k-1] >= i) {
				t.Fatalf("records %v for a block of %d", got, n)
			}
		}
	})
}
