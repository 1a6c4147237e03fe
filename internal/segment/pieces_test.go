package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// piecesBlockSpans is the block size of the codec-2 tests: 16 row groups.
const piecesBlockSpans = 1024

// textHeavyCorpus returns realistic spans with about 1.2 KB of text each:
// a ~600-byte message attribute and one or two events with ~300 bytes of
// text, words drawn (Zipf) from a vocabulary, so that the attributes and
// events columns of a 1024-span block are far above pieceMinRaw.
func textHeavyCorpus(seed uint64, spans int) []model.Span {
	rng := rand.New(rand.NewPCG(seed, 11))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(seed, 12)), 1.1, 1, 4999)
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, "w%d ", zipf.Uint64())
		}
		fmt.Fprintf(&b, "id%d", rng.Uint64())
		return b.String()
	}
	out := realisticCorpus(seed, spans)
	for i := range out {
		s := &out[i]
		s.Attributes = append(s.Attributes, model.KeyValue{Key: "message", Value: model.StringValue(text(600))})
		for e := 0; e < 1+rng.IntN(2); e++ {
			s.Events = append(s.Events, model.Event{TimeUnixNano: s.StartTimeUnixNano + uint64(e), Name: "log",
				Attributes: []model.KeyValue{{Key: "body", Value: model.StringValue(text(300))}}})
		}
	}
	return out
}

// writePieces writes the corpus in 1024-span blocks, with codec 2 unless off.
func writePieces(t testing.TB, corpus []model.Span, off bool) string {
	t.Helper()
	piecesOff = off
	defer func() { piecesOff = false }()
	path, _ := writeCorpus(t, map[string][]model.Span{"default": corpus}, WriterOptions{BlockSpans: piecesBlockSpans})
	return path
}

func TestPiecesRoundTrip(t *testing.T) {
	corpus := textHeavyCorpus(1, 2500)
	_, want := expected(map[string][]model.Span{"default": corpus})
	path := writePieces(t, corpus, false)
	r := openT(t, path)
	for i := range r.blocks {
		for _, id := range []uint32{colAttrs, colEvents} {
			if c, _ := r.blocks[i].col(id); c.Codec != codecPieces {
				t.Fatalf("block %d column %s: codec %d, want %d", i, columnNames[id], c.Codec, codecPieces)
			}
		}
		if c, _ := r.blocks[i].col(colTraceID); c.Codec == codecPieces {
			t.Fatalf("block %d: fixed-width column stored as pieces", i)
		}
	}
	all := readAll(t, r)
	requireSpansEqual(t, "ReadBlock", all, want)

	rng := rand.New(rand.NewPCG(3, 4))
	base := 0
	for i, m := range r.Blocks() {
		full := all[base : base+m.Spans]
		base += m.Spans
		n := m.Spans
		cases := [][]RowRange{
			{{0, 1}}, {{n - 1, n}}, {{0, 64}}, {{(n - 1) / 64 * 64, n}}, {{60, 70}}, {{63, 129}},
			{{0, n}}, {{5, 5}}, {{1, 2}, {200, 300}, {n - 3, n}}, {{64, 128}, {128, 192}},
		}
		for k := 0; k < 30; k++ {
			lo := rng.IntN(n)
			hi := lo + 1 + rng.IntN(min(n-lo, 150))
			cases = append(cases, []RowRange{{lo, hi}})
		}
		for _, ranges := range cases {
			got, err := r.ReadBlockRows(i, ranges)
			if err != nil {
				t.Fatalf("block %d ReadBlockRows(%v): %v", i, ranges, err)
			}
			var exp []model.Span
			for _, rg := range ranges {
				exp = append(exp, full[rg.Lo:rg.Hi]...)
			}
			requireSpansEqual(t, fmt.Sprintf("block %d rows %v", i, ranges), got, exp)
		}
	}

	traces := map[model.TraceID][]model.Span{}
	for _, s := range all {
		traces[s.TraceID] = append(traces[s.TraceID], s)
	}
	for id, exp := range traces {
		got, err := r.FindTrace("default", id)
		if err != nil {
			t.Fatalf("FindTrace %s: %v", id, err)
		}
		requireSpansEqual(t, "FindTrace "+id.String(), got, exp)
	}
	if v := verifyT(t, path); !v.Clean() {
		t.Fatalf("Verify: %v", v.Problems)
	}

	// The same spans without pieces: codec 0/1 only, same rows.
	r1 := openT(t, writePieces(t, corpus, true))
	for i := range r1.blocks {
		for _, c := range r1.blocks[i].Cols {
			if c.Codec == codecPieces {
				t.Fatalf("piecesOff: block %d column %s has codec 2", i, columnNames[c.ID])
			}
		}
	}
	requireSpansEqual(t, "ReadBlock without pieces", readAll(t, r1), want)
}

