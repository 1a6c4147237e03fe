package segment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/cespare/xxhash/v2"

	"github.com/rastro-dev/rastro/internal/model"
)

// StandInTokens is a stand-in for the real tokeniser (internal/text), which
// this package must not depend on: it emits the xxhash of every lowercased
// run of letters and digits (at least 2 runes) in the span's name, status
// message, and the string values (nested too) of its attributes and event
// attributes. Exported so that the external benchmarks use the same one.
func StandInTokens(s *model.Span, emit func(uint64)) {
	tokenize(s.Name, emit)
	tokenize(s.StatusMessage, emit)
	for _, kv := range s.Attributes {
		tokenizeValue(&kv.Value, emit)
	}
	for _, e := range s.Events {
		for _, kv := range e.Attributes {
			tokenizeValue(&kv.Value, emit)
		}
	}
}

func tokenizeValue(v *model.Value, emit func(uint64)) {
	switch v.Type {
	case model.ValueString:
		tokenize(v.Str, emit)
	case model.ValueArray, model.ValueKvList:
		if v.List == nil {
			return
		}
		for i := range v.List.Array {
			tokenizeValue(&v.List.Array[i], emit)
		}
		for i := range v.List.KvList {
			tokenizeValue(&v.List.KvList[i].Value, emit)
		}
	}
}

func tokenize(text string, emit func(uint64)) {
	var buf [64]byte
	tok := buf[:0]
	runes := 0
	flush := func() {
		if runes >= 2 {
			emit(xxhash.Sum64(tok))
		}
		tok, runes = tok[:0], 0
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			tok = append(tok, string(unicode.ToLower(r))...)
			runes++
			continue
		}
		flush()
	}
	flush()
}

// spanTokens returns the distinct token hashes of a span.
func spanTokens(fn func(*model.Span, func(uint64)), s *model.Span) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	fn(s, func(h uint64) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	})
	return out
}

// syntheticTokens emits n pseudo-random hashes per span, derived from its
// span id: for measuring false-positive rates against a known token set.
func syntheticTokens(n int) func(*model.Span, func(uint64)) {
	return func(s *model.Span, emit func(uint64)) {
		seed := le.Uint64(s.SpanID[:])
		for j := 0; j < n; j++ {
			emit(probeStep(seed + uint64(j)*0x9e3779b97f4a7c15))
		}
	}
}

// textCorpus returns spans whose attributes hold sentences of words drawn
// from a vocabulary of vocab words (Zipf-distributed), plus a unique word per
// span: the stand-in tokeniser then sees many distinct tokens.
func textCorpus(seed uint64, spans, vocab int) map[string][]model.Span {
	rng := rand.New(rand.NewPCG(seed, 5))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(seed, 6)), 1.1, 1, uint64(vocab-1))
	c := genCorpus(seed, 1, spans/4, 8)
	for p, ss := range c {
		for i := range ss {
			var b strings.Builder
			for w := 0; w < 40; w++ {
				fmt.Fprintf(&b, "w%d ", zipf.Uint64())
			}
			fmt.Fprintf(&b, "unique%d-%d", seed, rng.Uint64())
			ss[i].Attributes = append(ss[i].Attributes, model.KeyValue{Key: "text", Value: model.StringValue(b.String())})
		}
		c[p] = ss
	}
	return c
}

