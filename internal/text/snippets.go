package text

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// Snippet sizes.
const (
	// SnippetChars is about how many characters a snippet shows: the hits
	// it marks and the text around them.
	SnippetChars = 160
	// MaxSnippets bounds the snippets of one span.
	MaxSnippets = 3
	// snippetBefore is how many characters of context a snippet shows
	// before its first hit, at most.
	snippetBefore = 50
	// snippetSnap is how far a snippet's edge moves to fall between words.
	snippetSnap = 15
)

// Snippet sources.
const (
	SnippetAttribute = "attribute" // a span attribute (Key)
	SnippetEvent     = "event"     // an attribute (Key) of an event (Event)
	SnippetStatus    = "status"    // the status message
)

// Hit is one match of a query in a snippet: bytes [Start, End) of its
// Text.
type Hit struct{ Start, End int }

// Snippet is a fragment of one searchable text of a span (see Sources)
// around the places a query matched there.
type Snippet struct {
	Source string // SnippetAttribute, SnippetEvent or SnippetStatus
	Event  string // the event's name, for SnippetEvent
	Key    string // the attribute's key, for SnippetAttribute and SnippetEvent
	// Text is about SnippetChars characters of the text, cut between
	// characters (between words where one is near). Offset is its byte
	// offset in the whole text: the attribute's string value, the status
	// message or, for a value that holds a JSON document, the JSON string
	// the hits lie in, with its escapes decoded. CutEnd says that the
	// text goes on after Text (Offset > 0 says that it starts before).
	Text   string
	Offset int
	CutEnd bool
	// Hits are the matches in Text, in order, apart: each word of the
	// query that is in no phrase, each phrase (and CJK word) whole, from
	// its first token to its last. A hit is a whole token: the text's own
	// spelling (Café for the query word cafe).
	Hits []Hit
}

// Snippets returns up to MaxSnippets snippets of s's texts where q
// matches, in the order Sources reports the texts (span attributes,
// events, status message); minLen is as for Sources. A span the query
// matches has at least one, unless it matched only in texts too large to
// look through again (never, in practice: every text is searched). Values
// stored apart must be resolved first.
func Snippets(s *model.Span, q *Query, minLen int) []Snippet {
	if q == nil || len(q.Terms) == 0 {
		return nil
	}
	var out []Snippet
	sc := getScratch()
	defer putScratch(sc)
	add := func(base Snippet) func(label, text string, escaped bool) bool {
		return func(_, text string, escaped bool) bool {
			if escaped {
				text = unescapeJSON(text)
			}
			for _, sn := range snippetsOf(text, q, sc, MaxSnippets-len(out)) {
				sn.Source, sn.Event, sn.Key = base.Source, base.Event, base.Key
				out = append(out, sn)
			}
			return len(out) < MaxSnippets
		}
	}
	// Each text is walked alone, as walk would reach it, so that its
	// source is known.
	for i := range s.Attributes {
		one := model.Span{Attributes: s.Attributes[i : i+1]}
		if !walk(&one, minLen, add(Snippet{Source: SnippetAttribute, Key: s.Attributes[i].Key})) {
			return out
		}
	}
	for i := range s.Events {
		ev := &s.Events[i]
		for j := range ev.Attributes {
			one := model.Span{Events: []model.Event{{Name: ev.Name, Attributes: ev.Attributes[j : j+1]}}}
			if !walk(&one, minLen, add(Snippet{Source: SnippetEvent, Event: ev.Name, Key: ev.Attributes[j].Key})) {
				return out
			}
		}
	}
	if s.StatusMessage != "" {
		add(Snippet{Source: SnippetStatus})("", s.StatusMessage, false)
	}
	return out
}

// unescapeJSON decodes the inside of a JSON string literal (walk checked
// that it is one).
func unescapeJSON(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var s string
	if json.Unmarshal([]byte(`"`+raw+`"`), &s) != nil {
		return raw
	}
	return s
}

