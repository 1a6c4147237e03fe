package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "search", Short: "find spans or traces matching a filter", Run: runSearch})
}

func runSearch(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "search", "[flags] [TRACEQL]")
	var c clientFlags
	c.register(fs, env)
	traces := fs.Bool("traces", false, "list matching traces (summaries) instead of spans")
	var sf spanFilterFlags
	sf.register(fs)
	var win windowFlags
	win.register(fs)
	limit := fs.Int("limit", 20, "most results to show")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{}
	sf.set(params, fs.Args())
	win.set(params)
	params.Set("limit", strconv.Itoa(*limit))
	path := "/api/v1/spans"
	if *traces {
		path = "/api/v1/traces"
	}
	body, err := c.get(ctx, path, params)
	if err != nil {
		return err
	}
	if c.json {
		_, err := env.Stdout.Write(body)
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	if *traces {
		var resp struct {
			Traces []struct {
				TraceID     string `json:"trace_id"`
				RootService string `json:"root_service"`
				RootName    string `json:"root_name"`
				Start       uint64 `json:"start_time_unix_nano"`
				Duration    uint64 `json:"duration_ns"`
				Spans       int    `json:"span_count"`
				Errors      int    `json:"error_count"`
			} `json:"traces"`
			listingWindow
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return fmt.Errorf("decode server response: %w", err)
		}
		if len(resp.Traces) == 0 {
			return resp.empty(env.Stdout, "traces")
		}
		fmt.Fprintln(tw, "START\tTRACE ID\tROOT\tDURATION\tSPANS\tERRORS")
		for _, t := range resp.Traces {
			root := t.RootService + ": " + t.RootName
			if t.RootName == "" {
				root = "(root not received)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", c.fmtTime(t.Start), t.TraceID, root, fmtDuration(t.Duration), t.Spans, t.Errors)
		}
		return nil
	}
	var resp struct {
		Spans      []apiSpan `json:"spans"`
		NextCursor string    `json:"next_cursor"`
		listingWindow
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	if len(resp.Spans) == 0 {
		return resp.empty(env.Stdout, "spans")
	}
	fmt.Fprintln(tw, "START\tSERVICE\tNAME\tDURATION\tSTATUS\tTRACE ID")
	for _, s := range resp.Spans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.fmtTime(s.Start), s.Service, s.Name, fmtDuration(s.DurationNs), s.Status, s.TraceID)
	}
	tw.Flush()
	return writeSnippets(env, body)
}

// spanFilterFlags are the span filter flags of search and tail.
type spanFilterFlags struct {
	service, name, status, minDur, maxDur, content string
}

func (f *spanFilterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.service, "service", "", "only spans of this service")
	fs.StringVar(&f.name, "name", "", "only spans with this name")
	fs.StringVar(&f.status, "status", "", "only spans with this status: ok, error or unset")
	fs.StringVar(&f.minDur, "min-duration", "", "only spans at least this long (e.g. 100ms)")
	fs.StringVar(&f.maxDur, "max-duration", "", "only spans at most this long")
	fs.StringVar(&f.content, "content", "", `words the span's text must contain (prompts, completions, messages, exceptions); "quoted phrase" for exact order`)
}

// set adds the given filters to params, and the positional arguments as
// the TraceQL query q.
func (f *spanFilterFlags) set(params url.Values, args []string) {
	if len(args) > 0 {
		params.Set("q", strings.Join(args, " "))
	}
	for k, v := range map[string]string{"service": f.service, "name": f.name, "status": f.status,
		"min_duration": f.minDur, "max_duration": f.maxDur, "content": f.content} {
		if v != "" {
			params.Set(k, v)
		}
	}
}
