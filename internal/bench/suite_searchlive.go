package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "search-live",
		Summary:      "search while spans arrive: trace by id, a selective filter, absent values and a content word during ingest at half saturation, then on the quiet store",
		DefaultSpans: 1_000_000,
		Plan:         planSearchLive,
		Method: `Each run starts the real ` + "`rastro serve`" + ` (wal durability, defaults otherwise) on a fresh data directory and
preloads it with the canonical corpus (` + "`--spans`" + `, 1,000,000 by default) over OTLP/HTTP protobuf, 4 workers, closed loop (a
429 is retried after a backoff, as an exporter does, and counted). The preload's accepted rate is the **saturation
rate** unless ` + "`--rate`" + ` gives one. The server is stopped gracefully (the buffer is sealed) and started again on the same
directory, and the stored count is checked. Then a second canonical corpus (other seed, other trace ids, same 100
` + "`user.id`" + ` values, timestamps of the last minutes) is sent **open loop at half the saturation rate** by 4 workers for
` + "`--ingest-for`" + ` (60 s by default), from a ` + "`rastro load`" + ` process of its own at nice 10 (` + "`--load-nice`" + `): it stands
for senders on other machines, so the host's two CPUs go first to the server and to the query client (before
2026-12-03 14:30 UTC the generator ran inside the harness, beside the client it timed). At most 2,000,000 spans are generated, their times spread over what one pass takes
to send at that rate, and a longer ingest sends them again with new trace ids and later times (each pass mixes its
number into every trace id and moves its spans one pass later), so that every span stored is distinct and times
increase with arrival, as in real traffic (the records of 2026-12-02 up to 18:37 UTC re-sent the same spans with the
same times, so the store held each span about five times). During that
ingest ONE client sends queries back to back, cycling through four kinds: **trace by id**
(` + "`GET /api/v1/traces/{id}`" + `, traces of the preloaded corpus, each answer must hold the trace's exact span count), a
**selective filter** (` + "`{ span.user.id = \"u-NNN\" }`" + `, about 1% of spans, limit 20, the answer must be non-empty), an
**absent value** (` + "`user.id`" + ` values no span carries: ` + "`u-100`..`u-999`" + `, which share the prefix ` + "`u-`" + ` and often two digits
with present ones, present values with a digit appended (` + "`u-0420`" + `), cut short (` + "`u-04`" + `), upper-cased (` + "`U-042`" + `) or
with a fullwidth digit; the answer must be empty) and a **content word**
(` + "`GET /api/v1/spans?content=refused&limit=20`" + `, a word of the status message of about 0.4% of spans; non-empty).
When the ingest ends, the stored span count and the write buffer's spans (` + "`/api/v1/stats`" + `) are read: the quiet
queries run on whatever the buffer still holds (the harness neither seals nor waits for a seal; the buffer's span
count at the start and end of the quiet phase is reported), ` + "`--samples`" + ` of each kind, interleaved the same way.
Then the **settled** store: the server is stopped gracefully (its buffer sealed) and started again on the same
directory, and the same queries run once more after warm-ups, with no seal beside them (the quiet targets apply).
Each kind gets 10 untimed warm-ups after each restart. Every answer is checked; a wrong answer refuses the run. Times
are end to end (client send to last byte, loopback) and the server's own share from its ` + "`Server-Timing`" + ` header;
percentiles are exact nearest-rank over every sample of a run, and the tables show the median across runs.`,
		Columns: []Column{
			{Title: "Preloaded spans", Param: "spans"},
			{Title: "Saturation spans/s (min-max)", Metric: "saturation_spans_per_s", Spread: true},
			{Title: "Live target spans/s", Metric: "live_target_spans_per_s"},
			{Title: "Live accepted spans/s", Metric: "live_spans_per_s"},
			{Title: "Late sends", Metric: "live_late_sends"},
			{Title: "429s retried", Metric: "live_retried_429"},
			{Title: "Queries during ingest", Metric: "live_queries"},
			{Title: "Buffer spans, quiet start", Metric: "quiet_buffer_spans_start"},
			{Title: "Buffer spans, quiet end", Metric: "quiet_buffer_spans_end"},
		},
		Targets: searchLiveTargets,
		Detail:  searchLiveDetail,
	})
}

