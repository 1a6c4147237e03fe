package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/process"
)

func init() {
	register(&Command{
		Name:  "load",
		Short: "send generated spans to an OTLP endpoint on this machine and report the accepted rate",
		Run:   runLoad,
	})
}

func runLoad(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "load", "[flags]")
	endpoint := fs.String("endpoint", "", "server to load: http://HOST:PORT for HTTP protocols (default http://127.0.0.1:4318), HOST:PORT for otlp-grpc (default 127.0.0.1:4317); loopback addresses only")
	protocol := fs.String("protocol", "otlp-proto", "wire protocol: otlp-proto | otlp-json | otlp-grpc | native-json")
	corpus := fs.String("corpus", "canonical", "corpus to send: canonical | llm | api | llm-sessions")
	concurrency := fs.Int("concurrency", 4, "parallel workers, each with its own connection")
	batch := fs.Int("batch", 1000, "spans per request")
	rate := fs.Float64("rate", 0, "open loop: target spans/s, latency measured from each batch's scheduled time; 0 = closed loop (each worker sends when its previous batch is answered)")
	spans := fs.Int("spans", 100_000, "spans to generate (before the clock starts) and send")
	duration := fs.Duration("duration", 0, "stop after this long; with a duration the generated spans are re-sent from the start when they run out (the server de-duplicates them)")
	gz := fs.Bool("gzip", false, "gzip request bodies (compressed before the clock starts; gRPC compresses per call)")
	keepAlive := fs.Bool("keepalive", true, "reuse HTTP connections between requests")
	project := fs.String("project", "", "project to write to (the X-Scope-OrgID header over HTTP, x-scope-orgid metadata over gRPC); empty = the server's default project")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on a request after this long (counted as an error)")
	var token string
	registerToken(fs, env, &token)
	fs.Lookup("token").Usage = "bearer token (ingest role) for a server with --auth-file (default: RASTRO_TOKEN)"
	seed := fs.Uint64("seed", 1, "corpus seed: the same seed sends the same bytes")
	window := fs.Duration("window", time.Hour, "span start times are spread over the window ending now (or beginning at --start)")
	startAt := fs.String("start", "", "start time of the first span (RFC 3339); default: now minus --window")
	freshIDs := fs.Bool("fresh-ids", false, "with --duration: every pass after the first sends new spans (the pass number mixed into each trace id, times moved one --window later a pass), so the store keeps growing as under live traffic; otlp-proto without gzip only")
	retry429 := fs.Bool("retry-429", false, "re-send a batch answered 429 (gRPC RESOURCE_EXHAUSTED) after a backoff until it is accepted, as OTLP exporters do; such answers are counted apart")
	hold := fs.Bool("hold", false, "after generating the corpus, write \"rastro load: ready ...\" on stderr and start sending only when standard input closes: several generators start together")
	ackedFile := fs.String("acked-file", "", "write the send number of every acknowledged request to this file, one a line, ascending (0-based; with --duration, pass k's batch j is k*B+j, B the batches of one pass)")
	nice := fs.Int("nice", 0, "run at this nice value (1-19, Linux): a generator on the server's own machine yields the CPU to the server and to other clients")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	progress := fs.Duration("progress", time.Second, "interval of the progress line, shown on stderr when it is a terminal; 0 = none")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := envDefaults(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	p, err := bench.ParseProtocol(*protocol)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *concurrency < 1 || *batch < 1 || *spans < 1 || *rate < 0 || *duration < 0 || *timeout <= 0 {
		return fmt.Errorf("%w: --concurrency, --batch and --spans must be >= 1; --rate and --duration >= 0; --timeout > 0", errUsage)
	}
	if *freshIDs && (*duration == 0 || p != bench.ProtoOTLPProto || *gz) {
		return fmt.Errorf("%w: --fresh-ids needs --duration (it changes the passes that re-send the corpus) and --protocol otlp-proto without --gzip", errUsage)
	}
	if *nice < 0 || *nice > 19 {
		return fmt.Errorf("%w: --nice must be 0-19 (a generator may only lower its priority), got %d", errUsage, *nice)
	}
	start := time.Now().Add(-*window)
	if *startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, *startAt)
		if err != nil {
			return fmt.Errorf("%w: --start %q: want an RFC 3339 time such as 2026-12-03T14:00:00Z", errUsage, *startAt)
		}
		start = t
	}
	if *nice > 0 {
		if err := process.LowerPriority(*nice); err != nil {
			return fmt.Errorf("--nice %d: %w", *nice, err)
		}
	}
	ep := *endpoint
	if ep == "" {
		ep = "http://127.0.0.1:4318"
		if p == bench.ProtoOTLPGRPC {
			ep = "127.0.0.1:4317"
		}
	}
	if err := bench.CheckLoopback(ep); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *ackedFile != "" {
		// Written at the end; created now, so that a path it cannot write
		// fails before anything is sent.
		if err := bench.WriteAckedFile(*ackedFile, nil); err != nil {
			return err
		}
	}
	s, err := bench.Generate(*corpus, bench.CorpusOptions{Seed: *seed, Spans: *spans, Start: start, Window: *window})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	payloads, err := bench.Prepare(bench.Batches(s, *batch), p, *gz)
	if err != nil {
		return err
	}
	o := bench.LoadOptions{
		Endpoint: ep, Protocol: p, Concurrency: *concurrency, Rate: *rate, Duration: *duration, Loop: *duration > 0,
		Gzip: *gz, KeepAlive: *keepAlive, Project: *project, Token: token, Timeout: *timeout, ProgressEvery: *progress,
		FreshIDs: *freshIDs, Retry429: *retry429,
	}
	var (
		ackMu sync.Mutex
		acked []int // guarded by ackMu
	)
	if *ackedFile != "" {
		o.OnAck = func(n int) {
			ackMu.Lock()
			acked = append(acked, n)
			ackMu.Unlock()
		}
	}
	if *freshIDs {
		o.PassShift = *window
	}
	var pl *progressLine
	if *progress > 0 {
		if pl = newProgress(env); pl != nil {
			o.Progress = pl
		}
	}
	if *hold {
		fmt.Fprintf(env.Stderr, "%s %d spans in %d requests; sending when standard input closes\n", bench.LoadReadyLine, len(s), len(payloads))
		if err := waitStdinClosed(ctx); err != nil {
			return err
		}
	}
	// The clock starts now: a parent process (rastro bench) waits for this
	// line before it times anything against the load.
	fmt.Fprintf(env.Stderr, "%s %d spans in %d requests\n", bench.LoadStartLine, len(s), len(payloads))
	res, err := bench.Load(ctx, o, payloads)
	if pl != nil {
		pl.Close()
	}
	if err != nil && res.Requests == 0 {
		return fmt.Errorf("load %s: %w", ep, err)
	}
	if *ackedFile != "" { // Load has returned: no worker appends any more
		if err := bench.WriteAckedFile(*ackedFile, acked); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printLoad(env.Stdout, ep, o, *batch, res)
	return nil
}

