package text

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// snippetCase is a query and the spellings of what it finds: a brute-force
// search for them in a text gives every hit Snippets must mark. Decoys
// hold the query's words in a text without being a hit.
type snippetCase struct {
	query     string
	spellings []string
	decoys    []string
	cjk       bool // planted into text without spaces
}

var snippetCases = []snippetCase{
	{query: "refund", spellings: []string{"refund", "Refund", "REFUND"}},
	{query: `"cafe creme"`, spellings: []string{"Café Crème", "cafe creme", "CAFÉ CRÈME", "Cafe\u0301 Cre\u0300me"},
		decoys: []string{"Café alpha Crème", "creme cafe"}},
	{query: "straße", spellings: []string{"Straße", "STRASSE", "strasse", "STRAẞE"}},
	{query: "退款", spellings: []string{"退款"}, decoys: []string{"退了款", "款退"}, cjk: true},
	{query: `"order 42" refund`, spellings: []string{"Order 42", "order-42", "refund", "REFUND"},
		decoys: []string{"order alpha 42"}},
}

var snippetFiller = strings.Fields("alpha bravo status delay user shipping package the of to and invoice ticket agent tool model")

const cjkFiller = "请帮我查询订单用户问题支付谢谢您好"

// plantedText returns a text of about words filler words with spellings
// and decoys planted at random places.
func plantedText(r *rand.Rand, c snippetCase, words int) string {
	var parts []string
	if c.cjk {
		f := []rune(cjkFiller)
		for range words {
			parts = append(parts, string(f[r.IntN(len(f))]))
		}
	} else {
		for range words {
			parts = append(parts, snippetFiller[r.IntN(len(snippetFiller))])
		}
	}
	for range 1 + r.IntN(4) {
		k := r.IntN(len(parts) + 1)
		p := c.spellings[r.IntN(len(c.spellings))]
		if r.IntN(3) == 0 && len(c.decoys) > 0 {
			p = c.decoys[r.IntN(len(c.decoys))]
		}
		parts = slices.Insert(parts, k, p)
	}
	sep := " "
	if c.cjk {
		sep = ""
	}
	return strings.Join(parts, sep)
}

// bruteHits returns every [start, end) of text where a spelling occurs.
func bruteHits(text string, spellings []string) [][2]int {
	var out [][2]int
	for _, sp := range spellings {
		for i := 0; ; {
			j := strings.Index(text[i:], sp)
			if j < 0 {
				break
			}
			// A whole word only (refund in refunds is not a hit).
			lo, hi := i+j, i+j+len(sp)
			if wordEdge(text, lo, hi) {
				out = append(out, [2]int{lo, hi})
			}
			i = lo + 1
		}
	}
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	return slices.Compact(out)
}

// wordEdge reports whether text[lo:hi] is not part of a longer word
// (ideographs are words of their own).
func wordEdge(text string, lo, hi int) bool {
	isWord := func(r rune) bool {
		return r < 0x2E80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r))
	}
	before, _ := utf8.DecodeLastRuneInString(text[:lo])
	after, _ := utf8.DecodeRuneInString(text[hi:])
	return (lo == 0 || !isWord(before)) && (hi == len(text) || !isWord(after))
}

// TestSnippetsEqualBruteForce: every hit Snippets marks is, at its byte
// offsets in the stored text, one of the query's spellings found by a
// brute-force search, and every such spelling inside a snippet is marked;
// for words, phrases, accented and decomposed (NFD) text, CJK words in
// text without spaces, in span attributes, events and the status message.
func TestSnippetsEqualBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range snippetCases {
		q, err := ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 200 {
			texts := map[string]string{}
			s := model.Span{}
			for _, key := range []string{"gen_ai.prompt.0.content", "gen_ai.completion.0.content"} {
				if r.IntN(3) > 0 {
					texts[SnippetAttribute+"/"+key] = plantedText(r, c, 5+r.IntN(80))
					s.Attributes = append(s.Attributes, model.KeyValue{Key: key, Value: model.StringValue(texts[SnippetAttribute+"/"+key])})
				}
			}
			if r.IntN(2) == 0 {
				texts[SnippetEvent+"/message"] = plantedText(r, c, 5+r.IntN(40))
				s.Events = append(s.Events, model.Event{Name: "gen_ai.choice",
					Attributes: []model.KeyValue{{Key: "message", Value: model.StringValue(texts[SnippetEvent+"/message"])}}})
			}
			if r.IntN(3) == 0 {
				texts[SnippetStatus+"/"] = plantedText(r, c, 3+r.IntN(10))
				s.StatusMessage = texts[SnippetStatus+"/"]
			}
			what := fmt.Sprintf("%s round %d", c.query, round)
			withHits := 0
			for _, text := range texts {
				if len(bruteHits(text, c.spellings)) > 0 {
					withHits++
				}
			}
			sns := Snippets(&s, q, 0)
			if want := min(withHits, MaxSnippets); len(sns) < want || len(sns) > MaxSnippets {
				t.Fatalf("%s: %d snippets, want %d to %d (texts %q)", what, len(sns), want, MaxSnippets, texts)
			}
			for _, sn := range sns {
				text, ok := texts[sn.Source+"/"+sn.Key]
				if !ok {
					t.Fatalf("%s: snippet from unknown source %+v", what, sn)
				}
				if sn.Offset < 0 || sn.Offset+len(sn.Text) > len(text) || text[sn.Offset:sn.Offset+len(sn.Text)] != sn.Text {
					t.Fatalf("%s: snippet %q at %d is not the text %q there", what, sn.Text, sn.Offset, text)
				}
				if sn.CutEnd != (sn.Offset+len(sn.Text) < len(text)) {
					t.Fatalf("%s: CutEnd %v for %q of %q", what, sn.CutEnd, sn.Text, text)
				}
				if n := utf8.RuneCountInString(sn.Text); n > SnippetChars {
					t.Fatalf("%s: snippet of %d characters: %q", what, n, sn.Text)
				}
				var inside [][2]int
				for _, h := range bruteHits(text, c.spellings) {
					if h[0] >= sn.Offset && h[1] <= sn.Offset+len(sn.Text) {
						inside = append(inside, [2]int{h[0] - sn.Offset, h[1] - sn.Offset})
					}
				}
				var got [][2]int
				for _, h := range sn.Hits {
					got = append(got, [2]int{h.Start, h.End})
				}
				if len(got) == 0 || !slices.Equal(got, inside) {
					t.Fatalf("%s: snippet %q marks %v, brute force finds %v", what, sn.Text, got, inside)
				}
			}
		}
	}
}

