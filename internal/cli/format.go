package cli

import (
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
