package text

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/rastro-dev/rastro/internal/model"
)

// spanTokensUncached is SpanTokens without the cache of long texts: every
// text tokenised.
func spanTokensUncached(s *model.Span, minLen int, emit func(uint64)) {
	sc := getScratch()
	defer putScratch(sc)
	walk(s, minLen, func(_, text string, escaped bool) bool {
		return tokenize(text, escaped, sc, func(tok string, _ bool) bool {
			if h := Hash(tok); sc.seen.insert(h) {
				emit(h)
			}
			return true
		})
	})
}

// TestSpanTokensCacheGivesTheSameTokens: spans that share long texts (more
// of them than the cache holds, so entries are evicted and slots collide),
// as plain attributes, inside JSON message arrays with escapes, and beside
// short texts, give exactly the hashes, in the same order, that tokenising
// every text gives; so does a reused buffer whose bytes change under the
// same string header.
func TestSpanTokensCacheGivesTheSameTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"refund", "Café", "naïve", "東京", "données", "ключ", "card", "on", "file", "😀", "tool_call", "JSON"}
	sentence := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
			fmt.Fprint(&b, r.IntN(50))
		}
		return b.String()
	}
	long := make([]string, 3*tokenCacheSlots)
	for i := range long {
		long[i] = fmt.Sprintf("You are assistant %d. ", i) + sentence(200+r.IntN(600)) + "\n\"quoted\" and \\ backslash"
	}
	str := func(k, v string) model.KeyValue { return model.KeyValue{Key: k, Value: model.StringValue(v)} }
	for i := range 2000 {
		sys := long[r.IntN(len(long))]
		msgs, _ := json.Marshal([]map[string]any{{"role": "system", "parts": []map[string]string{{"type": "text", "content": long[r.IntN(len(long))]}}},
			{"role": "user", "parts": []map[string]string{{"type": "text", "content": sentence(20)}}}})
		s := &model.Span{Name: "chat", Attributes: []model.KeyValue{
			str("llm.input_messages.0.message.content", sys),
			str("gen_ai.input.messages", string(msgs)),
			str("gen_ai.prompt.1.content", sentence(10)),
		}}
		var got, want []uint64
		SpanTokens(s, 0, func(h uint64) { got = append(got, h) })
		spanTokensUncached(s, 0, func(h uint64) { want = append(want, h) })
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("span %d: %d hashes with the cache, %d without, or in another order", i, len(got), len(want))
		}
	}
	// A caller whose strings view a buffer it reuses (zero-copy decoding):
	// the same memory, new bytes, of a text that falls in the same slot.
	orig := "Unseen " + long[0] // not in the cache yet: the entry will view buf
	next := ""
	for j := 0; next == ""; j++ {
		c := fmt.Sprintf("%06d", j) + orig[6:]
		if c != orig && xxhash.Sum64String(c)%tokenCacheSlots == xxhash.Sum64String(orig)%tokenCacheSlots {
			next = c
		}
	}
	buf := []byte(orig)
	view := unsafe.String(&buf[0], len(buf))
	s := &model.Span{Attributes: []model.KeyValue{str("llm.input_messages.0.message.content", view)}}
	SpanTokens(s, 0, func(uint64) {})
	copy(buf, next)
	var got, want []uint64
	SpanTokens(s, 0, func(h uint64) { got = append(got, h) })
	spanTokensUncached(s, 0, func(h uint64) { want = append(want, h) })
	if !slices.Equal(got, want) {
		t.Fatal("a text whose bytes changed got the tokens of what it held before")
	}
}
