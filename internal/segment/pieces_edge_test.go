package segment

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestPartialReadPieceHeaderLongerThanItsPrefix: a column of more than 1024
// pieces (a 70,000-span block of 300-byte texts) has a piece header longer
// than the first read of it; partial reads, Verify and FindTrace must read
// the rest, not parse unread bytes (they reported a valid file as damaged,
// so a rare-word search skipped its segment).
func TestPartialReadPieceHeaderLongerThanItsPrefix(t *testing.T) {
	const n = 70000
	rng := rand.New(rand.NewPCG(1, 2))
	tid := model.TraceID{1}
	spans := make([]model.Span, n)
	for i := range spans {
		var b strings.Builder
		for b.Len() < 300 {
			fmt.Fprintf(&b, "%x ", rng.Uint64())
		}
		spans[i] = model.Span{TraceID: tid, SpanID: model.SpanID{byte(i), byte(i >> 8), byte(i >> 16), 1},
			StartTimeUnixNano: 1000 + uint64(i), EndTimeUnixNano: 2000 + uint64(i), Name: "op", Service: "svc",
			Attributes: []model.KeyValue{{Key: "message", Value: model.StringValue(b.String())}}}
	}
	path, _ := writeCorpus(t, map[string][]model.Span{"default": spans}, WriterOptions{BlockSpans: n})
	r := openT(t, path)
	c, _ := r.blocks[0].col(colAttrs)
	raw, err := r.readAt(int64(r.blocks[0].Offset+c.Offset), int64(c.Length))
	if err != nil {
		t.Fatal(err)
	}
	refs, err := parsePieces(raw, c.RawLen)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) <= pieceHeaderPrefix || pieceHeaderFits(raw[:pieceHeaderPrefix], c.Length) {
		t.Fatalf("%d pieces, header fits in %d bytes: the test needs a longer header", len(refs), pieceHeaderPrefix)
	}
	all, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Verify(path); err != nil || !v.Clean() {
		t.Errorf("Verify of a valid file: err=%v problems=%v", err, v.Problems)
	}
	for _, row := range []int{0, 5000, n - 1} {
		got, err := r.ReadBlockRows(0, []RowRange{{row, row + 1}})
		if err != nil {
			t.Fatalf("ReadBlockRows(%d) on a valid file: %v", row, err)
		}
		if !reflect.DeepEqual(got[0], all[row]) {
			t.Fatalf("row %d differs from the full read", row)
		}
	}
	if got, err := r.FindTrace("default", tid); err != nil || len(got) != n {
		t.Fatalf("FindTrace on a valid file: %d spans, %v", len(got), err)
	}
}

// TestReadBlockRowsEmptyRanges: an empty range (anywhere, row marks
// included) contributes no rows and no error.
func TestReadBlockRowsEmptyRanges(t *testing.T) {
	path := writePieces(t, textHeavyCorpus(1, 2500), false)
	r := openT(t, path)
	all, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ranges := range [][]RowRange{{{128, 128}}, {{0, 1}, {512, 512}}, {{5, 5}}, {{130, 130}, {130, 131}}, {{64, 64}, {64, 64}}} {
		got, err := r.ReadBlockRows(0, ranges)
		if err != nil {
			t.Fatalf("ReadBlockRows(0, %v): %v", ranges, err)
		}
		var want []model.Span
		for _, rg := range ranges {
			want = append(want, all[rg.Lo:rg.Hi]...)
		}
		requireSpansEqual(t, fmt.Sprint(ranges), got, want)
	}
}

// TestHugeColumnRawLengthIsCorruptionNotAPanic: a block index naming an
// impossible decompressed length gives an error on full and partial reads.
func TestHugeColumnRawLengthIsCorruptionNotAPanic(t *testing.T) {
	path := writePieces(t, textHeavyCorpus(1, 1100), false)
	for _, full := range []bool{true, false} {
		r := openT(t, path)
		hit := false
		for j := range r.blocks[0].Cols {
			if c := &r.blocks[0].Cols[j]; copiedColumn(c.ID) && c.Codec == codecZstd {
				c.RawLen = 1 << 50
				hit = true
				break
			}
		}
		if !hit {
			t.Fatal("no zstd id or number column")
		}
		var err error
		if full {
			_, err = r.ReadBlock(0)
		} else {
			_, err = r.ReadBlockRows(0, []RowRange{{0, 1}})
		}
		if err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
			t.Fatalf("full read %v: err %v, want a raw length error", full, err)
		}
	}
	// Such a block index is refused when the segment opens.
	r := openT(t, path)
	blocks := append([]blockEntry(nil), r.blocks...)
	blocks[0].Cols = append([]columnRef(nil), blocks[0].Cols...)
	blocks[0].Cols[0].RawLen = maxColumnRawBytes + 1
	end := blocks[len(blocks)-1].Offset + blocks[len(blocks)-1].Length
	if _, err := decodeBlockIndex(string(encodeBlockIndex(r.info.Projects, r.blocks)), r.info.Projects, 0, end); err != nil {
		t.Fatalf("the valid index: %v", err)
	}
	if _, err := decodeBlockIndex(string(encodeBlockIndex(r.info.Projects, blocks)), r.info.Projects, 0, end); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Fatalf("index with a raw length over the limit: err %v", err)
	}
}

