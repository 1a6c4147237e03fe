package server

import (
	"encoding/json"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/text"
)

// snippetJSON is one snippet of a span in a search answer (docs/api.md,
// "Snippets"): offsets are bytes of the UTF-8 text.
type snippetJSON struct {
	Source string    `json:"source"`
	Event  string    `json:"event,omitempty"`
	Key    string    `json:"key,omitempty"`
	Text   string    `json:"text"`
	Offset int       `json:"offset"`
	CutEnd bool      `json:"cut_end,omitempty"`
	Hits   []hitJSON `json:"hits"`
}

type hitJSON struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// appendSpansSnippets is appendSpans with, in each span, the snippets of
// its texts where q matched (text.Snippets). The spans are those of the
// page, with their stored values already resolved: no other text is read.
func appendSpansSnippets(buf []byte, spans []model.Span, q *text.Query) []byte {
	buf = append(buf, '[')
	for i := range spans {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = otlp.AppendSpanJSON(buf, &spans[i])
		if n := len(buf); n == 0 || buf[n-1] != '}' {
			panic("server: otlp.AppendSpanJSON did not end a span object with }") // a broken invariant
		}
		buf = append(buf[:len(buf)-1], `,"snippets":`...)
		sns := text.Snippets(&spans[i], q, 0)
		out := make([]snippetJSON, len(sns))
		for k, sn := range sns {
			out[k] = snippetJSON{Source: sn.Source, Event: sn.Event, Key: sn.Key, Text: sn.Text, Offset: sn.Offset,
				CutEnd: sn.CutEnd, Hits: make([]hitJSON, len(sn.Hits))}
			for h, hit := range sn.Hits {
				out[k].Hits[h] = hitJSON{hit.Start, hit.End}
			}
		}
		b, err := json.Marshal(out)
		if err != nil {
			panic("server: snippets do not encode: " + err.Error()) // strings and ints only
		}
		buf = append(append(buf, b...), '}')
	}
	return append(buf, ']')
}
