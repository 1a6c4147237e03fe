package cli

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "metrics", Short: "TraceQL metrics: rate, counts and percentiles over time ({ } | rate() by (resource.service.name))", Run: runMetrics})
}

func runMetrics(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "metrics", "[flags] TRACEQL")
	var c clientFlags
	c.register(fs, env)
	var win serviceWindowFlags
	win.register(fs, "1h")
	step := fs.String("step", "", "bucket width, e.g. 1m (default: a nice step giving at most 120 points)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: give a TraceQL metrics query, e.g. '{ status = error } | rate() by (resource.service.name)'", errUsage)
	}
	params := url.Values{"since": {*win.since}, "q": {strings.Join(fs.Args(), " ")}}
	if *win.until != "" {
		params.Set("until", *win.until)
	}
	if *step != "" {
		params.Set("step", *step)
	}
	var resp struct {
		Query       string  `json:"query"`
		StepSeconds float64 `json:"step_seconds"`
		Path        string  `json:"path"`
		SpansRead   int     `json:"spans_read"`
		Partial     bool    `json:"partial"`
		Reason      string  `json:"partial_reason"`
		Series      []struct {
			Labels  map[string]any `json:"labels"`
			Samples []struct {
				Value float64 `json:"value"`
			} `json:"samples"`
		} `json:"series"`
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/traceql/metrics", params, &resp); err != nil || printed {
		return err
	}
	how := "from stored aggregates"
	if resp.Path == "spans" {
		how = "from " + plural(resp.SpansRead, "span") + " read"
	}
	fmt.Fprintf(env.Stdout, "%s\n%s, step %gs, %s\n", resp.Query, plural(len(resp.Series), "series", "series"), resp.StepSeconds, how)
	if resp.Partial {
		fmt.Fprintf(env.Stdout, "partial: %s\n", resp.Reason)
	}
	if len(resp.Series) == 0 {
		fmt.Fprintln(env.Stdout, "no spans matched in the window; widen it with --since")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERIES\tPOINTS\tLAST\tMIN\tMEAN\tMAX")
	for _, s := range resp.Series {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, s.Labels[k]))
		}
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, p := range s.Samples {
			lo, hi, sum = math.Min(lo, p.Value), math.Max(hi, p.Value), sum+p.Value
		}
		last := s.Samples[len(s.Samples)-1].Value
		fmt.Fprintf(tw, "%s\t%d\t%.4g\t%.4g\t%.4g\t%.4g\n", strings.Join(parts, " "), len(s.Samples), last, lo, sum/float64(len(s.Samples)), hi)
	}
	return tw.Flush()
}
