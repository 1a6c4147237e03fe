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
	register(&Command{Name: "sessions", Short: "list LLM sessions (conversations) with tokens, cost and errors", Run: runSessions})
}

func runSessions(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "sessions", "[flags]")
	var c clientFlags
	c.register(fs)
	sortBy := fs.String("sort", "last_seen", "order: last_seen, first_seen, cost, tokens, spans or errors (descending)")
	limit := fs.Int("limit", 50, "most sessions to list (1-1000)")
	since := fs.String("since", "", "window start: RFC 3339, Unix nanoseconds, or a duration ago (1h); default all time")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{"sort": {*sortBy}, "limit": {strconv.Itoa(*limit)}}
	if *since != "" {
		params.Set("since", *since)
	}
	body, err := c.get(ctx, "/api/v1/sessions", params)
	if err != nil {
		return err
	}
	if c.json {
		_, err := env.Stdout.Write(body)
		return err
	}
	var resp struct {
		Sessions []struct {
			ID    string   `json:"session_id"`
			Users []string `json:"users"`
			llmMeasures
		} `json:"sessions"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tUSERS\tLAST SEEN\tTRACES\tSPANS\tERRORS\tTOKENS IN/OUT\tCOST USD")
	for _, s := range resp.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d/%d\t%.4f\n", s.ID, strings.Join(s.Users, ","), s.LastSeen,
			s.Traces, s.Spans, s.Errors, s.InputTokens, s.OutputTokens, s.CostUSD)
	}
	fmt.Fprintf(tw, "(%d of %d sessions)\n", len(resp.Sessions), resp.Total)
	return tw.Flush()
}
