// Command query is the client half of the peers benchmark (scripts/peers/run.sh
// starts the stores): it generates one canonical corpus, optionally sends it
// to each store over OTLP/HTTP protobuf, waits until each store answers for
// all of it, then times the same queries against each store's own query API,
// one client, checking every answer against a key computed from the corpus.
// It writes a markdown table between the rastro-bench markers of --out and
// the raw record next to it.
//
//	go run ./scripts/peers/query --load --spans 1000000 \
//	    --rastro http://127.0.0.1:4318 \
//	    --jaeger http://127.0.0.1:26686 --jaeger-otlp http://127.0.0.1:24318 \
//	    --tempo http://127.0.0.1:13200 --tempo-otlp http://127.0.0.1:14318
//
// A store whose URL is empty is skipped.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers query:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	rastro, jaeger, jaegerOTLP, tempo, tempoOTLP string
	spans, samples, limit, warmups               int
	seed                                         uint64
	start                                        time.Time
	window, wait                                 time.Duration
	load                                         bool
	out, raw, note                               string
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.rastro, "rastro", "", "Rastro base URL (OTLP/HTTP and query API on one port); empty skips Rastro")
	fs.StringVar(&o.jaeger, "jaeger", "", "Jaeger query base URL (jaeger_query http endpoint); empty skips Jaeger")
	fs.StringVar(&o.jaegerOTLP, "jaeger-otlp", "", "Jaeger's OTLP/HTTP receiver base URL (with --load)")
	fs.StringVar(&o.tempo, "tempo", "", "Tempo HTTP base URL; empty skips Tempo")
	fs.StringVar(&o.tempoOTLP, "tempo-otlp", "", "Tempo's OTLP/HTTP receiver base URL (with --load)")
	fs.IntVar(&o.spans, "spans", 1_000_000, "canonical spans in the corpus")
	fs.Uint64Var(&o.seed, "seed", 1, "corpus seed")
	start := fs.String("start", "", "RFC 3339 start of the corpus's time range (default: 2 hours ago, to the minute); pass the same value to every invocation on one set of stores")
	fs.DurationVar(&o.window, "window", time.Hour, "span start times are spread over this long from --start")
	fs.BoolVar(&o.load, "load", false, "send the corpus to every store first (4 workers, closed loop, 429s retried)")
	fs.DurationVar(&o.wait, "wait", 20*time.Minute, "longest wait for each store to answer for the whole corpus")
	fs.IntVar(&o.samples, "samples", 200, "timed requests per query kind per store")
	fs.IntVar(&o.warmups, "warmups", 10, "untimed requests per query kind per store first")
	fs.IntVar(&o.limit, "limit", 100, "trace limit of the windowed filter search")
	fs.StringVar(&o.out, "out", "docs/benchmarks/peers.md", "markdown file whose rastro-bench block is replaced; empty prints only")
	fs.StringVar(&o.note, "note", "", "a sentence recorded with the results (what else the host was doing)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.start = time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	if *start != "" {
		t, err := time.Parse(time.RFC3339, *start)
		if err != nil {
			return o, fmt.Errorf("--start: %v", err)
		}
		o.start = t
	}
	switch {
	case o.spans < 1000:
		return o, fmt.Errorf("--spans must be at least 1000, got %d", o.spans)
	case o.samples < 1 || o.warmups < 0 || o.limit < 1:
		return o, fmt.Errorf("--samples and --limit must be >= 1, --warmups >= 0")
	case o.window < time.Minute:
		return o, fmt.Errorf("--window must be at least 1m, got %s", o.window)
	case o.rastro == "" && o.jaeger == "" && o.tempo == "":
		return o, errors.New("name at least one store (--rastro, --jaeger, --tempo)")
	case o.load && (o.jaeger != "" && o.jaegerOTLP == "" || o.tempo != "" && o.tempoOTLP == ""):
		return o, errors.New("--load needs --jaeger-otlp and --tempo-otlp for the peers named")
	}
	if o.out != "" {
		o.raw = filepath.Join(filepath.Dir(o.out), "raw", "peers-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	logf("generating %d canonical spans (seed %d) from %s over %s", o.spans, o.seed, o.start.Format(time.RFC3339), o.window)
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: o.seed, Spans: o.spans, Start: o.start, Window: o.window})
	if err != nil {
		return err
	}
	key := newKey(spans)
	var payloads []bench.Payload
	if o.load {
		if payloads, err = bench.Prepare(bench.Batches(spans, 1000), bench.ProtoOTLPProto, false); err != nil {
			return err
		}
	}
	spans = nil
	plan := newPlan(key, o)
	stores := o.stores()
	sampler := bench.StartLoadSampler(2 * time.Second)
	rec := &record{Started: time.Now().UTC(), Machine: bench.DescribeMachine(""), Spans: o.spans, Seed: o.seed,
		CorpusStart: o.start, Window: o.window.String(), Samples: o.samples, Limit: o.limit, FilterWindow: plan.filterWindow.String(),
		Note: o.note, Command: "go run ./scripts/peers/query " + shellJoin(args)}
	for _, s := range stores {
		sr := storeRecord{Store: s.name, Base: s.base}
		if o.load {
			logf("%s: loading %d spans into %s", s.name, o.spans, s.otlp)
			lr, err := bench.Load(ctx, bench.LoadOptions{Endpoint: s.otlp, Protocol: bench.ProtoOTLPProto, Concurrency: 4, KeepAlive: true,
				Retry429: true, Timeout: 2 * time.Minute}, payloads)
			if err != nil {
				return fmt.Errorf("%s: load: %w", s.name, err)
			}
			sr.LoadSpansPerSecond, sr.LoadRetried429 = lr.SpansPerSecond, lr.Retried429
			if lr.AcceptedSpans != int64(o.spans) {
				return fmt.Errorf("%s: accepted %d of %d spans (%d errors, %d shed): %s", s.name, lr.AcceptedSpans, o.spans, lr.Errors, lr.Shed, lr.FirstError)
			}
		}
		logf("%s: waiting until every probe trace and filter answers in full (up to %s)", s.name, o.wait)
		t0 := time.Now()
		if err := plan.waitQueryable(ctx, s, o.wait); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		sr.ReadyAfterSeconds = time.Since(t0).Seconds()
		for _, k := range kinds {
			logf("%s: %s", s.name, k.title)
			sr.Kinds = append(sr.Kinds, plan.measure(ctx, s, k))
		}
		rec.Stores = append(rec.Stores, sr)
	}
	rec.LoadAvg = sampler.Stop()
	rec.Finished = time.Now().UTC()
	md := rec.markdown()
	fmt.Fprint(stdout, md)
	if o.out == "" {
		return nil
	}
	old, err := os.ReadFile(o.out)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc, err := bench.ReplaceBetweenMarkers(string(old), "Rastro, Jaeger and Tempo side by side", md)
	if err != nil {
		return fmt.Errorf("update %s: %w", o.out, err)
	}
	if err := os.WriteFile(o.out, []byte(doc), 0o644); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.MkdirAll(filepath.Dir(o.raw), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.raw, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	logf("wrote %s and %s", o.out, o.raw)
	return nil
}

