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
	register(&Command{Name: "search", Short: "find spans or traces matching a filter", Run: runSearch})
}

func runSearch(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "search", "[flags] [TRACEQL]")
	var c clientFlags
	c.register(fs, env)
	traces := fs.Bool("traces", false, "list matching traces (summaries) instead of spans")
	service := fs.String("service", "", "only spans of this service")
	name := fs.String("name", "", "only spans with this name")
	status := fs.String("status", "", "only spans with this status: ok, error or unset")
	minDur := fs.String("min-duration", "", "only spans at least this long (e.g. 100ms)")
	maxDur := fs.String("max-duration", "", "only spans at most this long")
	content := fs.String("content", "", `words the span's text must contain (prompts, completions, messages, exceptions); "quoted phrase" for exact order`)
	since := fs.String("since", "", "window start: RFC 3339, Unix time (unit by digit count), or a duration ago (1h)")
	until := fs.String("until", "", "window end, same forms as --since")
	limit := fs.Int("limit", 20, "most results to show")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{}
	if fs.NArg() > 0 {
		params.Set("q", strings.Join(fs.Args(), " "))
	}
	for k, v := range map[string]string{"service": *service, "name": *name, "status": *status,
		"min_duration": *minDur, "max_duration": *maxDur, "since": *since, "until": *until, "content": *content} {
		if v != "" {
			params.Set(k, v)
		}
	}
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
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return fmt.Errorf("decode server response: %w", err)
		}
		fmt.Fprintln(tw, "START\tTRACE ID\tROOT\tDURATION\tSPANS\tERRORS")
		for _, t := range resp.Traces {
			root := t.RootService + ": " + t.RootName
			if t.RootName == "" {
				root = "(root not received)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", fmtTime(t.Start), t.TraceID, root, fmtDuration(t.Duration), t.Spans, t.Errors)
		}
		if len(resp.Traces) == 0 {
			fmt.Fprintln(tw, "(no traces match)")
		}
		return nil
	}
	var resp struct {
		Spans      []apiSpan `json:"spans"`
		NextCursor string    `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	fmt.Fprintln(tw, "START\tSERVICE\tNAME\tDURATION\tSTATUS\tTRACE ID")
	for _, s := range resp.Spans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", fmtTime(s.Start), s.Service, s.Name, fmtDuration(s.DurationNs), s.Status, s.TraceID)
	}
	if len(resp.Spans) == 0 {
		fmt.Fprintln(tw, "(no spans match)")
	}
	return nil
}
