package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/text"
)

// TestBufferContentFiltersEqualBruteForce: content searches over a write
// buffer of several full chunks (each with a token filter built on the
// first content search that reaches it) and an open one equal a
// brute-force match, for rare, common, absent and per-round words and
// phrases, with and without a content index. With the index, a word in
// no span skips every full chunk, a round's word skips the chunks of other
// rounds, and the filters are counted in the buffer's size estimate.
func TestBufferContentFiltersEqualBruteForce(t *testing.T) {
	for _, noIndex := range []bool{false, true} {
		t.Run(fmt.Sprintf("noIndex=%v", noIndex), func(t *testing.T) {
			e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 64, SealAge: time.Hour, SealBytes: 1 << 40,
				MaxBufferBytes: 1 << 40, Durability: DurabilityBuffered, NoContentIndex: noIndex})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r := rand.New(rand.NewPCG(21, 22))
			var corpus []model.Span
			const rounds = 3
			for round := range rounds {
				var spans []model.Span
				for len(spans) < chunkRows+chunkRows/2 {
					spans = append(spans, contentCorpus(r, 50)...)
				}
				for i := range spans {
					plantText(&spans[i], i%2 == 0, fmt.Sprintf("roundword%d", round))
				}
				appendSpans(t, e, "default", spans)
				corpus = append(corpus, spans...)
			}
			full := fullChunks(e)
			if full < rounds {
				t.Fatalf("%d full chunks, want at least %d", full, rounds)
			}
			bytesBefore := bufferBytes(e)
			rare := 0
			for i := range corpus {
				if _, ok := corpus[i].Attr("gen_ai.prompt.0.content"); ok {
					rare++
				}
			}
			qs := []string{"absentword1", "roundword0", "roundword2", "roundword4", `"roundword1 refund"`, "ROUNDWORD2 order"}
			for range 30 {
				qs = append(qs, randomContentQuery(r, rare))
			}
			check := func(qs []string) {
				t.Helper()
				for _, q := range qs {
					cq, err := text.ParseQuery(q)
					if err != nil {
						t.Fatalf("parse %q: %v", q, err)
					}
					f := query.Filter{Content: cq}
					want := keys(bruteForce(corpus, &f))
					if got := keys(searchAll(t, e, "default", &f, 1000)); !slices.Equal(got, want) {
						t.Fatalf("content %q: got %d spans, want %d", q, len(got), len(want))
					}
				}
			}
			check(qs)
			if !noIndex {
				if _, held := tokenFilters(e); bufferBytes(e)-bytesBefore != held || held == 0 {
					t.Fatalf("the buffer estimate grew by %d bytes while the token filters hold %d", bufferBytes(e)-bytesBefore, held)
				}
			}
			// The open chunk's partial filter (built by those queries) is
			// topped up while it fills: queries between appends, until the
			// chunk is full and its partial filter becomes its filter.
			for !noIndex && fullChunks(e) == full {
				spans := contentCorpus(r, 60)
				for i := range spans {
					plantText(&spans[i], false, "roundword4")
				}
				appendSpans(t, e, "default", spans)
				corpus = append(corpus, spans...)
				check(qs[:8])
			}
			if !noIndex {
				check(qs) // the filled chunk's filter: its partial one, topped up
			}
			if !noIndex && fullChunks(e) <= full {
				t.Fatalf("the open chunk did not fill (%d full chunks)", fullChunks(e))
			}
			full = fullChunks(e)
			pruned := e.Counters().ContentChunkPruned
			if noIndex {
				if n, _ := tokenFilters(e); pruned != 0 || n != 0 {
					t.Fatalf("without a content index: %d chunks pruned, %d token filters", pruned, n)
				}
				return
			}
			if pruned == 0 {
				t.Fatal("no full chunk was skipped on its token filter")
			}
			// The filters are built: a word in no span skips every full
			// chunk but for the filters' false positives (1% a word).
			before := e.Counters().ContentChunkPruned
			const absent = 20
			for i := range absent {
				cq, _ := text.ParseQuery(fmt.Sprintf("missingterm%c", 'a'+i))
				if got := searchAll(t, e, "default", &query.Filter{Content: cq}, 10); len(got) != 0 {
					t.Fatalf("an absent word found %d spans", len(got))
				}
			}
			if n := e.Counters().ContentChunkPruned - before; n < int64(absent*full*9/10) {
				t.Fatalf("%d absent words skipped %d of %d full chunks", absent, n, absent*full)
			}
		})
	}
}

// fullChunks counts the full chunks of the engine's write buffers.
func fullChunks(e *Engine) int {
	v := e.view()
	defer v.release()
	n := 0
	for _, m := range v.mems {
		for _, cv := range m.chunkViews() {
			if cv.rows == chunkRows {
				n++
			}
		}
	}
	return n
}

