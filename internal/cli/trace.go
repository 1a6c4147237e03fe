package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "trace", Short: "show one trace as a tree of spans", Run: runTrace})
}

func runTrace(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "trace", "[flags] TRACE_ID")
	var c clientFlags
	c.register(fs, env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: give exactly one trace id", errUsage)
	}
	var resp struct {
		TraceID string    `json:"trace_id"`
		Spans   []apiSpan `json:"spans"`
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/traces/"+fs.Arg(0), nil, &resp); err != nil || printed {
		return err
	}
	printTraceTree(env, &c, resp.TraceID, resp.Spans)
	return nil
}

// printTraceTree prints spans indented under their parents; spans whose parent
// is missing are shown at the top level.
func printTraceTree(env *Env, c *clientFlags, traceID string, spans []apiSpan) {
	link := c.traceLink(traceID)
	byID := map[string]bool{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	children := map[string][]apiSpan{}
	var roots []apiSpan
	for _, s := range spans {
		if s.ParentSpanID == "" || !byID[s.ParentSpanID] {
			roots = append(roots, s)
		} else {
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		}
	}
	var t0 uint64
	for i, s := range spans {
		if i == 0 || s.Start < t0 {
			t0 = s.Start
		}
	}
	fmt.Fprintf(env.Stdout, "trace %s: %s, started %s (%s)\n\n", traceID, plural(len(spans), "span"), c.fmtTime(t0), link)
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SPAN\tSERVICE\tOFFSET\tDURATION\tSTATUS\tSPAN ID")
	var walk func(s apiSpan, depth int)
	walk = func(s apiSpan, depth int) {
		status := s.Status
		if s.StatusMsg != "" {
			status += ": " + s.StatusMsg
		}
		fmt.Fprintf(tw, "%s%s\t%s\t+%s\t%s\t%s\t%s\n", strings.Repeat("  ", depth), s.Name, s.Service,
			fmtDuration(s.Start-t0), fmtDuration(s.DurationNs), status, s.SpanID)
		kids := children[s.SpanID]
		sort.Slice(kids, func(i, j int) bool { return kids[i].Start < kids[j].Start })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].Start < roots[j].Start })
	for _, r := range roots {
		walk(r, 0)
	}
	tw.Flush()
}
