package text

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

func TestParseQuery(t *testing.T) {
	cases := []struct {
		in      string
		terms   []string
		phrases [][]string
		str     string
	}{
		{`refund "order 42" naïve`, []string{"refund", "order", "42", "naive"}, [][]string{{"order", "42"}}, `refund naive "order 42"`},
		{`  Refund   REFUND refund `, []string{"refund"}, nil, `refund`},
		{`退款`, []string{"退", "款"}, [][]string{{"退", "款"}}, `"退 款"`},
		{`order-42 user_id`, []string{"order", "42", "user", "id"}, [][]string{{"order", "42"}, {"user", "id"}}, `"order 42" "user id"`},
		{`"a b" "a b" "A B"`, []string{"a", "b"}, [][]string{{"a", "b"}}, `"a b"`},
		{`x "" y`, []string{"x", "y"}, nil, `x y`},
		{`"solo"`, []string{"solo"}, nil, `solo`},
		{`OR -x`, []string{"or", "x"}, nil, `or x`},
		{`foo"bar baz"qux`, []string{"foo", "bar", "baz", "qux"}, [][]string{{"bar", "baz"}}, `foo qux "bar baz"`},
		{`👍🏽 🇫🇷 Привет`, []string{"👍", "🇫🇷", "привет"}, nil, `👍 🇫🇷 привет`},
		{"tab\tsep\u3000ideographic", []string{"tab", "sep", "ideographic"}, nil, `tab sep ideographic`},
	}
	for _, c := range cases {
		q, err := ParseQuery(c.in)
		if err != nil {
			t.Errorf("ParseQuery(%q): %v", c.in, err)
			continue
		}
		if !slices.Equal(q.Terms, c.terms) || !slices.EqualFunc(q.Phrases, c.phrases, slices.Equal) {
			t.Errorf("ParseQuery(%q) = %q %q, want %q %q", c.in, q.Terms, q.Phrases, c.terms, c.phrases)
		}
		if s := q.String(); s != c.str {
			t.Errorf("ParseQuery(%q).String() = %q, want %q", c.in, s, c.str)
		}
		q2, err := ParseQuery(q.String())
		if err != nil || q2.String() != q.String() {
			t.Errorf("String %q does not parse back to itself: %v %v", q.String(), q2, err)
		}
	}
}

func TestParseQueryErrors(t *testing.T) {
	cases := []struct {
		in  string
		pos int
		msg string
	}{
		{``, 0, "empty query"},
		{`   `, 0, "empty query"},
		{`!!! ... ---`, 0, "empty query"},
		{`""`, 0, "empty query"},
		{`refund "order 42`, 7, "unterminated quote"},
		{`"a" "b" "`, 8, "unterminated quote"},
		{`"` + strings.Repeat("w ", 65) + `"`, 0, "phrase of 65 words: at most 64"},
		{strings.Repeat("x", 0) + manyWords(65), 4 * 64, "more than 64 distinct words"},
	}
	for _, c := range cases {
		_, err := ParseQuery(c.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseQuery(%q): want a *ParseError, got %v", c.in, err)
			continue
		}
		if pe.Pos != c.pos || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("ParseQuery(%q) = %v, want position %d and %q", c.in, err, c.pos, c.msg)
		}
	}
}

// manyWords returns n distinct 3-letter words separated by spaces.
func manyWords(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + "z ")
	}
	return b.String()
}

func TestQueryHashes(t *testing.T) {
	q, err := ParseQuery(`b a "a b" c`)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{Hash("b"), Hash("a"), Hash("c")}
	if got := q.Hashes(); !slices.Equal(got, want) {
		t.Errorf("Hashes = %x, want %x", got, want)
	}
}

// word is one vocabulary entry of the random corpora: surface forms that
// must all be found by each other, and the tokens they stand for, written
// out by hand (the reference does not call the tokeniser).
type word struct {
	forms []string
	toks  []string
}

var vocabulary = []word{
	{[]string{"refund", "Refund", "REFUND"}, []string{"refund"}},
	{[]string{"order", "Order"}, []string{"order"}},
	{[]string{"42"}, []string{"42"}},
	{[]string{"café", "Café", "CAFÉ", "cafe"}, []string{"cafe"}},
	{[]string{"naïve", "naive", "NAÏVE"}, []string{"naive"}},
	{[]string{"Straße", "strasse", "STRASSE"}, []string{"strasse"}},
	{[]string{"mañana", "MAÑANA"}, []string{"manana"}},
	{[]string{"øl", "ØL"}, []string{"øl"}},
	{[]string{"возврат", "Возврат", "ВОЗВРАТ"}, []string{"возврат"}},
	{[]string{"заказ", "Заказ"}, []string{"заказ"}},
	{[]string{"σοφός", "ΣΟΦΟΣ", "σοφοσ"}, []string{"σοφοσ"}},
	{[]string{"退款"}, []string{"退", "款"}},
	{[]string{"订单"}, []string{"订", "单"}},
	{[]string{"款项"}, []string{"款", "项"}},
	{[]string{"ラーメン"}, []string{"ラ", "ー", "メ", "ン"}},
	{[]string{"かな"}, []string{"か", "な"}},
	{[]string{"환불"}, []string{"환불"}},
	{[]string{"주문"}, []string{"주문"}},
	{[]string{"استرداد"}, []string{"استرداد"}},
	{[]string{"नमस्ते"}, []string{"नमस्ते"}},
	{[]string{"👍", "👍🏽"}, []string{"👍"}},
	{[]string{"🇫🇷"}, []string{"🇫🇷"}},
	{[]string{"user_id", "USER_ID"}, []string{"user", "id"}},
	{[]string{"id"}, []string{"id"}},
}

