package segment

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/rastro-dev/rastro/internal/model"
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

// wantPlaces is what the token map promises for a token held by the rows
// ps (in segment order, a row possibly listed twice), computed apart from
// the writer: per block, its one row, or its one 64-row group, or (three
// rows or fewer) those rows with the rows of one group made that group,
// or the whole block; nil (anywhere) when that makes more than
// maxTokenPlaces places.
func wantPlaces(r *Reader, ps []tokenPlace) []TokenPlace {
	byBlock := map[int][]int{}
	var blocks []int
	for _, p := range ps {
		rows := byBlock[p.block]
		if len(rows) == 0 {
			blocks = append(blocks, p.block)
		}
		if !slices.Contains(rows, p.row) {
			byBlock[p.block] = append(rows, p.row)
		}
	}
	group := func(b, row int) RowRange {
		g := row / groupRows * groupRows
		return RowRange{g, min(g+groupRows, r.blocks[b].Meta.Spans)}
	}
	var out []TokenPlace
	for _, b := range blocks {
		rows := byBlock[b]
		first, last := rows[0], rows[len(rows)-1]
		switch {
		case len(rows) == 1:
			out = append(out, TokenPlace{b, RowRange{first, first + 1}})
		case first/groupRows == last/groupRows:
			out = append(out, TokenPlace{b, group(b, first)})
		case len(rows) > 3:
			out = append(out, TokenPlace{b, RowRange{0, r.blocks[b].Meta.Spans}})
		default:
			for i, row := range rows {
				switch {
				case i > 0 && row/groupRows == rows[i-1]/groupRows:
					// in the previous row's group
				case i+1 < len(rows) && row/groupRows == rows[i+1]/groupRows:
					out = append(out, TokenPlace{b, group(b, row)})
				default:
					out = append(out, TokenPlace{b, RowRange{row, row + 1}})
				}
			}
		}
	}
	if len(out) > maxTokenPlaces {
		return nil
	}
	return out
}

// TestTokenMapLocatesEveryToken: for every token of a Zipf-worded corpus
// the token map never answers "absent", and names exactly the places
// wantPlaces gives: its row, its 64-row group, its block, or the few rows
// of a token in a few spans of different blocks or groups. That is the
// promise a rare word (or a phrase whose words also lie apart in a decoy
// span) relies on to read a few rows and still miss nothing.
func TestTokenMapLocatesEveryToken(t *testing.T) {
	path, _ := writeCorpus(t, textCorpus(71, 6000, 20000), WriterOptions{BlockSpans: 500, ContentTokens: StandInTokens})
	r := openT(t, path)
	if !r.grp.isMap || r.grp.places != maxTokenPlaces {
		t.Fatal("segment written without a token map with places")
	}
	places := placesOf(t, r)
	single, grouped, blocked, listed, anywhere := 0, 0, 0, 0, 0
	for h, ps := range places {
		loc, err := r.LocateTokens([]uint64{h})
		if err != nil {
			t.Fatal(err)
		}
		if loc.Absent {
			t.Fatalf("token %x of %d rows located as absent", h, len(ps))
		}
		want := wantPlaces(r, ps)
		if !slices.Equal(loc.Places, want) {
			t.Fatalf("token %x in rows %v located at %v, want %v", h, ps, loc.Places, want)
		}
		for _, p := range ps { // what the engine relies on
			if want != nil && !slices.ContainsFunc(want, func(q TokenPlace) bool {
				return q.Block == p.block && q.Rows.Lo <= p.row && p.row < q.Rows.Hi
			}) {
				t.Fatalf("token %x: row %v outside its places %v", h, p, want)
			}
		}
		switch {
		case want == nil:
			anywhere++
		case len(want) > 1:
			listed++
		case want[0].Rows.Hi-want[0].Rows.Lo == 1:
			single++
		case want[0].Rows.Hi-want[0].Rows.Lo <= groupRows && want[0].Rows.Hi-want[0].Rows.Lo < r.blocks[want[0].Block].Meta.Spans:
			grouped++
		default:
			blocked++
		}
	}
	// Tokens in one block only in four or more rows of several groups are
	// rare in this corpus (TestBlockPlaces covers them).
	if single < 100 || grouped < 10 || listed < 100 || anywhere < 10 {
		t.Fatalf("corpus too uniform to test: %d tokens in one row, %d in one group, %d in one block, %d in a few places, %d anywhere",
			single, grouped, blocked, listed, anywhere)
	}
	t.Logf("%d tokens: %d in one row, %d in one group, %d in one block, %d in a few places, %d anywhere",
		len(places), single, grouped, blocked, listed, anywhere)

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
	if !errors.As(err, &ce) || ce.Offset != at-5 || loc.Absent || loc.Places != nil {
		t.Fatalf("damaged page: %+v, %v; want anywhere and a CorruptionError at %d", loc, err, at-5)
	}
}

