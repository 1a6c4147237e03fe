package text

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func tokens(s string) []string {
	var out []string
	Tokens(s, func(tok string) { out = append(out, tok) })
	return out
}

func TestTokens(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct {
		name, in string
		want     []string
	}{
		{"english", "The refund for Order #42 was DENIED.", []string{"the", "refund", "for", "order", "42", "was", "denied"}},
		{"empty", "", nil},
		{"only punctuation", " ,.;:!?()[]{}<>/\\|-_=+*&^%$#@~`'\"\t\n", nil},
		{"accents", "Café CAFÉ cafe\u0301 naïve NAÏVE", []string{"cafe", "cafe", "cafe", "naive", "naive"}},
		{"spanish", "Año mañana ÑANDÚ", []string{"ano", "manana", "nandu"}},
		{"german", "Straße STRASSE straẞe Über für", []string{"strasse", "strasse", "strasse", "uber", "fur"}},
		{"nordic", "Ørsted øl Åse æble", []string{"ørsted", "øl", "ase", "æble"}},
		{"polish turkish", "Łódź zażółć İstanbul ıspanak", []string{"łodz", "zazołc", "istanbul", "ispanak"}},
		{"cyrillic", "Привет, МИР! Ёлка йод", []string{"привет", "мир", "елка", "иод"}},
		{"greek", "Καλημέρα ΣΟΦΟΣ σοφός", []string{"καλημερα", "σοφοσ", "σοφοσ"}},
		{"chinese", "退款订单", []string{"退", "款", "订", "单"}},
		{"chinese with latin", "订单order42号", []string{"订", "单", "order42", "号"}},
		{"japanese mix", "かなカナ混じりラーメン", []string{"か", "な", "カ", "ナ", "混", "じ", "り", "ラ", "ー", "メ", "ン"}},
		{"japanese voiced kana kept", "がギ", []string{"が", "ギ"}},
		{"halfwidth katakana", "ｶﾀｶﾅ", []string{"カ", "タ", "カ", "ナ"}},
		{"korean", "안녕하세요 세계", []string{"안녕하세요", "세계"}},
		{"arabic", "مَرْحَبًا بالعالم", []string{"مرحبا", "بالعالم"}},
		{"hebrew points", "שָׁלוֹם עולם", []string{"שלום", "עולם"}},
		{"devanagari marks kept", "हिन्दी नमस्ते", []string{"हिन्दी", "नमस्ते"}},
		{"thai", "สวัสดี", []string{"สวัสดี"}},
		{"emoji", "ok👍done", []string{"ok", "👍", "done"}},
		{"emoji skin tone", "👍🏽 👍🏿", []string{"👍", "👍"}},
		{"emoji zwj family", "👨‍👩‍👧", []string{"👨", "👩", "👧"}},
		{"flags", "🇫🇷🇩🇪 🇯", []string{"🇫🇷", "🇩🇪", "🇯"}},
		{"keycap and variation selector", "1️⃣ ❤️", []string{"1", "❤"}},
		{"tag sequence flag", "🏴\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F", []string{"🏴"}},
		{"digits", "3.14 1,000,000 v1.2.3 0x1F", []string{"3", "14", "1", "000", "000", "v1", "2", "3", "0x1f"}},
		{"url", "https://Example.com/orders/42?id=7&q=refund#top", []string{"https", "example", "com", "orders", "42", "id", "7", "q", "refund", "top"}},
		{"snake and kebab", "user_id get-order camelCase", []string{"user", "id", "get", "order", "camelcase"}},
		{"apostrophe", "don't l'homme", []string{"don", "t", "l", "homme"}},
		{"compatibility", "ﬁne ＡＢＣ x² ① ℌ", []string{"fine", "abc", "x2", "1", "h"}},
		{"soft hyphen and zwnj join", "co\u00adoperate می\u200cخواهم", []string{"cooperate", "میخواهم"}},
		{"symbols separate", "a→b a+b ©2024 €5", []string{"a", "b", "a", "b", "©", "2024", "5"}},
		{"invalid utf8", "ab\xffcd \xc3", []string{"ab", "cd"}},
		{"long token cut", long + " next " + "É" + long, []string{long[:64], "next", "e" + long[:63]}},
		{"long multibyte cut", strings.Repeat("ж", 40), []string{strings.Repeat("ж", 32)}},
	}
	for _, c := range cases {
		if got := tokens(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s: Tokens(%q)\n got %q\nwant %q", c.name, c.in, got, c.want)
		}
	}
}