// TestPiecesSmallColumnsUnchanged checks that columns below pieceMinRaw, or
// without row marks, keep one frame.
func TestPiecesSmallColumnsUnchanged(t *testing.T) {
	r := openT(t, writePieces(t, realisticCorpus(2, 3000), false))
	for i := range r.blocks {
		for _, c := range r.blocks[i].Cols {
			if c.Codec == codecPieces && c.RawLen < pieceMinRaw {
				t.Fatalf("block %d column %s: %d raw bytes stored as pieces", i, columnNames[c.ID], c.RawLen)
			}
		}
	}
}

// pieceFile is a written codec-2 segment and where block 0's attributes
// column and its pieces lie in the file.
type pieceFile struct {
	path string
	data []byte
	col  int // file offset of block 0's attributes column
	refs []pieceRef
	all  []model.Span // block 0, as read before any damage
}

func newPieceFile(t *testing.T) pieceFile {
	t.Helper()
	path := writePieces(t, textHeavyCorpus(5, piecesBlockSpans), false)
	r := openT(t, path)
	all, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.blocks[0].col(colAttrs)
	col := int(r.blocks[0].Offset + c.Offset)
	refs, err := parsePieces(data[col:col+int(c.Length)], c.RawLen)
	if err != nil {
		t.Fatal(err)
	}
	// The dictionary piece, then one piece per 64-row group.
	if want := 1 + piecesBlockSpans/markRows; len(refs) != want {
		t.Fatalf("%d pieces, want %d", len(refs), want)
	}
	return pieceFile{path: path, data: data, col: col, refs: refs, all: all}
}

// damaged writes a copy of the file with f applied and opens it.
func (p pieceFile) damaged(t *testing.T, f func(b []byte)) (string, *Reader) {
	t.Helper()
	b := append([]byte(nil), p.data...)
	f(b)
	path := p.path + ".bad"
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, openT(t, path)
}

// pieceByte returns the file offset of the middle byte of piece k.
func (p pieceFile) pieceByte(k int) int {
	return p.col + int(p.refs[k].storedOff+p.refs[k].stored/2)
}

func requireCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: got %v, want a *CorruptionError", what, err)
	}
}

// TestPiecesDamageIsolated shows that partial reads decompress only the
// pieces they need: a damaged piece of group 10 does not stop reading other
// rows, while every read that needs it, ReadBlock and Verify report it.
func TestPiecesDamageIsolated(t *testing.T) {
	p := newPieceFile(t)
	path, r := p.damaged(t, func(b []byte) { b[p.pieceByte(11)] ^= 0x5a }) // piece 11 = rows [640, 704)
	for _, rg := range []RowRange{{0, 64}, {100, 200}, {704, 1024}, {639, 640}} {
		got, err := r.ReadBlockRows(0, []RowRange{rg})
		if err != nil {
			t.Fatalf("rows %v away from the damage: %v", rg, err)
		}
		requireSpansEqual(t, fmt.Sprintf("rows %v", rg), got, p.all[rg.Lo:rg.Hi])
	}
	got, err := r.FindTrace("default", p.all[0].TraceID)
	if err != nil || len(got) == 0 {
		t.Fatalf("FindTrace of the first trace: %d spans, %v", len(got), err)
	}
	for _, rg := range []RowRange{{640, 641}, {600, 700}, {703, 704}} {
		_, err := r.ReadBlockRows(0, []RowRange{rg})
		requireCorrupt(t, fmt.Sprintf("rows %v over the damage", rg), err)
	}
	_, err = r.ReadBlock(0)
	requireCorrupt(t, "ReadBlock", err)
	if v := verifyT(t, path); v.Clean() || v.BlocksIntact {
		t.Fatalf("Verify missed the damaged piece: %+v", v.Problems)
	}
}