// textHits returns the hits of q in text: every occurrence of a phrase,
// from its first token's start to its last token's end, and of a term that
// is in no phrase; in order, overlapping hits merged.
func textHits(text string, q *Query, sc *scratch) []Hit {
	type tok struct {
		s      string
		lo, hi int
	}
	var toks []tok
	tokenize(text, false, sc, func(t string, fromInput bool) bool {
		if !fromInput {
			t = strings.Clone(t)
		}
		toks = append(toks, tok{t, sc.lo, tokenEnd(text, sc.hi)})
		return true
	})
	var hits []Hit
	for k := range toks {
		for _, p := range q.Phrases {
			if k+len(p) <= len(toks) && slices.EqualFunc(toks[k:k+len(p)], p, func(t tok, w string) bool { return t.s == w }) {
				hits = append(hits, Hit{toks[k].lo, toks[k+len(p)-1].hi})
			}
		}
		for _, t := range q.Terms {
			if toks[k].s == t && !slices.ContainsFunc(q.Phrases, func(p []string) bool { return slices.Contains(p, t) }) {
				hits = append(hits, Hit{toks[k].lo, toks[k].hi})
			}
		}
	}
	slices.SortFunc(hits, func(a, b Hit) int { return a.Start - b.Start })
	merged := hits[:0]
	for _, h := range hits {
		if n := len(merged); n > 0 && h.Start < merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, h.End)
			continue
		}
		merged = append(merged, h)
	}
	return merged
}

// tokenEnd snaps hi (see scratch) to the end of the token's last character
// and of the marks and joiners that follow it (a folded-away accent, a
// skin tone), so that a hit covers whole characters.
func tokenEnd(text string, hi int) int {
	hi = min(hi, len(text))
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	for hi < len(text) {
		r, n := utf8.DecodeRuneInString(text[hi:])
		if !unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) && !isTransparent(r) {
			break
		}
		hi += n
	}
	return hi
}

// snippetsOf cuts up to limit snippets of text around the hits of q. A
// snippet starts up to snippetBefore characters before its first hit (more
// when the text ends soon after) and holds the hits that fit in
// SnippetChars characters; snippets of one text do not overlap.
func snippetsOf(text string, q *Query, sc *scratch, limit int) []Snippet {
	hits := textHits(text, q, sc)
	var out []Snippet
	prev := 0 // the end of the previous snippet
	for len(hits) > 0 && len(out) < limit {
		first := hits[0]
		lo := backRunes(text, first.Start, snippetBefore, prev)
		hi := lo
		for k := 0; k < SnippetChars && hi < len(text); k++ {
			_, n := utf8.DecodeRuneInString(text[hi:])
			hi += n
		}
		hi = max(hi, first.End)
		n := 1
		for n < len(hits) && hits[n].End <= hi {
			n++
		}
		if n < len(hits) && hits[n].Start < hi {
			hi = hits[n].Start // the next hit starts the next snippet, whole
		}
		if hi == len(text) {
			// The text ends: show more of what comes before.
			lo = backRunes(text, lo, SnippetChars-utf8.RuneCountInString(text[lo:hi]), prev)
		}
		if lo > 0 {
			lo = snapStart(text, lo, first.Start)
		}
		if hi < len(text) {
			hi = snapEnd(text, hi, hits[n-1].End)
		}
		sn := Snippet{Text: text[lo:hi], Offset: lo, CutEnd: hi < len(text)}
		for _, h := range hits[:n] {
			sn.Hits = append(sn.Hits, Hit{h.Start - lo, h.End - lo})
		}
		out = append(out, sn)
		hits, prev = hits[n:], hi
	}
	return out
}

// backRunes moves i back by up to k characters, not before floor.
func backRunes(text string, i, k, floor int) int {
	for ; k > 0 && i > floor; k-- {
		_, n := utf8.DecodeLastRuneInString(text[floor:i])
		i -= n
	}
	return i
}

// snapStart moves a snippet's start lo forward to the start of a word, when
// a space is near and before the first hit at limit.
func snapStart(text string, lo, limit int) int {
	for k, i := 0, lo; k < snippetSnap && i < limit; k++ {
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			return i + n
		}
		i += n
	}
	return lo
}

// snapEnd moves a snippet's end hi back to the end of a word, when a space
// is near and after the last hit, which ends at limit.
func snapEnd(text string, hi, limit int) int {
	for k, i := 0, hi; k < snippetSnap && i > limit; k++ {
		r, n := utf8.DecodeLastRuneInString(text[:i])
		if unicode.IsSpace(r) {
			return i - n
		}
		i -= n
	}
	return hi
}
