package text

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/text/unicode/norm"
)

// MaxTokenLen is the longest token in bytes. A longer run of letters and
// digits is cut to its longest prefix of whole characters that fits; the rest
// of the run is dropped (it is neither indexed nor matched).
const MaxTokenLen = 64

// Tokens calls emit for each search token of s, in order. The rules are in
// the package documentation. Tokens allocates only for tokens that differ
// from their bytes in s (upper case, diacritics, compatibility forms).
func Tokens(s string, emit func(tok string)) {
	sc := getScratch()
	tokenize(s, false, sc, func(tok string, fromInput bool) bool {
		if fromInput {
			emit(tok)
		} else {
			emit(strings.Clone(tok))
		}
		return true
	})
	putScratch(sc)
}

// Hash is the 64-bit xxhash of a token: the value stored in token filters.
// It is part of the on-disk format and must never change.
func Hash(tok string) uint64 { return xxhash.Sum64String(tok) }

// scratch is the reusable memory of one tokenisation: the token being built
// and, for SpanTokens, the set of hashes already emitted.
type scratch struct {
	buf  [MaxTokenLen]byte
	one  [8]byte // a single-character token that is not a copy of the input
	seq  []byte  // a combining sequence (tokenizer.composed), and
	nfkc []byte  // its NFKC form
	seen hashSet
	// cache holds the tokens of the last long texts SpanTokens tokenised.
	cache [tokenCacheSlots]tokenCacheEntry
	// lo and hi place the token being emitted in the input: it starts at
	// lo, and its last input character starts before hi (Snippets snaps
	// hi to the end of that character and the marks after it).
	lo, hi int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	sc.seen.release()
	scratchPool.Put(sc)
}

// tokenizer holds the state of one tokenize call. It lives on the stack of
// tokenize.
type tokenizer struct {
	s    string
	sc   *scratch
	stop bool

	start int  // input offset where the current run started; -1 when there is none
	last  int  // input offset of the last character added to the run
	zero  bool // the run so far equals s[start:zEnd] (no copy needed)
	zEnd  int
	n     int  // otherwise the run so far is sc.buf[:n]
	full  bool // the run reached MaxTokenLen: the rest of it is dropped
	fold  bool // the last base character takes droppable diacritics

	plainUntil int // input before this offset was found in NFKC by composed

	ri    rune // pending regional indicator (first half of a flag)
	riPos int  // its input offset, or -1 when it is not a copy of the input
}

// tokenize calls emit for each token of s. With escaped, s is the inside of
// a JSON string literal and its backslash escapes are decoded. fromInput
// says that tok is a substring of s; otherwise it aliases sc and is valid
// only during the call. emit returns false to stop; tokenize then returns
// false.
type emitFunc = func(tok string, fromInput bool) bool

func tokenize(s string, escaped bool, sc *scratch, emit func(tok string, fromInput bool) bool) bool {
	t := tokenizer{s: s, sc: sc, start: -1}
	for i := 0; i < len(s) && !t.stop; {
		c := s[i]
		if c < utf8.RuneSelf && !(escaped && c == '\\') {
			switch {
			case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
				if t.start >= 0 && t.zero && t.zEnd == i {
					if !t.full {
						if t.zEnd-t.start < MaxTokenLen {
							t.zEnd++
						} else {
							t.full = true
						}
					}
				} else {
					t.flushRI(emit)
					t.add(rune(c), i, true)
				}
				t.fold = true
			case c >= 'A' && c <= 'Z':
				t.flushRI(emit)
				t.add(rune(c+'a'-'A'), i, false)
				t.fold = true
			default:
				t.separator(emit)
			}
			i++
			continue
		}
		if c >= 0xC2 && c < 0xE0 && i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			// Two-byte characters (Latin, Greek, Cyrillic, Hebrew,
			// Arabic...): precomputed.
			e := &twoByte[(rune(c&0x1F)<<6|rune(s[i+1]&0x3F))-0x80]
			switch e.class {
			case classWord:
				t.flushRI(emit)
				if t.start >= 0 && t.zero && t.zEnd == i && e.ident {
					if !t.full {
						if t.zEnd-t.start+2 <= MaxTokenLen {
							t.zEnd += 2
						} else {
							t.full = true
						}
					}
				} else {
					for j := 0; j < int(e.n); {
						r, n := utf8.DecodeRune(e.out[j:e.n])
						t.add(r, i, e.ident)
						j += n
					}
				}
				t.fold = e.foldMarks
				i += 2
				continue
			case classSeparator:
				t.separator(emit)
				i += 2
				continue
			}
		}
		var r rune
		var size int
		ident := true
		if c == '\\' {
			r, size = decodeEscape(s, i)
			ident = false
		} else {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if i+size < len(s) && i+size >= t.plainUntil && mayCombine(s[i+size], escaped) {
			if j := t.composed(r, i, i+size, escaped, !ident, emit); j > i+size {
				i = j
				continue
			}
		}
		t.char(r, i, size, ident, emit)
		i += size
	}
	if !t.stop {
		t.separator(emit)
	}
	return !t.stop
}