func TestPiecesCorruption(t *testing.T) {
	p := newPieceFile(t)
	header := func(b []byte) []byte { return b[p.col : p.col+int(p.refs[0].storedOff)] }
	for _, tc := range []struct {
		name   string
		damage func(b []byte)
		rows   RowRange // rows ReadBlockRows must fail on
	}{
		{"piece byte", func(b []byte) { b[p.pieceByte(3)] ^= 1 }, RowRange{128, 130}},
		{"dictionary piece byte", func(b []byte) { b[p.pieceByte(0)] ^= 1 }, RowRange{900, 901}},
		{"header byte", func(b []byte) { header(b)[2] ^= 1 }, RowRange{0, 1}},
		{"header checksum", func(b []byte) { h := header(b); h[len(h)-1] ^= 1 }, RowRange{500, 501}},
		{"lengths do not add up", func(b []byte) { resealHeader(t, header(b), 1, func(raw uint64) uint64 { return raw + 1 }) },
			RowRange{500, 501}},
		{"piece codec unknown", func(b []byte) { resealHeader(t, header(b), 2, nil) }, RowRange{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, r := p.damaged(t, tc.damage)
			_, err := r.ReadBlock(0)
			requireCorrupt(t, "ReadBlock", err)
			_, err = r.ReadBlockRows(0, []RowRange{tc.rows})
			requireCorrupt(t, "ReadBlockRows", err)
			v := verifyT(t, path)
			if v.Clean() || v.BlocksIntact {
				t.Fatalf("Verify: no problem reported")
			}
		})
	}
}

// resealHeader rewrites the piece entry k of a stored piece header in
// place: its raw length through f (when set), keeping the encoded size,
// or its codec to 7 (when f is nil), and recomputes the header checksum, so
// that only the structural checks can catch it.
func resealHeader(t *testing.T, h []byte, k int, f func(uint64) uint64) {
	t.Helper()
	d := dec{s: string(h)}
	d.uvarint()
	for j := 0; j < k; j++ {
		d.uvarint()
		d.uvarint()
		d.uvarint()
		d.u32le()
	}
	codecAt := d.off
	d.uvarint()
	rawAt := d.off
	raw := d.uvarint()
	if d.err != nil {
		t.Fatal(d.err)
	}
	if f == nil {
		h[codecAt] = 7
	} else {
		old := d.off - rawAt
		enc := appendUvarints(nil, f(raw))
		if len(enc) != old {
			t.Fatalf("new raw length changes the header size")
		}
		copy(h[rawAt:], enc)
	}
	le.PutUint32(h[len(h)-4:], crc(h[:len(h)-4]))
}

// TestPiecesHostileHeaders feeds mutated piece headers, with valid header
// checksums, straight to the column decoder (past the column checksum, as a
// hostile file would): every failure is an error, never a panic, and a
// success returns exactly the column's raw length.
func TestPiecesHostileHeaders(t *testing.T) {
	p := newPieceFile(t)
	c, _ := openT(t, p.path).blocks[0].col(colAttrs)
	stored := p.data[p.col : p.col+int(c.Length)]
	hlen := int(p.refs[0].storedOff)
	rng := rand.New(rand.NewPCG(9, 9))
	for k := 0; k < 3000; k++ {
		b := append([]byte(nil), stored...)
		for m := 0; m < 1+rng.IntN(3); m++ {
			b[rng.IntN(hlen-4)] = byte(rng.Uint32())
		}
		le.PutUint32(b[hlen-4:], crc(b[:hlen-4]))
		if rng.IntN(4) == 0 {
			b = b[:rng.IntN(len(b))]
		}
		s, err := decompressColumn(c, b, nil)
		if err == nil && uint64(len(s)) != c.RawLen {
			t.Fatalf("mutation %d: %d raw bytes, want %d", k, len(s), c.RawLen)
		}
		if refs, err := parsePieces(b, c.RawLen); err == nil {
			want := make([]bool, len(refs))
			want[rng.IntN(len(refs))] = true
			_, _, _ = decodePieces(b, refs, want)
		}
	}
	for _, b := range [][]byte{nil, {0}, {1}, {0, 0, 0, 0, 0}} {
		if _, err := decompressColumn(c, b, nil); err == nil {
			t.Fatalf("header %v accepted", b)
		}
	}
}

