package cli

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// windowFlags are --since and --until of every listing command. They are
// passed to the server as given; without --since the server's window rule
// applies (the last 24h, docs/api.md#time-windows), the same for every
// listing.
type windowFlags struct{ since, until string }

func (w *windowFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.since, "since", "", "window start: a duration ago (1h, 7d), RFC 3339, Unix time (unit by digit count), or all (default: the last 24h)")
	fs.StringVar(&w.until, "until", "", "window end, same forms as --since (default: now)")
}

// set adds the given window to params.
func (w *windowFlags) set(params url.Values) {
	if w.since != "" {
		params.Set("since", w.since)
	}
	if w.until != "" {
		params.Set("until", w.until)
	}
}

// listingWindow is the window part of a listing's answer (the server's
// window rule): the window searched and, for an empty answer, a hint.
type listingWindow struct {
	Window struct {
		Description string `json:"description"`
		Wider       string `json:"wider"`
	} `json:"window"`
	Hint string `json:"hint"`
}

// empty says that nothing matched, which window was searched and how to
// widen it: the server's hint with the CLI's flag, "no spans in the last
// 24h; try --since 7d".
func (lw *listingWindow) empty(w io.Writer, noun string) error {
	msg := lw.Hint
	if msg == "" {
		msg = "no " + noun + " matched"
	}
	_, err := fmt.Fprintln(w, strings.Replace(msg, "; try since=", "; try --since ", 1))
	return err
}
