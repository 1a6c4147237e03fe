package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "logs", Short: "search log records (newest first), or a trace's with --trace", Run: runLogs})
}

func runLogs(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "logs", "[flags] [WORDS...]")
	var c clientFlags
	c.register(fs, env)
	var win windowFlags
	win.register(fs)
	service := fs.String("service", "", "only records of this service")
	severity := fs.String("severity", "", "the lowest severity shown: a name (debug, info, warn, error, fatal) or a number 1-24")
	trace := fs.String("trace", "", "the records of this trace (32 hex digits), whenever they happened")
	filter := fs.String("q", "", `a log filter (docs/logs.md), e.g. '{ severity >= warn && .order.id = 42 }'`)
	limit := fs.Int("limit", 100, "records to show (1-10000)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{"limit": {strconv.Itoa(*limit)}}
	if words := strings.Join(fs.Args(), " "); words != "" {
		params.Set("content", words)
	}
	if *service != "" {
		params.Set("service", *service)
	}
	if *severity != "" {
		params.Set("severity", *severity)
	}
	if *filter != "" {
		params.Set("q", *filter)
	}
	path := "/api/v1/logs"
	if *trace != "" {
		path = "/api/v1/traces/" + url.PathEscape(*trace) + "/logs"
	}
	win.set(params)
	var resp struct {
		Logs []struct {
			TimeUnixNano uint64          `json:"time_unix_nano"`
			Time         string          `json:"time"`
			Severity     string          `json:"severity"`
			SeverityText string          `json:"severity_text"`
			Service      string          `json:"service"`
			Body         json.RawMessage `json:"body"`
			TraceID      string          `json:"trace_id"`
		} `json:"logs"`
		NextCursor string `json:"next_cursor"`
		listingWindow
	}
	if printed, err := c.fetch(ctx, env, path, params, &resp); err != nil || printed {
		return err
	}
	if len(resp.Logs) == 0 {
		if *trace != "" {
			_, err := fmt.Fprintf(env.Stdout, "no log records of trace %s\n", *trace)
			return err
		}
		return resp.empty(env.Stdout, "log records")
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSEVERITY\tSERVICE\tTRACE\tBODY")
	for _, l := range resp.Logs {
		sev := l.SeverityText
		if sev == "" {
			sev = l.Severity
		}
		var body string
		if err := json.Unmarshal(l.Body, &body); err != nil {
			body = string(l.Body) // a structured body: its JSON
		}
		body = strings.Join(strings.Fields(body), " ")
		if r := []rune(body); len(r) > 160 {
			body = string(r[:157]) + "..."
		}
		trace := l.TraceID
		if len(trace) > 8 {
			trace = trace[:8]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.fmtRFC3339(l.Time), sev, l.Service, trace, body)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resp.NextCursor != "" {
		fmt.Fprintf(env.Stdout, "(more than %s; narrow the search or raise --limit)\n", plural(len(resp.Logs), "record"))
	}
	return nil
}