// The targets (issue 23), milliseconds at p95 unless named.
const (
	LiveAbsentQuietP95MS  = 1.0
	LiveAbsentIngestP95MS = 2.0
	LiveAbsentP99MS       = 5.0
	LiveFilterQuietP95MS  = 5.0
	LiveFilterIngestP95MS = 8.0
	LiveTraceP95MS        = 1.5
)

const (
	searchLiveScenario   = "search-live"
	searchLiveWorkers    = 4
	searchLiveDefaultFor = 60 * time.Second
	searchLiveLiveCap    = 2_000_000 // distinct spans generated for the live ingest
	searchLiveWord       = "refused" // in canonErrors: "connection refused"
	searchLiveWarmups    = 10
	searchLiveLimit      = 20
	searchLiveSeedOffset = 7919 // the live corpus's seed is Config.Seed plus this
)

// liveKind is one query kind of the suite.
type liveKind struct {
	name, title string
	target      [2]float64 // p95 targets: quiet, during ingest (0 = reported only)
}

var liveKinds = []liveKind{
	{"trace", "trace by id", [2]float64{LiveTraceP95MS, LiveTraceP95MS}},
	{"filter", "selective filter (1% of spans)", [2]float64{LiveFilterQuietP95MS, LiveFilterIngestP95MS}},
	{"absent", "absent user.id value", [2]float64{LiveAbsentQuietP95MS, LiveAbsentIngestP95MS}},
	{"word", "content word (~0.4% of spans)", [2]float64{}},
}

// The phases of a run: metrics are named PHASE_KIND_STAT; target is the
// index of the phase's targets in liveKind.target (the settled store is
// held to the quiet targets).
var livePhases = []struct {
	name, title string
	target      int
}{{"quiet", "quiet, after the ingest", 0}, {"live", "during ingest", 1}, {"settled", "settled (sealed, restarted)", 0}}

type searchLivePlan struct {
	preload      []Payload
	preloadSpans int
	live         CorpusOptions // the live corpus, generated by the load process
	liveSpans    int
	passLen      time.Duration   // the live corpus's time span, by which each pass is moved
	traces       []model.TraceID // preloaded traces, in query order
	perTrace     map[model.TraceID]int
	users        []string // present user.id values, in query order
	absent       []string // absent user.id values, in query order
	rate         float64  // open-loop rate; 0 = half the measured saturation
	ingestFor    time.Duration
	batch        int
	nice         int           // the load process's nice value
	every        time.Duration // the client's query interval during the ingest (0 = back to back)
}