// corpusWords lists every surface form, for the tokeniser tests.
var corpusWords = func() []string {
	var out []string
	for _, w := range vocabulary {
		out = append(out, w.forms...)
	}
	return append(out, "Hello, World! https://x.io/a_b?c=d#e", "1️⃣ 👨‍👩‍👧 ＡＢＣ ﬁ ½ ⅻ ǅ ᾈ İ ϴ K Ω")
}()

var separators = []string{" ", " ", ", ", ". ", "\n", " - ", "/", "…"}

// refText is a generated text: its words (vocabulary indexes) and where it
// is put on the span.
type refText struct {
	words []int
	text  string
}

func randText(r *rand.Rand) refText {
	var rt refText
	var b strings.Builder
	for i := range 1 + r.IntN(8) {
		if i > 0 {
			b.WriteString(separators[r.IntN(len(separators))])
		}
		w := r.IntN(len(vocabulary))
		rt.words = append(rt.words, w)
		b.WriteString(vocabulary[w].forms[r.IntN(len(vocabulary[w].forms))])
	}
	rt.text = b.String()
	return rt
}

func (rt refText) tokens() []string {
	var out []string
	for _, w := range rt.words {
		out = append(out, vocabulary[w].toks...)
	}
	return out
}

// refSpan is a random span and the texts the reference searches.
type refSpan struct {
	span  *model.Span
	texts []refText // the searched texts
}

func randRefSpan(r *rand.Rand) refSpan {
	var rs refSpan
	s := &model.Span{Name: randText(r).text, Resource: &model.Resource{Attributes: []model.KeyValue{
		{Key: "service.name", Value: model.StringValue("svc")},
		{Key: "host.description", Value: model.StringValue(randText(r).text + " padding padding padding padding")},
	}}}
	searched := func(rt refText) { rs.texts = append(rs.texts, rt) }
	attr := func(k string, v string) {
		s.Attributes = append(s.Attributes, model.KeyValue{Key: k, Value: model.StringValue(v)})
	}
	for range r.IntN(4) {
		switch k := r.IntN(8); {
		case k == 0:
			rt := randText(r)
			attr("input.value", rt.text)
			searched(rt)
		case k == 1:
			rt := randText(r)
			attr("gen_ai.completion.0.content", rt.text)
			searched(rt)
		case k == 2:
			// A JSON message list: each content is a text of its own.
			a, b := randText(r), randText(r)
			attr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":`+jsonQuote(a.text)+`}]},`+
				`{"role":"assistant","parts":[{"type":"text","content":`+jsonQuote(b.text)+`}]}]`)
			searched(a)
			searched(b)
		case k == 3:
			rt := randText(r)
			s.Events = append(s.Events, model.Event{Name: "log", Attributes: []model.KeyValue{{Key: "message", Value: model.StringValue(rt.text)}}})
			searched(rt)
		case k == 4 && s.StatusMessage == "":
			rt := randText(r)
			s.StatusMessage = rt.text
			searched(rt)
		default:
			rt := randText(r)
			attr("note", rt.text)
			if len(rt.text) >= DefaultMinLen {
				searched(rt)
			}
		}
	}
	rs.span = s
	return rs
}

// jsonQuote writes s as a JSON string, escaping non-ASCII as \uXXXX the way
// Python's json.dumps does.
func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x80:
			b.WriteRune(r)
		case r < 0x10000:
			b.WriteString(`\u` + hex16(r))
		default:
			r -= 0x10000
			b.WriteString(`\u` + hex16(0xD800+r>>10) + `\u` + hex16(0xDC00+r&0x3FF))
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hex16(r rune) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[r>>12&15], digits[r>>8&15], digits[r>>4&15], digits[r&15]})
}

// refQuery is a random query and what it means, built from the vocabulary.
type refQuery struct {
	text    string
	terms   []string
	phrases [][]string
}

