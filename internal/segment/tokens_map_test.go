package segment

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"
)

// tokenPlace is where a token occurs in a written segment.
type tokenPlace struct{ block, row int }

// placesOf reads every block and lists, per token, the rows holding it.
func placesOf(t *testing.T, r *Reader) map[uint64][]tokenPlace {
	t.Helper()
	places := map[uint64][]tokenPlace{}
	for b := range r.Blocks() {
		spans, err := r.ReadBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		for row := range spans {
			for _, h := range spanTokens(StandInTokens, &spans[row]) {
				places[h] = append(places[h], tokenPlace{b, row})
			}
		}
	}
	return places
}

// TestTokenMapLocatesEveryToken: for every token of a Zipf-worded corpus
// the token map never answers "absent", always names a place holding all
// the token's rows, and names the exact row, 64-row group or block
// whenever the token lies in one: the promise a rare-word query relies on
// to read one row and still miss nothing.
func TestTokenMapLocatesEveryToken(t *testing.T) {
	path, _ := writeCorpus(t, textCorpus(71, 6000, 20000), WriterOptions{BlockSpans: 500, ContentTokens: StandInTokens})
	r := openT(t, path)
	if !r.grp.isMap {
		t.Fatal("segment written without a token map")
	}
	places := placesOf(t, r)
	single, grouped, blocked := 0, 0, 0
	for h, ps := range places {
		loc, err := r.LocateTokens([]uint64{h})
		if err != nil {
			t.Fatal(err)
		}
		if loc.Absent {
			t.Fatalf("token %x of %d rows located as absent", h, len(ps))
		}
		sameRow, sameBlock, sameGroup := true, true, true
		for _, p := range ps {
			sameRow = sameRow && p == ps[0]
			sameBlock = sameBlock && p.block == ps[0].block
			sameGroup = sameGroup && p.row/groupRows == ps[0].row/groupRows
		}
		switch {
		case !sameBlock:
			if loc.Block != -1 {
				t.Fatalf("token in several blocks located in block %d", loc.Block)
			}
			continue
		case loc.Block != ps[0].block:
			t.Fatalf("token of block %d located in block %d", ps[0].block, loc.Block)
		case sameRow:
			if loc.Rows != (RowRange{ps[0].row, ps[0].row + 1}) {
				t.Fatalf("token of row %d located at rows %v", ps[0].row, loc.Rows)
			}
			single++
		case sameGroup:
			g := ps[0].row / groupRows * groupRows
			if loc.Rows.Lo != g || loc.Rows.Hi != min(g+groupRows, r.blocks[loc.Block].Meta.Spans) {
				t.Fatalf("token of group at row %d located at rows %v", g, loc.Rows)
			}
			grouped++
		default:
			if loc.Rows != (RowRange{0, r.blocks[loc.Block].Meta.Spans}) {
				t.Fatalf("token of several groups of block %d located at rows %v", loc.Block, loc.Rows)
			}
			blocked++
		}
	}
	if single < 100 || grouped < 10 || blocked < 10 {
		t.Fatalf("corpus too uniform to test: %d tokens in one row, %d in one group, %d in one block", single, grouped, blocked)
	}
	t.Logf("%d tokens: %d in one row, %d in one group, %d in one block", len(places), single, grouped, blocked)

	// Two words: located together only where both are; apart is absent.
	var one []uint64 // tokens in one group, of different blocks
	seen := map[int]bool{}
	for h, ps := range places {
		if len(ps) == 1 && !seen[ps[0].block] {
			seen[ps[0].block] = true
			one = append(one, h)
		}
	}
	if len(one) < 2 {
		t.Fatal("need two single-row tokens in different blocks")
	}
	if loc, err := r.LocateTokens(one[:2]); err != nil || !loc.Absent {
		t.Fatalf("two words in different blocks: %+v, %v; want absent", loc, err)
	}

	// Absent tokens: the map alone (past the summary) passes few.
	rng := rand.New(rand.NewPCG(7, 8))
	pass := 0
	const probes = 50000
	for i := 0; i < probes; i++ {
		code, err := r.tokenMapCode(rng.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := r.decodeTokenCode(code); ok || code == 0 {
			pass++
		}
	}
	if fp := float64(pass) / probes; fp > 1.0/256 {
		t.Fatalf("token map passes %.4f of absent tokens, want <= %.4f", fp, 1.0/256)
	}
}

// TestTokenMapDamage: a flipped bit in a token map page is a
// CorruptionError at that page, and the lookup answers "anywhere" (the
// caller then asks the block filters), never "absent".
func TestTokenMapDamage(t *testing.T) {
	path, _ := writeCorpus(t, textCorpus(72, 2000, 5000), WriterOptions{BlockSpans: 500, ContentTokens: StandInTokens})
	r := openT(t, path)
	spans, err := r.ReadBlock(1)
	if err != nil {
		t.Fatal(err)
	}
	tok := spanTokens(StandInTokens, &spans[3])[:1]
	_, pos := r.grp.shape.positions(tok[0])
	pg, _ := r.grp.shape.slotAt(pos[2])
	at := r.grp.diskOff + int64(pg)*diskPageStride + 5
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0x10
	bad := t.TempDir() + "/bad.rseg"
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rb := openT(t, bad)
	loc, err := rb.LocateTokens(tok)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != at-5 || loc.Absent || loc.Block != -1 {
		t.Fatalf("damaged page: %+v, %v; want anywhere and a CorruptionError at %d", loc, err, at-5)
	}
}
