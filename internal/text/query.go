package text

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// Limits of a parsed query.
const (
	MaxTerms     = 64 // distinct words in a query
	MaxPhraseLen = 64 // words in one phrase
)

// Query is a parsed content query: every term must occur in the span's
// texts; each phrase must occur as consecutive tokens within one text.
// Terms are distinct tokens and include the words of the phrases; a phrase
// has at least two tokens. The zero Query matches every span.
type Query struct {
	Terms   []string
	Phrases [][]string
}

// ParseError is a content query error. Pos is the 0-based byte offset in
// the query of what is wrong.
type ParseError struct {
	Pos int
	Msg string
}

// Error renders the error as `position 7: unterminated quote`.
func (e *ParseError) Error() string { return "position " + strconv.Itoa(e.Pos) + ": " + e.Msg }

// ParseQuery parses a content query: words separated by white space, and
// phrases in double quotes. Each word and phrase is tokenised as texts are
// (see Tokens). A quoted phrase must appear as consecutive tokens; so must
// the tokens of one unquoted word that tokenises to several (order-42,
// user_id, 退款), since that is how they were written. There are no
// operators: every word is required, "OR" and "-x" are words. Errors are
// *ParseError values: an empty query (no word at all), an unterminated
// quote, more than MaxTerms distinct words, a phrase of more than
// MaxPhraseLen words.
func ParseQuery(q string) (*Query, error) {
	out := &Query{}
	for i := 0; i < len(q); {
		r, n := utf8.DecodeRuneInString(q[i:])
		switch {
		case unicode.IsSpace(r):
			i += n
		case r == '"':
			end := strings.IndexByte(q[i+1:], '"')
			if end < 0 {
				return nil, &ParseError{Pos: i, Msg: "unterminated quote: missing closing \""}
			}
			if err := out.add(q[i+1:i+1+end], i); err != nil {
				return nil, err
			}
			i += end + 2
		default:
			j := i
			for j < len(q) {
				r, n := utf8.DecodeRuneInString(q[j:])
				if r == '"' || unicode.IsSpace(r) {
					break
				}
				j += n
			}
			if err := out.add(q[i:j], i); err != nil {
				return nil, err
			}
			i = j
		}
	}
	if len(out.Terms) == 0 {
		return nil, &ParseError{Pos: 0, Msg: "empty query: no word to search for"}
	}
	return out, nil
}

// add adds the tokens of one word or phrase found at pos.
func (q *Query) add(s string, pos int) error {
	var words []string
	Tokens(s, func(tok string) { words = append(words, tok) })
	if len(words) > MaxPhraseLen {
		return &ParseError{Pos: pos, Msg: "phrase of " + strconv.Itoa(len(words)) + " words: at most " + strconv.Itoa(MaxPhraseLen)}
	}
	for _, w := range words {
		if !slices.Contains(q.Terms, w) {
			if len(q.Terms) == MaxTerms {
				return &ParseError{Pos: pos, Msg: "more than " + strconv.Itoa(MaxTerms) + " distinct words"}
			}
			q.Terms = append(q.Terms, w)
		}
	}
	if len(words) >= 2 && !slices.ContainsFunc(q.Phrases, func(p []string) bool { return slices.Equal(p, words) }) {
		q.Phrases = append(q.Phrases, words)
	}
	return nil
}

// Hashes returns the hashes of the distinct terms: every span the query
// matches has all of them among its SpanTokens.
func (q *Query) Hashes() []uint64 {
	out := make([]uint64, 0, len(q.Terms))
	for _, t := range q.Terms {
		h := Hash(t)
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// String renders the query in a canonical form that ParseQuery reads back
// as an equivalent query: the terms that are in no phrase, then the phrases
// in double quotes.
func (q *Query) String() string {
	var b strings.Builder
	for _, t := range q.Terms {
		if slices.ContainsFunc(q.Phrases, func(p []string) bool { return slices.Contains(p, t) }) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t)
	}
	for _, p := range q.Phrases {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		b.WriteString(strings.Join(p, " "))
		b.WriteByte('"')
	}
	return b.String()
}

// Matches reports whether the span's texts (see Sources) satisfy q: every
// term is a token of some text, and every phrase occurs as consecutive
// tokens of one text. minLen is as for Sources. It does not allocate.
// A phrase of more than 64 words (which ParseQuery rejects) never matches.
func (q *Query) Matches(s *model.Span, minLen int) bool {
	if !q.mayMatch(s, minLen) {
		return false // most spans a rare word's scan reads: no tokenising
	}
	terms, phrases := q.Terms, q.Phrases
	// Match in groups that fit the bit sets of matchGroup.
	for len(terms) > 0 || len(phrases) > 0 {
		nt, np := min(len(terms), 64), min(len(phrases), maxGroupPhrases)
		if !matchGroup(terms[:nt], phrases[:np], s, minLen) {
			return false
		}
		terms, phrases = terms[nt:], phrases[np:]
	}
	return true
}

const maxGroupPhrases = 8

// matchGroup is Matches for at most 64 terms and maxGroupPhrases phrases.
// Phrases are found with the shift-and algorithm: bit k of state[p] says
// that the last k+1 tokens equal the first k+1 words of phrase p.
func matchGroup(terms []string, phrases [][]string, s *model.Span, minLen int) bool {
	var found, matched, allTerms, allPhrases uint64
	allTerms = 1<<len(terms) - 1 // len(terms) == 64 wraps to all ones
	allPhrases = 1<<len(phrases) - 1
	for p, ph := range phrases {
		if len(ph) == 0 {
			matched |= 1 << p
		}
	}
	var state [maxGroupPhrases]uint64
	var sc *scratch
	walk(s, minLen, func(_, text string, escaped bool) bool {
		if sc == nil {
			sc = getScratch()
		}
		state = [maxGroupPhrases]uint64{}
		return tokenize(text, escaped, sc, func(tok string, _ bool) bool {
			for i, t := range terms {
				if tok == t {
					found |= 1 << i
				}
			}
			for p, ph := range phrases {
				if matched&(1<<p) != 0 {
					continue
				}
				var b uint64
				for w, word := range ph {
					if word == tok {
						b |= 1 << w
					}
				}
				st := (state[p]<<1 | 1) & b
				if st&(1<<(len(ph)-1)) != 0 {
					matched |= 1 << p
				}
				state[p] = st
			}
			return found != allTerms || matched != allPhrases
		})
	})
	if sc != nil {
		putScratch(sc)
	}
	return found == allTerms && matched == allPhrases
}