// TestBlockPlaces: the writer's places of a token within one block, from
// the rows that hold it in the order they are tokenised (a row repeated
// when a span holds the token twice).
func TestBlockPlaces(t *testing.T) {
	g := func(k int) uint32 { return uint32(k * groupRows) }
	for _, tc := range []struct {
		rows []uint32
		want [][2]uint32 // first, last row of each place
	}{
		{[]uint32{7}, [][2]uint32{{7, 7}}},
		{[]uint32{7, 7, 7}, [][2]uint32{{7, 7}}},
		{[]uint32{3, 9}, [][2]uint32{{3, 9}}}, // one group
		{[]uint32{3, g(2) + 1}, [][2]uint32{{3, 3}, {g(2) + 1, g(2) + 1}}},
		{[]uint32{3, 3, g(2) + 1, g(2) + 1}, [][2]uint32{{3, 3}, {g(2) + 1, g(2) + 1}}},
		{[]uint32{3, 4, g(2)}, [][2]uint32{{3, 4}, {g(2), g(2)}}},
		{[]uint32{3, g(2), g(2) + 5}, [][2]uint32{{3, 3}, {g(2), g(2) + 5}}},
		{[]uint32{3, g(1), g(2)}, [][2]uint32{{3, 3}, {g(1), g(1)}, {g(2), g(2)}}},
		{[]uint32{3, g(1), g(2), g(3)}, [][2]uint32{{3, g(3)}}}, // four rows: the range
		{[]uint32{1, 2, 3, 4, 5}, [][2]uint32{{1, 5}}},
		{[]uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, g(9)}, [][2]uint32{{0, g(9)}}}, // count saturates
	} {
		var v uint64
		for _, r := range tc.rows {
			v = noteRow(v, r)
		}
		var buf [3]uint64
		var got [][2]uint32
		for _, p := range blockPlaces(5, v, &buf) {
			if p>>40 != 5 {
				t.Fatalf("rows %v: place %x not in block 5", tc.rows, p)
			}
			first, last := unpackRows(p)
			got = append(got, [2]uint32{first, last})
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("rows %v: places %v, want %v", tc.rows, got, tc.want)
		}
	}
}

// placeRows expands places into the set of (block, row) they cover.
func placeRows(ps []TokenPlace) map[tokenPlace]bool {
	out := map[tokenPlace]bool{}
	for _, p := range ps {
		for row := p.Rows.Lo; row < p.Rows.Hi; row++ {
			out[tokenPlace{p.Block, row}] = true
		}
	}
	return out
}

// checkLocate compares LocateTokens(hs) with the answer built from each
// token's expected places (want): the rows in all of them, absent when
// none (or when a token is in no span), anywhere when no token has
// places. It also checks that every row
// holding all the tokens is among the located rows.
func checkLocate(t *testing.T, r *Reader, places map[uint64][]tokenPlace, hs []uint64, want func([]tokenPlace) []TokenPlace) {
	t.Helper()
	loc, err := r.LocateTokens(hs)
	if err != nil {
		t.Fatal(err)
	}
	var rows map[tokenPlace]bool // nil: anywhere
	for _, h := range hs {
		wp := want(places[h])
		if wp == nil && len(places[h]) > 0 {
			continue
		}
		pr := placeRows(wp)
		if rows == nil {
			rows = pr
			continue
		}
		for p := range rows {
			if !pr[p] {
				delete(rows, p)
			}
		}
	}
	switch {
	case rows == nil:
		if loc.Absent || loc.Places != nil {
			t.Fatalf("tokens %x, every one anywhere: located %+v", hs, loc)
		}
	case len(rows) == 0:
		if !loc.Absent {
			t.Fatalf("tokens %x share no place: located %+v, want absent", hs, loc)
		}
	default:
		got := placeRows(loc.Places)
		if loc.Absent || !maps.Equal(got, rows) {
			t.Fatalf("tokens %x: located %+v (%d rows), want %d rows", hs, loc, len(got), len(rows))
		}
		for i := 1; i < len(loc.Places); i++ {
			a, b := loc.Places[i-1], loc.Places[i]
			if a.Block > b.Block || (a.Block == b.Block && a.Rows.Hi > b.Rows.Lo) {
				t.Fatalf("tokens %x: places %v out of order", hs, loc.Places)
			}
		}
	}
	// The promise the scan relies on: no span holding them all is missed.
	both := map[tokenPlace]int{}
	for _, h := range hs {
		seen := map[tokenPlace]bool{}
		for _, p := range places[h] {
			if !seen[p] {
				seen[p] = true
				both[p]++
			}
		}
	}
	for p, n := range both {
		if n == len(hs) && (loc.Absent || (loc.Places != nil && !placeRows(loc.Places)[p])) {
			t.Fatalf("tokens %x: row %v holds them all, located %+v", hs, p, loc)
		}
	}
}