// composed handles a character r (the input at p, up to j) followed by
// characters that composition joins to it or reorders: NFD kana and Hangul,
// halfwidth kana with their voicing marks, marks typed out of canonical
// order. It tokenises r and them in their NFKC form, so that every spelling
// gives the tokens of the composed one, and returns the end of the run; it
// returns j when no such character follows or the run is already in NFKC
// (then the caller goes on as usual). baseEscaped says that r was decoded
// from a JSON escape (then the input bytes are not r's).
func (t *tokenizer) composed(r rune, p, j int, escaped, baseEscaped bool, emit emitFunc) int {
	s, start, esc := t.s, j, baseEscaped
	for j < len(s) {
		if escaped && s[j] == '\\' {
			m, n := decodeEscape(s, j)
			if !combines(m) {
				break
			}
			if j == start {
				t.sc.seq = utf8.AppendRune(t.sc.seq[:0], r)
			}
			t.sc.seq = utf8.AppendRune(t.sc.seq, m)
			esc = true
			j += n
			continue
		}
		n := markLen(s, j)
		if n == 0 {
			break
		}
		if j == start {
			t.sc.seq = utf8.AppendRune(t.sc.seq[:0], r)
		}
		t.sc.seq = append(t.sc.seq, s[j:j+n]...)
		j += n
	}
	if j == start || !esc && norm.NFKC.IsNormalString(s[p:j]) {
		t.plainUntil = j // its marks need no second look: linear in long runs
		return start
	}
	t.sc.nfkc = norm.NFKC.Append(t.sc.nfkc[:0], t.sc.seq...)
	for k := 0; k < len(t.sc.nfkc) && !t.stop; {
		c, n := utf8.DecodeRune(t.sc.nfkc[k:])
		t.char(c, p, n, false, emit)
		k += n
	}
	return j
}

// mayCombine reports whether the byte b, which starts a character or an
// escape, may start one that combines with the character before it
// (markLen and combines tell for sure): common ideographs and Hangul
// syllables never do, and this keeps CJK text on its fast path.
func mayCombine(b byte, escaped bool) bool {
	return b >= 0xC0 && !(b >= 0xE4 && b <= 0xE9 || b >= 0xEB && b <= 0xED) || escaped && b == '\\'
}

// markLen returns the length of the character at s[j] when it combines with
// the character before it (see combines), else 0.
func markLen(s string, j int) int {
	b := s[j]
	switch {
	case !mayCombine(b, false):
		return 0
	case b == 0xE3: // U+3000-3FFF: only U+302A-302F and U+3099-309A
		if j+2 < len(s) && (s[j+1] == 0x82 && (s[j+2] == 0x99 || s[j+2] == 0x9A) || s[j+1] == 0x80 && s[j+2] >= 0xAA && s[j+2] <= 0xAF) {
			return 3
		}
		return 0
	case b == 0xEF && j+2 < len(s) && s[j+1] == 0xBE && (s[j+2] == 0x9E || s[j+2] == 0x9F), // U+FF9E, U+FF9F
		b == 0xE1 && j+2 < len(s) && (s[j+1] == 0x85 && s[j+2] >= 0xA0 || s[j+1] == 0x86 || s[j+1] == 0x87): // U+1160-11FF
		return 3
	}
	if b < 0xE2 { // below U+2000: a table
		r, n := utf8.DecodeRuneInString(s[j:])
		if r < 0x2000 && markBits[r>>6]&(1<<(r&63)) != 0 {
			return n
		}
		return 0
	}
	if p := norm.NFC.PropertiesString(s[j:]); p.CCC() != 0 {
		return p.Size()
	}
	return 0
}