// shellJoin quotes the arguments that a shell would split or expand.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}!#~") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// traceKey is what the corpus says about one trace.
type traceKey struct {
	spans      int
	user       string
	start, end uint64 // earliest span start, latest span end (unix ns)
}

// key is the answer key: every trace of the corpus, and the traces of each
// user in start order.
type key struct {
	traces map[model.TraceID]*traceKey
	ids    []model.TraceID
	byUser map[string][]model.TraceID
}

func newKey(spans []model.Span) *key {
	k := &key{traces: map[model.TraceID]*traceKey{}, byUser: map[string][]model.TraceID{}}
	for i := range spans {
		s := &spans[i]
		t := k.traces[s.TraceID]
		if t == nil {
			t = &traceKey{start: s.StartTimeUnixNano, end: s.EndTimeUnixNano}
			k.traces[s.TraceID] = t
			k.ids = append(k.ids, s.TraceID)
		}
		t.spans++
		t.start, t.end = min(t.start, s.StartTimeUnixNano), max(t.end, s.EndTimeUnixNano)
		if v, ok := s.Attr("user.id"); ok {
			if t.user != "" && t.user != v.Str {
				panic("peers: a canonical trace carries two user.id values") // the generator picks one per trace
			}
			t.user = v.Str
		}
	}
	for _, id := range k.ids {
		if u := k.traces[id].user; u != "" {
			k.byUser[u] = append(k.byUser[u], id)
		}
	}
	return k
}