// tokenFilters counts the buffer chunks holding a token filter, whole or
// partial, and sums the filters' heap.
func tokenFilters(e *Engine) (n int, bytes int64) {
	v := e.view()
	defer v.release()
	for _, m := range v.mems {
		for _, cv := range m.chunkViews() {
			cv.c.sum.tokMu.Lock()
			for _, ct := range []*chunkTokens{cv.c.sum.tokens.Load(), cv.c.sum.partial} {
				if ct != nil {
					n++
					bytes += ct.heapBytes()
				}
			}
			cv.c.sum.tokMu.Unlock()
		}
	}
	return n, bytes
}

// bufferBytes is the engine's write buffers' size estimate.
func bufferBytes(e *Engine) int64 {
	return sumBuffers(e, func(m *memtable) int64 { return m.bytes.Load() })
}

// sumBuffers sums f over the engine's write buffers.
func sumBuffers(e *Engine, f func(*memtable) int64) int64 {
	v := e.view()
	defer v.release()
	var n int64
	for _, m := range v.mems {
		n += f(m)
	}
	return n
}

// TestChunkTokensFalsePositiveRate: the chunk filter, sized for its
// distinct tokens at chunkTokensFP, keeps every token it was built from and
// admits absent ones at about that rate.
func TestChunkTokensFalsePositiveRate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{10, 1000, 50000} {
		ct := &chunkTokens{}
		mbits := int(float64(n) * 9.6) // what buildChunkTokens computes for 1%
		ct.words = make([]uint64, (mbits+63)/64)
		ct.k = 7
		in := make([]uint64, n)
		for i := range in {
			in[i] = r.Uint64()
			ct.add(in[i])
		}
		for _, h := range in {
			if !ct.hasAll([]uint64{h}) {
				t.Fatalf("n=%d: a token it holds is rejected", n)
			}
		}
		const probes = 200000
		fp := 0
		for range probes {
			if ct.hasAll([]uint64{r.Uint64()}) {
				fp++
			}
		}
		if rate := float64(fp) / probes; rate > 2*chunkTokensFP {
			t.Fatalf("n=%d: false-positive rate %.4f, designed for %.2f", n, rate, chunkTokensFP)
		}
	}
}

// TestBufferContentRowSignatures: in a buffer chunk that passes its token
// filter, a content search decodes only the rows whose token signatures
// may hold every word: its matches and under 5% of the others (plain spans
// carry few tokens: a status message), in a full chunk and in the open one,
// and finds what brute force finds; a row with many tokens (a prompt) is
// still decoded and found.
func TestBufferContentRowSignatures(t *testing.T) {
	e := openBuffered(t)
	defer e.Close()
	g := newGen(5)
	var corpus []model.Span
	for len(corpus) < chunkRows+chunkRows/2 { // a full chunk and an open one
		corpus = append(corpus, g.trace()...)
	}
	words := []string{"timeout", "unavailable", "denied", "reset", "throttled"}
	refused := 0
	for i := range corpus {
		s := &corpus[i]
		s.StatusMessage = "upstream " + words[i%len(words)]
		if i%200 == 7 {
			s.StatusMessage = "connection refused by upstream"
			refused++
		}
	}
	// A span whose prompt holds many words, the one we look for among them.
	var many strings.Builder
	for i := range 300 {
		fmt.Fprintf(&many, "w%d ", i)
	}
	plantText(&corpus[1000], false, many.String()+"refused")
	refused++
	appendSpans(t, e, "default", corpus)
	if full := fullChunks(e); full != 1 {
		t.Fatalf("%d full chunks, want 1 and an open one", full)
	}
	decoded := func() int64 { return sumBuffers(e, func(m *memtable) int64 { return m.rowsDecoded.Load() }) }
	for _, q := range []string{"refused", "upstream refused", "reset", "absentword"} {
		cq, err := text.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		f := query.Filter{Content: cq}
		want := keys(bruteForce(corpus, &f))
		before := decoded()
		if got := keys(searchAll(t, e, "default", &f, 10000)); !slices.Equal(got, want) {
			t.Fatalf("content %q: got %d spans, want %d", q, len(got), len(want))
		}
		n := decoded() - before
		if q == "refused" || q == "upstream refused" {
			if len(want) != refused {
				t.Fatalf("%q: brute force finds %d spans, %d planted", q, len(want), refused)
			}
			// Every match is decoded; of the others (two bits in 64 of a
			// handful of tokens each) well under 5%.
			if n < int64(len(want)) || n > int64(len(want))+int64(len(corpus))/20 {
				t.Fatalf("%q decoded %d rows of %d for %d matches", q, n, len(corpus), len(want))
			}
		}
	}
}