func TestTokenFiltersNoFalseNegatives(t *testing.T) {
	for _, tc := range []struct {
		name   string
		corpus map[string][]model.Span
		opts   WriterOptions
	}{
		{"random attributes", genCorpus(41, 3, 40, 20), WriterOptions{BlockSpans: 32, ContentTokens: StandInTokens}},
		{"text", textCorpus(42, 3000, 20000), WriterOptions{BlockSpans: 256, ContentTokens: StandInTokens}},
		{"text, 20% fp", textCorpus(43, 1000, 5000), WriterOptions{BlockSpans: 100, ContentTokens: StandInTokens, TokenFilterFP: 0.2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, info := writeCorpus(t, tc.corpus, tc.opts)
			r := openT(t, path)
			if !r.HasTokenFilters() || !info.Tokens.Indexed || r.Info().Tokens != info.Tokens {
				t.Fatalf("token filters: has %v, writer stats %+v, reader stats %+v", r.HasTokenFilters(), info.Tokens, r.Info().Tokens)
			}
			all := map[uint64]bool{}
			for i := range r.Blocks() {
				spans, err := r.ReadBlock(i)
				if err != nil {
					t.Fatal(err)
				}
				for j := range spans {
					toks := spanTokens(StandInTokens, &spans[j])
					for _, h := range toks {
						all[h] = true
						if !r.SegmentMayContainTokens([]uint64{h}) {
							t.Fatalf("summary rejects a token of block %d span %d", i, j)
						}
						if ok, err := r.BlockMayContainTokens(i, []uint64{h}); !ok || err != nil {
							t.Fatalf("block %d rejects a token of its span %d: %v", i, j, err)
						}
					}
					if !r.SegmentMayContainTokens(toks) {
						t.Fatalf("summary rejects the token set of block %d span %d", i, j)
					}
					if ok, err := r.BlockMayContainTokens(i, toks); !ok || err != nil {
						t.Fatalf("block %d rejects the token set of its span %d: %v", i, j, err)
					}
				}
			}
			// The batch lookup answers exactly as the per-block one, for
			// present tokens and for absent ones.
			rng := rand.New(rand.NewPCG(7, 7))
			keys := make([]uint64, 0, len(all))
			for h := range all {
				keys = append(keys, h)
			}
			for q := 0; q < 200; q++ {
				hs := []uint64{keys[rng.IntN(len(keys))]}
				if q%2 == 1 {
					hs = append(hs, rng.Uint64())
				}
				may, err := r.BlocksMayContainTokens(hs)
				if err != nil || len(may) != len(r.Blocks()) {
					t.Fatalf("BlocksMayContainTokens: %d answers, %v", len(may), err)
				}
				for i := range may {
					ok, _ := r.BlockMayContainTokens(i, hs)
					if may[i] != (ok && r.SegmentMayContainTokens(hs)) {
						t.Fatalf("query %d block %d: batch %v, single %v", q, i, may[i], ok)
					}
				}
			}
			if len(all) != info.Tokens.DistinctTokens {
				t.Fatalf("stats count %d distinct tokens, the corpus has %d", info.Tokens.DistinctTokens, len(all))
			}
			if ok, err := r.BlockMayContainTokens(0, nil); !ok || err != nil || !r.SegmentMayContainTokens(nil) {
				t.Fatalf("an empty token list must match: %v %v", ok, err)
			}
		})
	}
}

// measureFP returns the fraction of random hashes (absent with near
// certainty) that the summary and the block filters pass.
func measureFP(t *testing.T, r *Reader, probes int) (summary, block float64) {
	rng := rand.New(rand.NewPCG(99, 1))
	var s, b, bn int
	for i := 0; i < probes; i++ {
		h := []uint64{rng.Uint64()}
		if r.SegmentMayContainTokens(h) {
			s++
		}
		blk := i % len(r.Blocks())
		ok, err := r.BlockMayContainTokens(blk, h)
		if err != nil {
			t.Fatal(err)
		}
		bn++
		if ok {
			b++
		}
	}
	return float64(s) / float64(probes), float64(b) / float64(bn)
}

