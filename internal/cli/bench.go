package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/rastro-dev/rastro/internal/bench"
)

func init() {
	register(&Command{
		Name:  "bench",
		Short: "run a benchmark suite against a fresh rastro serve process and write docs/benchmarks/SUITE.md",
		Run:   runBench,
	})
}

func runBench(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "bench", "[flags] SUITE... (flags may also follow the suite names)")
	binary := fs.String("binary", "", "rastro binary to start as the server (default: this executable)")
	runs := fs.Int("runs", 5, "runs per scenario; the table shows the median with min and max")
	spans := fs.Int("spans", 0, "spans per run (0 = the suite's default: ingest 50000, canonical 100000)")
	batch := fs.Int("batch", 1000, "spans per request")
	samples := fs.Int("samples", 200, "timed query samples per query kind per run (at least 100)")
	seed := fs.Uint64("seed", 1, "corpus seed")
	only := fs.String("only", "", "comma-separated substrings: run only scenarios whose name contains one (a trailing $ anchors it to the end of the name)")
	outDir := fs.String("out-dir", "docs/benchmarks", "where SUITE.md and raw/SUITE-TIME.json are written")
	noWrite := fs.Bool("no-write", false, "print the results only; write no files")
	asJSON := fs.Bool("json", false, "print the raw record as JSON instead of the markdown table")
	list := fs.Bool("list", false, "list the suites and exit")
	tmp := fs.String("tmp-dir", "", "parent directory of the per-run data directories (default: the system temp dir)")
	rate := fs.Float64("rate", 0, "search-live: open-loop ingest rate in spans/s while querying (0 = half the saturation rate measured by the preload)")
	ingestFor := fs.Duration("ingest-for", 0, "search-live: how long to ingest while querying; overload: the overload window (0 = 60s for both)")
	loadNice := fs.Int("load-nice", 10, "search-live and overload: nice value (0-19) of the processes that send the load; they stand for senders on other machines")
	queryEvery := fs.Duration("query-interval", 0, "search-live: during the ingest the client starts a query every interval (0 = back to back)")
	quiet := fs.Bool("quiet", false, "no progress line (shown on stderr when it is a terminal: which run, which scenario)")
	var names []string
	rest := args
	for {
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if err := envDefaults(fs, env); err != nil {
		return err
	}
	if *list {
		for _, s := range bench.Suites() {
			fmt.Fprintf(env.Stdout, "%-12s %s\n", s.Name, s.Summary)
		}
		return nil
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: name a suite (%s)", errUsage, suiteNames())
	}
	var suites []*bench.Suite
	for _, n := range names {
		s, ok := bench.LookupSuite(n)
		if !ok {
			return fmt.Errorf("%w: unknown suite %q (have %s)", errUsage, n, suiteNames())
		}
		suites = append(suites, s)
	}
	if *runs < 1 || *batch < 1 || *spans < 0 {
		return fmt.Errorf("%w: --runs and --batch must be >= 1, --spans >= 0", errUsage)
	}
	if *rate < 0 || *ingestFor < 0 || *queryEvery < 0 {
		return fmt.Errorf("%w: --rate, --ingest-for and --query-interval must be >= 0, got %g, %s and %s", errUsage, *rate, *ingestFor, *queryEvery)
	}
	if *loadNice < 0 || *loadNice > 19 {
		return fmt.Errorf("%w: --load-nice must be 0-19, got %d", errUsage, *loadNice)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the rastro binary: %w", err)
	}
	bin := *binary
	if bin == "" {
		bin = exe
	}
	cfg := bench.Config{Binary: bin, Runs: *runs, Spans: *spans, Batch: *batch, Samples: *samples, Seed: *seed, TempDir: *tmp,
		Rate: *rate, IngestFor: *ingestFor, Harness: exe, LoadNice: *loadNice,
		QueryInterval: *queryEvery}
	for _, o := range strings.Split(*only, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.Only = append(cfg.Only, o)
		}
	}
	pl := newProgress(env)
	if pl != nil && !*quiet {
		cfg.Log = pl
	}
	var failed []string
	for _, s := range suites {
		rec, err := bench.RunSuite(ctx, s, cfg)
		if pl != nil {
			pl.Close() // clear the progress line before the report
		}
		if err != nil {
			return fmt.Errorf("bench %s: %w", s.Name, err)
		}
		if *asJSON {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rec); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(env.Stdout, "## %s\n\n%s\n", s.Name, bench.Markdown(s, rec, ""))
		}
		if !*noWrite {
			md, raw, err := bench.WriteReport(*outDir, s, rec)
			if err != nil {
				return fmt.Errorf("bench %s: %w", s.Name, err)
			}
			fmt.Fprintf(env.Stderr, "wrote %s and %s\n", md, raw)
		}
		for _, sc := range rec.Scenarios {
			if sc.Status == "refused" {
				failed = append(failed, s.Name+"/"+sc.Name)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d scenarios refused (reported as failures): %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

func suiteNames() string {
	var n []string
	for _, s := range bench.Suites() {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}
