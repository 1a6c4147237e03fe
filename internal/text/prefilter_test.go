package text

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// prefilterPieces are the bits random texts are built from: every kind of
// character the tokenizer treats specially, next to plain words, so that
// chunks mix literal and non-literal characters.
var prefilterPieces = []string{
	"solo", "SOLO", "Sólo", "sÓlo", "so\u0301lo", "ｓｏｌｏ", "so\u200dlo", "ſolo", "ﬁle", "file", "STRASSE", "Straße",
	"ẞ", "ss", "K", "k", "Ω", "ω", "ς", "σ", "ǅ", "dž", "½", "1", "2", "⑳", "20", "㌀", "アパート",
	"退款", "退", "款", "豈", "更", "⼀", "一", "ｶﾞ", "ガ", "한국", "한", "🇫🇷", "🇫", "👍🏽", "👍", "#️⃣", "1️⃣",
	"возврат", "ВОЗВРАТ", "café", "CAFÉ", "naïve", "क़", "ಕ್ಷ", "\u0301", "é", "e", "x", "X", "7",
	strings.Repeat("a", 70), strings.Repeat("B", 63) + "é", strings.Repeat("é", 40),
	" ", " ", "-", "_", ".", "\\", "\"", "\n", "/", "(", "　", "、", "\xff", "\xe2\x82",
}

// mayHoldOne is mayHold for one term.
func mayHoldOne(s, tok string, sc *scratch) bool { return mayHold(s, []string{tok}, 1, sc) == 0 }

func randPrefilterText(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(12) {
		b.WriteString(prefilterPieces[r.IntN(len(prefilterPieces))])
		if r.IntN(3) == 0 {
			b.WriteByte(" -_."[r.IntN(4)])
		}
	}
	return b.String()
}

func tokensOf(s string) []string {
	var out []string
	Tokens(s, func(tok string) { out = append(out, tok) })
	return out
}

// checkMayHold fails when mayHold rejects a token the text has, for every
// token of s and for the tokens of the pieces.
func checkMayHold(t *testing.T, s string) {
	mayHold := func(s, tok string, sc *scratch) bool { return mayHoldOne(s, tok, sc) }
	t.Helper()
	sc := getScratch()
	defer putScratch(sc)
	has := map[string]bool{}
	for _, tok := range tokensOf(s) {
		has[tok] = true
		if !mayHold(s, tok, sc) {
			t.Fatalf("mayHold(%q, %q) = false, but it is a token of the text", s, tok)
		}
	}
	for _, p := range prefilterPieces {
		for _, tok := range tokensOf(p) {
			if has[tok] && !mayHold(s, tok, sc) {
				t.Fatalf("mayHold(%q, %q) = false, but it is a token of the text", s, tok)
			}
		}
	}
}

// TestMayHoldNeverRejectsAToken: over random texts of tricky characters,
// the prefilter passes every token the tokenizer finds.
func TestMayHoldNeverRejectsAToken(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for range 20000 {
		checkMayHold(t, randPrefilterText(r))
	}
}

// TestMayHoldRejects: the prefilter is not vacuous: it rejects words that
// are absent, including ones present only inside a longer word's letters
// spelled without a non-literal character.
func TestMayHoldRejects(t *testing.T) {
	sc := getScratch()
	defer putScratch(sc)
	mayHold := mayHoldOne
	for _, tc := range []struct {
		text, tok string
		want      bool
	}{
		{"The refund was denied", "solo", false},
		{"The refund was denied", "refund", true},
		{"The REFUND was denied", "refund", true},
		{"привет мир, café au lait 退款", "solo", false},
		{"привет мир, café au lait 退款", "cafe", true},
		{"привет мир, CAFÉ au lait", "cafe", true},
		{"ｓｏｌｏ", "solo", true},
		{"so\u0301lo and more", "solo", true},
		{"ВОЗВРАТ", "возврат", true},
		{"возвратный", "возврат", true}, // a substring: passed, Matches decides
		{"возвращение", "возврат", false},
		{"退款 请求", "款", true},
		{"退 请求 ⼀", "一", true}, // Kangxi radical one folds to the ideograph
		{"退 请求", "一", false},
		{"Cafe con leche", "leche", true},
		{"x", "", true},
	} {
		if got := mayHold(tc.text, tc.tok, sc); got != tc.want {
			t.Errorf("mayHold(%q, %q) = %v, want %v", tc.text, tc.tok, got, tc.want)
		}
	}
}

