package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// Config is what `rastro bench` passes to a suite. Zero values mean the
// suite's defaults.
type Config struct {
	Binary  string // the rastro binary to start as the server
	Runs    int    // rounds; each scenario runs once per round (default 5)
	Spans   int    // spans per run (suite default when 0)
	Batch   int    // spans per request (default 1000)
	Samples int    // query samples per query kind per run (default 200, at least 100)
	Seed    uint64 // corpus seed
	// Only runs the scenarios whose name contains one of these; an entry
	// ending in "$" must match the end of the name instead.
	Only    []string
	TempDir string // parent of the per-run data directories (default os.TempDir())
	// Rate is the open-loop ingest rate in spans/s of suites that query
	// while spans arrive (search-live); 0 lets the suite measure it.
	Rate float64
	// IngestFor is how long such a suite ingests (search-live), or the
	// overload window (overload); 0 = the suite's default.
	IngestFor time.Duration
	// Harness is the rastro binary whose `rastro load` the suites that send
	// from a load process of their own run (search-live, overload; default
	// Binary).
	Harness string
	// LoadNice is the nice value of those processes (0-19).
	LoadNice int
	// QueryInterval paces search-live's client during the ingest: a query
	// starts every QueryInterval (0 = back to back).
	QueryInterval time.Duration
	// Log receives progress lines (which run, which scenario); may be nil.
	Log io.Writer

	// spansGiven is set by RunSuite when the caller chose Spans (--spans)
	// rather than leaving the suite's default: a scenario with a size of
	// its own (ingest's sustained run) follows only a chosen count.
	spansGiven bool
}

func (c *Config) defaults() {
	if c.Harness == "" {
		c.Harness = c.Binary
	}
	if c.Runs <= 0 {
		c.Runs = 5
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	switch {
	case c.Samples <= 0:
		c.Samples = 200
	case c.Samples < 100:
		c.Samples = 100 // percentiles over fewer samples say too little
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
}

func (c *Config) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", a...)
	}
}

// Scenario is one measured configuration. Run performs one run: it gets a
// fresh temporary directory and must leave no process behind.
type Scenario struct {
	Name   string
	Params map[string]string
	Run    func(ctx context.Context, env *RunEnv) Result
}

// RunEnv is what one run may use.
type RunEnv struct {
	Config
	Dir string // fresh, empty, removed after the run
}

// Result is one run's outcome: its metrics, or the reasons it was refused.
type Result struct {
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Refusals []string           `json:"refusals,omitempty"`
	NotWired string             `json:"not_wired,omitempty"` // set by a scenario whose component does not exist yet
}

func refused(format string, a ...any) Result {
	return Result{Refusals: []string{fmt.Sprintf(format, a...)}}
}

// Column is one column of a suite's result table.
type Column struct {
	Title  string
	Param  string // a Scenario.Params key, or
	Metric string // a metric name (its median across runs is shown)
	Spread bool   // also show min and max
	Digits int    // decimals
}

// Suite is a family of scenarios run by `rastro bench NAME`.
type Suite struct {
	Name    string
	Summary string // one line for --help
	Method  string // markdown paragraph written above the table
	// DefaultSpans is the span count per run when Config.Spans is 0.
	DefaultSpans int
	// Plan generates and encodes everything the scenarios send (before any
	// clock starts) and returns the scenarios.
	Plan    func(ctx context.Context, cfg Config) ([]Scenario, error)
	Columns []Column
	// Targets turns a finished record into PASS/FAIL lines.
	Targets func(rec *Record) []Target
	// Detail, when set, returns extra markdown (for example a per-query
	// table) written under the result table and above the targets.
	Detail func(rec *Record) string
}

var suites = map[string]*Suite{}

// RegisterSuite adds a suite; later suites (LLM statistics, content search,
// memory, overload) register the same way from their own files.
func RegisterSuite(s *Suite) {
	if _, dup := suites[s.Name]; dup {
		panic("bench: suite registered twice: " + s.Name)
	}
	suites[s.Name] = s
}

// Suites returns the registered suites sorted by name.
func Suites() []*Suite {
	out := make([]*Suite, 0, len(suites))
	for _, s := range suites {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupSuite returns the named suite.
func LookupSuite(name string) (*Suite, bool) {
	s, ok := suites[name]
	return s, ok
}

// RunRecord is one run of one scenario.
type RunRecord struct {
	Round    int `json:"round"`
	Position int `json:"position"` // order within its round
	Result
	Seconds float64 `json:"seconds"`
}

// ScenarioRecord is a scenario's runs and their reduction.
type ScenarioRecord struct {
	Name    string            `json:"name"`
	Params  map[string]string `json:"params"`
	Status  string            `json:"status"` // "ok", "refused" or "not wired"
	Reasons []string          `json:"reasons,omitempty"`
	Summary map[string]Spread `json:"summary,omitempty"` // per metric, only when status is ok
	Runs    []RunRecord       `json:"runs"`
}

// Record is one `rastro bench SUITE` invocation, as written to raw JSON.
type Record struct {
	Suite     string           `json:"suite"`
	Started   time.Time        `json:"started"`
	Finished  time.Time        `json:"finished"`
	Seconds   float64          `json:"seconds"` // wall time of the whole invocation (monotonic clock)
	Machine   Machine          `json:"machine"`
	LoadAvg   LoadAvgSummary   `json:"load_avg_1m"`
	Runs      int              `json:"runs"`
	Spans     int              `json:"spans_per_run"`
	Batch     int              `json:"batch"`
	Seed      uint64           `json:"seed"`
	Only      []string         `json:"only,omitempty"`
	Scenarios []ScenarioRecord `json:"scenarios"`
	Targets   []Target         `json:"targets"`
}

// Scenario returns the named scenario record.
func (r *Record) Scenario(name string) (*ScenarioRecord, bool) {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name {
			return &r.Scenarios[i], true
		}
	}
	return nil, false
}

// Target is one PASS/FAIL line of a record.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // PASS, FAIL, REPORT or NOT RUN
}

