package text

import (
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/rastro-dev/rastro/internal/model"
)

// requireFinds fails when query q does not match a span whose input.value is
// text, or when a hash of q is missing from the span's SpanTokens (then the
// token index would skip the span before Matches ran).
func requireFinds(t *testing.T, text, q string) {
	t.Helper()
	s := &model.Span{Attributes: []model.KeyValue{{Key: "input.value", Value: model.StringValue(text)}}}
	pq, err := ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	toks := map[uint64]bool{}
	SpanTokens(s, DefaultMinLen, func(h uint64) { toks[h] = true })
	var missing []string
	for _, w := range pq.Terms {
		if !toks[Hash(w)] {
			missing = append(missing, w)
		}
	}
	if m := pq.Matches(s, 0); !m || len(missing) > 0 {
		t.Errorf("text %+q, query %+q: Matches=%v, query terms not among the span's tokens %+q", text, q, m, missing)
	}
}

// TestEverySpellingGivesTheSameTokens: text in another normalisation form
// than the query is found. Before, a kana followed by a combining voicing
// mark (NFD, as macOS file names are) or halfwidth katakana with ﾞ/ﾟ lost
// the mark, NFD Hangul stayed letter parts, and marks typed out of
// canonical order gave other tokens.
func TestEverySpellingGivesTheSameTokens(t *testing.T) {
	nfc := "データベース"
	for _, c := range []struct{ text, q string }{
		{norm.NFD.String(nfc), nfc},
		{nfc, norm.NFD.String(nfc)},
		{"ﾃﾞｰﾀﾍﾞｰｽ", nfc},
		{nfc, "ﾃﾞｰﾀﾍﾞｰｽ"},
		{"ﾊﾟｽﾜｰﾄﾞ", "パスワード"},
		{norm.NFD.String("/Users/山田/ダウンロード/請求書.pdf"), "ダウンロード"},
		{`{"content":"\uff83\uff9e\uff70\uff80"}`, "データ"}, // JSON escapes, base and mark
		{`{"content":"テ\u3099ータ"}`, "データ"},                // an escaped mark after a raw kana
		{`{"content":"\u30c6` + "\u3099" + `ータ"}`, "データ"}, // a raw mark after an escaped kana
		{norm.NFD.String("환불 요청"), "환불"},
		{"환불 요청", norm.NFD.String("환불")},
		{"ป\u0e48\u0e39", norm.NFC.String("ป\u0e48\u0e39")}, // tone mark typed before the vowel
		{norm.NFC.String("ป\u0e48\u0e39"), "ป\u0e48\u0e39"},
		{"क\u094d\u093c", norm.NFC.String("क\u094d\u093c")},
		{"Café crème", "cafe\u0301"},
	} {
		requireFinds(t, c.text, c.q)
	}
	// Voicing is not lost either way: テ does not find デ.
	s := &model.Span{Attributes: []model.KeyValue{{Key: "input.value", Value: model.StringValue(norm.NFD.String("デ"))}}}
	if q, _ := ParseQuery("テ"); q.Matches(s, 0) {
		t.Error("query テ matches NFD デ")
	}
}

// TestComposedTextKeepsItsTokens: text already in NFKC gives the tokens it
// always gave; segments on disk hold their hashes. (Text in NFC but not
// NFKC with combining marks, such as halfwidth ｶﾞ, tokenises differently
// since the composition fix.)
func TestComposedTextKeepsItsTokens(t *testing.T) {
	for text, want := range map[string]string{
		"データベース":       "デ|ー|タ|ベ|ー|ス",
		"환불 요청":        "환불|요청",
		"ปู่ย่า":       "ปู่ย่า",
		"क़ीमत नहीं":   "क़ीमत|नहीं",
		"Crème brûlée": "creme|brulee",
	} {
		var got string
		Tokens(norm.NFC.String(text), func(tok string) {
			if got != "" {
				got += "|"
			}
			got += tok
		})
		if got != want {
			t.Errorf("Tokens(%q) = %q, want %q", text, got, want)
		}
	}
}
