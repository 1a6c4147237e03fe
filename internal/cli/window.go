package cli

import (
	"flag"
	"fmt"
	"io"
	"net/url"
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
}

// empty says that nothing matched, which window was searched and how to
// widen it: "no spans in the last 24h; try --since 7d".
func (lw *listingWindow) empty(w io.Writer, noun string) error {
	msg := "no " + noun
	if d := lw.Window.Description; d != "" {
		msg += " in " + d
	}
	if lw.Window.Wider != "" {
		msg += "; try --since " + lw.Window.Wider
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}
