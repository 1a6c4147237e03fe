package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestBlockRowsStartingIn: for random windows (and the unbounded ones),
// the rows read through BlockRowsStartingIn are exactly the block's spans
// starting in the window, in order; a damaged start column is a
// *CorruptionError.
func TestBlockRowsStartingIn(t *testing.T) {
	corpus := genCorpus(53, 2, 150, 60)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	rnd := rand.New(rand.NewPCG(5, 6))
	for i := range r.Blocks() {
		all, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Blocks()[i]
		width := m.MaxStart - m.MinStart + 1
		windows := [][2]uint64{{0, 0}, {m.MinStart, 0}, {0, m.MinStart}, {m.MaxStart + 1, 0}}
		for range 8 {
			lo := m.MinStart - width/4 + rnd.Uint64N(width+width/2)
			windows = append(windows, [2]uint64{lo, lo + rnd.Uint64N(width)})
		}
		for _, w := range windows {
			ranges, err := r.BlockRowsStartingIn(i, w[0], w[1])
			if err != nil {
				t.Fatalf("block %d window %v: %v", i, w, err)
			}
			got, err := r.ReadBlockRows(i, ranges)
			if err != nil {
				t.Fatalf("block %d window %v: ReadBlockRows: %v", i, w, err)
			}
			var want []string
			for j := range all {
				if s := all[j].StartTimeUnixNano; s >= w[0] && (w[1] == 0 || s < w[1]) {
					want = append(want, fmt.Sprint(all[j].SpanID, s))
				}
			}
			if len(got) != len(want) {
				t.Fatalf("block %d window %v: %d rows, want %d", i, w, len(got), len(want))
			}
			for j := range got {
				if g := fmt.Sprint(got[j].SpanID, got[j].StartTimeUnixNano); g != want[j] {
					t.Fatalf("block %d window %v: row %d is %s, want %s", i, w, j, g, want[j])
				}
			}
		}
	}
	if _, err := r.BlockRowsStartingIn(len(r.Blocks()), 0, 0); err == nil {
		t.Fatal("a block out of range was read")
	}
	// Flip a byte of block 1's start column.
	b := &r.blocks[1]
	var at int64 = -1
	for _, c := range b.Cols {
		if c.ID == colStart {
			at = int64(b.Offset+c.Offset) + int64(c.Length)/2
		}
	}
	data, err := os.ReadFile(path)
	if err != nil || at < 0 {
		t.Fatal(err, at)
	}
	data[at] ^= 0x40
	bad := filepath.Join(t.TempDir(), "bad.seg")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rb := openT(t, bad)
	var ce *CorruptionError
	if _, err := rb.BlockRowsStartingIn(1, 0, 0); !errors.As(err, &ce) {
		t.Fatalf("damaged start column: %v, want a *CorruptionError", err)
	}
	if _, err := rb.BlockRowsStartingIn(0, 0, 0); err != nil {
		t.Fatalf("undamaged block 0: %v", err)
	}
}