// markBits has bit r set for the characters r below U+2000 with a non-zero
// canonical combining class (most marks of the scripts that use them).
var markBits = func() (m [0x2000 / 64]uint64) {
	var enc [utf8.UTFMax]byte
	for r := rune(0x300); r < 0x2000; r++ {
		if norm.NFC.Properties(enc[:utf8.EncodeRune(enc[:], r)]).CCC() != 0 {
			m[r>>6] |= 1 << (r & 63)
		}
	}
	return m
}()

// combines reports whether composition joins m to the character before it
// or reorders it: marks with a non-zero combining class, the kana voicing
// marks (combining and halfwidth), Hangul medial vowels and final
// consonants.
func combines(m rune) bool {
	var enc [utf8.UTFMax]byte
	return markLen(unsafe.String(&enc[0], utf8.EncodeRune(enc[:], m)), 0) > 0
}

// char handles one input character r at s[p:p+size]. ident says whether
// s[p:p+size] is r's UTF-8 encoding (false for a decoded JSON escape).
func (t *tokenizer) char(r rune, p, size int, ident bool, emit emitFunc) {
	switch {
	case r >= 0xAC00 && r <= 0xD7A3: // Hangul syllables: letters, kept composed
		t.flushRI(emit)
		t.add(r, p, ident)
		t.fold = false
		return
	case r >= 0x4E00 && r <= 0x9FFF || r >= 0x3041 && r <= 0x3096 || r >= 0x309D && r <= 0x30FF && r != 0x30A0 && r != 0x30FB:
		// Common ideographs and kana: no compatibility mapping to look up.
		t.single(r, p, size, ident, emit)
		return
	}
	var enc [utf8.UTFMax]byte
	var props norm.Properties
	if ident {
		props = norm.NFKD.PropertiesString(t.s[p : p+size])
	} else {
		n := utf8.EncodeRune(enc[:], r)
		props = norm.NFKD.Properties(enc[:n])
	}
	dec := props.Decomposition()
	if r >= 0x2E80 && isCJK(r) {
		// Compatibility forms (halfwidth katakana, compatibility
		// ideographs) map to one character; kana with a voicing mark
		// decompose to two and are kept whole.
		if d, n := utf8.DecodeRune(dec); n > 0 && n == len(dec) && d >= 0x2E80 && isCJK(d) {
			t.single(d, p, size, false, emit)
		} else {
			t.single(r, p, size, ident, emit)
		}
		return
	}
	if dec == nil {
		t.base(r, p, size, ident, emit)
		return
	}
	for len(dec) > 0 && !t.stop {
		d, n := utf8.DecodeRune(dec)
		dec = dec[n:]
		t.base(d, p, size, false, emit)
	}
}

// base handles one character after compatibility decomposition.
func (t *tokenizer) base(r rune, p, size int, ident bool, emit emitFunc) {
	switch {
	case r < utf8.RuneSelf:
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			t.flushRI(emit)
			t.add(r, p, ident)
			t.fold = true
		case r >= 'A' && r <= 'Z':
			t.flushRI(emit)
			t.add(r+'a'-'A', p, false)
			t.fold = true
		default:
			t.separator(emit)
		}
	case isTransparent(r):
		// Joiners, variation selectors, skin tones, tags, soft hyphens:
		// dropped without ending the run.
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc):
		if t.start < 0 || t.fold {
			return // a diacritic (folded away) or a mark with no base
		}
		t.add(r, p, ident)
	case unicode.IsLetter(r) || unicode.IsNumber(r):
		if r >= 0x2E80 && isCJK(r) {
			t.single(r, p, size, ident, emit)
			return
		}
		t.flushRI(emit)
		f := foldCase(r)
		if f == 'ß' {
			t.add('s', p, false)
			t.add('s', p, false)
		} else {
			t.add(f, p, ident && f == r)
		}
		t.fold = foldsMarks(f)
	case r >= 0x1F1E6 && r <= 0x1F1FF: // regional indicator: two make a flag
		if t.ri != 0 {
			t.flag(r, p, ident, emit)
			return
		}
		t.separator(emit)
		t.ri, t.riPos = r, p
		if !ident {
			t.riPos = -1
		}
	case isPictographic(r):
		t.single(r, p, size, ident, emit)
	default:
		t.separator(emit)
	}
}