// TestMatchesPrefilterAgrees: Matches with the prefilter equals the full
// match alone, over spans whose texts are random tricky text, plain and as
// JSON messages with escapes.
func TestMatchesPrefilterAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for range 3000 {
		var s model.Span
		for range 1 + r.IntN(3) {
			txt := randPrefilterText(r)
			switch r.IntN(3) {
			case 0:
				s.Attributes = append(s.Attributes, model.KeyValue{Key: "input.value", Value: model.StringValue(txt)})
			case 1:
				s.Attributes = append(s.Attributes, model.KeyValue{Key: "gen_ai.input.messages",
					Value: model.StringValue(`[{"role":"user","content":` + jsonQuote(txt) + `}]`)})
			default:
				s.StatusMessage = txt
			}
		}
		all := tokensOf(randPrefilterText(r) + " " + randPrefilterText(r))
		for i := 0; i < len(all); i++ {
			var q Query
			for _, w := range all[i:min(i+1+r.IntN(3), len(all))] {
				q.Terms = append(q.Terms, w)
			}
			full := matchGroup(q.Terms, nil, &s, 0)
			if got := q.Matches(&s, 0); got != full {
				t.Fatalf("terms %q on span %+v: Matches %v, full match %v", q.Terms, s, got, full)
			}
			if full && !q.mayMatch(&s, 0) {
				t.Fatalf("terms %q: prefilter rejects a matching span %+v", q.Terms, s)
			}
		}
	}
}

// FuzzMayHold: the prefilter never rejects a token of the text.
func FuzzMayHold(f *testing.F) {
	for _, s := range prefilterPieces {
		f.Add(s)
	}
	f.Add("ǅungla ᾈ İı ẞß ς Σ ſ K Å Ω ﬃ ㌀ ½ ⑳ 🄰 ｶﾞ が 豈 ⼀ ㊀")
	f.Add("Sólo SOLO so\u0301lo ｓｏｌｏ 한국어 🇫🇷🇩🇪 a\u200db")
	f.Fuzz(func(t *testing.T, s string) {
		checkMayHold(t, s)
	})
}

// TestJSONSpecial8NeverMisses: the word-at-a-time skip of the JSON string
// scanner flags every quote, backslash and control byte at every position,
// whatever the other bytes.
func TestJSONSpecial8NeverMisses(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for c := 0; c < 256; c++ {
		special := c == '"' || c == '\\' || c < 0x20
		for pos := 0; pos < 8; pos++ {
			for range 50 {
				b := make([]byte, 8)
				for k := range b {
					for { // fill with plain bytes, so c decides
						b[k] = byte(r.IntN(256))
						if b[k] != '"' && b[k] != '\\' && b[k] >= 0x20 {
							break
						}
					}
				}
				b[pos] = byte(c)
				got := jsonSpecial8(load64(string(b), 0))
				if special && !got {
					t.Fatalf("byte %#x at %d of %q not flagged", c, pos, b)
				}
				if !special && got {
					t.Fatalf("plain bytes %q flagged", b)
				}
			}
		}
	}
}

// TestContainsFoldASCII agrees with a search over ASCII-lowercased copies.
func TestContainsFoldASCII(t *testing.T) {
	lower := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if c >= 'A' && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	r := rand.New(rand.NewPCG(27, 28))
	alpha := "aAbBzZqQ9 é"
	for range 50000 {
		var s, tb strings.Builder
		for range r.IntN(20) {
			s.WriteByte(alpha[r.IntN(len(alpha))])
		}
		for range r.IntN(4) {
			tb.WriteByte(alpha[r.IntN(len(alpha))])
		}
		want := strings.Contains(lower(s.String()), lower(tb.String()))
		if got := containsFoldASCII(s.String(), tb.String()); got != want {
			t.Fatalf("containsFoldASCII(%q, %q) = %v, want %v", s.String(), tb.String(), got, want)
		}
	}
}
