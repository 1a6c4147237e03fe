package cli

import (
	"context"
	"fmt"
	"strconv"
)

func init() {
	register(&Command{Name: "summarize", Short: "where to look: per service rate, errors and latency against the previous window, error groups, slowest operations, LLM cost, anomalies", Run: runSummarize})
	register(&Command{Name: "anomalies", Short: "operations whose latency, error rate or traffic moved far from the previous window or their recent baseline, ranked", Run: runAnomalies})
}

func runSummarize(ctx context.Context, env *Env, args []string) error {
	return insightCommand(ctx, env, args, "summarize", "/api/v1/summary")
}

func runAnomalies(ctx context.Context, env *Env, args []string) error {
	return insightCommand(ctx, env, args, "anomalies", "/api/v1/anomalies")
}

// insightCommand prints the server's text rendering of a summary or an
// anomaly list (the JSON with --json).
func insightCommand(ctx context.Context, env *Env, args []string, name, path string) error {
	fs := newFlagSet(env, name, "[flags] [SERVICE]")
	var c clientFlags
	c.register(fs, env)
	var win serviceWindowFlags
	win.register(fs, "1h")
	q := fs.String("q", "", "a TraceQL filter the spans must match (costs a scan of the window)")
	sensitivity := fs.Float64("sensitivity", 1, "anomaly sensitivity: 2 reports moves half as strong, 0.5 only twice as strong")
	limit := fs.Int("limit", 0, "entries per list (default 5; anomalies 10)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params, err := win.params(fs)
	if err != nil {
		return err
	}
	if *q != "" {
		params.Set("q", *q)
	}
	if *sensitivity != 1 {
		params.Set("sensitivity", strconv.FormatFloat(*sensitivity, 'g', -1, 64))
	}
	if *limit != 0 {
		params.Set("limit", strconv.Itoa(*limit))
	}
	if !c.json {
		params.Set("format", "text")
	}
	body, err := c.get(ctx, path, params)
	if err != nil {
		return err
	}
	if _, err := env.Stdout.Write(body); err != nil {
		return err
	}
	if c.json {
		_, err = fmt.Fprintln(env.Stdout)
	}
	return err
}
