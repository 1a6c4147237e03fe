package segment

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// textOnly keeps of s what ReadRowTexts decodes: the status message, the
// attributes and the events (timed from the span's start).
func textOnly(s model.Span) model.Span {
	out := model.Span{StatusMessage: s.StatusMessage, Attributes: s.Attributes}
	for _, ev := range s.Events {
		ev.TimeUnixNano -= s.StartTimeUnixNano
		out.Events = append(out.Events, ev)
	}
	return out
}

// TestReadRowTexts: the texts of any rows, read alone, equal those of the
// same rows decoded whole, and decoding any subset of them afterwards
// equals ReadBlockRows of that subset; with the text columns stored as
// pieces (codec 2) and as one frame each.
func TestReadRowTexts(t *testing.T) {
	corpus := textHeavyCorpus(5, 2500)
	for i := range corpus {
		if i%3 == 0 {
			corpus[i].StatusMessage = fmt.Sprintf("failed at step %d", i)
		}
	}
	for _, off := range []bool{false, true} {
		r := openT(t, writePieces(t, corpus, off))
		rng := rand.New(rand.NewPCG(7, 8))
		for b, m := range r.Blocks() {
			n := m.Spans
			cases := [][]RowRange{{{0, 1}}, {{n - 1, n}}, {{0, n}}, {{63, 129}}, {{3, 4}, {n - 2, n - 1}}, {{5, 5}}}
			for q := 0; q < 40; q++ {
				var ranges []RowRange
				for lo := 0; len(ranges) < 1+rng.IntN(4) && lo < n; {
					a := lo + rng.IntN(min(n-lo, 400))
					h := min(a+1+rng.IntN(70), n)
					ranges = append(ranges, RowRange{a, h})
					lo = h
				}
				cases = append(cases, ranges)
			}
			for _, ranges := range cases {
				what := fmt.Sprintf("pieces off %v, block %d rows %v", off, b, ranges)
				full, err := r.ReadBlockRows(b, ranges)
				if err != nil {
					t.Fatalf("%s: ReadBlockRows: %v", what, err)
				}
				texts, err := r.ReadRowTexts(b, ranges)
				if err != nil {
					t.Fatalf("%s: ReadRowTexts: %v", what, err)
				}
				want := make([]model.Span, len(full))
				for k := range full {
					want[k] = textOnly(full[k])
				}
				requireSpansEqual(t, what, texts.Spans, want)

				// Decode a random subset: one row of each range, or all.
				sub := ranges
				if rng.IntN(2) == 0 {
					sub = nil
					for _, rg := range ranges {
						if rg.Hi > rg.Lo {
							row := rg.Lo + rng.IntN(rg.Hi-rg.Lo)
							sub = append(sub, RowRange{row, row + 1})
						}
					}
				}
				got, err := texts.Decode(sub)
				if err != nil {
					t.Fatalf("%s: Decode(%v): %v", what, sub, err)
				}
				exp, err := r.ReadBlockRows(b, sub)
				if err != nil {
					t.Fatalf("%s: ReadBlockRows(%v): %v", what, sub, err)
				}
				requireSpansEqual(t, what+fmt.Sprintf(" decoded %v", sub), got, exp)
			}
			// Rows outside those read for their texts are refused.
			texts, err := r.ReadRowTexts(b, []RowRange{{1, 2}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := texts.Decode([]RowRange{{2, 3}}); err == nil {
				t.Fatalf("block %d: Decode of a row not read for its texts succeeded", b)
			}
		}
	}
}