// phraseCorpus is textCorpus with phrase words planted: for each i, the
// words phraseaN and phrasebN together in one span and apart (in two
// texts) in 0-5 decoy spans anywhere in the segment.
func phraseCorpus(seed uint64, spans, vocab int) (map[string][]model.Span, [][2]uint64) {
	c := textCorpus(seed, spans, vocab)
	rng := rand.New(rand.NewPCG(seed, 9))
	var pairs [][2]uint64
	for _, ss := range c {
		for i := range 200 {
			a, b := fmt.Sprintf("phrasea%d", i), fmt.Sprintf("phraseb%d", i)
			at := &ss[rng.IntN(len(ss))]
			at.Attributes = append(at.Attributes, model.KeyValue{Key: "p", Value: model.StringValue(a + " " + b)})
			for range rng.IntN(6) {
				d := &ss[rng.IntN(len(ss))]
				d.Attributes = append(d.Attributes, model.KeyValue{Key: "x", Value: model.StringValue(a)}, model.KeyValue{Key: "y", Value: model.StringValue(b)})
			}
			pairs = append(pairs, [2]uint64{xxhash.Sum64String(a), xxhash.Sum64String(b)})
		}
	}
	return c, pairs
}

// TestLocateTokensEqualsBruteForce: for phrase words planted with decoys
// across the segment's blocks, and for random pairs and triples of its
// tokens, LocateTokens answers exactly the rows in every word's places
// (absent when there are none) and never misses a row holding them all.
func TestLocateTokensEqualsBruteForce(t *testing.T) {
	for _, bs := range []int{64, 300} {
		corpus, pairs := phraseCorpus(uint64(80+bs), 4000, 20000)
		path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: bs, ContentTokens: StandInTokens})
		r := openT(t, path)
		places := placesOf(t, r)
		want := func(ps []tokenPlace) []TokenPlace { return wantPlaces(r, ps) }
		listed := 0
		for _, p := range pairs {
			checkLocate(t, r, places, p[:], want)
			if loc, _ := r.LocateTokens(p[:]); len(loc.Places) > 1 {
				listed++
			}
		}
		if listed < 20 {
			t.Fatalf("block spans %d: only %d phrases located to several places", bs, listed)
		}
		var toks []uint64
		for h, ps := range places {
			if len(ps) < 12 { // few places: the interesting answers
				toks = append(toks, h)
			}
		}
		slices.Sort(toks)
		rng := rand.New(rand.NewPCG(uint64(bs), 3))
		for range 3000 {
			hs := []uint64{toks[rng.IntN(len(toks))], toks[rng.IntN(len(toks))]}
			if rng.IntN(4) == 0 {
				hs = append(hs, toks[rng.IntN(len(toks))])
			}
			checkLocate(t, r, places, hs, want)
		}
	}
}

// wantPlacesBefore is wantPlaces for token maps without place lists
// (written before them): one row, one group or one block, else anywhere.
func wantPlacesBefore(r *Reader, ps []tokenPlace) []TokenPlace {
	for _, p := range ps[1:] {
		if p.block != ps[0].block {
			return nil
		}
	}
	if want := wantPlaces(r, ps); len(want) == 1 {
		return want
	}
	return []TokenPlace{{ps[0].block, RowRange{0, r.blocks[ps[0].block].Meta.Spans}}}
}