func TestTokenFilterFalsePositiveRate(t *testing.T) {
	corpus := genCorpus(44, 1, 300, 10) // ~1450 spans
	for _, fp := range []float64{0.01, 0.05} {
		t.Run(fmt.Sprint(fp), func(t *testing.T) {
			// 8 tokens a span: 11.6k distinct, a summary at 0.1% fits.
			path, info := writeCorpus(t, corpus, WriterOptions{BlockSpans: 200, ContentTokens: syntheticTokens(8), TokenFilterFP: fp})
			r := openT(t, path)
			if info.Tokens.Saturated || info.Tokens.SummaryFP > summaryFP*1.01 {
				t.Fatalf("summary of %d tokens should fit its budget at %v: %+v", info.Tokens.DistinctTokens, summaryFP, info.Tokens)
			}
			s, b := measureFP(t, r, 200_000)
			t.Logf("target %v: block filters pass %.4f, summary %.5f (estimate %.5f, %.1f bits/token)",
				fp, b, s, info.Tokens.SummaryFP, info.Tokens.SummaryBitsPerToken)
			if b < fp/2 || b > fp*1.5 {
				t.Fatalf("block false-positive rate %.4f, target %v", b, fp)
			}
			if s > 3*summaryFP {
				t.Fatalf("summary false-positive rate %.5f, target %v", s, summaryFP)
			}
		})
	}
	t.Run("overloaded summary reports its rate", func(t *testing.T) {
		// 1450 spans x 60 = 87k distinct tokens in a summary of < 32 KiB.
		path, info := writeCorpus(t, corpus, WriterOptions{BlockSpans: 200, ContentTokens: syntheticTokens(60)})
		r := openT(t, path)
		st := info.Tokens
		if st.Saturated || st.ResidentBytes > residentTokenBudget || st.SummaryFP < 0.05 {
			t.Fatalf("stats %+v", st)
		}
		s, _ := measureFP(t, r, 100_000)
		t.Logf("%d tokens, %.2f bits/token: summary passes %.4f, estimate %.4f", st.DistinctTokens, st.SummaryBitsPerToken, s, st.SummaryFP)
		if math.Abs(s-st.SummaryFP) > 0.1*st.SummaryFP {
			t.Fatalf("summary passes %.4f, stats estimate %.4f", s, st.SummaryFP)
		}
	})
	t.Run("saturated summary passes everything", func(t *testing.T) {
		path, info := writeCorpus(t, corpus, WriterOptions{BlockSpans: 200, ContentTokens: syntheticTokens(200)})
		r := openT(t, path)
		if st := info.Tokens; !st.Saturated || st.SummaryFP != 1 || st.DistinctTokens <= summaryMaxTokens || r.TokenStats() != st {
			t.Fatalf("stats %+v, reader %+v", st, r.TokenStats())
		}
		if !r.SegmentMayContainTokens([]uint64{1, 2, 3}) {
			t.Fatal("saturated summary rejected a token")
		}
		if _, b := measureFP(t, r, 20_000); b > 0.02 {
			t.Fatalf("block filters pass %.4f", b)
		}
	})
}

func TestTokenFiltersEdgeCases(t *testing.T) {
	t.Run("blocks without tokens", func(t *testing.T) {
		corpus := genCorpus(45, 2, 10, 6)
		onlyFirst := func(s *model.Span, emit func(uint64)) {
			if s.SpanID[0]%4 == 0 {
				emit(uint64(s.SpanID[1]))
			}
		}
		path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 4, ContentTokens: onlyFirst})
		r := openT(t, path)
		empty := 0
		for i := range r.Blocks() {
			spans, _ := r.ReadBlock(i)
			want := map[uint64]bool{}
			for j := range spans {
				onlyFirst(&spans[j], func(h uint64) { want[h] = true })
			}
			if len(want) == 0 {
				empty++
			}
			for h := uint64(0); h < 256; h++ {
				ok, err := r.BlockMayContainTokens(i, []uint64{h})
				if err != nil || (want[h] && !ok) || (len(want) == 0 && ok) {
					t.Fatalf("block %d (tokens %v), hash %d: %v %v", i, want, h, ok, err)
				}
			}
		}
		if empty == 0 {
			t.Fatal("corpus has no block without tokens")
		}
	})
	t.Run("empty segment", func(t *testing.T) {
		path, info := writeCorpus(t, nil, WriterOptions{ContentTokens: StandInTokens})
		r := openT(t, path)
		if !r.HasTokenFilters() || info.Tokens.DistinctTokens != 0 || r.SegmentMayContainTokens([]uint64{7}) {
			t.Fatalf("empty segment: %+v", r.TokenStats())
		}
	})
	t.Run("without the hook", func(t *testing.T) {
		path, info := writeCorpus(t, genCorpus(46, 1, 5, 5), WriterOptions{})
		r := openT(t, path)
		ok, err := r.BlockMayContainTokens(0, []uint64{1})
		if r.HasTokenFilters() || info.Tokens.Indexed || !ok || err != nil || !r.SegmentMayContainTokens([]uint64{1}) {
			t.Fatalf("segment without token filters: has %v, %v %v", r.HasTokenFilters(), ok, err)
		}
		if _, err := r.BlockMayContainTokens(len(r.Blocks()), []uint64{1}); err == nil {
			t.Fatal("out of range block accepted")
		}
	})
	t.Run("hash zero", func(t *testing.T) {
		path, _ := writeCorpus(t, genCorpus(47, 1, 3, 3), WriterOptions{ContentTokens: func(_ *model.Span, emit func(uint64)) { emit(0) }})
		r := openT(t, path)
		ok, err := r.BlockMayContainTokens(0, []uint64{0})
		if !ok || err != nil || !r.SegmentMayContainTokens([]uint64{0}) {
			t.Fatalf("hash 0 lost: %v %v", ok, err)
		}
	})
	t.Run("options", func(t *testing.T) {
		for _, fp := range []float64{-0.1, 0.6, math.NaN()} {
			if err := (WriterOptions{TokenFilterFP: fp}).Validate(); err == nil {
				t.Fatalf("TokenFilterFP %v accepted", fp)
			}
		}
	})
}