// BenchmarkReadBlockRowsPieces reads one 64-row group of a 1024-span block
// of text-heavy spans, with the columns as one frame (codec 1, before) and
// as pieces (codec 2, after); B/span is the stored block size per span.
func BenchmarkReadBlockRowsPieces(b *testing.B) {
	corpus := textHeavyCorpus(7, piecesBlockSpans)
	for _, bc := range []struct {
		name string
		off  bool
	}{{"codec1", true}, {"pieces", false}} {
		b.Run(bc.name, func(b *testing.B) {
			r := openT(b, writePieces(b, corpus, bc.off))
			n := r.Blocks()[0].Spans
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				g := rng.IntN((n + markRows - 1) / markRows)
				spans, err := r.ReadBlockRows(0, []RowRange{{g * markRows, min((g+1)*markRows, n)}})
				if err != nil || len(spans) == 0 {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(r.blocks[0].Length)/float64(n), "B/span")
		})
	}
	// The whole-block checksum the partial path skips for codec-2 columns.
	b.Run("crc-block", func(b *testing.B) {
		r := openT(b, writePieces(b, corpus, false))
		raw, err := r.readAt(int64(r.blocks[0].Offset), int64(r.blocks[0].Length))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			_ = crc(raw)
		}
	})
}

// TestPartialReadsConcurrent: partial loads reuse pooled buffers, so
// concurrent one-row reads and trace lookups must each get exactly their
// own rows (run under -race in CI).
func TestPartialReadsConcurrent(t *testing.T) {
	corpus := textHeavyCorpus(9, 3000)
	path := writePieces(t, corpus, false)
	r := openT(t, path)
	all := readAll(t, r)
	var firsts []int // first row of each block in all
	base := 0
	for _, m := range r.Blocks() {
		firsts = append(firsts, base)
		base += m.Spans
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for k := 0; k < 300; k++ {
				b := rng.IntN(len(firsts))
				row := rng.IntN(r.Blocks()[b].Spans)
				got, err := r.ReadBlockRows(b, []RowRange{{row, row + 1}})
				if err != nil {
					errs <- err
					return
				}
				want := all[firsts[b]+row]
				if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
					errs <- fmt.Errorf("block %d row %d: got another span", b, row)
					return
				}
				spans, err := r.FindTrace("default", want.TraceID)
				if err != nil || !slices.ContainsFunc(spans, func(s model.Span) bool { return s.SpanID == want.SpanID }) {
					errs <- fmt.Errorf("trace of block %d row %d: %v, %d spans without the row's", b, row, err, len(spans))
					return
				}
			}
		}(uint64(g))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestPartialReadLongPieceHeader: a column cut into more pieces than the
// first read of a partial load holds entries for (its header is longer
// than pieceHeaderPrefix) reads the rest of its header and still decodes
// exactly the wanted rows.
func TestPartialReadLongPieceHeader(t *testing.T) {
	corpus := textHeavyCorpus(13, 9000)
	for i := range corpus { // one trace: one block of 9000 spans
		corpus[i].TraceID = corpus[0].TraceID
	}
	path, _ := writeCorpus(t, map[string][]model.Span{"default": corpus}, WriterOptions{BlockSpans: 9000})
	r := openT(t, path)
	if len(r.blocks) != 1 {
		t.Fatalf("%d blocks, want 1", len(r.blocks))
	}
	c, _ := r.blocks[0].col(colAttrs)
	raw, err := r.readAt(int64(r.blocks[0].Offset+c.Offset), int64(c.Length))
	if err != nil {
		t.Fatal(err)
	}
	if c.Codec != codecPieces || pieceHeaderFits(raw[:pieceHeaderPrefix], c.Length) {
		t.Fatalf("attributes column: codec %d, header within the first %d bytes: the test needs a longer header", c.Codec, pieceHeaderPrefix)
	}
	all, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []int{0, 63, 64, 4500, 8999} {
		got, err := r.ReadBlockRows(0, []RowRange{{row, row + 1}})
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], all[row]) {
			t.Fatalf("row %d: %d spans, %v; want the full read's row", row, len(got), err)
		}
	}
}