// TestTokenMapFixtureWithoutPlaces reads a committed file written before
// token maps listed places (flag bit 2 of section 13 clear): its words are
// still located where they are, alone and together, and a writer told to
// write that format (writeTokenMapWithoutPlaces) writes the same bytes.
func TestTokenMapFixtureWithoutPlaces(t *testing.T) {
	corpus := textCorpus(74, 200, 1000)
	path := filepath.Join("testdata", "v1-tokenmap.rseg")
	r := openT(t, path)
	if !r.grp.isMap || r.grp.places != 0 {
		t.Fatalf("fixture: token map %v, places %v; want a map without places", r.grp.isMap, r.grp.places)
	}
	_, all := expected(corpus)
	requireSpansEqual(t, "fixture", readAll(t, r), all)
	places := placesOf(t, r)
	want := func(ps []tokenPlace) []TokenPlace { return wantPlacesBefore(r, ps) }
	var toks []uint64
	for h := range places {
		checkLocate(t, r, places, []uint64{h}, want)
		toks = append(toks, h)
	}
	slices.Sort(toks)
	rng := rand.New(rand.NewPCG(74, 1))
	for range 2000 {
		checkLocate(t, r, places, []uint64{toks[rng.IntN(len(toks))], toks[rng.IntN(len(toks))]}, want)
	}

	writeTokenMapWithoutPlaces = true
	defer func() { writeTokenMapWithoutPlaces = false }()
	tmp, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 20, ContentTokens: StandInTokens})
	got, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, old) {
		t.Fatalf("a writer without places writes %d bytes that differ from the fixture's %d", len(got), len(old))
	}
}

// TestTokenMapReadsNearAndFarPages: a token's three slots lie in three
// consecutive fuse segments; pages within maxTokenMapRead of each other
// are read at once, pages further apart separately. In a segment large
// enough to have both, every token is located at its own row either way,
// and a damaged page is reported at its own offset, never as "absent".
func TestTokenMapReadsNearAndFarPages(t *testing.T) {
	const perSpan = 10
	path, _ := writeCorpus(t, genCorpus(74, 1, 4000, 8), WriterOptions{BlockSpans: 1000, ContentTokens: syntheticTokens(perSpan)})
	r := openT(t, path)
	if !r.grp.isMap {
		t.Fatal("segment written without a token map")
	}
	pages := func(h uint64) (pg [3]int) {
		_, pos := r.grp.shape.positions(h)
		for j, k := range pos {
			pg[j], _ = r.grp.shape.slotAt(k)
		}
		return pg
	}
	near, far := 0, 0
	var farTok uint64
	for b := range r.Blocks() {
		spans, err := r.ReadBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		for row := range spans {
			for _, h := range spanTokens(syntheticTokens(perSpan), &spans[row]) {
				loc, err := r.LocateTokens([]uint64{h})
				want := []TokenPlace{{b, RowRange{row, row + 1}}}
				if err != nil || !slices.Equal(loc.Places, want) {
					t.Fatalf("token %x of block %d row %d: %+v, %v; want %v", h, b, row, loc, err, want)
				}
				if pg := pages(h); (pg[2]-pg[0]+1)*diskPageStride > maxTokenMapRead {
					far, farTok = far+1, h
				} else {
					near++
				}
			}
		}
	}
	if near < 1000 || far < 1000 {
		t.Fatalf("%d tokens with their pages near, %d far: the segment does not test both reads", near, far)
	}
	t.Logf("%d tokens with their pages within %d bytes, %d further apart", near, maxTokenMapRead, far)

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for j, pg := range pages(farTok) {
		at := r.grp.diskOff + int64(pg)*diskPageStride
		bad := slices.Clone(data)
		bad[at+7] ^= 0x04
		p := filepath.Join(t.TempDir(), fmt.Sprintf("bad%d.rseg", j))
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		loc, err := openT(t, p).LocateTokens([]uint64{farTok})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Offset != at || loc.Absent || loc.Places != nil {
			t.Fatalf("page %d of a far token damaged: %+v, %v; want anywhere and a CorruptionError at %d", j, loc, err, at)
		}
	}
}