// window is a search window of whole seconds, [from, to).
type window struct{ from, to int64 }

// expect returns the traces of user u that a store must return for window w
// (every span of the trace inside it) and those it may return (the trace
// overlaps it: stores differ on whether a span must start inside the window
// or the trace merely overlap it, so traces across an edge are allowed
// either way).
func (k *key) expect(u string, w window) (must, may map[string]bool) {
	must, may = map[string]bool{}, map[string]bool{}
	lo, hi := uint64(w.from)*1e9, uint64(w.to)*1e9
	for _, id := range k.byUser[u] {
		t := k.traces[id]
		if t.end < lo || t.start >= hi {
			continue
		}
		may[id.String()] = true
		if t.start >= lo && t.end < hi {
			must[id.String()] = true
		}
	}
	return must, may
}

// query kinds, in the order they run.
type kind struct{ name, title, compared string }

var kinds = []kind{
	{"trace", "trace by id", "exact span count of the trace"},
	{"filter", "selective filter, narrow window", "exact trace set: every trace of the user inside the window, none outside it (traces across an edge may go either way)"},
	{"filter20", "selective filter, whole range, limit 20", "20 traces, each one of the user's"},
	{"absent", "absent user.id value, whole range", "no trace"},
}

// plan holds the query values, drawn once so every store gets the same.
type plan struct {
	key          *key
	o            options
	traces       []model.TraceID
	users        []string
	windows      []window
	absent       []string
	whole        window
	filterWindow time.Duration
}

func newPlan(k *key, o options) *plan {
	p := &plan{key: k, o: o}
	r := rand.New(rand.NewPCG(o.seed, 2323))
	n := o.samples + o.warmups
	for range n {
		p.traces = append(p.traces, k.ids[r.IntN(len(k.ids))])
	}
	users := bench.CanonicalUsers()
	// A window holding about a fifth of the limit of one user's traces on
	// average, so the whole answer fits under the limit in every store.
	perUserPerSec := float64(len(k.ids)) / float64(len(users)) / o.window.Seconds()
	secs := max(2, int64(float64(o.limit)/5/perUserPerSec))
	secs = min(secs, int64(o.window.Seconds()))
	p.filterWindow = time.Duration(secs) * time.Second
	from := o.start.Unix()
	last := o.start.Add(o.window).Unix() - secs
	for len(p.windows) < n {
		u := users[r.IntN(len(users))]
		a := from + r.Int64N(max(1, last-from+1))
		w := window{a, a + secs}
		if _, may := k.expect(u, w); len(may) > o.limit/2 {
			continue // draw again: a store may cut the answer at its limit
		}
		p.users, p.windows = append(p.users, u), append(p.windows, w)
	}
	cands := bench.AbsentUserIDs(users)
	for range n {
		p.absent = append(p.absent, cands[r.IntN(len(cands))])
	}
	p.whole = window{o.start.Unix() - 60, o.start.Add(o.window).Unix() + 120}
	return p
}

// kindRecord is one kind's figures at one store.
type kindRecord struct {
	Kind    string        `json:"kind"`
	Latency bench.Latency `json:"latency"`
	Wrong   int           `json:"wrong"`
	First   string        `json:"first_wrong,omitempty"`
	Errors  int           `json:"errors"`
	Results float64       `json:"mean_results"` // traces (or spans, for trace by id) per answer
}

// measure runs warm-ups then timed requests of kind k against s.
func (p *plan) measure(ctx context.Context, s *store, k kind) kindRecord {
	kr := kindRecord{Kind: k.name}
	var lat []time.Duration
	total := 0
	for i := range p.o.warmups + p.o.samples {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		n, wrong, err := p.ask(ctx, s, k.name, i)
		d := time.Since(t0)
		if i < p.o.warmups {
			continue
		}
		switch {
		case err != nil:
			kr.Errors++
			if kr.First == "" {
				kr.First = err.Error()
			}
			continue
		case wrong != "":
			kr.Wrong++
			if kr.First == "" {
				kr.First = wrong
			}
		}
		lat = append(lat, d)
		total += n
	}
	kr.Latency = bench.SummarizeLatency(lat)
	if len(lat) > 0 {
		kr.Results = float64(total) / float64(len(lat))
	}
	return kr
}

