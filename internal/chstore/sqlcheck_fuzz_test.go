package chstore

import (
	"strings"
	"testing"
)

// FuzzCheckSQL: the SQL mode's validator never panics, and what it accepts
// is rebuilt into text that tokenizes again with no denied word, no second
// statement, no comment, and no view name standing alone (every one is an
// alias after AS or a qualifier before '.'), while the views' subqueries
// stand where the statement named them.
func FuzzCheckSQL(f *testing.F) {
	for _, c := range refusedSQL {
		f.Add(c.sql)
	}
	for _, s := range []string{
		"SELECT count() FROM spans", "select name from spans s where s.name = 'x'",
		"SELECT * FROM spans AS a ANY INNER JOIN llm_calls AS b USING span_id",
		"SELECT 'it''s', '\\'' /* c */ FROM spans -- x\n", "SELECT k FROM spans ARRAY JOIN attr_keys AS k",
		"SELECT count() FROM (SELECT trace_id FROM spans) AS t WHERE trace_id IN (SELECT trace_id FROM llm_calls)",
		"WITH 1 AS x SELECT x, arrayMap(y -> y * 2, [1, 2.5e-3, 0x1F]) FROM ops_minutes WHERE status IN (1, -2, 'a')",
	} {
		f.Add(s)
	}
	views := map[string]string{"spans": "(SELECT 1 FROM v1)", "llm_calls": "(SELECT 1 FROM v2)", "llm_minutes": "(SELECT 1 FROM v3)", "ops_minutes": "(SELECT 1 FROM v4)"}
	f.Fuzz(func(t *testing.T, sql string) {
		out, err := checkSQL(sql, views)
		if err != nil {
			if _, ok := err.(*sqlError); !ok {
				t.Fatalf("%q: an error of type %T: %v", sql, err, err)
			}
			return
		}
		toks, err := tokenize(out)
		if err != nil {
			t.Fatalf("%q accepted as %q, which does not tokenize: %v", sql, out, err)
		}
		// No comment survives: the text is exactly its tokens joined again.
		var again strings.Builder
		for _, tk := range toks {
			if tk.space && again.Len() > 0 {
				again.WriteByte(' ')
			}
			if tk.kind == tokString {
				again.WriteString(quoteString(tk.text))
			} else {
				again.WriteString(tk.text)
			}
		}
		if again.String() != out {
			t.Fatalf("%q accepted as %q, which reads back as %q (a comment or a literal changed)", sql, out, again.String())
		}
		for i, tk := range toks {
			lower := strings.ToLower(tk.text)
			if tk.kind == tokPunct && tk.text == ";" {
				t.Fatalf("%q accepted as %q: a ';'", sql, out)
			}
			if tk.kind != tokIdent {
				continue
			}
			if _, denied := deniedWords[lower]; denied {
				t.Fatalf("%q accepted as %q: the denied word %s", sql, out, tk.text)
			}
			if _, view := views[tk.text]; view {
				alias := i > 0 && strings.EqualFold(toks[i-1].text, "as")
				qualifier := i+1 < len(toks) && toks[i+1].text == "."
				if !alias && !qualifier {
					t.Fatalf("%q accepted as %q: the view name %s stands alone at byte %d", sql, out, tk.text, tk.pos)
				}
			}
		}
	})
}