// waitStdinClosed reads standard input to its end, or until ctx ends.
func waitStdinClosed(ctx context.Context) error {
	eof := make(chan error, 1)
	go func() { // ends at end of input; when ctx ends first, the process is about to exit
		_, err := io.Copy(io.Discard, os.Stdin)
		eof <- err
	}()
	select {
	case err := <-eof:
		if err != nil {
			return fmt.Errorf("--hold: read standard input: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func printLoad(w io.Writer, ep string, o bench.LoadOptions, batch int, r bench.LoadResult) {
	route := o.Protocol.Route()
	if route == "" {
		route = "gRPC TraceService/Export"
	}
	mode := "closed loop"
	if o.Rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f spans/s (%d sends started late)", o.Rate, r.LateSends)
	}
	fmt.Fprintf(w, "endpoint     %s %s (%s), gzip %v, keep-alive %v\n", ep, route, o.Protocol, o.Gzip, o.KeepAlive)
	fmt.Fprintf(w, "mode         %s, %d workers, batch %d\n", mode, o.Concurrency, batch)
	fmt.Fprintf(w, "sent         %d spans in %d requests, %d bytes on the wire (%.0f B/span)\n",
		r.SentSpans, r.Requests, r.WireBytes, float64(r.WireBytes)/float64(max(r.SentSpans, 1)))
	fmt.Fprintf(w, "accepted     %d spans (%d rejected as partial success)\n", r.AcceptedSpans, r.RejectedSpans)
	fmt.Fprintf(w, "rate         %.0f accepted spans/s over %.2f s\n", r.SpansPerSecond, r.Elapsed.Seconds())
	from := "from the send"
	if o.Rate > 0 {
		from = "from each batch's due time"
	}
	fmt.Fprintf(w, "latency      p50 %.2f ms  p95 %.2f ms  p99 %.2f ms  max %.2f ms  (%d requests, client-observed, %s)\n",
		r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max, r.Latency.Samples, from)
	if o.Rate > 0 {
		a := r.AckedSendLatency
		fmt.Fprintf(w, "answer time  p50 %.2f ms  p95 %.2f ms  p99 %.2f ms  max %.2f ms  (%d acknowledged requests, from the send)\n",
			a.P50, a.P95, a.P99, a.Max, a.Samples)
		fmt.Fprintf(w, "send lag     p99 %.2f ms  max %.2f ms  (how late sends started after their due time); %d due but not sent when the duration ended\n",
			r.SendLag.P99, r.SendLag.Max, r.Unsent)
	}
	fmt.Fprintf(w, "429s         %d\n", r.Status429)
	fmt.Fprintf(w, "errors       %d (connections shed: %d)\n", r.Errors, r.Shed)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error  %s\n", r.FirstError)
	}
}