// TestTokenFilterCorruptionIsolated damages one block filter, then the
// summary: each is reported as a CorruptionError at the damaged part, and
// everything else in the segment still reads.
func TestTokenFilterCorruptionIsolated(t *testing.T) {
	corpus := textCorpus(48, 600, 3000)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 64, ContentTokens: StandInTokens})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := openT(t, path)
	nb := len(r.Blocks())
	toc := map[uint32]tocEntry{}
	foot := orig[len(orig)-footerLen:]
	tocOff := le.Uint64(foot)
	for i := 0; i < int(le.Uint32(orig[tocOff:])); i++ {
		p := orig[tocOff+4+uint64(i)*tocEntryLen:]
		toc[le.Uint32(p)] = tocEntry{Offset: le.Uint64(p[16:]), Length: le.Uint64(p[24:])}
	}
	bad := filepath.Join(t.TempDir(), "bad.rseg")
	reopen := func(data []byte) *Reader {
		t.Helper()
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rb, err := Open(bad)
		if err != nil {
			t.Fatalf("Open of a file with damaged token filters: %v", err)
		}
		t.Cleanup(func() { rb.Close() })
		if _, want := expected(corpus); len(readAll(t, rb)) != len(want) {
			t.Fatal("spans lost")
		}
		return rb
	}
	target := nb / 2
	spans, _ := r.ReadBlock(target)
	toks := spanTokens(StandInTokens, &spans[0])

	data := append([]byte(nil), orig...)
	at := int64(toc[sectionTokenFilters].Offset+r.tok.offs[target]) + 9
	data[at] ^= 0x40
	rb := reopen(data)
	for i := 0; i < nb; i++ {
		bspans, _ := rb.ReadBlock(i)
		ok, err := rb.BlockMayContainTokens(i, spanTokens(StandInTokens, &bspans[0]))
		var ce *CorruptionError
		switch {
		case i == target && (!ok || !errors.As(err, &ce) || ce.Offset != int64(toc[sectionTokenFilters].Offset+r.tok.offs[target])):
			t.Fatalf("damaged filter of block %d: %v %v", i, ok, err)
		case i != target && (!ok || err != nil):
			t.Fatalf("intact filter of block %d: %v %v", i, ok, err)
		}
	}
	if !rb.SegmentMayContainTokens(toks) {
		t.Fatal("summary lost a token")
	}
	may, err := rb.BlocksMayContainTokens(toks)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != int64(toc[sectionTokenFilters].Offset+r.tok.offs[target]) || !may[target] {
		t.Fatalf("batch lookup over a damaged filter: %v", err)
	}
	for i := range may {
		if ok, _ := r.BlockMayContainTokens(i, toks); i != target && may[i] != ok {
			t.Fatalf("batch lookup, intact block %d: %v, want %v", i, may[i], ok)
		}
	}

	data = append([]byte(nil), orig...)
	sum := toc[sectionTokenSummary]
	data[sum.Offset+sum.Length/2] ^= 0x01
	rb = reopen(data)
	if !rb.HasTokenFilters() || !rb.SegmentMayContainTokens([]uint64{12345}) {
		t.Fatal("damaged summary must pass every query")
	}
	for i := 0; i < nb; i++ {
		ok, err := rb.BlockMayContainTokens(i, []uint64{12345})
		var ce *CorruptionError
		if !ok || !errors.As(err, &ce) || ce.Offset != int64(sum.Offset) || ce.File != bad {
			t.Fatalf("block %d with a damaged summary: %v %v", i, ok, err)
		}
	}
	if may, err := rb.BlocksMayContainTokens([]uint64{12345}); !IsCorruption(err) || slices.Contains(may, false) {
		t.Fatalf("batch lookup with a damaged summary: %v %v", may, err)
	}
}