// add appends r, produced by the input at offset p, to the current run.
// ident says whether r is exactly the input at p (so no copy is needed).
func (t *tokenizer) add(r rune, p int, ident bool) {
	t.last = p
	if t.start < 0 {
		t.start, t.zero, t.zEnd, t.n, t.full = p, true, p, 0, false
	}
	if t.full {
		return
	}
	size := utf8.RuneLen(r)
	if t.zero {
		if ident && p == t.zEnd {
			if t.zEnd-t.start+size > MaxTokenLen {
				t.full = true
				return
			}
			t.zEnd += size
			return
		}
		t.n = copy(t.sc.buf[:], t.s[t.start:t.zEnd])
		t.zero = false
	}
	if t.n+size > MaxTokenLen {
		t.full = true
		return
	}
	t.n += utf8.EncodeRune(t.sc.buf[t.n:], r)
}

// separator ends the current run and any pending flag half.
func (t *tokenizer) separator(emit emitFunc) {
	t.flushRI(emit)
	if t.start < 0 || t.stop {
		t.start = -1
		return
	}
	start := t.start
	t.start = -1
	if t.zero {
		if t.zEnd > start {
			t.out(t.s[start:t.zEnd], true, start, t.zEnd, emit)
		}
		return
	}
	if t.n > 0 {
		t.out(unsafe.String(&t.sc.buf[0], t.n), false, start, t.last+1, emit)
	}
}

// out emits tok, found in the input from lo to (about) hi: see scratch.
func (t *tokenizer) out(tok string, fromInput bool, lo, hi int, emit emitFunc) {
	t.sc.lo, t.sc.hi = lo, hi
	if !t.stop && !emit(tok, fromInput) {
		t.stop = true
	}
}

// single emits r as a token of its own (CJK, emoji).
func (t *tokenizer) single(r rune, p, size int, ident bool, emit emitFunc) {
	t.separator(emit)
	if ident {
		t.out(t.s[p:p+size], true, p, p+size, emit)
		return
	}
	n := utf8.EncodeRune(t.sc.one[:], r)
	t.out(unsafe.String(&t.sc.one[0], n), false, p, p+size, emit)
}

// flushRI emits a lone pending regional indicator as a token.
func (t *tokenizer) flushRI(emit emitFunc) {
	if t.ri == 0 {
		return
	}
	r, p := t.ri, t.riPos
	t.ri = 0
	t.single(r, p, 4, p >= 0, emit)
}

// flag emits the pending regional indicator and r as one token.
func (t *tokenizer) flag(r rune, p int, ident bool, emit emitFunc) {
	first, fp := t.ri, t.riPos
	t.ri = 0
	if fp >= 0 && ident && p == fp+4 {
		t.out(t.s[fp:p+4], true, fp, p+4, emit)
		return
	}
	utf8.EncodeRune(t.sc.one[:], first)
	utf8.EncodeRune(t.sc.one[4:], r)
	lo := fp
	if lo < 0 {
		lo = p
	}
	t.out(unsafe.String(&t.sc.one[0], 8), false, lo, p+1, emit)
}

// foldCase maps r to its case-folded form (simple folding, through upper
// case so that final sigma, long s and dotless i fold with their letters).
// 'ß' is returned for both ß and ẞ; the caller expands it to "ss".
func foldCase(r rune) rune {
	f := unicode.ToLower(unicode.ToUpper(r))
	if f == 'ẞ' {
		return 'ß'
	}
	return f
}

// isCJK reports characters that are tokens of their own: Han ideographs,
// Hiragana, Katakana (with the prolonged sound mark), Bopomofo.
func isCJK(r rune) bool {
	return r == 0x30FC || unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Bopomofo)
}

// foldsMarks reports whether combining marks after base r are diacritics
// to drop: for Latin, Greek, Cyrillic, Armenian, Hebrew and Arabic (and
// their extension blocks). Marks after other letters (Indic vowel signs,
// Thai, ...) are part of the word and kept.
func foldsMarks(r rune) bool {
	switch {
	case r < 0x0900, r >= 0x1C80 && r < 0x1CC0, r >= 0x1D00 && r < 0x2000,
		r >= 0x2C60 && r < 0x2C80, r >= 0x2DE0 && r < 0x2E00, r >= 0xA640 && r < 0xA6A0,
		r >= 0xA720 && r < 0xA800, r >= 0xAB30 && r < 0xAB70, r >= 0xFB00 && r < 0xFF00:
		return true
	}
	return false
}

