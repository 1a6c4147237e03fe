package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/text"
)

// words in several scripts; the last ones are rare (one span each).
var contentWords = []string{
	"refund", "order", "invoice", "delivery", "café", "naïve", "Straße",
	"возврат", "заказ", "доставка", "退款", "订单", "配送", "払い戻し", "注文",
	"환불", "주문", "🔥", "🚀", "timeout", "exception", "policy", "customer",
}

// appendContentRounds appends three rounds of n content spans, sealing the
// first two (two segments and the write buffer), and returns them all.
func appendContentRounds(t *testing.T, e *Engine, r *rand.Rand, n int) []model.Span {
	t.Helper()
	var corpus []model.Span
	for round := range 3 {
		spans := contentCorpus(r, n)
		corpus = append(corpus, spans...)
		appendSpans(t, e, "default", spans)
		if round < 2 {
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return corpus
}

func contentCorpus(r *rand.Rand, traces int) []model.Span {
	g := newGen(r.Uint64())
	var out []model.Span
	n := 0
	for range traces {
		for _, s := range g.trace() {
			if r.IntN(3) == 0 {
				var b strings.Builder
				for range 8 + r.IntN(20) {
					b.WriteString(contentWords[r.IntN(len(contentWords))])
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "rareword%d", n) // a word found in exactly one span
				n++
				s.Attributes = append(s.Attributes, model.KeyValue{Key: "gen_ai.prompt.0.content", Value: model.StringValue(b.String())})
			}
			if r.IntN(20) == 0 {
				s.Events = append(s.Events, model.Event{Name: "exception", TimeUnixNano: s.StartTimeUnixNano,
					Attributes: []model.KeyValue{{Key: "exception.message", Value: model.StringValue("upstream timeout while refunding order")}}})
			}
			out = append(out, s)
		}
	}
	return out
}

func randomContentQuery(r *rand.Rand, rare int) string {
	switch r.IntN(5) {
	case 0:
		return fmt.Sprintf("rareword%d", r.IntN(rare))
	case 1:
		return "absentword" + fmt.Sprint(r.IntN(100))
	case 2:
		a, b := contentWords[r.IntN(len(contentWords))], contentWords[r.IntN(len(contentWords))]
		return fmt.Sprintf("%q", a+" "+b) // a phrase
	}
	var ws []string
	for range 1 + r.IntN(3) {
		ws = append(ws, strings.ToUpper(contentWords[r.IntN(len(contentWords))]))
	}
	return strings.Join(ws, " ")
}

// TestContentSearchEqualsBruteForce: content search returns exactly the spans
// a brute-force match over the corpus returns, with and without token
// filters, over segments and the write buffer; with filters, absent and rare
// words prune segments and blocks.
func TestContentSearchEqualsBruteForce(t *testing.T) {
	for _, tc := range []struct {
		noIndex    bool
		blockSpans int
	}{{false, 64}, {true, 64}, {false, 256}} {
		// Without a block cache every block read goes to the segment, so the
		// row-group reads are exercised.
		cacheBytes := int64(0)
		if tc.blockSpans > 64 {
			cacheBytes = -1
		}
		noIndex := tc.noIndex
		t.Run(fmt.Sprintf("noIndex=%v/blockSpans=%d", noIndex, tc.blockSpans), func(t *testing.T) {
			e, err := Open(Options{Dir: t.TempDir(), BlockSpans: tc.blockSpans, BlockCacheBytes: cacheBytes, RowGroupTokenFilters: tc.blockSpans > 64, NoContentIndex: noIndex, Durability: DurabilityBuffered})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r := rand.New(rand.NewPCG(11, 12))
			corpus := appendContentRounds(t, e, r, 120)
			rare := 0
			for i := range corpus {
				if _, ok := corpus[i].Attr("gen_ai.prompt.0.content"); ok {
					rare++
				}
			}
			for range 150 {
				q := randomContentQuery(r, rare)
				cq, err := text.ParseQuery(q)
				if err != nil {
					t.Fatalf("parse %q: %v", q, err)
				}
				f := query.Filter{Content: cq}
				want := keys(bruteForce(corpus, &f))
				got := keys(searchAll(t, e, "default", &f, 50))
				if !slices.Equal(got, want) {
					t.Fatalf("content %q: got %d spans, want %d", q, len(got), len(want))
				}
			}
			if !noIndex && tc.blockSpans > 64 {
				// Every rare word, wherever its row lies in its group.
				for i := range rare {
					cq, err := text.ParseQuery(fmt.Sprintf("rareword%d", i))
					if err != nil {
						t.Fatal(err)
					}
					f := query.Filter{Content: cq}
					want := keys(bruteForce(corpus, &f))
					if got := keys(searchAll(t, e, "default", &f, 50)); !slices.Equal(got, want) {
						t.Fatalf("rareword%d: got %d spans, want %d", i, len(got), len(want))
					}
				}
			}
			c := e.Counters()
			if noIndex && (c.ContentSegPruned+c.ContentBlockPruned != 0) {
				t.Fatalf("pruned without an index: %+v", c)
			}
			if !noIndex && (c.ContentSegPruned == 0 || c.ContentBlockPruned == 0) {
				t.Fatalf("token filters never pruned: %d segments, %d blocks", c.ContentSegPruned, c.ContentBlockPruned)
			}
			// Rare words narrow blocks of several row groups to one.
			if !noIndex && tc.blockSpans > 64 && (c.ContentGroupPruned == 0 || c.ContentGroupExamined == 0) {
				t.Fatalf("row-group filters never used: %+v", c)
			}
		})
	}
}

// plantText appends words to span s's prompt (or, with completion, to its
// completion): two texts, so that words planted in different ones never
// form a phrase.
func plantText(s *model.Span, completion bool, words string) {
	key := "gen_ai.prompt.0.content"
	if completion {
		key = "gen_ai.completion.0.content"
	}
	for i := range s.Attributes {
		if s.Attributes[i].Key == key {
			s.Attributes[i].Value = model.StringValue(s.Attributes[i].Value.Str + " " + words)
			return
		}
	}
	s.Attributes = append(s.Attributes, model.KeyValue{Key: key, Value: model.StringValue(words)})
}

// plantEvent appends words to the text of a gen_ai.choice event of s,
// adding the event when s has none.
func plantEvent(s *model.Span, words string) {
	for i := range s.Events {
		if s.Events[i].Name == "gen_ai.choice" {
			kv := &s.Events[i].Attributes[0]
			kv.Value = model.StringValue(kv.Value.Str + " " + words)
			return
		}
	}
	s.Events = append(s.Events, model.Event{TimeUnixNano: s.StartTimeUnixNano + 1, Name: "gen_ai.choice",
		Attributes: []model.KeyValue{{Key: "message", Value: model.StringValue(words)}}})
}

// TestContentPhraseDecoysEqualBruteForce: a phrase (or a CJK word, two
// ideographs written together) whose words also lie apart in decoy spans
// of the same segment (other blocks, the same block, the same row group; in
// different texts, or together in the wrong order) returns exactly the
// spans a brute-force match returns. The decoys make its words lie in a
// few places each, which the token map lists (up to four) and the scan
// reads row by row, checking the texts of those rows before it decodes
// them; with more decoys the words are "anywhere" and the block filters
// answer. Some phrases have no answer at all, only decoys. Answers and
// decoys lie in attributes (short, or long enough to be stored apart),
// events and status messages.
func TestContentPhraseDecoysEqualBruteForce(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 64 << (seed % 3), BlockCacheBytes: -1, Durability: DurabilityBuffered})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r := rand.New(rand.NewPCG(seed, 17))
			var corpus []model.Span
			var queries []string
			for round := range 3 {
				spans := contentCorpus(r, 150)
				for i := range 40 {
					tag := fmt.Sprintf("%dx%d", round, i)
					a, b := "cedar"+tag, "dune"+tag
					if i%2 == 1 { // a CJK word: two rare ideographs
						a, b = string(rune(0x3400+2*(40*round+i))), string(rune(0x3400+2*(40*round+i)+1))
					}
					sep := " "
					if i%2 == 1 {
						sep = ""
					}
					answer := r.IntN(len(spans))
					switch {
					case i%7 == 3: // only decoys
					case i%5 == 2:
						plantEvent(&spans[answer], a+sep+b)
					default:
						plantText(&spans[answer], r.IntN(2) == 0, a+sep+b)
					}
					for range r.IntN(5) { // 0..4 decoys
						d := r.IntN(len(spans))
						switch r.IntN(5) {
						case 0: // near the answer: often its block or row group
							d = min(max(answer+r.IntN(9)-4, 0), len(spans)-1)
						case 1: // both words together, in the wrong order
							plantText(&spans[d], r.IntN(2) == 0, b+sep+a)
							continue
						case 2: // one in an event, one in the status message
							plantEvent(&spans[d], a)
							spans[d].StatusMessage += " " + b
							continue
						}
						first := r.IntN(2) == 0
						plantText(&spans[d], first, a)
						plantText(&spans[d], !first, b)
					}
					if r.IntN(3) == 0 { // one word alone somewhere else
						plantText(&spans[r.IntN(len(spans))], r.IntN(2) == 0, a)
					}
					if sep == " " {
						queries = append(queries, fmt.Sprintf("%q", a+" "+b))
					} else {
						queries = append(queries, a+b)
					}
				}
				corpus = append(corpus, spans...)
				appendSpans(t, e, "default", spans)
				if round < 2 {
					if err := e.Seal(); err != nil {
						t.Fatal(err)
					}
				}
			}
			found := 0
			for _, q := range queries {
				cq, err := text.ParseQuery(q)
				if err != nil {
					t.Fatalf("parse %q: %v", q, err)
				}
				if len(cq.Phrases) != 1 {
					t.Fatalf("%q parses to %d phrases", q, len(cq.Phrases))
				}
				f := query.Filter{Content: cq}
				want := keys(bruteForce(corpus, &f))
				got := keys(searchAll(t, e, "default", &f, 50))
				if !slices.Equal(got, want) {
					t.Fatalf("content %s: got %d spans %v, want %d %v", q, len(got), got, len(want), want)
				}
				found += len(want)
			}
			if found < len(queries)/2 {
				t.Fatalf("only %d answers to %d queries", found, len(queries))
			}
			if c := e.Counters(); c.ContentGroupExamined == 0 || c.ContentRowsRejected == 0 {
				t.Fatalf("no query was located to rows, or no decoy row rejected on its texts: %+v", c)
			}
		})
	}
}
