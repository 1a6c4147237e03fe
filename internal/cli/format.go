package cli

import (
	"io"
	"os"
	"strconv"
)

// plural writes a count with its noun, singular for one: "1 span",
// "3 spans", "0 spans". Nouns whose plural is not noun+"s" pass it:
// plural(n, "entry", "entries").
func plural[N int | int64 | uint64](n N, noun string, pluralForm ...string) string {
	p := noun + "s"
	if len(pluralForm) > 0 {
		p = pluralForm[0]
	}
	s := strconv.FormatInt(int64(n), 10)
	if n == 1 {
		return s + " " + noun
	}
	return s + " " + p
}

// isTerminal reports whether w is a terminal (a character device), for
// output meant for a person only: progress lines, redrawing.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