// isTransparent reports characters dropped without ending a word: format
// characters (zero-width joiners, soft hyphen, bidi marks, emoji tags),
// variation selectors and emoji skin-tone modifiers.
func isTransparent(r rune) bool {
	switch {
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF, r >= 0x1F3FB && r <= 0x1F3FF:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// isPictographic approximates Unicode's Extended_Pictographic property:
// the emoji and pictograph blocks and the older symbols that have emoji
// presentations.
func isPictographic(r rune) bool {
	switch {
	case r >= 0x1F000 && r <= 0x1FAFF, r >= 0x1FC00 && r <= 0x1FFFD,
		r >= 0x2600 && r <= 0x27BF, r >= 0x2B00 && r <= 0x2BFF, r >= 0x2300 && r <= 0x23FF,
		r >= 0x2194 && r <= 0x21AA:
		return true
	}
	switch r {
	case 0xA9, 0xAE, 0x203C, 0x2049, 0x2122, 0x2139, 0x24C2, 0x25AA, 0x25AB, 0x25B6, 0x25C0,
		0x25FB, 0x25FC, 0x25FD, 0x25FE, 0x2934, 0x2935, 0x3030, 0x303D, 0x3297, 0x3299:
		return true
	}
	return false
}

// decodeEscape decodes the JSON escape at s[i] == '\\' and returns the
// character and the escape's length. \uXXXX pairs of surrogates combine;
// anything invalid decodes as U+FFFD, a separator.
func decodeEscape(s string, i int) (rune, int) {
	if i+1 >= len(s) {
		return utf8.RuneError, 1
	}
	switch s[i+1] {
	case '"', '\\', '/':
		return rune(s[i+1]), 2
	case 'n':
		return '\n', 2
	case 't':
		return '\t', 2
	case 'r':
		return '\r', 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'u':
		r, ok := hex4(s, i+2)
		if !ok {
			return utf8.RuneError, 2
		}
		if r >= 0xD800 && r < 0xDC00 {
			if i+7 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if lo, ok := hex4(s, i+8); ok && lo >= 0xDC00 && lo < 0xE000 {
					return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
				}
			}
			return utf8.RuneError, 6
		}
		if r >= 0xDC00 && r < 0xE000 {
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return utf8.RuneError, 1
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Classes of the precomputed two-byte characters.
const (
	classSlow      = iota // take the general path
	classWord             // letters or digits: append out to the run
	classSeparator        // ends the run
)

// twoByteEntry is what the general path does with one character of
// U+0080..U+07FF, when that is simple: append out (case folded, diacritics
// dropped) to the run, or end the run.
type twoByteEntry struct {
	class     uint8
	ident     bool // out is the character itself
	foldMarks bool // marks after it are dropped
	n         uint8
	out       [8]byte
}

var twoByte = func() (tab [0x800 - 0x80]twoByteEntry) {
	for r := rune(0x80); r < 0x800; r++ {
		tab[r-0x80] = twoByteClass(r)
	}
	return tab
}()

func twoByteClass(r rune) twoByteEntry {
	var e twoByteEntry
	var enc [4]byte
	n := utf8.EncodeRune(enc[:], r)
	dec := norm.NFKD.Properties(enc[:n]).Decomposition()
	if dec == nil {
		dec = enc[:n]
	}
	first := true
	for len(dec) > 0 {
		d, size := utf8.DecodeRune(dec)
		dec = dec[size:]
		switch {
		case unicode.IsLetter(d) || unicode.IsNumber(d):
			if d >= 0x2E80 || isTransparent(d) {
				return twoByteEntry{}
			}
			f := foldCase(d)
			if f == 'ß' {
				e.n += uint8(copy(e.out[e.n:], "ss"))
			} else {
				if int(e.n)+utf8.RuneLen(f) > len(e.out) {
					return twoByteEntry{}
				}
				e.n += uint8(utf8.EncodeRune(e.out[e.n:], f))
			}
			e.foldMarks = foldsMarks(f)
		case unicode.In(d, unicode.Mn, unicode.Me, unicode.Mc) && !first && !isTransparent(d):
			// A diacritic after a Latin, Greek or Cyrillic base: dropped.
			if !e.foldMarks {
				return twoByteEntry{}
			}
		default:
			plain := !isTransparent(d) && !isPictographic(d) && !unicode.In(d, unicode.Mn, unicode.Me, unicode.Mc)
			if d == r && plain {
				return twoByteEntry{class: classSeparator}
			}
			return twoByteEntry{}
		}
		first = false
	}
	if e.n == 0 {
		return twoByteEntry{}
	}
	e.class = classWord
	e.ident = int(e.n) == n && string(e.out[:e.n]) == string(enc[:n])
	return e
}
