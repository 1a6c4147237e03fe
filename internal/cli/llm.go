package cli

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "llm", Short: "LLM usage: tokens, cost and latency grouped by model, user, session...", Run: runLLM})
}

// llmMeasures is the subset of the API's measures the CLI prints.
type llmMeasures struct {
	Spans        int64   `json:"spans"`
	Counted      int64   `json:"counted_spans"`
	Errors       int64   `json:"errors"`
	Traces       int64   `json:"traces"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CacheRead    int64   `json:"cache_read_tokens"`
	Reasoning    int64   `json:"reasoning_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	FirstSeen    string  `json:"first_seen"`
	LastSeen     string  `json:"last_seen"`
	Latency      *struct {
		P50 float64 `json:"p50"`
		P95 float64 `json:"p95"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	// FromMetrics: calls known from the GenAI client metrics, not spans.
	FromMetrics *struct {
		Calls int64 `json:"calls"`
	} `json:"from_metrics"`
}

// calls are the counted spans plus the calls known from metrics only.
func (m *llmMeasures) calls() int64 {
	if m.FromMetrics != nil {
		return m.Counted + m.FromMetrics.Calls
	}
	return m.Counted
}

// llmGroup is one row of LLM statistics.
type llmGroup struct {
	Key map[string]string `json:"key"`
	llmMeasures
}

func runLLM(ctx context.Context, env *Env, args []string) error {
	// The subcommand is the first positional argument, so flags may come
	// before it: rastro llm --server URL stats.
	fs := newFlagSet(env, "llm", "stats [flags] [TRACEQL]")
	var c clientFlags
	c.register(fs, env)
	by := fs.String("by", "model", "comma-separated group keys: model, provider, service, operation, session, user, agent, day, hour")
	var win windowFlags
	win.register(fs)
	top := fs.Int("top", 0, "show at most this many groups, the costliest (default: the server's, 1000); the rest are summed in one OTHERS row")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 || fs.Arg(0) != "stats" {
		return fmt.Errorf("%w: usage: rastro llm stats [--by model,user,...] [flags] [TRACEQL]", errUsage)
	}
	params := url.Values{"group_by": {*by}}
	if fs.NArg() > 1 {
		params.Set("q", strings.Join(fs.Args()[1:], " "))
	}
	win.set(params)
	if *top != 0 {
		params.Set("top", strconv.Itoa(*top))
	}
	var resp struct {
		GroupBy     []string     `json:"group_by"`
		Groups      []llmGroup   `json:"groups"`
		TotalGroups int          `json:"total_groups"`
		Others      *llmMeasures `json:"others"`
		Totals      llmMeasures  `json:"totals"`
		listingWindow
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/llm/stats", params, &resp); err != nil || printed {
		return err
	}
	if len(resp.Groups) == 0 {
		return resp.empty(env.Stdout, "spans")
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, k := range resp.GroupBy {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(k))
	}
	fmt.Fprintln(tw, "SPANS\tCALLS\tERRORS\tINPUT TOK\tOUTPUT TOK\tCACHE READ\tREASONING\tCOST USD\tP50 ms\tP95 ms\tP99 ms\t")
	row := func(key []string, m llmMeasures) {
		for _, k := range key {
			fmt.Fprintf(tw, "%s\t", k)
		}
		p50, p95, p99 := "-", "-", "-"
		if m.Latency != nil {
			p50, p95, p99 = fmt.Sprintf("%.1f", m.Latency.P50), fmt.Sprintf("%.1f", m.Latency.P95), fmt.Sprintf("%.1f", m.Latency.P99)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%s\t%s\t%s\t\n", m.Spans, m.calls(), m.Errors,
			m.InputTokens, m.OutputTokens, m.CacheRead, m.Reasoning, m.CostUSD, p50, p95, p99)
	}
	// By day or hour: rows in time order (the server orders by cost).
	for _, k := range []string{"hour", "day"} {
		if slices.Contains(resp.GroupBy, k) {
			slices.SortStableFunc(resp.Groups, func(a, b llmGroup) int { return strings.Compare(a.Key[k], b.Key[k]) })
		}
	}
	missing := map[string]bool{} // group keys some spans do not carry
	for _, g := range resp.Groups {
		key := make([]string, len(resp.GroupBy))
		for i, k := range resp.GroupBy {
			switch v := g.Key[k]; {
			case v == "":
				key[i] = "(no " + k + ")"
				missing[k] = true
			case k == "hour":
				key[i] = c.fmtRFC3339(v)
			default:
				key[i] = v
			}
		}
		row(key, g.llmMeasures)
	}
	label := func(name string) []string {
		key := make([]string, len(resp.GroupBy))
		if len(key) > 0 {
			key[0] = name
		}
		return key
	}
	if resp.Others != nil {
		row(label(fmt.Sprintf("OTHERS (%d)", resp.TotalGroups-len(resp.Groups))), *resp.Others)
	}
	row(label("TOTAL"), resp.Totals)
	if err := tw.Flush(); err != nil {
		return err
	}
	// Explain the rows of spans without a key, and CALLS.
	for _, k := range resp.GroupBy {
		if !missing[k] {
			continue
		}
		if k == "model" {
			fmt.Fprintln(env.Stdout, "(no model): spans that name no model: agent, tool and workflow spans, whose usage is counted on the LLM calls beneath them, and LLM spans that sent none.")
			continue
		}
		fmt.Fprintf(env.Stdout, "(no %s): spans that carry no %s.\n", k, k)
	}
	if len(missing) > 0 {
		fmt.Fprintln(env.Stdout, "CALLS counts LLM calls (the spans whose tokens and cost are summed); SPANS counts every span of the group (docs/llm.md).")
	}
	if fm := resp.Totals.FromMetrics; fm != nil && fm.Calls > 0 {
		fmt.Fprintf(env.Stdout, "CALLS includes %d calls known only from the GenAI client metrics (no span; no session, user or latency percentiles): docs/llm.md.\n", fm.Calls)
	}
	if slices.Contains(resp.GroupBy, "day") {
		fmt.Fprintln(env.Stdout, "Days are UTC dates.")
	}
	return nil
}
