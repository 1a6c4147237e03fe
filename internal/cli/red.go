package cli

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "red", Short: "rate, errors and duration per service (or per operation of one service)", Run: runRED})
	register(&Command{Name: "errors", Short: "error groups: failing spans grouped by service, operation, exception type and message", Run: runErrors})
}

func runRED(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "red", "[flags] [SERVICE]")
	var c clientFlags
	c.register(fs, env)
	var win serviceWindowFlags
	win.register(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params, err := win.params(fs)
	if err != nil {
		return err
	}
	if fs.NArg() == 1 {
		params.Set("group", "operation")
	}
	var resp struct {
		Series []struct {
			Service   string  `json:"service"`
			Operation string  `json:"operation"`
			Calls     int64   `json:"calls"`
			Errors    int64   `json:"errors"`
			ErrorRate float64 `json:"error_rate"`
			Rate      float64 `json:"rate_per_second"`
			P50       float64 `json:"p50_ns"`
			P95       float64 `json:"p95_ns"`
			P99       float64 `json:"p99_ns"`
		} `json:"series"`
		listingWindow
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/red", params, &resp); err != nil || printed {
		return err
	}
	if len(resp.Series) == 0 {
		return resp.empty(env.Stdout, "spans")
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	name := "SERVICE"
	if fs.NArg() == 1 {
		name = "OPERATION"
	}
	fmt.Fprintf(tw, "%s\tCALLS\tREQ/S\tERRORS\tERROR %%\tP50\tP95\tP99\t\n", name)
	for _, s := range resp.Series {
		label := s.Service
		if fs.NArg() == 1 {
			label = s.Operation
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\t%.1f\t%s\t%s\t%s\t\n", label, s.Calls, s.Rate, s.Errors, 100*s.ErrorRate,
			fmtDuration(uint64(s.P50)), fmtDuration(uint64(s.P95)), fmtDuration(uint64(s.P99)))
	}
	return tw.Flush()
}

func runErrors(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "errors", "[flags] [SERVICE]")
	var c clientFlags
	c.register(fs, env)
	var win serviceWindowFlags
	win.register(fs, "")
	limit := fs.Int("limit", 20, "most groups to list")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params, err := win.params(fs)
	if err != nil {
		return err
	}
	params.Set("limit", fmt.Sprint(*limit))
	var resp struct {
		Groups []struct {
			Service   string `json:"service"`
			Operation string `json:"operation"`
			Type      string `json:"exception_type"`
			Message   string `json:"message"`
			Count     int64  `json:"count"`
			Last      uint64 `json:"last_seen_unix_nano"`
			Trace     string `json:"sample_trace_id"`
		} `json:"groups"`
		listingWindow
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/errors", params, &resp); err != nil || printed {
		return err
	}
	if len(resp.Groups) == 0 {
		return resp.empty(env.Stdout, "errors")
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "COUNT\tSERVICE\tOPERATION\tTYPE\tMESSAGE\tLAST SEEN\tSAMPLE TRACE\n")
	for _, g := range resp.Groups {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Count, g.Service, g.Operation, orDash(g.Type), orDash(clip(g.Message, 60)),
			c.fmtTime(g.Last), c.traceLink(g.Trace))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens s to n bytes on a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// serviceWindowFlags are --since, --until and the optional SERVICE
// argument of the service commands.
type serviceWindowFlags struct{ since, until *string }

// register declares --since and --until; since "" leaves the window to the
// server's rule for listings (the last 24h).
func (w *serviceWindowFlags) register(fs *flag.FlagSet, since string) {
	if since == "" {
		var wf windowFlags
		wf.register(fs)
		w.since, w.until = &wf.since, &wf.until
		return
	}
	w.since = fs.String("since", since, "window start: RFC 3339, Unix time (unit by digit count), or a duration ago")
	w.until = fs.String("until", "", "window end (default now)")
}

// params returns since, until and service once fs is parsed.
func (w *serviceWindowFlags) params(fs *flag.FlagSet) (url.Values, error) {
	params := url.Values{}
	(&windowFlags{since: *w.since, until: *w.until}).set(params)
	switch fs.NArg() {
	case 0:
	case 1:
		params.Set("service", fs.Arg(0))
	default:
		return nil, fmt.Errorf("%w: give at most one service", errUsage)
	}
	return params, nil
}