// ask sends request i of kind to s and checks it: n is the answer's size,
// wrong says how it differs from the key, err is a failed request.
func (p *plan) ask(ctx context.Context, s *store, kind string, i int) (n int, wrong string, err error) {
	switch kind {
	case "trace":
		id := p.traces[i%len(p.traces)]
		n, err := s.traceByID(ctx, id)
		if err == nil && n != p.key.traces[id].spans {
			return n, fmt.Sprintf("trace %s: %d spans, want %d", id, n, p.key.traces[id].spans), nil
		}
		return n, "", err
	case "filter":
		u, w := p.users[i%len(p.users)], p.windows[i%len(p.windows)]
		got, err := s.search(ctx, u, w, p.o.limit)
		if err != nil {
			return 0, "", err
		}
		must, may := p.key.expect(u, w)
		for id := range must {
			if !slices.Contains(got, id) {
				return len(got), fmt.Sprintf("%s in [%d,%d): trace %s missing (%d returned, %d required)", u, w.from, w.to, id, len(got), len(must)), nil
			}
		}
		for _, id := range got {
			if !may[id] {
				return len(got), fmt.Sprintf("%s in [%d,%d): trace %s is not the user's or not in the window", u, w.from, w.to, id), nil
			}
		}
		return len(got), "", nil
	case "filter20":
		u := p.users[i%len(p.users)]
		got, err := s.search(ctx, u, p.whole, 20)
		if err != nil {
			return 0, "", err
		}
		_, may := p.key.expect(u, p.whole)
		if want := min(20, len(may)); len(got) != want {
			return len(got), fmt.Sprintf("%s: %d traces, want %d", u, len(got), want), nil
		}
		for _, id := range got {
			if !may[id] {
				return len(got), fmt.Sprintf("%s: trace %s is not the user's", u, id), nil
			}
		}
		return len(got), "", nil
	case "absent":
		u := p.absent[i%len(p.absent)]
		got, err := s.search(ctx, u, p.whole, p.o.limit)
		if err == nil && len(got) > 0 {
			return len(got), fmt.Sprintf("absent %q: %d traces, want none", u, len(got)), nil
		}
		return len(got), "", err
	}
	panic("peers: unknown kind " + kind)
}

// waitQueryable polls s until the probe traces (the first and last traces
// of the corpus and a spread between) answer in full and the first filter
// windows return their whole answer.
func (p *plan) waitQueryable(ctx context.Context, s *store, limit time.Duration) error {
	ids := p.key.ids
	var probes []model.TraceID
	for i := 0; i < 20; i++ {
		probes = append(probes, ids[i*(len(ids)-1)/19])
	}
	deadline := time.Now().Add(limit)
	last := ""
	for {
		ok := true
		for _, id := range probes {
			n, err := s.traceByID(ctx, id)
			if err != nil || n != p.key.traces[id].spans {
				ok, last = false, fmt.Sprintf("trace %s: %d of %d spans (%v)", id, n, p.key.traces[id].spans, err)
				break
			}
		}
		for i := 0; ok && i < 5; i++ {
			if _, wrong, err := p.ask(ctx, s, "filter", i); err != nil || wrong != "" {
				ok, last = false, fmt.Sprintf("filter: %s %v", wrong, err)
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not queryable after %s: %s", limit, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// store is one backend and how to ask it the two questions.
type store struct {
	name, base, otlp string
	client           *http.Client
	traceByID        func(ctx context.Context, id model.TraceID) (int, error)
	search           func(ctx context.Context, user string, w window, limit int) ([]string, error)
}

func (o options) stores() []*store {
	var out []*store
	if o.rastro != "" {
		out = append(out, newRastro(o.rastro))
	}
	if o.jaeger != "" {
		out = append(out, newJaeger(o.jaeger, o.jaegerOTLP))
	}
	if o.tempo != "" {
		out = append(out, newTempo(o.tempo, o.tempoOTLP))
	}
	return out
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}, Timeout: 60 * time.Second}
}

// get fetches base+path and decodes a JSON answer into v; a status in
// notFound is an empty answer, any other non-200 an error.
func get(ctx context.Context, c *http.Client, u string, v any, notFound ...int) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, fmt.Errorf("GET %s: %w", u, err)
	}
	if slices.Contains(notFound, resp.StatusCode) {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("GET %s: %w: %.200s", u, err, body)
	}
	return true, nil
}

