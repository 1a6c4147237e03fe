package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// apiSnippet is one snippet of a span in a search answer (docs/api.md,
// "Snippets"): hits are byte offsets in text.
type apiSnippet struct {
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

// Highlighting of hits on a terminal: bold yellow.
const (
	hitOn  = "\x1b[1;33m"
	hitOff = "\x1b[0m"
)

// writeSnippets prints, below the table of `rastro search --content`, the
// text each span matched in (the snippets of body, a /api/v1/spans
// answer): one block per span that has snippets, one line per snippet
// naming where the text is. Hits are highlighted when stdout is a terminal
// (and NO_COLOR is unset), plain otherwise.
func writeSnippets(env *Env, body []byte) error {
	var resp struct {
		Spans []struct {
			TraceID  string       `json:"trace_id"`
			SpanID   string       `json:"span_id"`
			Service  string       `json:"service"`
			Name     string       `json:"name"`
			Snippets []apiSnippet `json:"snippets"`
		} `json:"spans"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	color := colorOutput(env)
	first := true
	for _, s := range resp.Spans {
		if len(s.Snippets) == 0 {
			continue
		}
		if first {
			fmt.Fprintln(env.Stdout, "\nMATCHED TEXT")
			first = false
		}
		fmt.Fprintf(env.Stdout, "%s: %s  trace %s span %s\n", s.Service, s.Name, s.TraceID, s.SpanID)
		for _, sn := range s.Snippets {
			fmt.Fprintf(env.Stdout, "  %s: %s\n", snippetSource(sn), renderSnippet(sn, color))
		}
	}
	return nil
}

// colorOutput reports whether stdout is a terminal that may be coloured.
func colorOutput(env *Env) bool {
	if v, ok := env.LookupEnv("NO_COLOR"); ok && v != "" {
		return false
	}
	if v, _ := env.LookupEnv("TERM"); v == "dumb" {
		return false
	}
	f, ok := env.Stdout.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// snippetSource names where a snippet's text is.
func snippetSource(sn apiSnippet) string {
	switch sn.Source {
	case "event":
		return "event " + sn.Event + " " + sn.Key
	case "status":
		return "status message"
	}
	return sn.Key
}

// renderSnippet returns a snippet's text on one line, "…" where the text
// goes on, with its hits between hitOn and hitOff when color is set. Line
// breaks, tabs and other control characters (an escape sequence in stored
// text must not drive the terminal) are shown as spaces; hits out of range
// (a server bug) are ignored.
func renderSnippet(sn apiSnippet, color bool) string {
	var b strings.Builder
	if sn.Offset > 0 {
		b.WriteString("…")
	}
	text := sn.Text
	pos := 0
	for _, h := range sn.Hits {
		if !color || h.Start < pos || h.End > len(text) || h.Start >= h.End {
			continue
		}
		writePrintable(&b, text[pos:h.Start])
		b.WriteString(hitOn)
		writePrintable(&b, text[h.Start:h.End])
		b.WriteString(hitOff)
		pos = h.End
	}
	writePrintable(&b, text[pos:])
	if sn.CutEnd {
		b.WriteString("…")
	}
	return b.String()
}

// writePrintable writes s with every control character, and invalid
// UTF-8, replaced by a space.
func writePrintable(b *strings.Builder, s string) {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n <= 1 || unicode.IsControl(r) {
			b.WriteByte(' ')
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
}