func matchOnly(name string, only []string) bool {
	if len(only) == 0 {
		return true
	}
	for _, o := range only {
		if exact, ok := strings.CutSuffix(o, "$"); ok {
			if strings.HasSuffix(name, exact) && exact != "" {
				return true
			}
			continue
		}
		if o != "" && strings.Contains(name, o) {
			return true
		}
	}
	return false
}

// RunSuite plans the suite and runs its scenarios round-robin, rotating the
// order each round so that every scenario's runs are spread over the whole
// wall-clock window and over positions within a round; it samples the load
// average throughout and reduces each scenario to median, min and max.
func RunSuite(ctx context.Context, s *Suite, cfg Config) (*Record, error) {
	cfg.defaults()
	cfg.spansGiven = cfg.Spans > 0
	if cfg.Spans <= 0 {
		cfg.Spans = s.DefaultSpans
	}
	t0 := time.Now()
	rec := &Record{Suite: s.Name, Started: t0.UTC(), Runs: cfg.Runs, Spans: cfg.Spans, Batch: cfg.Batch, Seed: cfg.Seed, Only: cfg.Only}
	if cfg.Spans < 100 {
		return nil, fmt.Errorf("suite %s: --spans must be at least 100, got %d", s.Name, cfg.Spans)
	}
	rec.Machine = DescribeMachine(cfg.Binary)
	cfg.logf("bench %s: generating and encoding the corpus (%d spans)", s.Name, cfg.Spans)
	all, err := s.Plan(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("plan suite %s: %w", s.Name, err)
	}
	var scen []Scenario
	for _, sc := range all {
		if matchOnly(sc.Name, cfg.Only) {
			scen = append(scen, sc)
		}
	}
	if len(scen) == 0 {
		return nil, fmt.Errorf("suite %s: no scenario matches --only %q", s.Name, strings.Join(cfg.Only, ","))
	}
	sampler := StartLoadSampler(2 * time.Second)
	recs := make([]ScenarioRecord, len(scen))
	for i, sc := range scen {
		recs[i] = ScenarioRecord{Name: sc.Name, Params: sc.Params}
	}
	for round := 0; round < cfg.Runs && ctx.Err() == nil; round++ {
		for pos := 0; pos < len(scen) && ctx.Err() == nil; pos++ {
			idx := (pos + round) % len(scen)
			sc := scen[idx]
			dir, err := os.MkdirTemp(cfg.TempDir, "rastro-bench-*")
			if err != nil {
				sampler.Stop()
				return nil, fmt.Errorf("make run directory: %w", err)
			}
			cfg.logf("round %d/%d  %-40s", round+1, cfg.Runs, sc.Name)
			t0 := time.Now()
			res := sc.Run(ctx, &RunEnv{Config: cfg, Dir: dir})
			for k, v := range res.Metrics {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					delete(res.Metrics, k) // JSON has no NaN; an absent metric reads n/a
				}
			}
			sampler.sample()
			if err := os.RemoveAll(dir); err != nil {
				res.Refusals = append(res.Refusals, "remove run directory: "+err.Error())
			}
			rr := RunRecord{Round: round, Position: pos, Result: res, Seconds: time.Since(t0).Seconds()}
			recs[idx].Runs = append(recs[idx].Runs, rr)
			switch {
			case res.NotWired != "":
				cfg.logf("    not wired: %s", res.NotWired)
			case len(res.Refusals) > 0:
				cfg.logf("    REFUSED: %s", strings.Join(res.Refusals, "; "))
			}
		}
	}
	rec.LoadAvg = sampler.Stop()
	for i := range recs {
		reduce(&recs[i])
	}
	rec.Scenarios = recs
	rec.Finished = time.Now().UTC()
	rec.Seconds = time.Since(t0).Seconds()
	if s.Targets != nil {
		rec.Targets = s.Targets(rec)
	}
	return rec, ctx.Err()
}

// reduce sets a scenario's status and, when every run counted, the median,
// min and max of each metric.
func reduce(sr *ScenarioRecord) {
	sr.Status = "ok"
	for _, r := range sr.Runs {
		if r.NotWired != "" {
			sr.Status = "not wired"
			sr.Reasons = []string{r.NotWired}
			return
		}
	}
	for _, r := range sr.Runs {
		for _, why := range r.Refusals {
			sr.Status = "refused"
			sr.Reasons = append(sr.Reasons, fmt.Sprintf("round %d: %s", r.Round+1, why))
		}
	}
	if sr.Status != "ok" || len(sr.Runs) == 0 {
		if len(sr.Runs) == 0 {
			sr.Status = "refused"
			sr.Reasons = append(sr.Reasons, "no run completed")
		}
		return
	}
	vals := map[string][]float64{}
	for _, r := range sr.Runs {
		for k, v := range r.Metrics {
			vals[k] = append(vals[k], v)
		}
	}
	sr.Summary = map[string]Spread{}
	for k, v := range vals {
		sr.Summary[k] = SpreadOf(v)
	}
}

// median returns the median of metric for scenario name, NaN when the
// scenario did not run or was refused.
func (r *Record) median(name, metric string) float64 {
	sr, ok := r.Scenario(name)
	if !ok || sr.Status != "ok" {
		return math.NaN()
	}
	s, ok := sr.Summary[metric]
	if !ok {
		return math.NaN()
	}
	return s.Median
}
