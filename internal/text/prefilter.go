package text

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// The prefilter rules spans out before Matches tokenises their texts: a
// rare word is absent from nearly every span a content scan reads, and
// finding that out by a byte search is several times cheaper than
// tokenising. It is exact in one direction only: a span it rejects
// certainly does not match; a span it passes is matched in full.
//
// Why a byte search is enough. Call a character literal when its bytes are
// always, in any context, exactly its contribution to a token: a to z, 0
// to 9, letters such as ж or α that fold to themselves, and the Hangul
// syllables, common ideographs and kana. A token made of literal
// characters only is a substring of the text; with upper-case ASCII
// letters too, it is one up to ASCII case, which the search ignores. Any
// other token contains a character c that is not literal: either c may
// contribute nothing (a diacritic, a joiner) or what it contributes (é
// gives e, Ａ gives a) is part of the token. Such a token lies inside one
// chunk, a maximal run of bytes without an ASCII separator (every ASCII
// byte but a letter or digit ends a token, in any context), and tokenising
// that chunk on its own gives the tokens it gives in context, since the
// separator before it resets the tokenizer. So a term is looked for as a
// substring, then among the tokens of the chunks holding a character that
// is not literal and may contribute one of the term's characters (or
// nothing). What characters contribute is summarised as a 64-bit set of
// hashed runes; characters the summary does not know (outside U+0080 to
// U+07FF and the literal ranges) count as contributing anything. A JSON
// string with escapes is tokenised whole.

// sigAll is the contribution summary of a character that may contribute
// anything (or nothing).
const sigAll = ^uint64(0)

// runeSig is the bit of r in a contribution summary.
func runeSig(r rune) uint64 { return 1 << (uint32(r) * 0x9E3779B1 >> 26) }

// stringSig is the contribution summary of the characters of s.
func stringSig(s string) uint64 {
	var sig uint64
	for _, r := range s {
		sig |= runeSig(r)
	}
	return sig
}

// charSig returns the contribution summary of the non-ASCII character at
// s[i] and its length: 0 for a literal character or a separator.
func charSig(s string, i int) (uint64, int) {
	c := s[i]
	if c >= 0xC2 && c < 0xE0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
		e := &twoByte[(rune(c&0x1F)<<6|rune(s[i+1]&0x3F))-0x80]
		switch {
		case e.class == classSeparator || e.class == classWord && e.ident:
			return 0, 2
		case e.class == classWord:
			return stringSig(unsafe.String(&e.out[0], int(e.n))), 2
		}
		return sigAll, 2
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if n == 3 && literal3(r) {
		return 0, 3
	}
	return sigAll, n
}

// mayMatch reports whether the span's texts may hold every term of q;
// false is certain. Only the first 64 terms are looked at.
func (q *Query) mayMatch(s *model.Span, minLen int) bool {
	terms := q.Terms
	if len(terms) > 64 {
		terms = terms[:64]
	}
	if len(terms) == 0 {
		return true
	}
	pending := ^uint64(0) >> (64 - len(terms))
	var sc *scratch
	walkMode(s, minLen, true, func(_, text string, escaped bool) bool {
		if sc == nil {
			sc = getScratch()
		}
		if escaped {
			tokenize(text, true, sc, func(tok string, _ bool) bool {
				pending = found(terms, pending, tok)
				return pending != 0
			})
		} else {
			pending = mayHold(text, terms, pending, sc)
		}
		return pending != 0
	})
	if sc != nil {
		putScratch(sc)
	}
	return pending == 0
}

// found clears the bits of pending whose term is tok.
func found(terms []string, pending uint64, tok string) uint64 {
	for i, t := range terms {
		if pending&(1<<i) != 0 && tok == t {
			pending &^= 1 << i
		}
	}
	return pending
}

// mayHold clears the bits of pending whose term may be a token of the
// unescaped text s, and returns the terms still pending: those certainly
// absent from s (see above).
func mayHold(s string, terms []string, pending uint64, sc *scratch) uint64 {
	var sig uint64
	for i, t := range terms {
		if pending&(1<<i) == 0 {
			continue
		}
		if containsFoldASCII(s, t) {
			pending &^= 1 << i
		} else {
			sig |= stringSig(t)
		}
	}
	for i := 0; pending != 0 && i < len(s); {
		j := indexNonASCII(s[i:])
		if j < 0 {
			break
		}
		i += j
		cs, n := charSig(s, i)
		if cs&sig == 0 {
			i += n
			continue
		}
		lo, hi := i, i+n
		for lo > 0 && !asciiSeparator(s[lo-1]) {
			lo--
		}
		for hi < len(s) && !asciiSeparator(s[hi]) {
			hi++
		}
		tokenize(s[lo:hi], false, sc, func(tok string, _ bool) bool {
			pending = found(terms, pending, tok)
			return pending != 0
		})
		i = hi
	}
	return pending
}

// asciiSeparator reports the ASCII bytes that end a token.
func asciiSeparator(c byte) bool {
	return c < utf8.RuneSelf && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
}

// indexNonASCII returns the index of the first byte of s at or above 0x80,
// or -1.
func indexNonASCII(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if load64(s, i)&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return i
		}
	}
	return -1
}

// literal3 reports the three-byte characters the tokenizer emits as they
// are, in any context (the fast paths of tokenizer.char).
func literal3(r rune) bool {
	return r >= 0xAC00 && r <= 0xD7A3 || r >= 0x4E00 && r <= 0x9FFF || r >= 0x3041 && r <= 0x3096 ||
		r >= 0x309D && r <= 0x30FF && r != 0x30A0 && r != 0x30FB
}

// containsFoldASCII reports whether s holds t, ASCII letters compared
// without case (other bytes exactly).
func containsFoldASCII(s, t string) bool {
	if len(t) == 0 {
		return true
	}
	if len(t) > len(s) {
		return false
	}
	// Find candidates by t's rarest byte (by English letter frequency), in
	// both cases: the fewer candidates, the fewer comparisons.
	k := anchor(t)
	c := t[k]
	lo, up := c, c
	switch {
	case c >= 'a' && c <= 'z':
		up = c - 'a' + 'A'
	case c >= 'A' && c <= 'Z':
		lo = c - 'A' + 'a'
	}
	end := len(s) - len(t) + k + 1 // candidates for t[k] lie in s[k:end]
	nextLo, nextUp := -1, -1
	for i := k; i < end; {
		if nextLo < i {
			if nextLo = strings.IndexByte(s[i:end], lo); nextLo < 0 {
				nextLo = len(s)
			} else {
				nextLo += i
			}
		}
		if nextUp < i {
			if lo == up {
				nextUp = nextLo
			} else if nextUp = strings.IndexByte(s[i:end], up); nextUp < 0 {
				nextUp = len(s)
			} else {
				nextUp += i
			}
		}
		p := min(nextLo, nextUp)
		if p >= end {
			return false
		}
		if equalFoldASCII(s[p-k:p-k+len(t)], t) {
			return true
		}
		i = p + 1
	}
	return false
}

// letterRarity ranks ASCII letters from the most frequent in English
// text (0) to the rarest; other bytes rank above every letter.
const letterRarity = "etaoinshrdlcumwfgypbvkjxqz"

// anchor returns the index of t's rarest byte.
func anchor(t string) int {
	best, bestRank := 0, -1
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		rank := strings.IndexByte(letterRarity, c)
		if rank < 0 {
			rank = len(letterRarity)
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	return best
}

// equalFoldASCII reports whether a and b (same length) are equal up to the
// case of ASCII letters.
func equalFoldASCII(a, b string) bool {
	for i := 0; i < len(b); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}