func planSearchLive(ctx context.Context, cfg Config) ([]Scenario, error) {
	ingestFor := cfg.IngestFor
	if ingestFor <= 0 {
		ingestFor = searchLiveDefaultFor
	}
	if cfg.Rate < 0 {
		return nil, fmt.Errorf("search-live: --rate must be >= 0 spans/s, got %g", cfg.Rate)
	}
	start := time.Now().Add(-90 * time.Minute).Truncate(time.Minute)
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: start, Window: time.Hour})
	if err != nil {
		return nil, err
	}
	if cfg.LoadNice < 0 || cfg.LoadNice > 19 {
		return nil, fmt.Errorf("search-live: --load-nice must be 0-19, got %d", cfg.LoadNice)
	}
	p := &searchLivePlan{preloadSpans: len(spans), perTrace: map[model.TraceID]int{}, rate: cfg.Rate, ingestFor: ingestFor,
		batch: cfg.Batch, nice: cfg.LoadNice, every: cfg.QueryInterval}
	if p.preload, err = Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false); err != nil {
		return nil, err
	}
	var ids []model.TraceID
	present := map[string]bool{}
	for _, s := range spans {
		if p.perTrace[s.TraceID] == 0 {
			ids = append(ids, s.TraceID)
		}
		p.perTrace[s.TraceID]++
		if v, ok := s.Attr("user.id"); ok {
			present[v.Str] = true
		}
	}
	spans = nil
	// The live corpus: the spans the ingest will send (at --rate, or at half
	// of a generous saturation guess of 400,000 spans/s), capped; beyond it
	// the ingest sends them again.
	guess := 200_000.0
	if cfg.Rate > 0 {
		guess = cfg.Rate
	}
	liveN := max(100, min(searchLiveLiveCap, int(guess*ingestFor.Seconds())+cfg.Batch))
	// The corpus spans the time one pass takes to send at the guessed
	// rate; each later pass is moved that much later (PassShift), so that
	// times go on increasing with arrival as live traffic's do.
	p.passLen = time.Duration(float64(liveN) / guess * float64(time.Second))
	// Generated here to check its ids and by the load process to send it.
	p.live = CorpusOptions{Seed: cfg.Seed + searchLiveSeedOffset, Spans: liveN, Start: time.Now().Add(-time.Minute), Window: p.passLen}
	live, err := Generate(CorpusCanonical, p.live)
	if err != nil {
		return nil, err
	}
	for i := range live {
		if p.perTrace[live[i].TraceID] > 0 {
			return nil, fmt.Errorf("search-live: the live corpus reuses trace id %s of the preloaded one", live[i].TraceID)
		}
	}
	p.liveSpans = len(live)
	live = nil
	r := rand.New(rand.NewPCG(cfg.Seed, 23))
	n := cfg.Samples + searchLiveWarmups
	for range n {
		p.traces = append(p.traces, ids[r.IntN(len(ids))])
	}
	all := CanonicalUsers()
	for len(p.users) < n {
		if u := all[r.IntN(len(all))]; present[u] {
			p.users = append(p.users, u)
		}
	}
	cands := AbsentUserIDs(all)
	for len(p.absent) < n {
		p.absent = append(p.absent, cands[r.IntN(len(cands))])
	}
	if len(p.users) == 0 {
		return nil, errors.New("search-live: the preloaded corpus carries no user.id")
	}
	params := map[string]string{"spans": strconv.Itoa(p.preloadSpans), "live_generated_spans": strconv.Itoa(p.liveSpans),
		"ingest_for": ingestFor.String(), "workers": strconv.Itoa(searchLiveWorkers), "load_nice": strconv.Itoa(cfg.LoadNice)}
	if cfg.QueryInterval > 0 {
		params["query_interval"] = cfg.QueryInterval.String()
	}
	if cfg.Rate > 0 {
		params["rate"] = strconv.FormatFloat(cfg.Rate, 'f', -1, 64)
	}
	return []Scenario{{Name: searchLiveScenario, Params: params,
		Run: func(ctx context.Context, env *RunEnv) Result { return runSearchLive(ctx, env, p) }}}, nil
}