// traceQL is the filter both Rastro and Tempo are asked: the user's spans
// of the frontend service (every canonical trace's root is a frontend span
// carrying the trace's user), the same condition Jaeger gets from its
// service and tags parameters.
func traceQL(user string) string {
	return fmt.Sprintf(`{ resource.service.name = "frontend" && span.user.id = %q }`, user)
}

// normID pads a hex trace id to 32 digits (Tempo strips leading zeros,
// Jaeger shortens ids whose high half is zero).
func normID(s string) string {
	s = strings.ToLower(s)
	if len(s) < 32 {
		s = strings.Repeat("0", 32-len(s)) + s
	}
	return s
}

func newRastro(base string) *store {
	s := &store{name: "Rastro", base: base, otlp: base, client: newClient()}
	s.traceByID = func(ctx context.Context, id model.TraceID) (int, error) {
		var r struct {
			Spans []json.RawMessage `json:"spans"`
		}
		_, err := get(ctx, s.client, base+"/api/v1/traces/"+id.String(), &r, http.StatusNotFound)
		return len(r.Spans), err
	}
	s.search = func(ctx context.Context, user string, w window, limit int) ([]string, error) {
		v := url.Values{"q": {traceQL(user)}, "since": {strconv.FormatInt(w.from, 10)}, "until": {strconv.FormatInt(w.to, 10)}, "limit": {strconv.Itoa(limit)}}
		var r struct {
			Traces []struct {
				TraceID string `json:"trace_id"`
			} `json:"traces"`
		}
		if _, err := get(ctx, s.client, base+"/api/v1/traces?"+v.Encode(), &r); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(r.Traces))
		for _, t := range r.Traces {
			out = append(out, normID(t.TraceID))
		}
		return out, nil
	}
	return s
}

// newJaeger asks Jaeger's query API v1 (the one its UI and Grafana's Jaeger
// data source call): GET /api/traces/{id}, and GET /api/traces with
// service, tags (a JSON object), start and end in microseconds and limit.
func newJaeger(base, otlp string) *store {
	s := &store{name: "Jaeger", base: base, otlp: otlp, client: newClient()}
	type env struct {
		Data []struct {
			TraceID string            `json:"traceID"`
			Spans   []json.RawMessage `json:"spans"`
		} `json:"data"`
	}
	s.traceByID = func(ctx context.Context, id model.TraceID) (int, error) {
		var r env
		if _, err := get(ctx, s.client, base+"/api/traces/"+id.String(), &r, http.StatusNotFound); err != nil || len(r.Data) == 0 {
			return 0, err
		}
		return len(r.Data[0].Spans), nil
	}
	s.search = func(ctx context.Context, user string, w window, limit int) ([]string, error) {
		tags, _ := json.Marshal(map[string]string{"user.id": user})
		v := url.Values{"service": {"frontend"}, "tags": {string(tags)}, "start": {strconv.FormatInt(w.from*1e6, 10)},
			"end": {strconv.FormatInt(w.to*1e6-1, 10)}, "limit": {strconv.Itoa(limit)}}
		var r env
		if _, err := get(ctx, s.client, base+"/api/traces?"+v.Encode(), &r); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(r.Data))
		for _, t := range r.Data {
			out = append(out, normID(t.TraceID))
		}
		return out, nil
	}
	return s
}

// newTempo asks Tempo's HTTP API: GET /api/v2/traces/{id} (JSON, what
// Grafana's Tempo data source asks first; a missing trace is a 200 with an
// empty trace) and GET /api/search with q (TraceQL), start and end in unix
// seconds, limit and spss=1.
func newTempo(base, otlp string) *store {
	s := &store{name: "Tempo", base: base, otlp: otlp, client: newClient()}
	s.traceByID = func(ctx context.Context, id model.TraceID) (int, error) {
		var r struct {
			Trace struct {
				ResourceSpans []struct {
					ScopeSpans []struct {
						Spans []json.RawMessage `json:"spans"`
					} `json:"scopeSpans"`
				} `json:"resourceSpans"`
			} `json:"trace"`
		}
		if _, err := get(ctx, s.client, base+"/api/v2/traces/"+id.String(), &r, http.StatusNotFound); err != nil {
			return 0, err
		}
		n := 0
		for _, rs := range r.Trace.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		return n, nil
	}
	s.search = func(ctx context.Context, user string, w window, limit int) ([]string, error) {
		v := url.Values{"q": {traceQL(user)}, "start": {strconv.FormatInt(w.from, 10)}, "end": {strconv.FormatInt(w.to, 10)},
			"limit": {strconv.Itoa(limit)}, "spss": {"1"}}
		var r struct {
			Traces []struct {
				TraceID string `json:"traceID"`
			} `json:"traces"`
		}
		if _, err := get(ctx, s.client, base+"/api/search?"+v.Encode(), &r); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(r.Traces))
		for _, t := range r.Traces {
			out = append(out, normID(t.TraceID))
		}
		return out, nil
	}
	return s
}

