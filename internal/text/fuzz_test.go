package text

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

func FuzzTokens(f *testing.F) {
	for _, s := range corpusWords {
		f.Add(s)
	}
	for _, s := range []string{
		"", "ǅungla ᾈ İı ẞß ς Σ ſ K Å Ω ﬃ ㌀ ½ ⑳ 🄰 ｶﾞ が",
		"👩🏽‍💻🇺🇳🇦 🏴\U000E0067\U000E007F #️⃣ \u200d\u200c\ufe0f",
		"a\u0301\u0301\u0301 \u0301x क़ ಕ್ಷ ຄຳ",
		strings.Repeat("é", 40) + " " + strings.Repeat("ß", 40),
		"\xff\xfe\xc3(\xe2\x82", `\u00e9\n\"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var toks []string
		Tokens(s, func(tok string) { toks = append(toks, tok) })
		for _, tok := range toks {
			if tok == "" || len(tok) > MaxTokenLen || !utf8.ValidString(tok) {
				t.Fatalf("Tokens(%q): bad token %q", s, tok)
			}
			var again []string
			Tokens(tok, func(x string) { again = append(again, x) })
			if len(again) != 1 || again[0] != tok {
				t.Fatalf("Tokens(%q): token %q tokenises to %q", s, tok, again)
			}
		}
		// The same text as a JSON string literal gives the same tokens.
		sc := getScratch()
		defer putScratch(sc)
		if utf8.ValidString(s) {
			var viaJSON []string
			tokenize(strings.Trim(jsonQuote(s), `"`), true, sc, func(tok string, _ bool) bool {
				viaJSON = append(viaJSON, strings.Clone(tok))
				return true
			})
			if !slices.Equal(viaJSON, toks) {
				t.Fatalf("Tokens(%q) = %q but escaped as JSON %q", s, toks, viaJSON)
			}
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		`refund "order 42" naïve`, `退款 "ラーメン 👍"`, `"unterminated`, `""`, `!!!`, `a"b c"d`,
		`"` + strings.Repeat("w ", 70) + `"`, manyWords(70), "tab\tnew\nline", "\xff\"\xfe\"",
	} {
		f.Add(s)
	}
	span := &model.Span{Attributes: []model.KeyValue{{Key: "input.value", Value: model.StringValue("refund order 42 naive 退款 ラーメン 👍 a b c d")}}}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(s) {
				t.Fatalf("ParseQuery(%q): bad error %#v", s, err)
			}
			return
		}
		if len(q.Terms) == 0 || len(q.Terms) > MaxTerms {
			t.Fatalf("ParseQuery(%q): %d terms", s, len(q.Terms))
		}
		for _, p := range q.Phrases {
			if len(p) < 2 || len(p) > MaxPhraseLen {
				t.Fatalf("ParseQuery(%q): phrase %q", s, p)
			}
			for _, w := range p {
				if !slices.Contains(q.Terms, w) {
					t.Fatalf("ParseQuery(%q): phrase word %q is not a term", s, w)
				}
			}
		}
		text := q.String()
		q2, err := ParseQuery(text)
		if err != nil {
			t.Fatalf("ParseQuery(%q) renders %q, which fails: %v", s, text, err)
		}
		if q2.String() != text {
			t.Fatalf("String not a fixed point: %q then %q", text, q2.String())
		}
		if q.Matches(span, 0) != q2.Matches(span, 0) {
			t.Fatalf("%q and its canonical form %q disagree", s, text)
		}
	})
}

// FuzzSources feeds arbitrary attribute values (JSON or not) through the
// source walk: no panic, and every emitted text is valid UTF-8 when the
// input is.
func FuzzSources(f *testing.F) {
	for _, s := range []string{
		`[{"role":"user","parts":[{"type":"text","content":"Caf\u00e9 \ud83d\udc4d"}]}]`,
		`{"messages":[{"role":"user","content":["a",{"text":"b"}]}]}`,
		`[`, `{"a":}`, `{"a":"b" "c"}`, `  [1, -2.5e3, true, null, "x\"y"]  `, `"just a string"`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100), `{"id":"secret","type":"text","x":"\u0000"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s := &model.Span{Attributes: []model.KeyValue{{Key: "gen_ai.input.messages", Value: model.StringValue(v)}}}
		Sources(s, 0, func(_, text string) {
			if text == "" || utf8.ValidString(v) && !utf8.ValidString(text) && !strings.Contains(v, `\u`) {
				t.Fatalf("Sources(%q) emitted %q", v, text)
			}
		})
		q := &Query{Terms: []string{"a"}}
		q.Matches(s, 0)
		SpanTokens(s, 0, func(uint64) {})
	})
}
