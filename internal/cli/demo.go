package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
)

func init() {
	register(&Command{
		Name:  "demo",
		Short: "seed a running server with realistic LLM and API traces (backfill, then an optional live trickle)",
		Run:   runDemo,
	})
}

func runDemo(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "demo", "[flags]")
	endpoint := fs.String("server", "http://127.0.0.1:4318", "URL of the running rastro server, where the demo data is sent over OTLP/HTTP (loopback only)")
	fs.StringVar(endpoint, "endpoint", "http://127.0.0.1:4318", "same as --server (kept for compatibility)")
	hours := fs.Float64("hours", 6, "hours of history to backfill, ending now")
	perHour := fs.Int("spans-per-hour", 5000, "spans per hour of history, for each of the llm and api corpora")
	rate := fs.Float64("rate", 20_000, "backfill send rate in spans/s")
	live := fs.Bool("live", false, "after the backfill, keep sending a trickle of new traces until interrupted")
	liveRate := fs.Float64("live-rate", 20, "live trickle in spans/s (split between the llm and api corpora)")
	liveFor := fs.Duration("live-for", 0, "stop the live trickle after this long; 0 = until interrupted")
	project := fs.String("project", "", "project to write to (X-Scope-OrgID); empty = server default")
	seed := fs.Uint64("seed", 1, "corpus seed")
	asJSON := fs.Bool("json", false, "print the backfill's result and the commands to try as JSON")
	var token string
	registerToken(fs, env, &token)
	fs.Lookup("token").Usage = "bearer token (ingest role) for a server with --auth-file (default: RASTRO_TOKEN)"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := envDefaults(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *hours <= 0 || *perHour < 1 || *rate <= 0 || *liveRate <= 0 {
		return fmt.Errorf("%w: --hours, --spans-per-hour, --rate and --live-rate must be > 0", errUsage)
	}
	if err := bench.CheckLoopback(*endpoint); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	now := time.Now()
	window := time.Duration(*hours * float64(time.Hour))
	n := int(*hours * float64(*perHour))
	var payloads []bench.Payload
	for _, c := range []string{bench.CorpusLLM, bench.CorpusAPI} {
		spans, err := bench.Generate(c, bench.CorpusOptions{Seed: *seed, Spans: n, Start: now.Add(-window), Window: window})
		if err != nil {
			return err
		}
		pl, err := bench.Prepare(bench.Batches(spans, 500), bench.ProtoOTLPProto, false)
		if err != nil {
			return err
		}
		payloads = append(payloads, pl...)
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "backfilling %.1f h of llm and api traces (%d spans) into %s at %.0f spans/s\n", *hours, 2*n, *endpoint, *rate)
	}
	o := bench.LoadOptions{Endpoint: *endpoint, Protocol: bench.ProtoOTLPProto, Concurrency: 2, Rate: *rate, KeepAlive: true, Project: *project, Token: token}
	if p := newProgress(env); p != nil {
		o.Progress, o.ProgressEvery = p, 500*time.Millisecond
	}
	res, err := bench.Load(ctx, o, payloads)
	if p, ok := o.Progress.(*progressLine); ok {
		p.Close()
	}
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	if res.AcceptedSpans == 0 {
		return fmt.Errorf("backfill: the server accepted no spans: %s", res.FirstError)
	}
	try := demoTry(*endpoint, *project)
	ui := strings.TrimRight(*endpoint, "/") + "/"
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		if err := enc.Encode(map[string]any{"sent_spans": res.SentSpans, "accepted_spans": res.AcceptedSpans, "seconds": res.Elapsed.Seconds(),
			"status_429": res.Status429, "errors": res.Errors + res.Shed, "try": try, "ui": ui}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "backfill: %d of %s accepted in %.1f s (429s %d, errors %d)\n", res.AcceptedSpans, plural(res.SentSpans, "span"), res.Elapsed.Seconds(), res.Status429, res.Errors+res.Shed)
		fmt.Fprintln(env.Stdout, "\nTry:")
		for _, t := range try {
			fmt.Fprintf(env.Stdout, "  %-44s # %s\n", t[0], t[1])
		}
		fmt.Fprintf(env.Stdout, "or open %s in a browser.\n", ui)
	}
	if !*live {
		return nil
	}
	return demoLive(ctx, env, o, *seed, *liveRate, *liveFor)
}

// demoTry are three commands to run on the demo data, each with what it
// shows.
func demoTry(endpoint, project string) [][2]string {
	flags := ""
	if strings.TrimRight(endpoint, "/") != "http://127.0.0.1:4318" {
		flags += " --server " + endpoint
	}
	if project != "" {
		flags += " --project " + project
	}
	return [][2]string{
		{"rastro search --traces --status error" + flags, "failing traces of the last 24h"},
		{"rastro llm stats --by model" + flags, "LLM calls, tokens and cost by model"},
		{"rastro sessions" + flags, "chat sessions, latest first (then: rastro sessions ID)"},
	}
}

// demoLive sends a few fresh traces every second until ctx ends or liveFor passes.
func demoLive(ctx context.Context, env *Env, o bench.LoadOptions, seed uint64, rate float64, liveFor time.Duration) error {
	fmt.Fprintf(env.Stdout, "live: sending about %.0f spans/s; interrupt to stop\n", rate)
	if liveFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, liveFor)
		defer cancel()
	}
	o.Rate = 0
	o.Concurrency = 1
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var sent int64
	for i := uint64(1); ; i++ {
		select {
		case <-ctx.Done():
			fmt.Fprintf(env.Stdout, "live: %d spans accepted\n", sent)
			return nil
		case <-tick.C:
		}
		c := bench.Corpora[1+i%2] // llm, api alternately
		spans, err := bench.Generate(c, bench.CorpusOptions{Seed: seed*1_000_003 + i, Spans: int(2 * rate), Start: time.Now().Add(-time.Second), Window: time.Second})
		if err != nil {
			return err
		}
		pl, err := bench.Prepare(bench.Batches(spans, 500), bench.ProtoOTLPProto, false)
		if err != nil {
			return err
		}
		res, err := bench.Load(ctx, o, pl)
		sent += res.AcceptedSpans
		if err != nil {
			continue // interrupted: report at the top of the loop
		}
		if res.FailedRequests() > 0 {
			fmt.Fprintf(env.Stderr, "live: %d requests failed: %s\n", res.FailedRequests(), res.FirstError)
		}
	}
}
