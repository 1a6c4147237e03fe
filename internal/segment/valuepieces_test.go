package segment

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkPieces requires that the pieces of v join to v and that none is
// empty or longer than maxPiece.
func checkPieces(t testing.TB, v string) []string {
	t.Helper()
	ps := Pieces(v)
	if strings.Join(ps, "") != v {
		t.Fatalf("pieces of a %d-byte value do not join to it", len(v))
	}
	for i, p := range ps {
		if p == "" && len(v) > 0 {
			t.Fatalf("piece %d of a %d-byte value is empty", i, len(v))
		}
		if len(p) > maxPiece {
			t.Fatalf("piece %d has %d bytes, more than %d", i, len(p), maxPiece)
		}
	}
	return ps
}

// A conversation's message array grows by a few messages per call: every
// call shares all the earlier pieces with the call before it.
func TestPiecesOfAGrowingMessageArray(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var msgs []map[string]any
	prev := map[string]bool{}
	for turn := range 20 {
		msgs = append(msgs, map[string]any{"role": "user", "parts": []map[string]string{{"type": "text", "content": words(r, 30)}}})
		b, _ := json.Marshal(msgs)
		ps := checkPieces(t, string(b))
		if turn == 0 {
			if len(ps) != 1 {
				t.Fatalf("an array of one message is cut into %d pieces", len(ps))
			}
		} else if len(ps) != len(msgs)+1 {
			t.Fatalf("turn %d: %d messages cut into %d pieces, want one per message and the closing bracket", turn, len(msgs), len(ps))
		}
		news := 0
		for _, p := range ps {
			if !prev[p] {
				news++
			}
			prev[p] = true
		}
		if turn > 1 && news != 1 {
			t.Fatalf("turn %d: %d new pieces, want 1 (the new message)", turn, news)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "parts": []map[string]string{{"type": "text", "content": words(r, 50)}}})
		prev = map[string]bool{}
		for _, p := range ps {
			prev[p] = true
		}
		b, _ = json.Marshal(msgs)
		for _, p := range checkPieces(t, string(b)) {
			prev[p] = true
		}
	}
}

// Brackets, braces and commas inside strings, escaped quotes and nesting do
// not cut; malformed arrays are cut as text.
func TestPiecesJSONEdgeCases(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
	}{
		{`[{"a":"x,y]"},{"b":"\"],["}]`, 3},
		{` [ [1,2] , {"c":[3,4]} ] `, 3},
		{`["a"]`, 1},
		{`[]`, 1},
		{`[1,2`, 1},
		{`[1,2]]`, 1},
		{`[1],[2]`, 1},
		{`["unterminated,1]`, 1},
		{`{"a":1,"b":2}`, 1},
		{`plain text, with commas`, 1},
	} {
		if got := len(checkPieces(t, c.v)); got != c.want {
			t.Errorf("%q: %d pieces, want %d (%q)", c.v, got, c.want, Pieces(c.v))
		}
	}
}

// Long text is cut by content: an insertion near the start changes only
// the pieces around it.
func TestPiecesByContentResistInsertion(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	doc := words(r, 20000) // about 140 KiB
	a := checkPieces(t, doc)
	if len(a) < 8 {
		t.Fatalf("a %d-byte text cut into %d pieces", len(doc), len(a))
	}
	b := checkPieces(t, doc[:5000]+" an inserted sentence, "+doc[5000:])
	shared := map[string]bool{}
	for _, p := range a {
		shared[p] = true
	}
	differ := 0
	for _, p := range b {
		if !shared[p] {
			differ++
		}
	}
	if differ > 2 {
		t.Fatalf("an insertion changed %d of %d pieces", differ, len(b))
	}
	if fmt.Sprint(Pieces(doc)) != fmt.Sprint(a) {
		t.Fatalf("cutting is not deterministic")
	}
	// A giant array element is cut by content too.
	giant := `[{"content":"` + doc + `"},{"content":"short"}]`
	if ps := checkPieces(t, giant); len(ps) < 8 {
		t.Fatalf("an array with a %d-byte element cut into %d pieces", len(doc), len(ps))
	}
}

func FuzzPieces(f *testing.F) {
	for _, s := range []string{`[{"a":1},{"b":"]"}]`, `["x","y"]`, strings.Repeat("abc ", 5000), `[1,[2,3],{"4":5}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) { checkPieces(t, v) })
}

func words(r *rand.Rand, n int) string {
	vocab := strings.Fields("the a refund order account shipping policy customer agent tool call result please thanks " +
		"invoice payment card delivery address week day status update error retry model answer question")
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[r.IntN(len(vocab))])
		fmt.Fprint(&b, r.IntN(100))
	}
	return b.String()
}