// TestSnippetsJSONMessages: in a value holding a JSON document, a snippet
// is cut from the JSON string the hit is in, escapes decoded.
func TestSnippetsJSONMessages(t *testing.T) {
	msgs := []map[string]string{
		{"role": "system", "content": "You are a helpful agent."},
		{"role": "user", "content": "Please \"refund\" my order\nand tell me when: 退款 please, café crème"},
	}
	doc, _ := json.Marshal(msgs)
	s := model.Span{Attributes: []model.KeyValue{{Key: "gen_ai.input.messages", Value: model.StringValue(string(doc))}}}
	content := msgs[1]["content"]
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"refund", []string{"refund"}},
		{"退款", []string{"退款"}},
		{`"cafe creme" order`, []string{"order", "café crème"}},
		{"user", nil}, // a role: a structural value, not text
	} {
		q, err := ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		sns := Snippets(&s, q, 0)
		if c.want == nil {
			if len(sns) != 0 {
				t.Fatalf("%s: %+v, want no snippet", c.query, sns)
			}
			continue
		}
		if len(sns) != 1 || sns[0].Key != "gen_ai.input.messages" || sns[0].Source != SnippetAttribute {
			t.Fatalf("%s: %+v, want one snippet of gen_ai.input.messages", c.query, sns)
		}
		sn := sns[0]
		if content[sn.Offset:sn.Offset+len(sn.Text)] != sn.Text {
			t.Fatalf("%s: %q at %d is not in the decoded message %q", c.query, sn.Text, sn.Offset, content)
		}
		var got []string
		for _, h := range sn.Hits {
			got = append(got, sn.Text[h.Start:h.End])
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("%s: hits %q, want %q", c.query, got, c.want)
		}
	}
}

// TestSnippetsLongText: hits far apart in a long text give separate
// snippets of at most SnippetChars characters, cut between words.
func TestSnippetsLongText(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		if i == 10 || i == 200 || i == 390 {
			b.WriteString("Refund ")
			continue
		}
		b.WriteString(snippetFiller[i%len(snippetFiller)] + " ")
	}
	text := strings.TrimSpace(b.String())
	s := model.Span{StatusMessage: text}
	q, _ := ParseQuery("refund")
	sns := Snippets(&s, q, 0)
	if len(sns) != 3 {
		t.Fatalf("%d snippets, want 3: %+v", len(sns), sns)
	}
	for k, sn := range sns {
		if sn.Source != SnippetStatus || len(sn.Hits) != 1 || sn.Text[sn.Hits[0].Start:sn.Hits[0].End] != "Refund" {
			t.Fatalf("snippet %d: %+v", k, sn)
		}
		if sn.Offset > 0 && text[sn.Offset-1] != ' ' || sn.CutEnd && text[sn.Offset+len(sn.Text)] != ' ' {
			t.Fatalf("snippet %d %q cuts a word", k, sn.Text)
		}
		if n := utf8.RuneCountInString(sn.Text); n > SnippetChars || n < SnippetChars-2*snippetSnap {
			t.Fatalf("snippet %d: %d characters", k, n)
		}
	}
}

// BenchmarkSnippets times the snippets of one LLM span (a prompt and a
// completion of 60 words each) for a word and a phrase: what a search
// answer adds per span of its page.
func BenchmarkSnippets(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, c := range []snippetCase{snippetCases[0], snippetCases[1]} {
		s := model.Span{Attributes: []model.KeyValue{
			{Key: "gen_ai.prompt.0.content", Value: model.StringValue(plantedText(r, c, 60))},
			{Key: "gen_ai.completion.0.content", Value: model.StringValue(plantedText(r, c, 60))},
		}}
		q, err := ParseQuery(c.query)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.query, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(Snippets(&s, q, 0)) == 0 {
					b.Fatal("no snippet")
				}
			}
		})
	}
}