// AbsentUserIDs returns user.id values that no span of the canonical
// corpus carries, chosen to resemble the present ones (given): other
// numbers with the same prefix (u-100..u-999, which share "u-" and often
// two digits with present values), present values with a digit appended,
// cut short, upper-cased, and with a fullwidth last digit (which NFKC
// folding would turn into a present value).
func AbsentUserIDs(present []string) []string {
	have := map[string]bool{}
	for _, u := range present {
		have[u] = true
	}
	var out []string
	add := func(v string) {
		if !have[v] && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for i := 100; i < 1000; i += 7 {
		add(fmt.Sprintf("u-%03d", i))
	}
	for i, u := range present {
		switch i % 4 {
		case 0:
			add(u + strconv.Itoa(i%10))
		case 1:
			add(u[:len(u)-1])
		case 2:
			add(strings.ToUpper(u))
		case 3:
			last := u[len(u)-1]
			if last >= '0' && last <= '9' {
				add(u[:len(u)-1] + string(rune(0xFF10+int(last-'0'))))
			}
		}
	}
	return out
}

// The kinds of absent value AbsentUserIDs makes, as AbsentClass names them.
var absentClasses = []struct{ name, title string }{
	{"number", "another number (u-100..u-999)"},
	{"longer", "a present value and a digit"},
	{"shorter", "a present value cut short"},
	{"upper", "a present value upper-cased"},
	{"fullwidth", "a present value, fullwidth last digit"},
}

// AbsentClass names the kind of an absent user.id value of AbsentUserIDs.
func AbsentClass(v string) string {
	switch {
	case strings.HasPrefix(v, "U-"):
		return "upper"
	case strings.ContainsFunc(v, func(r rune) bool { return r >= 0xFF10 && r <= 0xFF19 }):
		return "fullwidth"
	case len(v) == 4:
		return "shorter"
	case len(v) == 6:
		return "longer"
	}
	return "number"
}

// liveQuery is one request of a kind and how to check its answer.
type liveQuery struct {
	path  string
	check func(body []byte) error
}

func (p *searchLivePlan) query(kind string, i int) liveQuery {
	spansIn := func(body []byte) (int, error) {
		var r struct {
			Spans []json.RawMessage `json:"spans"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return 0, fmt.Errorf("bad JSON: %v", err)
		}
		return len(r.Spans), nil
	}
	nonEmpty := func(body []byte) error {
		n, err := spansIn(body)
		if err == nil && (n == 0 || n > searchLiveLimit) {
			err = fmt.Errorf("%d spans, want 1..%d (the corpus has matches)", n, searchLiveLimit)
		}
		return err
	}
	switch kind {
	case "trace":
		id := p.traces[i%len(p.traces)]
		return liveQuery{path: "/api/v1/traces/" + id.String(), check: func(body []byte) error {
			n, err := spansIn(body)
			if err == nil && n != p.perTrace[id] {
				err = fmt.Errorf("%d spans, want %d", n, p.perTrace[id])
			}
			return err
		}}
	case "filter":
		q := fmt.Sprintf(`{ span.user.id = %q }`, p.users[i%len(p.users)])
		return liveQuery{path: fmt.Sprintf("/api/v1/spans?limit=%d&q=%s", searchLiveLimit, url.QueryEscape(q)), check: nonEmpty}
	case "absent":
		q := fmt.Sprintf(`{ span.user.id = %q }`, p.absent[i%len(p.absent)])
		return liveQuery{path: fmt.Sprintf("/api/v1/spans?limit=%d&q=%s", searchLiveLimit, url.QueryEscape(q)), check: func(body []byte) error {
			n, err := spansIn(body)
			if err == nil && n != 0 {
				err = fmt.Errorf("%d spans, want none (no span carries the value)", n)
			}
			return err
		}}
	case "word":
		return liveQuery{path: fmt.Sprintf("/api/v1/spans?limit=%d&content=%s", searchLiveLimit, searchLiveWord), check: nonEmpty}
	}
	panic("bench: unknown search-live kind " + kind)
}

// liveSamples collects the end-to-end and server times of one phase.
// Absent values are also kept per AbsentClass, under "absent_CLASS".
type liveSamples struct {
	e2e    map[string][]time.Duration
	server map[string][]float64
}

func newLiveSamples() *liveSamples {
	return &liveSamples{e2e: map[string][]time.Duration{}, server: map[string][]float64{}}
}

func (s *liveSamples) add(name string, d time.Duration, serverMS float64) {
	s.e2e[name] = append(s.e2e[name], d)
	s.server[name] = append(s.server[name], serverMS)
}

// do sends query i of kind and checks the answer; timed adds its times.
func (p *searchLivePlan) do(ctx context.Context, srv *Server, kind string, i int, into *liveSamples) error {
	q := p.query(kind, i)
	t0 := time.Now()
	code, body, ms, err := srv.GetTimed(ctx, q.path)
	d := time.Since(t0)
	if err != nil {
		return fmt.Errorf("%s %s: %v", kind, q.path, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %.200s", kind, q.path, code, body)
	}
	if err := q.check(body); err != nil {
		return fmt.Errorf("%s %s: %v", kind, q.path, err)
	}
	if into != nil {
		into.add(kind, d, ms)
		if kind == "absent" {
			into.add("absent_"+AbsentClass(p.absent[i%len(p.absent)]), d, ms)
		}
	}
	return nil
}

// put adds the phase's percentiles to m as PHASE_KIND_{p50,p95,p99,max}_ms
// and PHASE_KIND_server_{p50,p95,p99,max}_ms, plus PHASE_KIND_n.
func (s *liveSamples) put(m map[string]float64, phase string) {
	var names []string
	for _, k := range liveKinds {
		names = append(names, k.name)
	}
	for _, c := range absentClasses {
		names = append(names, "absent_"+c.name)
	}
	for _, name := range names {
		l := SummarizeLatency(s.e2e[name])
		pre := phase + "_" + name + "_"
		m[pre+"n"] = float64(l.Samples)
		if l.Samples == 0 {
			continue
		}
		m[pre+"p50_ms"], m[pre+"p95_ms"], m[pre+"p99_ms"], m[pre+"max_ms"] = l.P50, l.P95, l.P99, l.Max
		srv := slices.DeleteFunc(slices.Clone(s.server[name]), math.IsNaN)
		if len(srv) == len(s.server[name]) && len(srv) > 0 {
			slices.Sort(srv)
			m[pre+"server_p50_ms"], m[pre+"server_p95_ms"] = percentileSorted(srv, 50), percentileSorted(srv, 95)
			m[pre+"server_p99_ms"], m[pre+"server_max_ms"] = percentileSorted(srv, 99), srv[len(srv)-1]
		}
	}
}

func runSearchLive(ctx context.Context, env *RunEnv, p *searchLivePlan) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	pre, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: searchLiveWorkers,
		KeepAlive: true, Retry429: true}, p.preload)
	if err != nil {
		return refused("preload: %v", err)
	}
	res := Result{Metrics: map[string]float64{"saturation_spans_per_s": pre.SpansPerSecond, "preload_retried_429": float64(pre.Retried429)}}
	facts := RunFacts{Load: pre, Expected: int64(p.preloadSpans), Stored: -1, RestartStored: -1, Restarted: true}
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
	}
	if err := srv.Stop(120 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server after the preload: "+err.Error())
	}
	srv, err = StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("restart server: %v", err)
	}
	defer srv.Kill()
	if st, err := srv.Stats(ctx); err == nil {
		facts.RestartStored = st.Spans
	}
	if res.Refusals = append(Refusals(facts), res.Refusals...); len(res.Refusals) > 0 {
		return res
	}
	for i := range searchLiveWarmups {
		for _, k := range liveKinds {
			if err := p.do(ctx, srv, k.name, i, nil); err != nil {
				return refused("warm-up: %v", err)
			}
		}
	}

	rate := p.rate
	if rate <= 0 {
		rate = pre.SpansPerSecond / 2
	}
	res.Metrics["live_target_spans_per_s"] = rate
	type loadOut struct {
		lr  LoadResult
		err error
	}
	done := make(chan loadOut, 1)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	gen, err := StartLoadProcess(lctx, LoadProcess{Binary: env.Harness, Corpus: CorpusCanonical, Options: p.live, Batch: p.batch, Nice: p.nice,
		Load: LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: searchLiveWorkers,
			KeepAlive: true, Retry429: true, Rate: rate, Duration: p.ingestFor, Loop: true, FreshIDs: true, PassShift: p.passLen}})
	if err != nil {
		return refused("live ingest: %v", err)
	}
	res.Metrics["live_load_nice"] = float64(gen.Nice)
	go func() { // the live ingest; owned by this run, which waits for it below
		lr, err := gen.Wait()
		done <- loadOut{lr, err}
	}()
	live := newLiveSamples()
	var lo loadOut
	var qerr error
	n, late := 0, 0
	due := time.Now()
queries:
	for i := searchLiveWarmups; ; i++ {
		for _, k := range liveKinds {
			if p.every > 0 { // a paced client: query n is due at start + n x interval
				if wait := time.Until(due); wait > 0 {
					select {
					case lo = <-done:
						break queries
					case <-time.After(wait):
					}
				} else if wait < -time.Millisecond {
					late++
				}
				due = due.Add(p.every)
			}
			select {
			case lo = <-done:
				break queries
			default:
			}
			if qerr = p.do(ctx, srv, k.name, i, live); qerr != nil {
				stopLoad()
				lo = <-done
				break queries
			}
			n++
		}
	}
	if qerr != nil {
		return refused("during ingest: %v", qerr)
	}
	if lo.err != nil {
		return refused("live ingest: %v", lo.err)
	}
	if lr := lo.lr; lr.FailedRequests() > 0 {
		return refused("live ingest: %d of %d batches failed (%d answered 429, %d errors, %d shed): %s", lr.FailedRequests(), lr.Requests,
			lr.Status429, lr.Errors, lr.Shed, lr.FirstError)
	}
	res.Metrics["live_spans_per_s"] = lo.lr.SpansPerSecond
	res.Metrics["live_accepted_spans"] = float64(lo.lr.AcceptedSpans)
	res.Metrics["live_late_sends"] = float64(lo.lr.LateSends)
	res.Metrics["live_retried_429"] = float64(lo.lr.Retried429)
	res.Metrics["live_ingest_p99_ms"] = lo.lr.Latency.P99
	res.Metrics["live_queries"] = float64(n)
	res.Metrics["live_query_interval_ms"] = float64(p.every) / float64(time.Millisecond)
	res.Metrics["live_late_queries"] = float64(late)
	live.put(res.Metrics, "live")

	st, err := srv.Stats(ctx)
	if err != nil {
		return refused("stats after the ingest: %v", err)
	}
	// Every acknowledged span is stored (each pass sends new ids).
	if want := int64(p.preloadSpans) + lo.lr.AcceptedSpans; st.Spans < want {
		return refused("stored count %d after the ingest is short of %d preloaded + %d acknowledged spans", st.Spans, p.preloadSpans, lo.lr.AcceptedSpans)
	}
	res.Metrics["quiet_buffer_spans_start"] = float64(st.BufferSpans)
	quiet := newLiveSamples()
	for i := searchLiveWarmups; i < searchLiveWarmups+env.Samples; i++ {
		for _, k := range liveKinds {
			if err := p.do(ctx, srv, k.name, i, quiet); err != nil {
				return refused("quiet: %v", err)
			}
		}
	}
	quiet.put(res.Metrics, "quiet")
	if st, err := srv.Stats(ctx); err == nil {
		res.Metrics["quiet_buffer_spans_end"] = float64(st.BufferSpans)
	}

	// The settled store: stopped gracefully (the write buffer sealed) and
	// started again on the same directory, warmed up, then the same
	// queries, with no seal running beside them.
	if err := srv.Stop(120 * time.Second); err != nil {
		return refused("stop server after the quiet phase: %v", err)
	}
	srv, err = StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("restart server for the settled phase: %v", err)
	}
	defer srv.Kill()
	for i := range searchLiveWarmups {
		for _, k := range liveKinds {
			if err := p.do(ctx, srv, k.name, i, nil); err != nil {
				return refused("settled warm-up: %v", err)
			}
		}
	}
	settled := newLiveSamples()
	for i := searchLiveWarmups; i < searchLiveWarmups+env.Samples; i++ {
		for _, k := range liveKinds {
			if err := p.do(ctx, srv, k.name, i, settled); err != nil {
				return refused("settled: %v", err)
			}
		}
	}
	settled.put(res.Metrics, "settled")
	if err := srv.Stop(120 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	return res
}

// searchLiveTargets: the targets on the medians across runs.
func searchLiveTargets(rec *Record) []Target {
	line := func(name, metric string, limit float64) Target {
		if limit <= 0 {
			return scenarioTarget(rec, searchLiveScenario, name, metric, "report", " ms", nil, 3)
		}
		return scenarioTarget(rec, searchLiveScenario, name, metric, fmt.Sprintf("< %g ms", limit), " ms", func(v float64) bool { return v < limit }, 3)
	}
	var out []Target
	for _, k := range liveKinds {
		for _, ph := range livePhases {
			if k.target[ph.target] > 0 {
				out = append(out, line(fmt.Sprintf("%s p95, %s (end to end, median of runs)", k.title, ph.title), ph.name+"_"+k.name+"_p95_ms", k.target[ph.target]))
			}
		}
	}
	for _, ph := range livePhases {
		out = append(out, line(fmt.Sprintf("absent user.id value p99, %s (end to end)", ph.title), ph.name+"_absent_p99_ms", LiveAbsentP99MS))
	}
	for _, ph := range livePhases {
		out = append(out, line(fmt.Sprintf("absent user.id value, server time p95, %s (Server-Timing)", ph.title), ph.name+"_absent_server_p95_ms", 0))
	}
	for _, ph := range livePhases {
		out = append(out, line(fmt.Sprintf("content word p95, %s (end to end)", ph.title), ph.name+"_word_p95_ms", 0))
	}
	t := Target{Name: "live ingest: accepted rate / target rate (below 1: the server or the host fell behind the open loop)", Want: "report", Status: "NOT RUN"}
	sr, ran := rec.Scenario(searchLiveScenario)
	switch {
	case ran && sr.Status != "ok":
		t.Got, t.Status = sr.Status, "FAIL"
	case ran:
		t.Got, t.Status = fmt.Sprintf("%.2f (%s of %s spans/s)", rec.median(searchLiveScenario, "live_spans_per_s")/rec.median(searchLiveScenario, "live_target_spans_per_s"),
			num(rec.median(searchLiveScenario, "live_spans_per_s"), 0), num(rec.median(searchLiveScenario, "live_target_spans_per_s"), 0)), "REPORT"
	}
	return append(out, t)
}

// searchLiveDetail is the per-kind table: both phases, end to end and server.
func searchLiveDetail(rec *Record) string {
	var b strings.Builder
	b.WriteString("Per query kind and phase, medians across runs (ms); p95 also with min-max across runs. End to end is the client's ")
	b.WriteString("time from send to the last byte over loopback; server is the `Server-Timing` header's handler time.\n\n")
	b.WriteString("| Query | Phase | Requests | p50 | p95 (min-max) | p99 | max | server p50 | server p95 | server p99 | server max | target p95 |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	sr, ok := rec.Scenario(searchLiveScenario)
	get := func(metric string) Spread {
		if !ok || sr.Status != "ok" {
			return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
		}
		if sp, ok := sr.Summary[metric]; ok {
			return sp
		}
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	for _, k := range liveKinds {
		for _, ph := range livePhases {
			pre := ph.name + "_" + k.name + "_"
			target := "-"
			if k.target[ph.target] > 0 {
				target = fmt.Sprintf("< %g", k.target[ph.target])
			}
			p95 := get(pre + "p95_ms")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s (%s-%s) | %s | %s | %s | %s | %s | %s | %s |\n", k.title, ph.title,
				num(get(pre+"n").Median, 0), num(get(pre+"p50_ms").Median, 3), num(p95.Median, 3), num(p95.Min, 3), num(p95.Max, 3),
				num(get(pre+"p99_ms").Median, 3), num(get(pre+"max_ms").Median, 3), num(get(pre+"server_p50_ms").Median, 3),
				num(get(pre+"server_p95_ms").Median, 3), num(get(pre+"server_p99_ms").Median, 3), num(get(pre+"server_max_ms").Median, 3), target)
		}
	}
	b.WriteString("\nAbsent values by kind (which near misses the filters let through), medians across runs (ms):\n\n")
	b.WriteString("| Absent value | Phase | Requests | p50 | p95 | max | server p50 | server p95 |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range absentClasses {
		for _, ph := range livePhases {
			pre := ph.name + "_absent_" + c.name + "_"
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.title, ph.title, num(get(pre+"n").Median, 0),
				num(get(pre+"p50_ms").Median, 3), num(get(pre+"p95_ms").Median, 3), num(get(pre+"max_ms").Median, 3),
				num(get(pre+"server_p50_ms").Median, 3), num(get(pre+"server_p95_ms").Median, 3))
		}
	}
	return b.String()
}
