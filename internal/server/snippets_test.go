package server

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

type snippetResp struct {
	Spans []struct {
		SpanID        string            `json:"span_id"`
		StatusMessage string            `json:"status_message"`
		Attributes    map[string]any    `json:"attributes"`
		Events        []json2Event      `json:"events"`
		Snippets      []snippetJSONResp `json:"snippets"`
	} `json:"spans"`
}

type json2Event struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes"`
}

type snippetJSONResp struct {
	Source string `json:"source"`
	Event  string `json:"event"`
	Key    string `json:"key"`
	Text   string `json:"text"`
	Offset int    `json:"offset"`
	CutEnd bool   `json:"cut_end"`
	Hits   []struct {
		Start int `json:"start"`
		End   int `json:"end"`
	} `json:"hits"`
}

// TestSearchSnippetsOverHTTP: a content search answers, per span, snippets
// whose hits are, at their byte offsets in the text the answer carries,
// exactly the spellings of the query a brute-force search finds there: for
// a word, a phrase, an accented word and a CJK word, in prompts long enough
// to be stored apart (sealed, read back from the value store), short
// attributes, events and status messages.
func TestSearchSnippetsOverHTTP(t *testing.T) {
	ts := startServer(t, Options{})
	cases := []struct {
		query     string
		spellings []string
	}{
		{"refund", []string{"refund", "Refund", "REFUND"}},
		{`"cafe creme"`, []string{"Café Crème", "cafe creme", "CAFE\u0301 CRE\u0300ME"}},
		{"straße", []string{"Straße", "STRASSE"}},
		{"退款", []string{"退款"}},
	}
	filler := strings.Fields("please check the order status for my account today thanks agent tool")
	r := rand.New(rand.NewPCG(3, 4))
	text := func(words int, plant string) string {
		ws := make([]string, words)
		for i := range ws {
			ws[i] = filler[r.IntN(len(filler))]
		}
		for range 1 + r.IntN(3) {
			ws = slices.Insert(ws, r.IntN(len(ws)+1), plant)
		}
		return strings.Join(ws, " ")
	}
	spans := spansFor(40, 9)
	for i := range spans {
		c := cases[i%len(cases)]
		sp := c.spellings[r.IntN(len(c.spellings))]
		s := &spans[i]
		switch i / len(cases) % 4 {
		case 0: // long: stored apart
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "gen_ai.prompt.0.content", Value: model.StringValue(text(150, sp))})
		case 1:
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "gen_ai.completion.0.content", Value: model.StringValue(text(8, sp))})
		case 2:
			s.Events = append(s.Events, model.Event{Name: "gen_ai.choice", TimeUnixNano: s.StartTimeUnixNano,
				Attributes: []model.KeyValue{{Key: "message", Value: model.StringValue(text(60, sp))}}})
		case 3:
			s.StatusMessage = text(12, sp)
		}
	}
	if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(spans)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if err := ts.eng.Seal(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var sr snippetResp
		if code := ts.get("/api/v1/spans?since=all&limit=100&content="+url.QueryEscape(c.query), &sr); code != 200 || len(sr.Spans) != 10 {
			t.Fatalf("%s: code %d, %d spans, want 10", c.query, code, len(sr.Spans))
		}
		for _, s := range sr.Spans {
			if len(s.Snippets) == 0 {
				t.Fatalf("%s: span %s has no snippet", c.query, s.SpanID)
			}
			for _, sn := range s.Snippets {
				var whole string
				switch sn.Source {
				case "attribute":
					whole, _ = s.Attributes[sn.Key].(string)
				case "event":
					for _, ev := range s.Events {
						if ev.Name == sn.Event {
							whole, _ = ev.Attributes[sn.Key].(string)
						}
					}
				case "status":
					whole = s.StatusMessage
				}
				what := fmt.Sprintf("%s: span %s snippet %+v", c.query, s.SpanID, sn)
				if strings.HasPrefix(whole, "<stored value") {
					t.Fatalf("%s: the value was not read back: %q", what, whole)
				}
				if sn.Offset < 0 || sn.Offset+len(sn.Text) > len(whole) || whole[sn.Offset:sn.Offset+len(sn.Text)] != sn.Text {
					t.Fatalf("%s: not the text %q at its offset", what, whole)
				}
				if sn.CutEnd != (sn.Offset+len(sn.Text) < len(whole)) {
					t.Fatalf("%s: cut_end wrong for a text of %d bytes", what, len(whole))
				}
				var want, got [][2]int
				for _, h := range bruteForceHits(whole, c.spellings) {
					if h[0] >= sn.Offset && h[1] <= sn.Offset+len(sn.Text) {
						want = append(want, [2]int{h[0] - sn.Offset, h[1] - sn.Offset})
					}
				}
				for _, h := range sn.Hits {
					got = append(got, [2]int{h.Start, h.End})
				}
				if len(got) == 0 || !slices.Equal(got, want) {
					t.Fatalf("%s: hits %v, brute force %v", what, got, want)
				}
			}
		}
	}
	// Without content= there are no snippets.
	var sr snippetResp
	ts.get("/api/v1/spans?limit=5", &sr)
	for _, s := range sr.Spans {
		if s.Snippets != nil {
			t.Fatalf("snippets without a content query: %+v", s.Snippets)
		}
	}
}

// bruteForceHits returns every [start, end) of text where a spelling
// occurs as whole words (ideographs are words of their own).
func bruteForceHits(text string, spellings []string) [][2]int {
	isWord := func(r rune) bool {
		return r < 0x2E80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r))
	}
	var out [][2]int
	for _, sp := range spellings {
		for i := 0; ; {
			j := strings.Index(text[i:], sp)
			if j < 0 {
				break
			}
			lo, hi := i+j, i+j+len(sp)
			before, _ := utf8.DecodeLastRuneInString(text[:lo])
			after, _ := utf8.DecodeRuneInString(text[hi:])
			if (lo == 0 || !isWord(before)) && (hi == len(text) || !isWord(after)) {
				out = append(out, [2]int{lo, hi})
			}
			i = lo + 1
		}
	}
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	return out
}