// TestPartialReadsEqualFullReadsEveryColumn: with every variable-width column large enough to be
// pieces (names, services, status, trace state, resources, scopes, events,
// links, llm), random range sets compared with the full read.
func TestPartialReadsEqualFullReadsEveryColumn(t *testing.T) {
	for _, bs := range []int{700, 1024, 2000} {
		rng := rand.New(rand.NewPCG(uint64(bs), 5))
		word := func(n int) string {
			var b strings.Builder
			for b.Len() < n {
				fmt.Fprintf(&b, "%x", rng.Uint64())
			}
			return b.String()[:n]
		}
		spans := make([]model.Span, bs*2+37)
		var res []*model.Resource
		for i := range spans {
			if i%3 == 0 {
				res = append(res, &model.Resource{Attributes: []model.KeyValue{{Key: "r", Value: model.StringValue(word(80))}}})
			}
			s := &spans[i]
			s.TraceID = model.TraceID{byte(i / 5), byte(i / 5 >> 8), 3}
			s.SpanID = model.SpanID{byte(i), byte(i >> 8), 9}
			s.StartTimeUnixNano = 1_000_000 + uint64(i/5)*1000 + uint64(i%5)
			s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(rng.IntN(1<<30))
			s.Name = "n" + word(40)
			s.Service = "s" + word(40)
			s.StatusMessage = word(rng.IntN(60))
			s.TraceState = word(rng.IntN(60))
			s.Resource = res[len(res)-1]
			s.Scope = &model.Scope{Name: word(50), Version: "1"}
			if rng.IntN(3) > 0 {
				s.Attributes = []model.KeyValue{{Key: "k" + word(2), Value: model.StringValue(word(rng.IntN(200)))}}
			}
			for e := 0; e < rng.IntN(3); e++ {
				s.Events = append(s.Events, model.Event{TimeUnixNano: s.StartTimeUnixNano, Name: word(30),
					Attributes: []model.KeyValue{{Key: "e", Value: model.StringValue(word(rng.IntN(100)))}}})
			}
			for l := 0; l < rng.IntN(2); l++ {
				s.Links = append(s.Links, model.Link{TraceID: model.TraceID{1}, TraceState: word(40)})
			}
			if rng.IntN(4) > 0 {
				s.LLM = &model.LLM{Provider: "p", SessionID: word(50), UserID: word(20), InputTokens: rng.Int64N(1 << 40), Counted: rng.IntN(2) == 0}
			}
		}
		path, _ := writeCorpus(t, map[string][]model.Span{"default": spans}, WriterOptions{BlockSpans: bs})
		r := openT(t, path)
		pieced := map[string]bool{}
		for i := range r.blocks {
			for _, c := range r.blocks[i].Cols {
				if c.Codec == codecPieces {
					pieced[columnNames[c.ID]] = true
				}
			}
		}
		t.Logf("block spans %d: pieced columns %v", bs, pieced)
		for b, m := range r.Blocks() {
			full, err := r.ReadBlock(b)
			if err != nil {
				t.Fatal(err)
			}
			n := m.Spans
			for q := 0; q < 300; q++ {
				var ranges []RowRange
				lo := 0
				for k := 0; k < 1+rng.IntN(4) && lo < n; k++ {
					a := lo + rng.IntN(min(n-lo, 400))
					if rng.IntN(3) == 0 {
						a = a / 64 * 64
						if a < lo {
							a = lo
						}
					}
					h := a + 1 + rng.IntN(min(n-a, 150))
					if h > n {
						h = n
					}
					if a >= h {
						break
					}
					ranges = append(ranges, RowRange{a, h})
					lo = h
				}
				got, err := r.ReadBlockRows(b, ranges)
				if err != nil {
					t.Fatalf("block %d ReadBlockRows(%v): %v", b, ranges, err)
				}
				var exp []model.Span
				for _, rg := range ranges {
					exp = append(exp, full[rg.Lo:rg.Hi]...)
				}
				requireSpansEqual(t, fmt.Sprintf("block %d %v", b, ranges), got, exp)
			}
		}
		for tr := 0; tr < len(spans)/5; tr += 7 {
			id := model.TraceID{byte(tr), byte(tr >> 8), 3}
			got, err := r.FindTrace("default", id)
			if err != nil || len(got) == 0 {
				t.Fatalf("FindTrace: %d, %v", len(got), err)
			}
		}
	}
}