func randRefQuery(r *rand.Rand, spans []refSpan) refQuery {
	var q refQuery
	var parts []string
	addTerms := func(toks []string) {
		for _, t := range toks {
			if !slices.Contains(q.terms, t) {
				q.terms = append(q.terms, t)
			}
		}
		if len(toks) >= 2 {
			q.phrases = append(q.phrases, toks)
		}
	}
	for range 1 + r.IntN(3) {
		w := vocabulary[r.IntN(len(vocabulary))]
		parts = append(parts, w.forms[r.IntN(len(w.forms))])
		addTerms(w.toks)
	}
	if r.IntN(2) == 0 {
		// A phrase: often cut from a real text so that it matches.
		var ws []int
		for range 2 + r.IntN(2) {
			ws = append(ws, r.IntN(len(vocabulary)))
		}
		if rs := spans[r.IntN(len(spans))]; r.IntN(3) > 0 && len(rs.texts) > 0 {
			if rt := rs.texts[r.IntN(len(rs.texts))]; len(rt.words) >= 2 {
				i := r.IntN(len(rt.words) - 1)
				ws = rt.words[i : i+2+r.IntN(len(rt.words)-i-1)]
			}
		}
		var forms, toks []string
		for _, w := range ws {
			forms = append(forms, vocabulary[w].forms[r.IntN(len(vocabulary[w].forms))])
			toks = append(toks, vocabulary[w].toks...)
		}
		parts = append(parts, `"`+strings.Join(forms, " ")+`"`)
		addTerms(toks)
	}
	r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	q.text = strings.Join(parts, " ")
	return q
}

// refMatch is the reference: a brute-force statement of the semantics.
func refMatch(q refQuery, rs refSpan) bool {
	for _, t := range q.terms {
		found := false
		for _, rt := range rs.texts {
			if slices.Contains(rt.tokens(), t) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	for _, p := range q.phrases {
		found := false
		for _, rt := range rs.texts {
			toks := rt.tokens()
			for i := 0; i+len(p) <= len(toks); i++ {
				if slices.Equal(toks[i:i+len(p)], p) {
					found = true
				}
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestMatchesAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	// Short texts so that phrases spanning two texts are common: they
	// must not match.
	spans := make([]refSpan, 400)
	for i := range spans {
		spans[i] = randRefSpan(r)
	}
	matched, queries := 0, 600
	for range queries {
		rq := randRefQuery(r, spans)
		q, err := ParseQuery(rq.text)
		if err != nil {
			t.Fatalf("ParseQuery(%q): %v", rq.text, err)
		}
		hashes := q.Hashes()
		for _, rs := range spans {
			want := refMatch(rq, rs)
			if got := q.Matches(rs.span, 0); got != want {
				t.Fatalf("query %q (parsed %q %q, reference %q %q) on span with texts %+v: Matches = %v, reference %v",
					rq.text, q.Terms, q.Phrases, rq.terms, rq.phrases, rs.texts, got, want)
			}
			if !want {
				continue
			}
			matched++
			toks := map[uint64]bool{}
			SpanTokens(rs.span, 0, func(h uint64) { toks[h] = true })
			for i, h := range hashes {
				if !toks[h] {
					t.Fatalf("query %q matches but term %q is not among the span's tokens", rq.text, q.Terms[i])
				}
			}
		}
	}
	t.Logf("%d matches of %d queries over %d spans", matched, queries, len(spans))
	if matched < 500 {
		t.Fatalf("only %d matches: the comparison is too weak", matched)
	}
}

func TestMatchesZeroQueryAndGroups(t *testing.T) {
	s := &model.Span{Attributes: []model.KeyValue{{Key: "input.value", Value: model.StringValue(manyWords(100) + " x y")}}}
	if !(&Query{}).Matches(s, 0) {
		t.Error("the zero Query must match every span")
	}
	var all Query
	Tokens(manyWords(100), func(tok string) { all.Terms = append(all.Terms, tok) })
	for i := range 10 {
		all.Phrases = append(all.Phrases, all.Terms[i:i+2])
	}
	if !all.Matches(s, 0) {
		t.Error("a hand-built query of 100 terms and 10 phrases present in the span must match")
	}
	all.Phrases = append(all.Phrases, []string{"y", "x"})
	if all.Matches(s, 0) {
		t.Error("the 11th phrase is absent: no match")
	}
}

func TestMatchesDoesNotAllocate(t *testing.T) {
	s := llmSpan()
	q, err := ParseQuery(`refund "card on file"`)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Matches(s, 0) {
		t.Fatal("the query must match the span")
	}
	if n := testing.AllocsPerRun(100, func() { q.Matches(s, 0) }); n != 0 {
		t.Errorf("Matches allocates %v times per call", n)
	}
	n := 0
	if a := testing.AllocsPerRun(100, func() { SpanTokens(s, 0, func(uint64) { n++ }) }); a != 0 {
		t.Errorf("SpanTokens allocates %v times per call", a)
	}
}
