package engine_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/text"
)

// contentBenchVocab is a Zipf-ranked vocabulary of consonant-vowel
// pseudo-words (no c, so no planted word below is one of them).
func contentBenchVocab(n int) []string {
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		var b strings.Builder
		for k := i; ; k /= len(cons) * len(vows) {
			j := k % (len(cons) * len(vows))
			b.WriteByte(cons[j/len(vows)])
			b.WriteByte(vows[j%len(vows)])
			if k < len(cons)*len(vows) {
				break
			}
		}
		out = append(out, b.String())
	}
	return out
}

// contentBenchMultilingual are the other scripts' words of the text.
var contentBenchMultilingual = strings.Fields(`café naïve über straße привет заказ возврат λογαριασμός
退款 订单 用户 问题 支付 注文 返金 환불 주문 طلب שלום 👍`)

// contentBenchSpans returns n LLM spans with a prompt and a completion of
// 45-75 words each, like the bench content corpus: 15% multilingual words,
// the rest Zipf-distributed over 20,000 pseudo-words.
func contentBenchSpans(r *rand.Rand, n int) []model.Span {
	vocab := contentBenchVocab(20_000)
	z := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	words := func() []string {
		ws := make([]string, 45+r.IntN(31))
		for i := range ws {
			if r.IntN(100) < 15 {
				ws[i] = contentBenchMultilingual[r.IntN(len(contentBenchMultilingual))]
			} else {
				ws[i] = vocab[z.Uint64()]
			}
		}
		return ws
	}
	start := time.Now().Add(-time.Hour)
	out := make([]model.Span, n)
	for i := range out {
		var tid model.TraceID
		var sid model.SpanID
		tid[0], tid[1], tid[2] = byte(i>>16), byte(i>>8), byte(i)
		tid[15] = 1
		sid[6], sid[7] = byte(i>>8), byte(i)
		sid[0] = 1
		at := uint64(start.Add(time.Duration(i) * time.Millisecond).UnixNano())
		out[i] = model.Span{
			TraceID: tid, SpanID: sid, Name: "chat", Service: "agent", Kind: model.KindClient,
			StartTimeUnixNano: at, EndTimeUnixNano: at + 1e6,
			Attributes: []model.KeyValue{
				{Key: "gen_ai.prompt.0.content", Value: model.StringValue(strings.Join(words(), " "))},
				{Key: "gen_ai.completion.0.content", Value: model.StringValue(strings.Join(words(), " "))},
			},
		}
	}
	return out
}

// plantWords appends words to one of span s's two texts.
func plantWords(s *model.Span, completion bool, words string) {
	kv := &s.Attributes[0]
	if completion {
		kv = &s.Attributes[1]
	}
	kv.Value = model.StringValue(kv.Value.Str + " " + words)
}

// BenchmarkContentSearch times content queries on one sealed segment of 8
// blocks of 1024 LLM spans, with the block cache off (the bench content
// suite asks a new word each time, so its blocks are never cached): a
// phrase whose words are also apart in a decoy span of another block, a
// CJK word (two rare ideographs) likewise, a word in one span and a word in
// no span. Each kind cycles through 16 planted queries.
func BenchmarkContentSearch(b *testing.B) {
	const blocks, blockSpans, items = 8, 1024, 16
	r := rand.New(rand.NewPCG(5, 6))
	spans := contentBenchSpans(r, blocks*blockSpans)
	queries := map[string][]string{}
	want := map[string][]int{}
	other := func(t int) int { // a span of another block
		for {
			if d := r.IntN(len(spans)); d/blockSpans != t/blockSpans {
				return d
			}
		}
	}
	for i := range items {
		tag := string(rune('a'+i%26)) + string(rune('a'+i/26))
		pa, pb := "cedar"+tag, "dune"+tag
		t := r.IntN(len(spans))
		plantWords(&spans[t], r.IntN(2) == 0, pa+" "+pb)
		d := other(t)
		plantWords(&spans[d], true, pa)
		plantWords(&spans[d], false, pb)
		queries["phrase"] = append(queries["phrase"], `"`+pa+" "+pb+`"`)
		want["phrase"] = append(want["phrase"], t)

		c1, c2 := string(rune(0x3400+2*i)), string(rune(0x3400+2*i+1))
		t = r.IntN(len(spans))
		plantWords(&spans[t], r.IntN(2) == 0, c1+c2)
		d = other(t)
		plantWords(&spans[d], false, c1)
		plantWords(&spans[d], true, c2)
		queries["cjk_word"] = append(queries["cjk_word"], c1+c2)
		want["cjk_word"] = append(want["cjk_word"], t)

		w := "solo" + tag
		t = r.IntN(len(spans))
		plantWords(&spans[t], r.IntN(2) == 0, w)
		queries["one_word"] = append(queries["one_word"], w)
		want["one_word"] = append(want["one_word"], t)

		queries["absent_word"] = append(queries["absent_word"], "nowhere"+tag)
		want["absent_word"] = append(want["absent_word"], -1)
	}
	e, err := engine.Open(engine.Options{Dir: b.TempDir(), Durability: engine.DurabilityBuffered,
		BlockSpans: blockSpans, BlockCacheBytes: -1, NoCompaction: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	appendSealed(b, e, spans, 1000)
	for _, kind := range []string{"phrase", "cjk_word", "one_word", "absent_word"} {
		filters := make([]query.Filter, items)
		for i, q := range queries[kind] {
			cq, err := text.ParseQuery(q)
			if err != nil {
				b.Fatal(err)
			}
			filters[i] = query.Filter{Content: cq}
		}
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % items
				got, _, res, err := e.SearchSpans(context.Background(), "default", &filters[k], 20, nil)
				if err != nil || len(res.Warnings) > 0 {
					b.Fatalf("%s: %v %v", queries[kind][k], err, res.Warnings)
				}
				if t := want[kind][k]; (t < 0 && len(got) != 0) || (t >= 0 && (len(got) != 1 || got[0].SpanID != spans[t].SpanID)) {
					b.Fatalf("%s: %d spans, want span %d", queries[kind][k], len(got), t)
				}
				i++
			}
		})
	}
	c := e.Counters()
	b.Logf("blocks examined %d, pruned %d; rows rejected on their texts %d", c.ContentBlockExamined, c.ContentBlockPruned, c.ContentRowsRejected)
}