// TestTokenFormatFixture reads a committed file with token filters: a change
// to the filter layout or to the probe derivation would make existing files
// answer differently (false negatives), and fails here.
func TestTokenFormatFixture(t *testing.T) {
	corpus := textCorpus(49, 120, 500)
	path := filepath.Join("testdata", "v1-tokens.rseg")
	if *update {
		tmp, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 16, ContentTokens: StandInTokens})
		data, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := openT(t, path)
	if !r.HasTokenFilters() {
		t.Fatal("fixture has no token filters")
	}
	_, want := expected(corpus)
	requireSpansEqual(t, "fixture", readAll(t, r), want)
	for i := range r.Blocks() {
		spans, _ := r.ReadBlock(i)
		for j := range spans {
			toks := spanTokens(StandInTokens, &spans[j])
			ok, err := r.BlockMayContainTokens(i, toks)
			if !ok || err != nil || !r.SegmentMayContainTokens(toks) {
				t.Fatalf("fixture block %d span %d: tokens rejected (%v, %v)", i, j, ok, err)
			}
		}
	}
	// Pinned answers for absent tokens: how many of 5000 fixed hashes each
	// block filter and the summary pass. The same bits must answer the same.
	var counts []int
	for i := -1; i < len(r.Blocks()); i++ {
		n := 0
		for h := uint64(0); h < 5000; h++ {
			hs := []uint64{probeStep(h)}
			ok := r.SegmentMayContainTokens(hs)
			if i >= 0 {
				ok, _ = r.BlockMayContainTokens(i, hs)
			}
			if ok {
				n++
			}
		}
		counts = append(counts, n)
	}
	if got := fmt.Sprint(counts); got != fixtureTokenAnswers {
		t.Fatalf("answers for absent tokens changed:\n got %s\nwant %s", got, fixtureTokenAnswers)
	}
}

const fixtureTokenAnswers = "[7 50 60 49 42 40 57 42 41]"