// Every token tokenises to itself: this is what makes a query written
// with tokens (Query.String) mean the same thing again.
func TestTokensStable(t *testing.T) {
	for _, s := range corpusWords {
		for _, tok := range tokens(s) {
			if got := tokens(tok); len(got) != 1 || got[0] != tok {
				t.Errorf("Tokens(%q) = %q, want [%q]", tok, got, tok)
			}
		}
	}
}

func TestTokensJSONEscapes(t *testing.T) {
	sc := getScratch()
	defer putScratch(sc)
	var got []string
	tokenize(`Caf\u00e9 said:\n\"hi\"\tthere \ud83d\udc4d \u9000\u6b3e bad\ud800x`, true, sc, func(tok string, _ bool) bool {
		got = append(got, strings.Clone(tok))
		return true
	})
	want := []string{"cafe", "said", "hi", "there", "👍", "退", "款", "bad", "x"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTokensStopEarly(t *testing.T) {
	sc := getScratch()
	defer putScratch(sc)
	n := 0
	done := tokenize("a b c d", false, sc, func(string, bool) bool { n++; return n < 2 })
	if done || n != 2 {
		t.Fatalf("tokenize went on after emit returned false: done=%v, %d tokens", done, n)
	}
}

func TestTokensAllocations(t *testing.T) {
	s := "the refund for order 42 was denied because the card expired"
	if n := testing.AllocsPerRun(100, func() { Tokens(s, func(string) {}) }); n != 0 {
		t.Errorf("Tokens of lowercase ASCII allocates %v times", n)
	}
}

// The hash is stored on disk: it must never change.
func TestHashPinned(t *testing.T) {
	for tok, want := range map[string]uint64{
		"":       0xef46db3751d8e999,
		"refund": 0xca54d25419503ae1,
		"退":      0xdae40f88609d648f,
	} {
		if got := Hash(tok); got != want {
			t.Errorf("Hash(%q) = %#x, want %#x", tok, got, want)
		}
	}
}

func TestTokensValidUTF8(t *testing.T) {
	for _, s := range corpusWords {
		Tokens(s, func(tok string) {
			if !utf8.ValidString(tok) || tok == "" || len(tok) > MaxTokenLen {
				t.Errorf("Tokens(%q) emitted bad token %q", s, tok)
			}
		})
	}
}

// The precomputed two-byte table must agree with the general path, which
// a JSON escape takes.
func TestTwoByteTableAgrees(t *testing.T) {
	sc := getScratch()
	defer putScratch(sc)
	collect := func(s string, escaped bool) []string {
		var out []string
		tokenize(s, escaped, sc, func(tok string, _ bool) bool { out = append(out, strings.Clone(tok)); return true })
		return out
	}
	fast, slow := 0, 0
	for r := rune(0x80); r < 0x800; r++ {
		if twoByte[r-0x80].class == classSlow {
			slow++
		} else {
			fast++
		}
		for _, f := range []string{"a%sb", "%s", "\u0416%s\u0301x", "\u05d0%s\u05b8", "%s%s", strings.Repeat("x", 63) + "%s"} {
			direct := strings.ReplaceAll(f, "%s", string(r))
			escaped := strings.ReplaceAll(f, "%s", `\u`+hex16(r))
			if got, want := collect(direct, false), collect(escaped, true); !slices.Equal(got, want) {
				t.Errorf("U+%04X in %q: table gives %q, general path %q", r, f, got, want)
			}
		}
	}
	t.Logf("%d characters precomputed, %d take the general path", fast, slow)
}