// record is one invocation, as written to raw JSON.
type record struct {
	Started      time.Time            `json:"started"`
	Finished     time.Time            `json:"finished"`
	Command      string               `json:"command"`
	Note         string               `json:"note,omitempty"`
	Machine      bench.Machine        `json:"machine"`
	LoadAvg      bench.LoadAvgSummary `json:"load_avg_1m"`
	Spans        int                  `json:"spans"`
	Seed         uint64               `json:"seed"`
	CorpusStart  time.Time            `json:"corpus_start"`
	Window       string               `json:"window"`
	FilterWindow string               `json:"filter_window"`
	Samples      int                  `json:"samples"`
	Limit        int                  `json:"limit"`
	Stores       []storeRecord        `json:"stores"`
}

type storeRecord struct {
	Store              string       `json:"store"`
	Base               string       `json:"base"`
	LoadSpansPerSecond float64      `json:"load_spans_per_s,omitempty"`
	LoadRetried429     int          `json:"load_retried_429,omitempty"`
	ReadyAfterSeconds  float64      `json:"ready_after_s"`
	Kinds              []kindRecord `json:"kinds"`
}

func (r *record) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- Command: `%s`\n", r.Command)
	fmt.Fprintf(&b, "- Machine: %s/%s, %d CPUs, %s; Go %s; Rastro client at commit %s\n", r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.Commit)
	fmt.Fprintf(&b, "- Taken %s, %.0f s; 1-minute load average min %.2f, mean %.2f, max %.2f (%d samples)\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.Finished.Sub(r.Started).Seconds(), r.LoadAvg.Min, r.LoadAvg.Mean, r.LoadAvg.Max, r.LoadAvg.Samples)
	fmt.Fprintf(&b, "- Corpus: %d canonical spans, seed %d, starts from %s over %s; %d timed requests per kind per store, one client; narrow filter window %s, limit %d\n",
		r.Spans, r.Seed, r.CorpusStart.UTC().Format(time.RFC3339), r.Window, r.Samples, r.FilterWindow, r.Limit)
	if r.Note != "" {
		fmt.Fprintf(&b, "- Host: %s\n", r.Note)
	}
	b.WriteString("\n| Store | Load spans/s | Queryable after s |")
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s p50 / p95 / p99 ms | %s wrong / errors |", k.title, k.name)
	}
	b.WriteString("\n|---|---:|---:|")
	for range kinds {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	for _, s := range r.Stores {
		load := "-"
		if s.LoadSpansPerSecond > 0 {
			load = strconv.FormatFloat(s.LoadSpansPerSecond, 'f', 0, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f |", s.Store, load, s.ReadyAfterSeconds)
		for _, k := range s.Kinds {
			fmt.Fprintf(&b, " %.2f / %.2f / %.2f | %d / %d of %d |", k.Latency.P50, k.Latency.P95, k.Latency.P99, k.Wrong, k.Errors, r.Samples)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nWhat each answer was checked against (the key computed from the generated corpus):\n\n")
	for _, k := range kinds {
		fmt.Fprintf(&b, "- %s: %s.\n", k.title, k.compared)
	}
	var bad []string
	for _, s := range r.Stores {
		for _, k := range s.Kinds {
			if k.First != "" {
				bad = append(bad, fmt.Sprintf("- %s, %s: %d wrong, %d errors; first: %s", s.Store, k.Kind, k.Wrong, k.Errors, k.First))
			}
		}
	}
	if len(bad) > 0 {
		b.WriteString("\nAnswers that differ from the key:\n\n" + strings.Join(bad, "\n") + "\n")
	} else {
		b.WriteString("\nEvery answer of every store matched the key.\n")
	}
	return b.String()
}