// FuzzDecodeTokenSummary decodes arbitrary section 8 contents (as a hostile
// file with valid checksums would hold) and queries the result.
func FuzzDecodeTokenSummary(f *testing.F) {
	w := newTokenWriter(WriterOptions{ContentTokens: syntheticTokens(5), TokenFilterFP: 0.01})
	corpus := genCorpus(50, 1, 4, 4)
	for _, ss := range corpus {
		w.addBlock(ss[:len(ss)/2])
		w.addBlock(ss[len(ss)/2:])
	}
	seed, _ := w.summary()
	f.Add(seed, uint16(2), uint32(len(w.data)))
	f.Add([]byte{1, 0, 0, 0, 0}, uint16(0), uint32(0))
	f.Add([]byte{0, 3, 1, 1, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, uint16(1), uint32(0))
	f.Fuzz(func(t *testing.T, data []byte, nBlocks uint16, sectionLen uint32) {
		ti, err := decodeTokenSummary(string(data), int(nBlocks), uint64(sectionLen))
		if err != nil {
			return
		}
		ti.summary.testAll([]uint64{0, 1, math.MaxUint64})
		if len(ti.offs) != int(nBlocks)+1 || ti.offs[nBlocks] != uint64(sectionLen) {
			t.Fatalf("directory of %d offsets ending at %d accepted for %d blocks of %d bytes", len(ti.offs), ti.offs[len(ti.offs)-1], nBlocks, sectionLen)
		}
	})
}

// FuzzDecodeTokenFilter decodes arbitrary block filter contents and tests
// hashes against them. Nothing may panic.
func FuzzDecodeTokenFilter(f *testing.F) {
	w := newTokenWriter(WriterOptions{ContentTokens: syntheticTokens(30), TokenFilterFP: 0.01})
	w.addBlock(genCorpus(51, 1, 3, 5)["p0"])
	f.Add(w.data, uint64(1))
	f.Add([]byte{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, uint64(0))
	f.Add([]byte{1, 17, 1, 0, 0, 0, 0, 0, 0, 0, 0}, uint64(5))
	f.Fuzz(func(t *testing.T, data []byte, h uint64) {
		d := dec{s: string(data)}
		n, v := decodeTokenBloom(&d, maxBlockTokenFilterWords)
		if d.err != nil {
			return
		}
		// Without bits the token count is unchecked here: callers decide
		// (a saturated summary has tokens and no bits; a block filter may not).
		if len(v.bits)%8 != 0 || (len(v.bits) > 0 && (n == 0 || v.k < 1 || v.k > maxTokenK)) {
			t.Fatalf("accepted filter: %d tokens, %d bytes, k %d", n, len(v.bits), v.k)
		}
		v.testAll([]uint64{h, ^h})
	})
}

// TestTokenSummariesIndependent: two segments over nearly the same tokens
// (a store's segments share most of their vocabulary) have summaries of
// one size. Unsalted, they set nearly the same bits and pass the same
// absent tokens, so a word one passes costs a token map lookup in every
// segment; salted (summarySalted), a token passes both about as often as
// the product of the two rates.
func TestTokenSummariesIndependent(t *testing.T) {
	const vocab, perSpan = 60_000, 10
	// Span k of a corpus holds tokens k*perSpan .. k*perSpan+perSpan-1 of
	// the vocabulary (its index in attribute "k"); extra adds one token of
	// its own, so the two segments' token sets differ by one.
	tokens := func(extra uint64) func(*model.Span, func(uint64)) {
		return func(s *model.Span, emit func(uint64)) {
			k := uint64(s.Attributes[0].Value.Int)
			for j := range uint64(perSpan) {
				emit(probeStep(k*perSpan + j))
			}
			if k == 0 {
				emit(extra)
			}
		}
	}
	corpus := func(seed uint64) map[string][]model.Span {
		c := genCorpus(seed, 1, vocab/perSpan/4, 8)
		for p, ss := range c {
			for i := range ss {
				ss[i].Attributes = []model.KeyValue{{Key: "k", Value: model.IntValue(int64(i % (vocab / perSpan)))}}
			}
			c[p] = ss
		}
		return c
	}
	measure := func(salted bool) (pa, pb, both float64) {
		writeUnsaltedSummary = !salted
		defer func() { writeUnsaltedSummary = false }()
		pathA, _ := writeCorpus(t, corpus(81), WriterOptions{BlockSpans: 1000, ContentTokens: tokens(1)})
		pathB, _ := writeCorpus(t, corpus(82), WriterOptions{BlockSpans: 1000, ContentTokens: tokens(2)})
		a, b := openT(t, pathA), openT(t, pathB)
		if a.tok.salted != salted || b.tok.salted != salted || a.tok.saturated || b.tok.saturated {
			t.Fatalf("summaries salted %v and %v, saturated %v and %v; want salted %v, not saturated",
				a.tok.salted, b.tok.salted, a.tok.saturated, b.tok.saturated, salted)
		}
		for k := range uint64(vocab) { // no false negative
			if h := []uint64{probeStep(k)}; !a.SegmentMayContainTokens(h) || !b.SegmentMayContainTokens(h) {
				t.Fatalf("salted %v: token %d of both segments rejected", salted, k)
			}
		}
		const probes = 200_000
		var na, nb, n2 int
		for i := range uint64(probes) {
			h := []uint64{probeStep(vocab + 1_000_000 + i)} // in neither
			okA, okB := a.SegmentMayContainTokens(h), b.SegmentMayContainTokens(h)
			if okA {
				na++
			}
			if okB {
				nb++
			}
			if okA && okB {
				n2++
			}
		}
		return float64(na) / probes, float64(nb) / probes, float64(n2) / probes
	}
	pa, pb, both := measure(false)
	t.Logf("unsalted: pass rates %.4f and %.4f, both %.4f", pa, pb, both)
	if pa < 0.05 || both < 0.8*min(pa, pb) {
		t.Fatalf("unsalted summaries: pass rates %.4f and %.4f, both %.4f; want crowded summaries passing the same tokens", pa, pb, both)
	}
	pa, pb, both = measure(true)
	t.Logf("salted: pass rates %.4f and %.4f, both %.4f (independent: %.4f)", pa, pb, both, pa*pb)
	if pa < 0.05 || both > 1.5*pa*pb {
		t.Fatalf("salted summaries: pass rates %.4f and %.4f, both %.4f; want about %.4f", pa, pb, both, pa*pb)
	}
}
