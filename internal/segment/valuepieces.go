package segment

import "math/rand/v2"

// Values stored apart are cut into pieces, each stored (and deduplicated)
// on its own, so that the parts two values share are stored once. The cut
// must depend only on the value's bytes: the same text always gives the same
// pieces, whichever span, segment or process writes it.
//
//   - A JSON array of two or more elements (the message arrays of
//     gen_ai.input.messages, which grow by a few messages per call of a
//     conversation) is cut before each top-level comma and before the closing
//     bracket: "[m0", ",m1", ..., ",mN", "]". A call that adds messages shares
//     every earlier piece with the call before it.
//   - Any other value, and any piece still longer than maxPiece, is cut by
//     content (a gear rolling hash, pieces of minPiece to maxPiece bytes,
//     about avgPiece on average), so an edit inside a long document changes
//     only the pieces around it.
//   - Everything else is one piece.
const (
	minPiece = 2 << 10
	avgPiece = 8 << 10 // a power of two
	maxPiece = 64 << 10
)

// cutPieces returns the end offsets of the pieces of v, the last being
// len(v).
func cutPieces(v string, dst []int) []int {
	dst = dst[:0]
	if ends := jsonArrayCuts(v, dst); len(ends) > 0 {
		// Cut the rare giant element by content too.
		out, start := ends[len(ends):], 0
		for _, end := range ends {
			if end-start > maxPiece {
				out = contentCuts(v[:end], start, out)
			} else {
				out = append(out, end)
			}
			start = end
		}
		return out
	}
	return contentCuts(v, 0, dst)
}

// gear is the rolling hash's table: fixed for ever (pieces written with one
// table are shared only with pieces cut by the same table).
var gear = func() (t [256]uint64) {
	r := rand.New(rand.NewPCG(0x7261737472, 0x676561)) // "rastr", "gea"
	for i := range t {
		t[i] = r.Uint64()
	}
	return t
}()

// contentCuts appends the content-defined cut points of v[start:] (offsets
// into v) to dst. Values shorter than 2*minPiece are one piece.
func contentCuts(v string, start int, dst []int) []int {
	const mask = avgPiece - 1
	for len(v)-start >= 2*minPiece {
		var h uint64
		end := min(start+maxPiece, len(v)-minPiece)
		cut := end
		for i := start + minPiece; i < end; i++ {
			h = h<<1 + gear[v[i]]
			if h>>(64-13)&mask == 0 { // the top bits mix the most bytes
				cut = i + 1
				break
			}
		}
		dst = append(dst, cut)
		start = cut
	}
	return append(dst, len(v))
}

// jsonArrayCuts appends the cut points of a JSON array of two or more
// elements: before each top-level comma and before the closing bracket. It
// returns dst unchanged (empty) when v is not such an array (leading and
// trailing whitespace aside) or is malformed.
func jsonArrayCuts(v string, dst []int) []int {
	i := skipJSONSpace(v, 0)
	j := len(v)
	for j > i && isSpace(v[j-1]) {
		j--
	}
	if i >= j || v[i] != '[' || v[j-1] != ']' {
		return dst[:0]
	}
	depth, inStr, esc := 0, false, false
	n := len(dst)
	for k := i; k < j; k++ {
		c := v[k]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth < 0 {
				return dst[:n]
			}
			if depth == 0 && k != j-1 {
				return dst[:n] // the array closed before the end
			}
		case ',':
			if depth == 1 {
				dst = append(dst, k)
			}
		}
	}
	if depth != 0 || inStr || len(dst) == n {
		return dst[:n] // malformed, or fewer than two elements
	}
	return append(dst, j-1, len(v))
}

func skipJSONSpace(v string, i int) int {
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Pieces returns the pieces a value stored apart is cut into, in order:
// their concatenation is v.
func Pieces(v string) []string {
	cuts := cutPieces(v, nil)
	out := make([]string, len(cuts))
	start := 0
	for i, end := range cuts {
		out[i], start = v[start:end], end
	}
	return out
}
