package ui_test

// The web UI's benchmark suite: a harness, not a test. `go test` runs it only
// when asked with -bench:
//
//	go test ./internal/ui -run '^$' -bench UISuite -benchtime 1x -timeout 60m
//
// With RASTRO_BENCH_WRITE=1 it writes docs/benchmarks/ui.md (between the
// rastro-bench markers; text outside them survives), else it prints the same
// markdown to stdout. It starts a real server and engine in this process with
// the UI mounted (as `rastro serve` wires them), seeds the store with
// 1,000,000 spans, and drives Debian's /usr/bin/chromium over the DevTools
// protocol, a fresh browser profile for every cold measure. See the Method
// section it writes for how every figure is taken.
//
// Knobs (for trying the harness out; the record says when they were used):
// RASTRO_UI_BENCH_SPANS (default 1000000), RASTRO_UI_BENCH_RUNS (default 5,
// at least 1), RASTRO_UI_BENCH_ONLY (a comma list of size, render, trace,
// tail, journey), RASTRO_UI_BENCH_QUIET (the longest wait for a 1-minute load
// average below 0.5 before starting: a Go duration; default 5m when writing,
// else 0).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/process"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/ui"
)

const uiBenchCommand = "go test ./internal/ui -run '^$' -bench UISuite -benchtime 1x -timeout 60m"

// Targets (issue: UI performance).
const (
	targetJSBytes      = 60_000  // initial JavaScript, gzipped
	targetTotalBytes   = 150_000 // total transfer of the first page
	targetRenderMs     = 500     // first page rendered with data at 1M spans
	targetTailP95Ms    = 250     // live tail: ingest 2xx to row in the DOM
	targetFrameP95Ms   = 16.7    // live tail frame time with 10,000 rows
	targetTrace10kMs   = 1000    // a 10,000-span trace's waterfall
	targetJourneyP95Ms = 200     // journey API, warm p95
)

const (
	uiTailRate      = 200  // spans/s streamed to the tail, one per request
	uiTailLatSpans  = 1000 // spans timed on an empty list, per run
	uiTailRows      = 10000
	uiTailIdle      = 20 * time.Second
	uiTailScroll    = 10 * time.Second
	uiJourneyValue  = "journey-user-0001"
	uiJourneyPerDay = 10000
	uiJourneyDays   = 7
	uiJourneyBg     = 200000 // canonical spans of 100 other user.id values over the same 7 days
	uiFrameBudgetMs = 1000.0 / 60
)

var uiSuite struct {
	sync.Once
	metrics map[string]float64
}

// BenchmarkUISuite runs the whole suite once per process (use -benchtime 1x)
// and reports its headline figures as benchmark metrics.
func BenchmarkUISuite(b *testing.B) {
	uiSuite.Do(func() { uiSuite.metrics = runUISuite(b) })
	keys := make([]string, 0, len(uiSuite.metrics))
	for k := range uiSuite.metrics {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v := uiSuite.metrics[k]; !math.IsNaN(v) {
			b.ReportMetric(v, k)
		}
	}
}

// ---- the suite --------------------------------------------------------------

type uiBench struct {
	b      *testing.B
	base   string
	tmp    string
	runs   int
	spans  int
	only   map[string]bool
	client *http.Client
	eng    *engine.Engine
	rec    uiRecord
}

// uiRecord is everything the markdown shows.
type uiRecord struct {
	Started     time.Time
	Seconds     float64
	Machine     bench.Machine
	Describe    string
	Chromium    string
	ChromiumCDP string
	Runs        int
	Spans       int
	Knobs       []string
	LoadBefore  float64
	QuietWaited time.Duration
	Load        bench.LoadAvgSummary
	Seed        seedFacts
	Pages       map[string]*pageResult
	PageOrder   []string
	Tail        []tailRun
	TailErrs    []string
	Journey     journeyFacts
	Measures    []uiMeasure
	Failures    []string
}

type seedFacts struct {
	Spans         int64
	LLM, API      int
	IngestSeconds float64
	SpansPerSec   float64
	Retried429    int
	VisibleAfter  float64 // s from the end of ingest until /api/v1/stats counted every span
	SettledAfter  float64 // s from the end of ingest until sealed and the segment count was still
	Settled       bool
	Segments      int
	BufferSpans   int
}

// ---- pages ------------------------------------------------------------------

// pageSpec is one page measured cold: its URL and the DOM conditions that
// define "rendered with data" (first) and "every panel filled" (complete).
type pageSpec struct {
	key, title, path string
	first, complete  string // JavaScript conditions
	firstDesc        string
	completeDesc     string
	api              []string // substrings of the URL of the API call the first rows need (all of them)
	apiDesc          string
}

// pageRun is one cold load of a page.
type pageRun struct {
	First, FirstFrame, FirstPainted float64 // ms from navigation start
	Complete                        float64
	APIStart, APIEnd, APIDur        float64 // the key API call, from Resource Timing
	APIURL                          string
	APIBytes                        float64
	LastAPIEnd                      float64
	SlowAPI                         string // the API call that took longest (path and parameters other than the window)
	SlowAPIDur                      float64
	SlowAPIURL                      string // as requested, window included
	BigAPI                          string // the API answer with the most bytes
	BigAPIBytes                     float64
	DrawMs                          float64 // main[data-render-ms] (trace page's own draw time), NaN if none
	DOMContentLoaded, Load          float64
	DocTransfer, DocEncoded         float64
	JSTransfer, JSEncoded           float64
	JSDecoded                       float64
	JSFiles                         int
	CSSTransfer, CSSEncoded         float64
	APITransfer                     float64
	OtherTransfer                   float64
	TotalTransfer                   float64
	StaticTransfer                  float64
	Files                           map[string]float64 // path -> encoded bytes (scripts, styles)
	Visibility                      string
}

type pageResult struct {
	Spec   pageSpec
	Runs   []pageRun
	Errors []string
	GoAPI  []float64 // the key API call from Go, warm, ms
	GoSlow []float64 // the slowest API call of the last run, from Go, warm, ms
}

// uiInstrument is evaluated in every new document before the app's scripts:
// a MutationObserver on the whole document records performance.now() (ms
// since navigation start) the first time each condition holds, then the
// next animation frame, then a task after that frame (the frame has been
// painted).
func uiInstrument(first, complete string) string {
	return `(() => {
  if (location.protocol !== 'http:' || window.__uiBench) return;
  const conds = [() => (` + first + `), () => (` + complete + `)];
  const B = window.__uiBench = {marks: [0, 0], frames: [0, 0], painted: [0, 0]};
  let mo = null;
  const check = () => {
    let pending = 0;
    for (let i = 0; i < conds.length; i++) {
      if (B.marks[i]) continue;
      let ok = false;
      try { ok = !!conds[i](); } catch (e) { ok = false; }
      if (!ok) { pending++; continue; }
      B.marks[i] = performance.now();
      requestAnimationFrame(() => { B.frames[i] = performance.now(); setTimeout(() => { B.painted[i] = performance.now(); }, 0); });
    }
    if (!pending && mo) mo.disconnect();
  };
  mo = new MutationObserver(check);
  mo.observe(document, {childList: true, subtree: true, characterData: true});
})();`
}

const uiCollect = `(() => {
  const B = window.__uiBench || {marks: [0, 0], frames: [0, 0], painted: [0, 0]};
  const n = performance.getEntriesByType('navigation')[0] || {};
  const m = document.querySelector('main');
  return {
    marks: B.marks, frames: B.frames, painted: B.painted,
    nav: {transfer: n.transferSize || 0, encoded: n.encodedBodySize || 0, decoded: n.decodedBodySize || 0,
      dcl: n.domContentLoadedEventEnd || 0, load: n.loadEventEnd || 0},
    res: performance.getEntriesByType('resource').map(e => ({name: e.name, type: e.initiatorType, transfer: e.transferSize,
      encoded: e.encodedBodySize, decoded: e.decodedBodySize, start: e.startTime, end: e.responseEnd})),
    renderMs: (m && m.dataset.renderMs) || '',
    errors: [...document.querySelectorAll('main .error')].map(e => e.textContent.slice(0, 300)),
    visibility: document.visibilityState,
  };
})()`

type uiCollected struct {
	Marks   []float64 `json:"marks"`
	Frames  []float64 `json:"frames"`
	Painted []float64 `json:"painted"`
	Nav     struct {
		Transfer, Encoded, Decoded, DCL, Load float64
	} `json:"nav"`
	Res []struct {
		Name     string  `json:"name"`
		Type     string  `json:"type"`
		Transfer float64 `json:"transfer"`
		Encoded  float64 `json:"encoded"`
		Decoded  float64 `json:"decoded"`
		Start    float64 `json:"start"`
		End      float64 `json:"end"`
	} `json:"res"`
	RenderMs   string   `json:"renderMs"`
	Errors     []string `json:"errors"`
	Visibility string   `json:"visibility"`
}

// ---- tail -------------------------------------------------------------------

type tailRun struct {
	OffsetMs, RTTMs    float64 // page clock minus Go clock, and the calibration round trip
	Lat                latStats
	LatRows            latStats // spans streamed during the idle frame window (10,000 rows present)
	Rows, Dropped      int
	FillSeconds        float64
	Idle, Scroll       frameStats
	Still              frameStats // 10,000 rows, nothing streamed, 3 s: the floor of the frame measures
	Few                frameStats // during the latency phase (0 to 1,000 rows)
	Visibility         string
	ScrolledToPx       float64
	AckP50Ms, AckP95Ms float64 // request to 2xx, as the Go sender saw it
}

type latStats struct {
	N, Missing     int
	P50, P95, Max  float64
	Min, Negatives float64
}

type frameStats struct {
	N, Over, LoAF       int
	P50, P95, Max, Mean float64 // rAF intervals as measured
	P95Refresh          float64 // p95 of the intervals rounded to whole 60 Hz refresh periods
	Missed              int     // refresh periods skipped in all (an interval of n periods skips n-1)
	WorkP50, WorkP95    float64 // frame start to the end of its main-thread rendering work
	WorkMax             float64
	WorkOver            int // frames whose main-thread work exceeded 16.7 ms
}

// ---- journey ----------------------------------------------------------------

type journeyFacts struct {
	Value             string
	Spans, Background int
	IngestSeconds     float64
	Retried429        int
	VisibleAfter      float64
	SettledAfter      float64
	Settled           bool
	Segments          int
	StoreSpans        int64
	First500Ms        float64
	First10kMs        float64
	Traces500         int
	Traces10k         int
	Bytes500          int
	Bytes10k          int
	Truncated500      bool
	Rounds500         []latStats // per round: 20 timed requests after 2 warm-ups
	Rounds10k         []latStats
	Engine500         float64 // the engine's SearchTraces alone, in process, median of 5 after a warm-up
	Engine10k         float64
}

// ---- measures ---------------------------------------------------------------

type uiMeasure struct {
	ID, Name, Unit string
	Metric         string // the benchmark metric it is reported as, if any
	Runs           []float64
	Limit          float64 // 0: reported, no target
	Digits         int
}

func (m uiMeasure) spread() bench.Spread { return bench.SpreadOf(m.Runs) }

func (m uiMeasure) result() string {
	sp := m.spread()
	switch {
	case sp.N == 0:
		return "FAILED (no value)"
	case m.Limit == 0:
		return "REPORT"
	case sp.Median < m.Limit:
		return "PASS"
	}
	return "FAIL"
}

func (m uiMeasure) want() string {
	if m.Limit == 0 {
		return "-"
	}
	return "< " + strconv.FormatFloat(m.Limit, 'f', -1, 64) + " " + m.Unit
}

// ---- running ----------------------------------------------------------------

func runUISuite(b *testing.B) map[string]float64 {
	if _, err := os.Stat(chromiumPath); err != nil {
		b.Fatalf("the UI benchmarks need Chromium at %s: install it with `apt-get install chromium` (%v)", chromiumPath, err)
	}
	write := os.Getenv("RASTRO_BENCH_WRITE") == "1"
	u := &uiBench{b: b, tmp: b.TempDir(), runs: 5, spans: 1_000_000,
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DisableCompression: true}, Timeout: 2 * time.Minute}}
	u.rec.Pages = map[string]*pageResult{}
	if v := os.Getenv("RASTRO_UI_BENCH_SPANS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2000 {
			b.Fatalf("RASTRO_UI_BENCH_SPANS=%q: want a whole number >= 2000", v)
		}
		u.spans = n
		u.rec.Knobs = append(u.rec.Knobs, "RASTRO_UI_BENCH_SPANS="+v)
	}
	if v := os.Getenv("RASTRO_UI_BENCH_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("RASTRO_UI_BENCH_RUNS=%q: want a whole number >= 1", v)
		}
		u.runs = n
		u.rec.Knobs = append(u.rec.Knobs, "RASTRO_UI_BENCH_RUNS="+v)
	}
	if v := os.Getenv("RASTRO_UI_BENCH_ONLY"); v != "" {
		u.only = map[string]bool{}
		for _, s := range strings.Split(v, ",") {
			u.only[strings.TrimSpace(s)] = true
		}
		u.rec.Knobs = append(u.rec.Knobs, "RASTRO_UI_BENCH_ONLY="+v)
	}
	quiet := time.Duration(0)
	if write {
		quiet = 5 * time.Minute
	}
	if v := os.Getenv("RASTRO_UI_BENCH_QUIET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("RASTRO_UI_BENCH_QUIET=%q: %v", v, err)
		}
		quiet = d
	}
	u.rec.Runs, u.rec.Spans = u.runs, u.spans

	// A quiet host first: wait (bounded) for the 1-minute load average to
	// fall below 0.5.
	t0 := time.Now()
	u.rec.LoadBefore, _ = bench.ReadLoadAvg()
	for u.rec.LoadBefore >= 0.5 && time.Since(t0) < quiet {
		u.logf("waiting for a quiet host: 1-minute load average %.2f (waited %s of at most %s)", u.rec.LoadBefore, time.Since(t0).Round(time.Second), quiet)
		time.Sleep(10 * time.Second)
		u.rec.LoadBefore, _ = bench.ReadLoadAvg()
	}
	u.rec.QuietWaited = time.Since(t0)

	u.rec.Started = time.Now().UTC()
	sampler := bench.StartLoadSampler(5 * time.Second)
	u.rec.Machine = bench.DescribeMachine("")
	u.rec.Describe = gitDescribe()
	u.rec.Chromium = chromiumVersion()

	u.start()
	if u.want("size", "render", "trace", "tail") {
		u.seed()
	}
	if u.want("size") {
		u.measureSizes()
	}
	if u.want("render") {
		u.measureRenders()
	}
	if u.want("trace") {
		u.measureTrace()
	}
	if u.want("tail") {
		u.measureTail()
	}
	if u.want("journey") {
		u.measureJourney()
	}
	u.rec.Load = sampler.Stop()
	u.rec.Seconds = time.Since(u.rec.Started).Seconds()
	u.buildMeasures()

	md := u.markdown()
	if write {
		path := filepath.Join(benchRepoRoot(b), "docs", "benchmarks", "ui.md")
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
		doc, err := bench.ReplaceBetweenMarkers(string(old), "Benchmark: ui", md)
		if err != nil {
			b.Fatalf("update %s: %v", path, err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
		u.logf("wrote %s", path)
	} else {
		fmt.Fprintln(os.Stdout, md)
	}
	return u.metrics()
}

func (u *uiBench) want(names ...string) bool {
	if u.only == nil {
		return true
	}
	for _, n := range names {
		if u.only[n] {
			return true
		}
	}
	return false
}

func (u *uiBench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ui-bench %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (u *uiBench) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	u.logf("FAILURE: %s", msg)
	u.rec.Failures = append(u.rec.Failures, msg)
}

// start runs the server and the engine in this process, wired as
// `rastro serve` wires them (UI on, default engine settings, merges on a
// low-priority thread).
func (u *uiBench) start() {
	b := u.b
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0", UI: ui.Handler(), Prices: llm.DefaultPrices()})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(u.tmp, "data")
	eng, err := engine.Open(engine.Options{Dir: dir, Prices: llm.DefaultPrices(),
		Background: &process.Background{MergeHeadroom: process.DefaultMergeHeadroom, MergeNice: process.DefaultMergeNice}})
	if err != nil {
		b.Fatal(err)
	}
	srv.SetBackend(eng)
	u.eng = eng
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
	})
	u.base = "http://" + srv.HTTPAddr()
}

type storeStats struct {
	Spans       int64 `json:"spans"`
	Segments    int   `json:"segments"`
	BufferSpans int   `json:"buffer_spans"`
}

func (u *uiBench) stats() (storeStats, error) {
	var st storeStats
	code, body, _, err := u.get("/api/v1/stats")
	if err != nil {
		return st, err
	}
	if code != 200 {
		return st, fmt.Errorf("GET /api/v1/stats: %d %s", code, body)
	}
	return st, json.Unmarshal(body, &st)
}

// get times one GET from request to the last byte of the body.
func (u *uiBench) get(path string) (int, []byte, float64, error) {
	t0 := time.Now()
	resp, err := u.client.Get(u.base + path)
	if err != nil {
		return 0, nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body, msSince(t0), err
}

func msSince(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

// settle waits until /api/v1/stats counts want spans, then (at most 2
// minutes) until the write buffer is sealed and the segment count has not
// changed for 10 s (compaction quiet).
func (u *uiBench) settle(want int64) (visible, settledAfter float64, settled bool, last storeStats) {
	t0 := time.Now()
	for {
		st, err := u.stats()
		if err != nil {
			u.b.Fatal(err)
		}
		last = st
		if st.Spans >= want {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			u.b.Fatalf("the store counts %d spans 5 minutes after ingest, want %d", st.Spans, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
	visible = time.Since(t0).Seconds()
	t1 := time.Now()
	stable, segs := time.Now(), -1
	for time.Since(t1) < 2*time.Minute {
		st, err := u.stats()
		if err != nil {
			u.b.Fatal(err)
		}
		last = st
		if st.Segments != segs || st.BufferSpans != 0 {
			segs, stable = st.Segments, time.Now()
		}
		if st.BufferSpans == 0 && time.Since(stable) >= 10*time.Second {
			return visible, time.Since(t0).Seconds(), true, last
		}
		time.Sleep(time.Second)
	}
	return visible, time.Since(t0).Seconds(), false, last
}

// load sends OTLP/HTTP protobuf payloads over 8 connections, retrying a 429
// after a backoff (20 ms doubling to 1 s) as an OTLP exporter does.
func (u *uiBench) load(payloads []bench.Payload, spans int64) bench.LoadResult {
	res, err := bench.Load(context.Background(), bench.LoadOptions{Endpoint: u.base, Protocol: bench.ProtoOTLPProto,
		Concurrency: 8, KeepAlive: true, Retry429: true}, payloads)
	if err != nil {
		u.b.Fatal(err)
	}
	if res.FailedRequests() != 0 || res.AcceptedSpans != spans {
		u.b.Fatalf("ingest: %d of %d spans accepted, %d failed requests (first error: %s)", res.AcceptedSpans, spans, res.FailedRequests(), res.FirstError)
	}
	return res
}

// seed puts u.spans spans in the store, half of the llm corpus and half of
// the api corpus, over the last 6 hours, their batches interleaved.
func (u *uiBench) seed() {
	now := time.Now()
	half := u.spans / 2
	u.logf("generating %d llm + %d api spans over the last 6 h", half, u.spans-half)
	var lists [2][]bench.Payload
	for i, c := range []struct {
		name  string
		spans int
	}{{bench.CorpusLLM, half}, {bench.CorpusAPI, u.spans - half}} {
		spans, err := bench.Generate(c.name, bench.CorpusOptions{Seed: 1, Spans: c.spans, Start: now.Add(-6 * time.Hour), Window: 6*time.Hour - time.Minute})
		if err != nil {
			u.b.Fatal(err)
		}
		pl, err := bench.Prepare(bench.Batches(spans, 1000), bench.ProtoOTLPProto, false)
		if err != nil {
			u.b.Fatal(err)
		}
		lists[i] = pl
	}
	var payloads []bench.Payload
	for i := 0; i < max(len(lists[0]), len(lists[1])); i++ {
		for _, l := range lists {
			if i < len(l) {
				payloads = append(payloads, l[i])
			}
		}
	}
	lists = [2][]bench.Payload{}
	u.logf("ingesting %d spans in %d requests", u.spans, len(payloads))
	res := u.load(payloads, int64(u.spans))
	payloads = nil
	goruntime.GC()
	s := &u.rec.Seed
	s.LLM, s.API = half, u.spans-half
	s.IngestSeconds, s.SpansPerSec, s.Retried429 = res.Elapsed.Seconds(), res.SpansPerSecond, res.Retried429
	u.logf("ingested at %.0f spans/s (%d 429s retried); settling", res.SpansPerSecond, res.Retried429)
	var st storeStats
	s.VisibleAfter, s.SettledAfter, s.Settled, st = u.settle(int64(u.spans))
	s.Spans, s.Segments, s.BufferSpans = st.Spans, st.Segments, st.BufferSpans
	u.logf("store: %d spans, %d segments, %d in the write buffer (settled %v after %.0f s)", st.Spans, st.Segments, st.BufferSpans, s.Settled, s.SettledAfter)
}

// ---- Chromium ---------------------------------------------------------------

type uiTab struct {
	ctx    context.Context
	close  func()
	mu     sync.Mutex
	thrown []string
}

// launch starts a new headless Chromium with a fresh profile directory and
// one tab; script, when set, runs in every document before the app.
func (u *uiBench) launch(script string) (*uiTab, error) {
	dir, err := os.MkdirTemp(u.tmp, "chromium-")
	if err != nil {
		return nil, err
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 800))
	ctx, cancel := chromedp.NewContext(actx)
	t := &uiTab{ctx: ctx, close: func() { cancel(); cancelA(); os.RemoveAll(dir) }}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.close()
		return nil, fmt.Errorf("start Chromium: %w", err)
	}
	if u.rec.ChromiumCDP == "" {
		if v, err := chromedp.CallBrowser(ctx, cdpbrowser.GetVersion, cdp.Empty{}); err == nil {
			u.rec.ChromiumCDP = v.Product
		}
	}
	if script != "" {
		if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
			t.close()
			return nil, fmt.Errorf("add the instrumentation script: %w", err)
		}
	}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() { // ends when the tab's context is cancelled
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			t.mu.Lock()
			t.thrown = append(t.thrown, msg)
			t.mu.Unlock()
		}
	}()
	// Let the new browser's own start-up work finish before the clock runs.
	time.Sleep(time.Second)
	return t, nil
}

func (t *uiTab) exceptions() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.thrown)
}

func tabEval[T any](t *uiTab, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(t.ctx, 60*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

func (t *uiTab) poll(cond string, timeout time.Duration) error {
	_, err := chromedp.Run(t.ctx, chromedp.Poll[chromedp.Void]("!!("+cond+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	return err
}

// quiet waits until no Resource Timing entry has been added for 1 s (at
// most 30 s): every fetch the page started has finished.
func (t *uiTab) quiet() {
	last, since := -1, time.Now()
	for t0 := time.Now(); time.Since(t0) < 30*time.Second; time.Sleep(100 * time.Millisecond) {
		n, err := tabEval[int](t, `performance.getEntriesByType('resource').length`)
		if err != nil {
			return
		}
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) >= time.Second {
			return
		}
	}
}

// coldLoad opens spec's page in a new browser with a fresh profile and
// returns what it measured.
func matchAll(s string, subs []string) bool {
	if len(subs) == 0 {
		return false
	}
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// apiLabel shortens an API URL to its path and parameters, without the
// time window.
func apiLabel(raw string) string {
	pu, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := pu.Query()
	q.Del("since")
	q.Del("until")
	if len(q) == 0 {
		return pu.Path
	}
	return pu.Path + "?" + q.Encode()
}

func (u *uiBench) coldLoad(spec pageSpec) (pageRun, error) {
	r := pageRun{First: math.NaN(), Complete: math.NaN(), FirstFrame: math.NaN(), FirstPainted: math.NaN(), DrawMs: math.NaN(),
		APIStart: math.NaN(), APIEnd: math.NaN(), APIDur: math.NaN(), APIBytes: math.NaN()}
	t, err := u.launch(uiInstrument(spec.first, spec.complete))
	if err != nil {
		return r, err
	}
	defer t.close()
	if err := chromedp.Do(t.ctx, chromedp.Navigate(u.base+spec.path)); err != nil {
		return r, fmt.Errorf("open %s: %w", spec.path, err)
	}
	state := func() string {
		s, _ := tabEval[string](t, `document.body.innerText.slice(0, 400)`)
		return strings.Join(strings.Fields(s), " ")
	}
	if err := t.poll(`window.__uiBench && window.__uiBench.painted[0]`, 60*time.Second); err != nil {
		return r, fmt.Errorf("%s: no data rows within 60 s (%v; exceptions %q): page: %s", spec.path, err, t.exceptions(), state())
	}
	completeErr := t.poll(`window.__uiBench && window.__uiBench.painted[1]`, 60*time.Second)
	t.quiet()
	c, err := tabEval[uiCollected](t, uiCollect)
	if err != nil {
		return r, fmt.Errorf("collect %s: %w", spec.path, err)
	}
	if len(c.Errors) > 0 || len(t.exceptions()) > 0 {
		return r, fmt.Errorf("%s: the page shows errors %q, exceptions %q", spec.path, c.Errors, t.exceptions())
	}
	r.First, r.FirstFrame, r.FirstPainted = c.Marks[0], c.Frames[0], c.Painted[0]
	if completeErr == nil {
		r.Complete = c.Marks[1]
	}
	if v, err := strconv.ParseFloat(c.RenderMs, 64); err == nil {
		r.DrawMs = v
	}
	r.Visibility = c.Visibility
	r.DOMContentLoaded, r.Load = c.Nav.DCL, c.Nav.Load
	r.DocTransfer, r.DocEncoded = c.Nav.Transfer, c.Nav.Encoded
	r.Files = map[string]float64{}
	for _, e := range c.Res {
		p := e.Name
		if pu, err := url.Parse(e.Name); err == nil {
			p = pu.Path
		}
		switch {
		case strings.HasPrefix(p, "/api/"):
			r.APITransfer += e.Transfer
			if e.End > r.LastAPIEnd && (completeErr != nil || e.Start <= c.Marks[1]) {
				r.LastAPIEnd = e.End
			}
			if d := e.End - e.Start; d > r.SlowAPIDur {
				r.SlowAPI, r.SlowAPIDur, r.SlowAPIURL = apiLabel(e.Name), d, strings.TrimPrefix(e.Name, u.base)
			}
			if e.Transfer > r.BigAPIBytes {
				r.BigAPI, r.BigAPIBytes = apiLabel(e.Name), e.Transfer
			}
			if matchAll(e.Name, spec.api) && r.APIURL == "" {
				r.APIURL = strings.TrimPrefix(e.Name, u.base)
				r.APIStart, r.APIEnd, r.APIDur, r.APIBytes = e.Start, e.End, e.End-e.Start, e.Transfer
			}
		case strings.HasSuffix(p, ".js"):
			r.JSTransfer += e.Transfer
			r.JSEncoded += e.Encoded
			r.JSDecoded += e.Decoded
			r.JSFiles++
			r.Files[p] += e.Encoded
		case strings.HasSuffix(p, ".css"):
			r.CSSTransfer += e.Transfer
			r.CSSEncoded += e.Encoded
			r.Files[p] += e.Encoded
		default:
			r.OtherTransfer += e.Transfer
		}
	}
	r.StaticTransfer = r.DocTransfer + r.JSTransfer + r.CSSTransfer + r.OtherTransfer
	r.TotalTransfer = r.StaticTransfer + r.APITransfer
	if completeErr != nil {
		u.fail("%s: the complete condition (%s) did not hold within 60 s: %s", spec.path, spec.completeDesc, state())
	}
	return r, nil
}

// measurePages loads every page runs times, round-robin and rotated (round
// r starts at page r), so that background load lands on all pages alike.
func (u *uiBench) measurePages(specs []pageSpec) {
	for _, s := range specs {
		if u.rec.Pages[s.key] == nil {
			u.rec.Pages[s.key] = &pageResult{Spec: s}
			u.rec.PageOrder = append(u.rec.PageOrder, s.key)
		}
	}
	for r := 0; r < u.runs; r++ {
		for i := range specs {
			s := specs[(i+r)%len(specs)]
			res := u.rec.Pages[s.key]
			run, err := u.coldLoad(s)
			if err != nil {
				res.Errors = append(res.Errors, err.Error())
				u.fail("%s run %d: %v", s.title, r+1, err)
				continue
			}
			res.Runs = append(res.Runs, run)
			u.logf("%-26s run %d: data rows %6.1f ms, complete %6.1f ms, key API %6.1f-%6.1f ms, JS %5.1f KB gz, total %6.1f KB; slowest API %.1f ms %s",
				s.title, r+1, run.First, run.Complete, run.APIStart, run.APIEnd, run.JSEncoded/1000, run.TotalTransfer/1000, run.SlowAPIDur, run.SlowAPI)
		}
	}
	// The key API call of each page, and the slowest of its last run, from
	// Go, warm: one warm-up, then 5.
	timeGo := func(path string) []float64 {
		var out []float64
		for i := 0; i < 6; i++ {
			code, body, ms, err := u.get(path)
			if err != nil || code != 200 {
				u.fail("GET %s: %d %v %s", path, code, err, trunc(string(body), 200))
				return out
			}
			if i > 0 {
				out = append(out, ms)
			}
		}
		return out
	}
	for _, s := range specs {
		res := u.rec.Pages[s.key]
		if len(res.Runs) == 0 {
			continue
		}
		last := res.Runs[len(res.Runs)-1]
		if last.APIURL != "" {
			res.GoAPI = timeGo(last.APIURL)
		}
		if last.SlowAPIURL != "" {
			res.GoSlow = timeGo(last.SlowAPIURL)
		}
	}
}

// ---- measure 1: transfer of the first page and of the Trace page ----------

const (
	searchRows     = `document.querySelector('#results tbody tr')`
	searchComplete = searchRows + ` && document.querySelector('.histo svg') && document.querySelectorAll('#f-service option').length > 1 && document.querySelectorAll('#f-model option').length > 1`
)

func (u *uiBench) measureSizes() {
	var found struct {
		Spans []struct {
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		} `json:"spans"`
	}
	q := url.QueryEscape(`{ span.gen_ai.input.messages != nil }`)
	code, body, _, err := u.get("/api/v1/spans?limit=1&since=1h&q=" + q)
	if err == nil && code == 200 {
		err = json.Unmarshal(body, &found)
	}
	specs := []pageSpec{{key: "first", title: "Search `/` (first visit)", path: "/",
		first: searchRows, complete: searchComplete,
		firstDesc:    "`#results tbody tr` exists",
		completeDesc: "rows, the histogram's `svg`, and the service and model facets filled",
		api:          []string{"/api/v1/traces?"}, apiDesc: "GET /api/v1/traces (limit 50)"}}
	if err != nil || len(found.Spans) == 0 {
		u.fail("no LLM span with messages in the last hour for the Trace page (%d %v)", code, err)
	} else {
		id, span := found.Spans[0].TraceID, found.Spans[0].SpanID
		specs = append(specs, pageSpec{key: "trace-llm", title: "Trace (an LLM trace, its LLM span open)", path: "/traces/" + id + "?span=" + span,
			first:        `document.querySelector('#waterfall .wf-row')`,
			complete:     `document.querySelector('#waterfall .wf-row') && document.querySelectorAll('#conversation .msg').length > 0`,
			firstDesc:    "`#waterfall .wf-row` exists",
			completeDesc: "waterfall rows and the conversation's `.msg` blocks",
			api:          []string{"/api/v1/traces/" + id}, apiDesc: "GET /api/v1/traces/{id}"})
	}
	u.logf("measure 1: transfer of the first page and the Trace page")
	u.measurePages(specs)
}

// ---- measure 2: first render at 1M spans -----------------------------------

func (u *uiBench) measureRenders() {
	specs := []pageSpec{
		{key: "search", title: "Search `/?since=6h`", path: "/?since=6h", first: searchRows, complete: searchComplete,
			firstDesc:    "`#results tbody tr` exists",
			completeDesc: "rows, the histogram's `svg`, and the service and model facets filled",
			api:          []string{"/api/v1/traces?"}, apiDesc: "GET /api/v1/traces (limit 50)"},
		{key: "llm", title: "LLM `/llm?since=6h`", path: "/llm?since=6h",
			first: `document.querySelector('#llm-groups tbody tr')`,
			complete: `/^\$\d/.test(document.querySelector('#total-cost .v')?.textContent || '') && document.querySelectorAll('#llm-charts svg').length >= 6 &&
				document.querySelector('#llm-groups tbody tr') && document.querySelector('#top-sessions tbody tr') && document.querySelector('#top-users tbody tr') &&
				document.querySelector('#prices').textContent.startsWith('prices: ') && !document.querySelector('#prices').textContent.includes('…')`,
			firstDesc:    "`#llm-groups tbody tr` exists (the by-model table)",
			completeDesc: "the cost card, 6 charts, the by-model table, top sessions, top users and the price line",
			api:          []string{"/api/v1/llm/stats?", "group_by=model"}, apiDesc: "GET /api/v1/llm/stats?group_by=model"},
		{key: "services", title: "Services `/services?since=6h`", path: "/services?since=6h",
			first: `document.querySelector('#red-services tbody tr')`,
			complete: `document.querySelector('#red-services tbody tr') && document.querySelector('#heatmap rect.cell') &&
				document.querySelector('#error-groups tbody tr') && document.querySelector('#dependencies .edge')`,
			firstDesc:    "`#red-services tbody tr` exists (the RED table)",
			completeDesc: "RED rows, heatmap cells, error groups and dependency edges",
			api:          []string{"/api/v1/red?"}, apiDesc: "GET /api/v1/red?group=service"},
	}
	u.logf("measure 2: first renders at %d spans", u.spans)
	u.measurePages(specs)
}

// ---- measure 4: a 10,000-span trace ----------------------------------------

func (u *uiBench) measureTrace() {
	spans := wideTrace(time.Now().Add(-3 * time.Minute))
	body, err := json.Marshal(spans)
	if err != nil {
		u.b.Fatal(err)
	}
	resp, err := u.client.Post(u.base+"/v1/spans", "application/json", bytes.NewReader(body))
	if err != nil {
		u.b.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		u.b.Fatalf("POST /v1/spans (10,000-span trace): %d %s", resp.StatusCode, rb)
	}
	u.logf("measure 4: the %d-span trace", bigSpans)
	cond := fmt.Sprintf(`document.querySelector('#span-count')?.textContent === '%d spans' && document.querySelector('#waterfall .wf-row')`, bigSpans)
	u.measurePages([]pageSpec{{key: "trace-10k", title: "Trace, 10,000 spans", path: "/traces/" + bigTrace,
		first: cond, complete: cond,
		firstDesc:    fmt.Sprintf("`#span-count` reads \"%d spans\" and `#waterfall .wf-row` exists", bigSpans),
		completeDesc: "same as the rows",
		api:          []string{"/api/v1/traces/" + bigTrace}, apiDesc: "GET /api/v1/traces/{id}"}})
}

// ---- measure 3: the live tail ----------------------------------------------

const tailInstall = `(() => {
  if (window.__tailBench) return true;
  const list = document.querySelector('#tail-list');
  const T = window.__tailBench = {seen: new Map(), frames: [], work: [], on: false, last: 0, ts: 0, loaf: 0, scroll: false};
  const ch = new MessageChannel();
  ch.port1.onmessage = () => { if (T.on && T.ts) T.work.push(performance.now() - T.ts); };
  new MutationObserver(ms => {
    const now = performance.timeOrigin + performance.now();
    for (const m of ms) for (const n of m.addedNodes) {
      const id = n.dataset && n.dataset.spanId;
      if (id && !T.seen.has(id)) T.seen.set(id, now);
    }
  }).observe(list, {childList: true, subtree: true});
  const loop = t => {
    if (T.on) {
      if (T.last) T.frames.push(t - T.last);
      T.last = t;
      T.ts = performance.now();
      ch.port2.postMessage(0);
      if (T.scroll) list.scrollTop = list.scrollTop + 30;
    }
    requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
  try {
    new PerformanceObserver(l => { if (T.on) T.loaf += l.getEntries().length; }).observe({type: 'long-animation-frame'});
  } catch (e) { T.loaf = -1; }
  return true;
})()`

func (u *uiBench) measureTail() {
	u.logf("measure 3: live tail, %d runs", u.runs)
	for r := 0; r < u.runs; r++ {
		run, err := u.tailRun(r + 1)
		if err != nil {
			u.rec.TailErrs = append(u.rec.TailErrs, err.Error())
			u.fail("tail run %d: %v", r+1, err)
			continue
		}
		u.rec.Tail = append(u.rec.Tail, run)
		u.logf("tail run %d: latency p50 %.1f p95 %.1f max %.1f ms (%d spans, %d missing); %d rows; frames idle p95 %.2f (%.2f) max %.1f over %d/%d work p95 %.1f; scrolling p95 %.2f (%.2f) max %.1f over %d/%d work p95 %.1f",
			r+1, run.Lat.P50, run.Lat.P95, run.Lat.Max, run.Lat.N, run.Lat.Missing, run.Rows,
			run.Idle.P95Refresh, run.Idle.P95, run.Idle.Max, run.Idle.Over, run.Idle.N, run.Idle.WorkP95,
			run.Scroll.P95Refresh, run.Scroll.P95, run.Scroll.Max, run.Scroll.Over, run.Scroll.N, run.Scroll.WorkP95)
	}
}

// calibrate returns the page clock (performance.timeOrigin +
// performance.now()) minus Go's wall clock, from the evaluation with the
// shortest round trip of 9.
func (t *uiTab) calibrate() (offset, rtt float64, err error) {
	rtt = math.Inf(1)
	for i := 0; i < 9; i++ {
		t0 := nowMs()
		v, err := tabEval[float64](t, `performance.timeOrigin + performance.now()`)
		t1 := nowMs()
		if err != nil {
			return 0, 0, err
		}
		if t1-t0 < rtt {
			rtt, offset = t1-t0, v-(t0+t1)/2
		}
	}
	return offset, rtt, nil
}

func tailSpanID(phase, run, i int) string { return fmt.Sprintf("%02x%02x%012x", phase, run, i) }

// stream sends n requests of per spans each to POST /v1/spans, one every
// interval (open loop: a slow answer does not delay the next request), and
// returns Go's wall clock (epoch ms) when each span's request was answered
// 2xx, and each request's latency.
func (u *uiBench) stream(phase, run, n, per int, interval time.Duration) (map[string]float64, []float64, error) {
	acks := make(map[string]float64, n*per)
	lat := make([]float64, 0, n)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	start := time.Now()
	for i := 0; i < n; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		ids := make([]string, per)
		var body bytes.Buffer
		body.WriteByte('[')
		now := time.Now().UnixNano()
		for j := range ids {
			k := i*per + j
			ids[j] = tailSpanID(phase, run, k)
			if j > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"trace_id":"7a11%02x%02x%024x","span_id":"%s","name":"tail bench %d","kind":"server","service":"tail-bench","start_time":%d,"duration_ns":1000000,"attributes":{"bench.phase":%d}}`,
				phase, run, k/10, ids[j], k%17, now, phase)
		}
		body.WriteByte(']')
		payload := body.Bytes()
		wg.Add(1)
		go func() { // one request; returns when answered
			defer wg.Done()
			sent := time.Now()
			for attempt := 0; ; attempt++ {
				resp, err := u.client.Post(u.base+"/v1/spans", "application/json", bytes.NewReader(payload))
				at := nowMs()
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests && attempt < 100 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				if resp.StatusCode/100 != 2 {
					firstErr = cmpOr(firstErr, fmt.Errorf("POST /v1/spans: %d", resp.StatusCode))
					return
				}
				for _, id := range ids {
					acks[id] = at
				}
				lat = append(lat, msSince(sent))
				return
			}
		}()
	}
	wg.Wait()
	return acks, lat, firstErr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// seen returns the page's first-seen time (epoch ms, page clock) of every
// row whose span id starts with prefix.
func (t *uiTab) seen(prefix string) (map[string]float64, error) {
	return tabEval[map[string]float64](t, fmt.Sprintf(`Object.fromEntries([...window.__tailBench.seen].filter(([k]) => k.startsWith(%q)))`, prefix))
}

func latencies(acks, seen map[string]float64, offset float64) latStats {
	var xs []float64
	missing := 0
	for id, ack := range acks {
		s, ok := seen[id]
		if !ok {
			missing++
			continue
		}
		xs = append(xs, s-offset-ack)
	}
	return latOf(xs, missing)
}

func latOf(xs []float64, missing int) latStats {
	l := latStats{N: len(xs), Missing: missing, P50: math.NaN(), P95: math.NaN(), Max: math.NaN(), Min: math.NaN()}
	if len(xs) == 0 {
		return l
	}
	l.P50, l.P95, l.Max, l.Min = bench.Percentile(xs, 50), bench.Percentile(xs, 95), slices.Max(xs), slices.Min(xs)
	for _, x := range xs {
		if x < 0 {
			l.Negatives++
		}
	}
	return l
}

func framesOf(ds, work []float64, loaf int) frameStats {
	f := frameStats{N: len(ds), LoAF: loaf, P50: math.NaN(), P95: math.NaN(), Max: math.NaN(), Mean: math.NaN(), P95Refresh: math.NaN(),
		WorkP50: math.NaN(), WorkP95: math.NaN(), WorkMax: math.NaN()}
	if len(work) > 0 {
		f.WorkP50, f.WorkP95, f.WorkMax = bench.Percentile(work, 50), bench.Percentile(work, 95), slices.Max(work)
		for _, w := range work {
			if w > uiFrameBudgetMs {
				f.WorkOver++
			}
		}
	}
	if len(ds) == 0 {
		return f
	}
	f.P50, f.P95, f.Max = bench.Percentile(ds, 50), bench.Percentile(ds, 95), slices.Max(ds)
	sum := 0.0
	q := make([]float64, len(ds))
	for i, d := range ds {
		sum += d
		// A frame longer than one 60 Hz refresh: the rAF timestamps are
		// frame start times, coarsened to 0.1 ms, so one refresh reads
		// 16.5-16.8 ms; 0.3 ms of slack absorbs that.
		if d > uiFrameBudgetMs+0.3 {
			f.Over++
		}
		n := max(1, math.Round(d/uiFrameBudgetMs))
		f.Missed += int(n) - 1
		q[i] = n * uiFrameBudgetMs
	}
	f.P95Refresh = bench.Percentile(q, 95)
	f.Mean = sum / float64(len(ds))
	return f
}

func (u *uiBench) tailRun(run int) (tailRun, error) {
	var tr tailRun
	t, err := u.launch("")
	if err != nil {
		return tr, err
	}
	defer t.close()
	if err := chromedp.Do(t.ctx, chromedp.Navigate(u.base+"/tail")); err != nil {
		return tr, err
	}
	if err := t.poll(`window.__rastroTail && window.__rastroTail.open`, 30*time.Second); err != nil {
		return tr, fmt.Errorf("the tail did not open: %w", err)
	}
	if _, err := tabEval[bool](t, tailInstall); err != nil {
		return tr, err
	}
	tr.Visibility, _ = tabEval[string](t, `document.visibilityState`)
	off0, rtt0, err := t.calibrate()
	if err != nil {
		return tr, err
	}
	interval := time.Second / uiTailRate

	type frames struct {
		Frames []float64 `json:"frames"`
		Work   []float64 `json:"work"`
		LoAF   int       `json:"loaf"`
		Top    float64   `json:"top"`
	}
	startFrames := func(scroll bool) error {
		js := `(() => { const T = window.__tailBench; T.frames = []; T.work = []; T.last = 0; T.ts = 0; T.loaf = 0; T.scroll = false; T.on = true; return true; })()`
		if scroll {
			js = `(() => { const T = window.__tailBench; document.querySelector('#tail-list').scrollTop = 24; T.frames = []; T.work = []; T.last = 0; T.ts = 0; T.loaf = 0; T.scroll = true; T.on = true; return true; })()`
		}
		_, err := tabEval[bool](t, js)
		return err
	}
	stopFrames := func() (frames, error) {
		return tabEval[frames](t, `(() => { const T = window.__tailBench; T.on = false; T.scroll = false; return {frames: T.frames, work: T.work, loaf: T.loaf, top: document.querySelector('#tail-list').scrollTop}; })()`)
	}

	// Latency on an empty list: 1000 spans, one per request, at 200/s.
	if err := startFrames(false); err != nil {
		return tr, err
	}
	acks, reqLat, err := u.stream(1, run, uiTailLatSpans, 1, interval)
	if err != nil {
		return tr, err
	}
	f, err := stopFrames()
	if err != nil {
		return tr, err
	}
	tr.Few = framesOf(f.Frames, f.Work, f.LoAF)
	tr.AckP50Ms, tr.AckP95Ms = bench.Percentile(reqLat, 50), bench.Percentile(reqLat, 95)
	time.Sleep(time.Second)
	seen, err := t.seen(fmt.Sprintf("%02x%02x", 1, run))
	if err != nil {
		return tr, err
	}
	off1, rtt1, err := t.calibrate()
	if err != nil {
		return tr, err
	}
	tr.OffsetMs, tr.RTTMs = (off0+off1)/2, max(rtt0, rtt1)
	tr.Lat = latencies(acks, seen, tr.OffsetMs)

	// Fill to 10,000 rows: 40 spans per request, 20 requests/s (800 spans/s,
	// under the page's default cap of 1,000 rows/s, so none is dropped).
	fill := uiTailRows - uiTailLatSpans
	t0 := time.Now()
	if _, _, err := u.stream(2, run, fill/40, 40, 50*time.Millisecond); err != nil {
		return tr, err
	}
	if err := t.poll(fmt.Sprintf(`window.__rastroTail.rows + window.__rastroTail.dropped >= %d`, uiTailRows), 60*time.Second); err != nil {
		return tr, fmt.Errorf("the tail did not reach %d rows: %w", uiTailRows, err)
	}
	tr.FillSeconds = time.Since(t0).Seconds()
	type tailState struct{ Rows, Dropped int }
	st, err := tabEval[tailState](t, `({Rows: window.__rastroTail.rows, Dropped: window.__rastroTail.dropped})`)
	if err != nil {
		return tr, err
	}
	tr.Rows, tr.Dropped = st.Rows, st.Dropped

	// Frames while streaming at 200 spans/s: idle, then scrolling.
	window := func(scroll bool, d time.Duration, phase int) (frames, map[string]float64, error) {
		if err := startFrames(scroll); err != nil {
			return frames{}, nil, err
		}
		var acks map[string]float64
		if phase > 0 {
			var err error
			if acks, _, err = u.stream(phase, run, int(d/interval), 1, interval); err != nil {
				return frames{}, nil, err
			}
		} else {
			time.Sleep(d)
		}
		f, err := stopFrames()
		return f, acks, err
	}
	f, _, err = window(false, 3*time.Second, 0)
	if err != nil {
		return tr, err
	}
	tr.Still = framesOf(f.Frames, f.Work, f.LoAF)
	f, acks, err = window(false, uiTailIdle, 3)
	if err != nil {
		return tr, err
	}
	tr.Idle = framesOf(f.Frames, f.Work, f.LoAF)
	time.Sleep(500 * time.Millisecond)
	if seen, err = t.seen(fmt.Sprintf("%02x%02x", 3, run)); err != nil {
		return tr, err
	}
	tr.LatRows = latencies(acks, seen, tr.OffsetMs)
	if f, _, err = window(true, uiTailScroll, 4); err != nil {
		return tr, err
	}
	tr.Scroll = framesOf(f.Frames, f.Work, f.LoAF)
	tr.ScrolledToPx = f.Top
	if ex := t.exceptions(); len(ex) > 0 {
		return tr, fmt.Errorf("uncaught exceptions in the tail page: %q", ex)
	}
	return tr, nil
}

// ---- measure 5: a journey of 10,000 spans a day over 7 days ----------------

// journeySpans returns perDay x days single-span traces carrying user.id =
// value, spread evenly over [from, to).
func journeySpans(value string, n int, from, to time.Time) []model.Span {
	r := rand.New(rand.NewPCG(5, 7))
	routes := []string{"GET /api/cart", "POST /api/cart/items", "GET /api/products/{id}", "GET /api/search", "POST /api/checkout",
		"GET /api/orders", "GET /api/orders/{id}", "POST /api/login", "GET /api/recommendations", "GET /api/profile"}
	svcs := make([]*model.Resource, 4)
	for i := range svcs {
		svcs[i] = &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(fmt.Sprintf("journey-svc-%d", i))}}}
	}
	scope := &model.Scope{Name: "ui-bench"}
	out := make([]model.Span, n)
	step := to.Sub(from) / time.Duration(n)
	for i := range out {
		var tid model.TraceID
		var sid model.SpanID
		for j := range tid {
			tid[j] = byte(r.Uint32())
		}
		for j := range sid {
			sid[j] = byte(r.Uint32())
		}
		tid[0], sid[0] = 0x70, 0x70|1 // never all zeros
		start := from.Add(time.Duration(i) * step)
		d := time.Duration(math.Exp(r.NormFloat64()*0.8) * float64(30*time.Millisecond))
		svc := r.IntN(len(svcs))
		route := routes[r.IntN(len(routes))]
		s := model.Span{TraceID: tid, SpanID: sid, Flags: 1, Name: route, Kind: model.KindServer,
			StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(d).UnixNano()),
			Attributes: []model.KeyValue{
				{Key: "user.id", Value: model.StringValue(value)},
				{Key: "http.route", Value: model.StringValue(strings.Fields(route)[1])},
				{Key: "http.request.method", Value: model.StringValue(strings.Fields(route)[0])},
			},
			Resource: svcs[svc], Scope: scope, Service: fmt.Sprintf("journey-svc-%d", svc)}
		if r.IntN(50) == 0 {
			s.StatusCode = model.StatusError
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "http.response.status_code", Value: model.IntValue(500)})
		} else {
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "http.response.status_code", Value: model.IntValue(200)})
		}
		out[i] = s
	}
	return out
}

type journeyAnswer struct {
	Traces    []json.RawMessage `json:"traces"`
	Truncated bool              `json:"truncated"`
}

func (u *uiBench) journeyGet(limit int) (float64, journeyAnswer, int, error) {
	path := "/api/v1/journey?key=user.id&value=" + url.QueryEscape(uiJourneyValue) + "&since=7d"
	if limit != 500 {
		path += "&limit=" + strconv.Itoa(limit)
	}
	var a journeyAnswer
	code, body, ms, err := u.get(path)
	if err != nil {
		return 0, a, 0, err
	}
	if code != 200 {
		return 0, a, 0, fmt.Errorf("GET %s: %d %s", path, code, trunc(string(body), 300))
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, a, 0, err
	}
	return ms, a, len(body), nil
}

// journeyEngine times the engine's part of the journey (the trace search
// the handler runs) in this process, without HTTP and JSON: median of 5
// calls after one warm-up.
func (u *uiBench) journeyEngine(limit int) float64 {
	f, err := query.FromValues(url.Values{"q": {`{ .user.id = "` + uiJourneyValue + `" }`}, "since": {"7d"}, "limit": {strconv.Itoa(limit)}}, time.Now())
	if err != nil {
		u.fail("journey filter: %v", err)
		return math.NaN()
	}
	var xs []float64
	for i := 0; i < 6; i++ {
		t0 := time.Now()
		sums, _, err := u.eng.SearchTraces(context.Background(), server.DefaultProject, &f, limit)
		ms := msSince(t0)
		if err != nil || len(sums) != limit {
			u.fail("engine SearchTraces (limit %d): %d traces, %v", limit, len(sums), err)
			return math.NaN()
		}
		if i > 0 {
			xs = append(xs, ms)
		}
	}
	return bench.SpreadOf(xs).Median
}

func (u *uiBench) measureJourney() {
	j := &u.rec.Journey
	j.Value = uiJourneyValue
	j.Spans = uiJourneyPerDay * uiJourneyDays
	j.Background = uiJourneyBg
	now := time.Now()
	from, to := now.Add(-uiJourneyDays*24*time.Hour+30*time.Minute), now.Add(-time.Minute)
	u.logf("measure 5: generating %d journey spans and %d background spans over 7 days", j.Spans, j.Background)
	mine := journeySpans(uiJourneyValue, j.Spans, from, to)
	bg, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 3, Spans: j.Background, Start: from, Window: to.Sub(from)})
	if err != nil {
		u.b.Fatal(err)
	}
	pm, err := bench.Prepare(bench.Batches(mine, 1000), bench.ProtoOTLPProto, false)
	if err != nil {
		u.b.Fatal(err)
	}
	pb, err := bench.Prepare(bench.Batches(bg, 1000), bench.ProtoOTLPProto, false)
	if err != nil {
		u.b.Fatal(err)
	}
	var payloads []bench.Payload
	for i := 0; i < max(len(pm), len(pb)); i++ {
		if i < len(pm) {
			payloads = append(payloads, pm[i])
		}
		if i < len(pb) {
			payloads = append(payloads, pb[i])
		}
	}
	mine, bg, pm, pb = nil, nil, nil, nil
	before, err := u.stats()
	if err != nil {
		u.b.Fatal(err)
	}
	res := u.load(payloads, int64(j.Spans+j.Background))
	payloads = nil
	goruntime.GC()
	j.IngestSeconds, j.Retried429 = res.Elapsed.Seconds(), res.Retried429
	var st storeStats
	j.VisibleAfter, j.SettledAfter, j.Settled, st = u.settle(before.Spans + int64(j.Spans+j.Background))
	j.Segments, j.StoreSpans = st.Segments, st.Spans
	u.logf("journey data in: store %d spans, %d segments (settled %v after %.0f s)", st.Spans, st.Segments, j.Settled, j.SettledAfter)

	ms, a, n, err := u.journeyGet(500)
	if err != nil {
		u.fail("journey: %v", err)
		return
	}
	j.First500Ms, j.Traces500, j.Bytes500, j.Truncated500 = ms, len(a.Traces), n, a.Truncated
	if len(a.Traces) != 500 || !a.Truncated {
		u.fail("journey: the first answer has %d traces (truncated %v), want 500 of %d", len(a.Traces), a.Truncated, j.Spans)
	}
	rounds := func(limit, want, n int) []latStats {
		var out []latStats
		for r := 0; r < n; r++ {
			var xs []float64
			for i := 0; i < 22; i++ {
				ms, a, _, err := u.journeyGet(limit)
				if err != nil {
					u.fail("journey limit %d: %v", limit, err)
					return out
				}
				if len(a.Traces) != want {
					u.fail("journey limit %d: %d traces, want %d", limit, len(a.Traces), want)
					return out
				}
				if i >= 2 {
					xs = append(xs, ms)
				}
			}
			out = append(out, latOf(xs, 0))
		}
		return out
	}
	j.Rounds500 = rounds(500, 500, u.runs)
	ms, a, n, err = u.journeyGet(10000)
	if err != nil {
		u.fail("journey: %v", err)
		return
	}
	j.First10kMs, j.Traces10k, j.Bytes10k = ms, len(a.Traces), n
	j.Rounds10k = rounds(10000, 10000, 1) // one round: each request takes over a second
	j.Engine500, j.Engine10k = u.journeyEngine(500), u.journeyEngine(10000)
	u.logf("journey, engine SearchTraces alone: limit 500 %.1f ms, limit 10000 %.1f ms", j.Engine500, j.Engine10k)
	for i := range j.Rounds500 {
		u.logf("journey round %d: limit 500 p50 %.1f p95 %.1f ms", i+1, j.Rounds500[i].P50, j.Rounds500[i].P95)
	}
	for i := range j.Rounds10k {
		u.logf("journey round %d: limit 10000 p50 %.1f p95 %.1f ms", i+1, j.Rounds10k[i].P50, j.Rounds10k[i].P95)
	}
	u.measurePages([]pageSpec{{key: "journeys", title: "Journeys (the 70,000-span key, 7 days)",
		path:         "/journeys?key=user.id&value=" + url.QueryEscape(uiJourneyValue) + "&since=7d",
		first:        `document.querySelector('#journey-traces .tl-item')`,
		complete:     `document.querySelector('#journey-traces .tl-item') && document.querySelector('#journey .chart-box svg')`,
		firstDesc:    "`#journey-traces .tl-item` exists",
		completeDesc: "timeline items and the buckets chart",
		api:          []string{"/api/v1/journey?"}, apiDesc: "GET /api/v1/journey (limit 200, as the page asks)"}})
}

// ---- the record ---------------------------------------------------------------

func pageVals(p *pageResult, f func(pageRun) float64) []float64 {
	if p == nil {
		return nil
	}
	out := make([]float64, 0, len(p.Runs))
	for _, r := range p.Runs {
		out = append(out, f(r))
	}
	return out
}

func (u *uiBench) buildMeasures() {
	P := u.rec.Pages
	add := func(m uiMeasure) { u.rec.Measures = append(u.rec.Measures, m) }
	if P["first"] != nil {
		add(uiMeasure{ID: "1a", Metric: "first-js-KB", Name: "Initial JavaScript of the first page `/` (gzipped bytes of every script it loads)", Unit: "KB", Limit: targetJSBytes / 1000, Digits: 1,
			Runs: pageVals(P["first"], func(r pageRun) float64 { return r.JSEncoded / 1000 })})
		add(uiMeasure{ID: "1b", Metric: "first-total-KB", Name: "Total transfer of the first page `/` (document, scripts, style, API answers; headers included)", Unit: "KB", Limit: targetTotalBytes / 1000, Digits: 1,
			Runs: pageVals(P["first"], func(r pageRun) float64 { return r.TotalTransfer / 1000 })})
	}
	if P["trace-llm"] != nil {
		add(uiMeasure{ID: "1c", Name: "Initial JavaScript of the largest page, Trace (an LLM trace, its LLM span open)", Unit: "KB", Limit: targetJSBytes / 1000, Digits: 1,
			Runs: pageVals(P["trace-llm"], func(r pageRun) float64 { return r.JSEncoded / 1000 })})
		add(uiMeasure{ID: "1d", Name: "Total transfer of that Trace page", Unit: "KB", Limit: targetTotalBytes / 1000, Digits: 1,
			Runs: pageVals(P["trace-llm"], func(r pageRun) float64 { return r.TotalTransfer / 1000 })})
	}
	for _, p := range []struct{ key, id, name string }{
		{"search", "2a", "Search `/?since=6h` first rendered with data (rows in the DOM), cold"},
		{"llm", "2b", "LLM `/llm?since=6h` first rendered with data (by-model rows in the DOM), cold"},
		{"services", "2c", "Services `/services?since=6h` first rendered with data (RED rows in the DOM), cold"},
	} {
		if P[p.key] == nil {
			continue
		}
		add(uiMeasure{ID: p.id, Metric: p.key + "-render-ms", Name: p.name, Unit: "ms", Limit: targetRenderMs, Digits: 1, Runs: pageVals(P[p.key], func(r pageRun) float64 { return r.First })})
	}
	for _, p := range []struct{ key, id, name string }{
		{"search", "2d", "Search: every panel filled (histogram, facets)"},
		{"llm", "2e", "LLM: every panel filled (cards, 6 charts, tables, top sessions and users)"},
		{"services", "2f", "Services: every panel filled (heatmap, error groups, dependencies)"},
	} {
		if P[p.key] == nil {
			continue
		}
		add(uiMeasure{ID: p.id, Name: p.name, Unit: "ms", Digits: 1, Runs: pageVals(P[p.key], func(r pageRun) float64 { return r.Complete })})
	}
	if len(u.rec.Tail) > 0 || len(u.rec.TailErrs) > 0 {
		tv := func(f func(tailRun) float64) []float64 {
			var out []float64
			for _, r := range u.rec.Tail {
				out = append(out, f(r))
			}
			return out
		}
		add(uiMeasure{ID: "3a", Metric: "tail-p95-ms", Name: "Live tail: ingest 2xx to row in the DOM, p95 over 1,000 spans at 200/s", Unit: "ms", Limit: targetTailP95Ms, Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Lat.P95 })})
		add(uiMeasure{ID: "3b", Name: "Live tail: same, p50", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Lat.P50 })})
		add(uiMeasure{ID: "3c", Name: "Live tail: same, max", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Lat.Max })})
		add(uiMeasure{ID: "3d", Metric: "tail-frame-p95-ms", Name: "Live tail, 10,000 rows, streaming 200 spans/s for 20 s: frame time p95 (rAF intervals in whole 60 Hz refresh periods)", Unit: "ms", Limit: targetFrameP95Ms, Digits: 2, Runs: tv(func(r tailRun) float64 { return r.Idle.P95Refresh })})
		add(uiMeasure{ID: "3e", Name: "same: frame time p95, rAF intervals as measured (one refresh reads 16.5-16.8 ms)", Unit: "ms", Digits: 2, Runs: tv(func(r tailRun) float64 { return r.Idle.P95 })})
		add(uiMeasure{ID: "3f", Name: "same: frame time p50", Unit: "ms", Digits: 2, Runs: tv(func(r tailRun) float64 { return r.Idle.P50 })})
		add(uiMeasure{ID: "3g", Name: "same: frame time max", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Idle.Max })})
		add(uiMeasure{ID: "3h", Name: "same: frames longer than 16.7 ms (of about 1,200)", Unit: "frames", Digits: 0, Runs: tv(func(r tailRun) float64 { return float64(r.Idle.Over) })})
		add(uiMeasure{ID: "3i", Name: "same: main-thread work per frame, p95 (rAF callbacks to the end of its rendering)", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Idle.WorkP95 })})
		add(uiMeasure{ID: "3i1", Name: "same, during the latency phase (0 to 1,000 rows, 200 spans/s): main-thread work per frame, p95", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Few.WorkP95 })})
		add(uiMeasure{ID: "3i2", Name: "same list, no spans streamed (3 s): main-thread work per frame, p95 (the measure's floor)", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Still.WorkP95 })})
		add(uiMeasure{ID: "3j", Name: "same, while scrolling the list (10 s): frame time p95 (whole refresh periods)", Unit: "ms", Digits: 2, Runs: tv(func(r tailRun) float64 { return r.Scroll.P95Refresh })})
		add(uiMeasure{ID: "3k", Name: "same, while scrolling: frame time max", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Scroll.Max })})
		add(uiMeasure{ID: "3l", Name: "same, while scrolling: frames longer than 16.7 ms (of about 600)", Unit: "frames", Digits: 0, Runs: tv(func(r tailRun) float64 { return float64(r.Scroll.Over) })})
		add(uiMeasure{ID: "3m", Name: "same, while scrolling: main-thread work per frame, p95", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.Scroll.WorkP95 })})
		add(uiMeasure{ID: "3n", Name: "Live tail with 10,000 rows: ingest 2xx to row, p95 (spans of the idle frame window)", Unit: "ms", Digits: 1, Runs: tv(func(r tailRun) float64 { return r.LatRows.P95 })})
	}
	if P["trace-10k"] != nil {
		add(uiMeasure{ID: "4a", Metric: "trace10k-ms", Name: "A 10,000-span trace: navigation to waterfall rows in the DOM, cold", Unit: "ms", Limit: targetTrace10kMs, Digits: 1,
			Runs: pageVals(P["trace-10k"], func(r pageRun) float64 { return r.First })})
		add(uiMeasure{ID: "4b", Name: "same: its API answer (GET /api/v1/traces/{id}, Resource Timing start to end)", Unit: "ms", Digits: 1,
			Runs: pageVals(P["trace-10k"], func(r pageRun) float64 { return r.APIDur })})
		add(uiMeasure{ID: "4c", Name: "same: the page's own draw (tree, critical path, first rows: `main[data-render-ms]`)", Unit: "ms", Digits: 0,
			Runs: pageVals(P["trace-10k"], func(r pageRun) float64 { return r.DrawMs })})
	}
	j := u.rec.Journey
	if j.Value != "" {
		jv := func(ls []latStats, f func(latStats) float64) []float64 {
			var out []float64
			for _, l := range ls {
				out = append(out, f(l))
			}
			return out
		}
		add(uiMeasure{ID: "5a", Metric: "journey-p95-ms", Name: "Journey API, a key with 10,000 spans a day over 7 days (`since=7d`, default limit 500): warm p95", Unit: "ms", Limit: targetJourneyP95Ms, Digits: 1,
			Runs: jv(j.Rounds500, func(l latStats) float64 { return l.P95 })})
		add(uiMeasure{ID: "5b", Name: "same: warm p50", Unit: "ms", Digits: 1, Runs: jv(j.Rounds500, func(l latStats) float64 { return l.P50 })})
		add(uiMeasure{ID: "5c", Name: "same: the first request after ingest (one sample)", Unit: "ms", Digits: 1, Runs: nonZero(j.First500Ms)})
		add(uiMeasure{ID: "5d", Name: "same with `limit=10000`: warm p95", Unit: "ms", Digits: 1, Runs: jv(j.Rounds10k, func(l latStats) float64 { return l.P95 })})
		add(uiMeasure{ID: "5e", Name: "same with `limit=10000`: warm p50", Unit: "ms", Digits: 1, Runs: jv(j.Rounds10k, func(l latStats) float64 { return l.P50 })})
		add(uiMeasure{ID: "5f", Name: "same with `limit=10000`: its first request (one sample)", Unit: "ms", Digits: 1, Runs: nonZero(j.First10kMs)})
		if P["journeys"] != nil {
			add(uiMeasure{ID: "5g", Name: "Journeys page for that key: navigation to timeline items in the DOM, cold", Unit: "ms", Digits: 1,
				Runs: pageVals(P["journeys"], func(r pageRun) float64 { return r.First })})
		}
	}
	renumber(u.rec.Measures)
}

// renumber gives the measures of each group (the digit of their ID)
// consecutive letters, in order.
func renumber(ms []uiMeasure) {
	next := map[byte]byte{}
	for i := range ms {
		g := ms[i].ID[0]
		if next[g] == 0 {
			next[g] = 'a'
		}
		ms[i].ID = string(g) + string(next[g])
		next[g]++
	}
}

func nonZero(x float64) []float64 {
	if x == 0 {
		return nil
	}
	return []float64{x}
}

func (u *uiBench) metrics() map[string]float64 {
	out := map[string]float64{}
	for _, m := range u.rec.Measures {
		if m.Metric != "" {
			out[m.Metric] = m.spread().Median
		}
	}
	return out
}

func fmtNum(x float64, d int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	if d == 0 {
		s := strconv.FormatInt(int64(math.Round(x)), 10)
		if len(s) > 4 {
			var b strings.Builder
			for i, c := range s {
				if i > 0 && (len(s)-i)%3 == 0 {
					b.WriteByte(',')
				}
				b.WriteRune(c)
			}
			return b.String()
		}
		return s
	}
	return strconv.FormatFloat(x, 'f', d, 64)
}

func spreadCell(xs []float64, d int) string {
	sp := bench.SpreadOf(xs)
	if sp.N == 0 {
		return "n/a"
	}
	if sp.N == 1 {
		return fmtNum(sp.Median, d)
	}
	return fmt.Sprintf("%s (%s-%s)", fmtNum(sp.Median, d), fmtNum(sp.Min, d), fmtNum(sp.Max, d))
}

func (u *uiBench) markdown() string {
	var b strings.Builder
	rec := &u.rec
	m := rec.Machine
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("_Generated by `%s` with `RASTRO_BENCH_WRITE=1` (internal/ui/bench_test.go); edit outside the markers._\n\n", uiBenchCommand)
	busy := rec.Load.Max > float64(m.CPUs)/2
	w("- Machine: %s/%s, %d CPUs, %s\n", m.OS, m.Arch, m.CPUs, cmpStr(m.CPUModel, "-"))
	w("- Go %s; Chromium: %s (CDP: %s), headless, `/usr/bin/chromium`\n", m.GoVersion, cmpStr(rec.Chromium, "?"), cmpStr(rec.ChromiumCDP, "?"))
	w("- Commit: %s (`git describe --always --dirty`; `-dirty`: tracked files differ from the commit)\n", cmpStr(rec.Describe, m.Commit))
	w("- Taken %s, %.0f s; %d runs per measure", rec.Started.Format("2006-01-02 15:04 UTC"), rec.Seconds, rec.Runs)
	if len(rec.Knobs) > 0 {
		w("; knobs: `%s`", strings.Join(rec.Knobs, " "))
	}
	w("\n")
	w("- Before the run the 1-minute load average was %.2f (waited %s for it to fall below 0.5)\n", rec.LoadBefore, rec.QuietWaited.Round(time.Second))
	w("- 1-minute load average during the run: min %.2f, mean %.2f, max %.2f (%d samples, every 5 s) on %d CPUs", rec.Load.Min, rec.Load.Mean, rec.Load.Max, rec.Load.Samples, m.CPUs)
	if busy {
		w(" - **host busy: read levels with care** (the server, the harness and Chromium share the %d CPUs, so the suite itself loads the host)", m.CPUs)
	}
	w("\n")
	s := rec.Seed
	if s.Spans > 0 {
		w("- Store for measures 1-4: %s spans (%s of the `llm` corpus, %s of the `api` corpus, over the 6 h before the run), ingested at %s spans/s (%d 429s retried); every span counted by `/api/v1/stats` %.0f s after ingest; then %s: %d segments, %d spans in the write buffer\n",
			fmtNum(float64(s.Spans), 0), fmtNum(float64(s.LLM), 0), fmtNum(float64(s.API), 0), fmtNum(s.SpansPerSec, 0), s.Retried429, s.VisibleAfter,
			map[bool]string{true: fmt.Sprintf("sealed and compaction quiet %.0f s after ingest", s.SettledAfter), false: fmt.Sprintf("not settled after %.0f s (measured anyway)", s.SettledAfter)}[s.Settled],
			s.Segments, s.BufferSpans)
	}
	if j := rec.Journey; j.Value != "" {
		w("- Store for measure 5: the same store plus %s journey spans and %s background spans (%s in all), %d segments, %s\n",
			fmtNum(float64(j.Spans), 0), fmtNum(float64(j.Background), 0), fmtNum(float64(j.StoreSpans), 0), j.Segments,
			map[bool]string{true: fmt.Sprintf("sealed and compaction quiet %.0f s after ingest", j.SettledAfter), false: fmt.Sprintf("not settled after %.0f s (measured anyway)", j.SettledAfter)}[j.Settled])
	}
	w("\n| # | Measure | Median | Min | Max | Runs | Target | Result |\n|---|---|---:|---:|---:|---:|---|---|\n")
	for _, ms := range rec.Measures {
		sp := ms.spread()
		res := ms.result()
		if busy && (res == "PASS" || res == "FAIL") {
			res += fmt.Sprintf(" (host busy: load avg up to %.1f)", rec.Load.Max)
		}
		w("| %s | %s | %s %s | %s | %s | %d | %s | %s |\n", ms.ID, ms.Name, fmtNum(sp.Median, ms.Digits), ms.Unit, fmtNum(sp.Min, ms.Digits), fmtNum(sp.Max, ms.Digits), sp.N, ms.want(), res)
	}
	if len(rec.Failures) > 0 {
		w("\nFailures (runs that gave no number, or conditions that never held):\n\n")
		for _, f := range rec.Failures {
			w("- %s\n", strings.ReplaceAll(f, "|", "\\|"))
		}
	}

	// Pages: bytes and the render breakdown.
	if len(rec.PageOrder) > 0 {
		w("\n### Pages, cold (a new browser profile per load)\n\n")
		w("Medians over the runs (min-max). Bytes: KB = 1,000 bytes; \"gz\" is the encoded (gzipped) body, \"transfer\" adds the response headers. Times: ms from navigation start.\n\n")
		w("| Page | JS files | JS gz KB | CSS gz KB | Document KB | API KB | Total transfer KB | Key API call | API start | API end | Data rows in DOM | Next frame | Painted | Complete | Key API from Go, warm (ms) | Slowest API call (ms, in the page) | Slowest call of the last run, from Go, warm (ms) | Largest API answer (KB) |\n")
		w("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
		for _, k := range rec.PageOrder {
			p := rec.Pages[k]
			v := func(f func(pageRun) float64, d int) string { return spreadCell(pageVals(p, f), d) }
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Spec.title,
				v(func(r pageRun) float64 { return float64(r.JSFiles) }, 0), v(func(r pageRun) float64 { return r.JSEncoded / 1000 }, 1),
				v(func(r pageRun) float64 { return r.CSSEncoded / 1000 }, 1), v(func(r pageRun) float64 { return r.DocTransfer / 1000 }, 1),
				v(func(r pageRun) float64 { return r.APITransfer / 1000 }, 1), v(func(r pageRun) float64 { return r.TotalTransfer / 1000 }, 1),
				p.Spec.apiDesc, v(func(r pageRun) float64 { return r.APIStart }, 1), v(func(r pageRun) float64 { return r.APIEnd }, 1),
				v(func(r pageRun) float64 { return r.First }, 1), v(func(r pageRun) float64 { return r.FirstFrame }, 1),
				v(func(r pageRun) float64 { return r.FirstPainted }, 1), v(func(r pageRun) float64 { return r.Complete }, 1),
				spreadCell(p.GoAPI, 1), slowest(p), spreadCell(p.GoSlow, 1), largest(p))
		}
		w("\nDOM conditions (\"data rows\" / \"complete\"):\n\n")
		for _, k := range rec.PageOrder {
			p := rec.Pages[k]
			w("- %s: %s / %s. URL `%s`.\n", p.Spec.title, p.Spec.firstDesc, p.Spec.completeDesc, p.Spec.path)
		}
		w("\nPer run (data rows in the DOM, ms; run 1 first):\n\n")
		for _, k := range rec.PageOrder {
			p := rec.Pages[k]
			var xs []string
			for _, r := range p.Runs {
				xs = append(xs, fmtNum(r.First, 1))
			}
			w("- %s: %s\n", p.Spec.title, cmpStr(strings.Join(xs, ", "), "none"))
		}
		for _, k := range []string{"first", "trace-llm"} {
			p := rec.Pages[k]
			if p == nil || len(p.Runs) == 0 {
				continue
			}
			r := p.Runs[0]
			names := make([]string, 0, len(r.Files))
			for n := range r.Files {
				names = append(names, n)
			}
			slices.SortFunc(names, func(a, b string) int { return int(r.Files[b] - r.Files[a]) })
			var parts []string
			for _, n := range names {
				parts = append(parts, fmt.Sprintf("`%s` %.1f", n, r.Files[n]/1000))
			}
			w("\nFiles of %s (gzipped KB, run 1): document %.1f; %s.\n", p.Spec.title, r.DocEncoded/1000, strings.Join(parts, ", "))
		}
	}

	if len(rec.Tail) > 0 {
		w("\n### Live tail, per run\n\n")
		w("Frames: n intervals; p50 / p95 / max of the rAF intervals as measured; p95 in whole refresh periods; intervals > 16.7 ms; refresh periods missed in all; main-thread work per frame p50 / p95 / max and frames whose work exceeded 16.7 ms; Long Animation Frames (> 50 ms).\n\n")
		w("| Run | Latency p50 / p95 / max ms (n, missing) | Min (negative) | Ingest request p50 / p95 ms | Rows before the frame windows | Fill s | Latency phase (0-1,000 rows), 5 s | No spans, 3 s | Idle, 20 s | Scrolling, 10 s (scrolled to px) | Latency with 10,000 rows p50 / p95 / max ms (n, missing) | Clock offset ms (RTT) | Visibility |\n")
		w("|---:|---|---|---|---:|---:|---|---|---|---|---|---|---|\n")
		fr := func(f frameStats) string {
			return fmt.Sprintf("n %d; %.2f / %.2f / %.1f; p95 %.2f; > 16.7: %d; missed %d; work %.1f / %.1f / %.1f, > 16.7: %d; LoAF %d",
				f.N, f.P50, f.P95, f.Max, f.P95Refresh, f.Over, f.Missed, f.WorkP50, f.WorkP95, f.WorkMax, f.WorkOver, f.LoAF)
		}
		for i, r := range rec.Tail {
			w("| %d | %.1f / %.1f / %.1f (%d, %d) | %.1f (%.0f) | %.1f / %.1f | %d (+%d dropped) | %.1f | %s | %s | %s | %s (%.0f) | %.1f / %.1f / %.1f (%d, %d) | %.2f (%.2f) | %s |\n",
				i+1, r.Lat.P50, r.Lat.P95, r.Lat.Max, r.Lat.N, r.Lat.Missing, r.Lat.Min, r.Lat.Negatives, r.AckP50Ms, r.AckP95Ms, r.Rows, r.Dropped, r.FillSeconds,
				fr(r.Few), fr(r.Still), fr(r.Idle), fr(r.Scroll), r.ScrolledToPx,
				r.LatRows.P50, r.LatRows.P95, r.LatRows.Max, r.LatRows.N, r.LatRows.Missing, r.OffsetMs, r.RTTMs, r.Visibility)
		}
	}

	if j := rec.Journey; j.Value != "" && len(j.Rounds500) > 0 {
		w("\n### Journey API, per round (20 timed requests after 2 warm-ups)\n\n")
		w("First request: limit 500 %.1f ms (%d traces, %s bytes, truncated %v); limit 10000 %.1f ms (%d traces, %s bytes). ",
			j.First500Ms, j.Traces500, fmtNum(float64(j.Bytes500), 0), j.Truncated500, j.First10kMs, j.Traces10k, fmtNum(float64(j.Bytes10k), 0))
		w("The engine's part alone (its `SearchTraces`, in process, no HTTP or JSON; median of 5 after a warm-up): limit 500 %.1f ms, limit 10000 %.1f ms. Limit 10000 is timed in one round.\n\n", j.Engine500, j.Engine10k)
		w("| Round | limit 500: p50 / p95 / max ms | limit 10000: p50 / p95 / max ms |\n|---:|---|---|\n")
		for i := range j.Rounds500 {
			l := j.Rounds500[i]
			c := "-"
			if i < len(j.Rounds10k) {
				k := j.Rounds10k[i]
				c = fmt.Sprintf("%.1f / %.1f / %.1f", k.P50, k.P95, k.Max)
			}
			w("| %d | %.1f / %.1f / %.1f | %s |\n", i+1, l.P50, l.P95, l.Max, c)
		}
	}

	w("\n### Method\n\n")
	b.WriteString(strings.TrimSpace(uiMethod) + "\n")
	return b.String()
}

// slowest names the API call that most often took longest in p's runs,
// with the median of the slowest call's time.
func slowest(p *pageResult) string {
	count := map[string]int{}
	best := ""
	for _, r := range p.Runs {
		count[r.SlowAPI]++
		if best == "" || count[r.SlowAPI] > count[best] {
			best = r.SlowAPI
		}
	}
	if best == "" {
		return "-"
	}
	return fmt.Sprintf("%s: `%s` (slowest in %d of %d runs)", spreadCell(pageVals(p, func(r pageRun) float64 { return r.SlowAPIDur }), 1), best, count[best], len(p.Runs))
}

// largest names the largest API answer of p's last run.
func largest(p *pageResult) string {
	if len(p.Runs) == 0 || p.Runs[len(p.Runs)-1].BigAPI == "" {
		return "-"
	}
	r := p.Runs[len(p.Runs)-1]
	return fmt.Sprintf("%.1f: `%s`", r.BigAPIBytes/1000, r.BigAPI)
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

const uiMethod = `
**Setup.** One Go benchmark process runs the real server and engine with the UI mounted, wired as ` + "`rastro serve`" + ` wires them
(` + "`server.Options{UI: ui.Handler(), Prices: llm.DefaultPrices()}`" + `, engine defaults: wal durability, background compaction,
merges on a low-priority thread), on a loopback port and a temporary data directory, and drives Debian's Chromium over
the DevTools protocol (chromedp) with ` + "`--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars`" + `,
a 1280x800 viewport, and a new ` + "`--user-data-dir`" + ` (a new browser process, empty HTTP cache, no compiled-code cache) for every
cold load. After the browser starts the harness waits 1 s, so that its start-up work is over before the page's clock runs.
The server, the harness and Chromium share the machine's CPUs.

**Store.** Once per process: 1,000,000 spans, half of the ` + "`llm`" + ` corpus and half of the ` + "`api`" + ` corpus (` + "`bench.Generate`" + `,
seed 1), their start times over the 6 hours before the run, cut into batches of 1,000 (` + "`bench.Batches`" + `), encoded as OTLP
protobuf (` + "`bench.Prepare`" + `), the two corpora's batches interleaved, and sent to POST /v1/traces by 8 concurrent keep-alive
clients that retry a 429 after a backoff (` + "`bench.Load`" + ` with ` + "`Retry429`" + `). The harness then waits until GET /api/v1/stats
counts every span, and (at most 2 minutes) until the write buffer is sealed and the segment count has not changed for
10 s, so that no seal or merge runs under the measures. Measures 1 to 4 run against that store (measure 4 adds its
10,000-span trace and measure 3 its tail spans, about 15,000 per run, before measure 5).

**Cold page loads (measures 1, 2 and 4, and the Journeys page of 5).** A script added with ` + "`Page.addScriptToEvaluateOnNewDocument`" + ` runs in the page
before the app: a MutationObserver on the whole document checks the page's DOM conditions after every mutation and
records ` + "`performance.now()`" + ` (ms since navigation start: the document's time origin) the first time each holds; then the
time of the next ` + "`requestAnimationFrame`" + ` callback ("next frame") and of a task posted from it ("painted": that frame has
been rendered). The figure with the target is the first: the page's first data rows are in the DOM. Once the
conditions hold and no Resource Timing entry has been added for 1 s, the harness reads
` + "`performance.getEntriesByType('navigation')`" + ` and ` + "`('resource')`" + `. The key API call's start and end are its Resource Timing
` + "`startTime`" + ` and ` + "`responseEnd`" + `, so "data rows" minus "API end" is the page's own work after the data arrived (JSON
parse, building the DOM) and "API start" is the time to load the app and the page's module and issue the request.
After a page's runs the harness times the same API URL from Go (one warm-up, then 5 requests, median), and so the
slowest API call of the page's last run: in the page the calls run at once and share the CPUs, from Go one at a time. Pages are
loaded round-robin, rotated per round (round r starts at page r). Every run of a page is a cold browser; the server
is warm after the page's first run (its first run is the first time the server sees those queries; see "Per run").

**Measure 1, bytes.** On the first visit of ` + "`/`" + ` (Search, last hour; the default page) and of a Trace page (the largest:
the trace of an LLM span with messages, that span open, which loads the waterfall, the LLM conversation view and the
charts module): initial JavaScript is the sum of ` + "`encodedBodySize`" + ` (the gzipped body as sent: the UI serves its assets
gzipped) of every resource whose path ends in ` + "`.js`" + ` loaded by the time the page is complete and the network is quiet
(modulepreloads, the page module and its dynamic imports). Total transfer is the navigation entry's ` + "`transferSize`" + ` plus
every resource's ` + "`transferSize`" + ` (headers plus encoded body: document, scripts, stylesheet and the API's JSON answers,
which the server sends uncompressed). KB = 1,000 bytes. The favicon is fetched by the browser outside the page and is
not in Resource Timing.

**Measure 2, first render at 1M spans.** Search ` + "`/?since=6h`" + `, LLM ` + "`/llm?since=6h`" + ` and Services ` + "`/services?since=6h`" + `, 5 cold loads
each; "complete" (every panel filled) is reported without a target.

**Measure 3, live tail.** A fresh browser opens ` + "`/tail`" + ` (default rate cap, 1,000 rows/s) and waits for
` + "`window.__rastroTail.open`" + `. A script then installs a MutationObserver on ` + "`#tail-list`" + ` recording, for every added row, its
` + "`data-span-id`" + ` and ` + "`performance.timeOrigin + performance.now()`" + ` the first time that id appears (epoch ms, page clock), and a
requestAnimationFrame loop. Go sends 1,000 spans at 200/s, one span per POST /v1/spans request (native JSON), on a
fixed schedule (open loop: a slow answer does not delay the next request), and records ` + "`time.Now()`" + ` in epoch ms when each
request's 2xx answer arrives. Latency = page time minus Go time, corrected by the page-minus-Go clock offset (the
evaluation of ` + "`performance.timeOrigin + performance.now()`" + ` with the shortest round trip of 9, before and after; the offset
and round trip are in the per-run table). A row can appear before Go has read its answer (the tail publishes on
acknowledgement), so small negative latencies are possible and counted. Then the list is filled to 10,000 rows (40
spans per request, 800 spans/s, under the page's cap so nothing is dropped), and Go streams 200 spans/s for 20 s
while the rAF loop records the difference between consecutive rAF timestamps (frame start times): p50, p95, max, and
the intervals longer than 16.7 ms (one 60 Hz refresh; the page's timestamps are coarsened to 0.1 ms, so an on-time
frame reads 16.5-16.8 ms, and 0.3 ms of slack absorbs that). Because of that coarsening, a p95 of the raw intervals
reads 16.7-16.8 ms even when no frame is late, so the target is judged on the p95 of the intervals rounded to whole
refresh periods (16.67 ms: fewer than 5% of frames late; 33.33 ms: 5% or more skipped at least one refresh); the raw
p95 is shown next to it. Each frame's main-thread work is also timed: from the start of the harness's rAF callback
(the first of the frame) to a MessageChannel message posted from it, which runs once that frame's rendering (the
other rAF callbacks, among them the tail's own row update, then style, layout, paint) is done. Work under 16.7 ms with late frames means the
frames were late for want of CPU (or in the compositor), not because of the page's work. LoAF counts the Long
Animation Frames entries (> 50 ms). Before the 20 s window, 3 s with nothing streamed give the floor of these
figures (10,000 rows present, no new row); the same figures are also taken during the latency phase (0 to 1,000
rows). Then 10 s more while the rAF loop also scrolls the list down 30 px per frame
(1,800 px/s; the tail's own code also scrolls by a row per new row while the list is not at the top). The latency of the spans of the 20 s window (10,000 rows present, list at the top) is also
reported. 5 runs, a new browser each.

**Measure 4, a 10,000-span trace.** The browser tests' ` + "`wideTrace`" + ` (10,000 spans, four children per span, 7 services) is
sent once over POST /v1/spans; then 5 cold loads of ` + "`/traces/{id}`" + `, to ` + "`#span-count`" + ` reading "10000 spans" with waterfall
rows in the DOM (the waterfall is virtual: only the rows in view, plus a margin, exist). Its API call's time and ` + "`main[data-render-ms]`" + ` (the
trace page's own timing of its draw) split the total.

**Measure 5, journey.** 70,000 single-span traces carrying ` + "`user.id = journey-user-0001`" + ` (10,000 a day, evenly spread over
the 7 days before the run, about 2% errors, 4 services, 10 routes) plus 200,000 spans of the ` + "`canonical`" + ` corpus over the
same 7 days (100 other ` + "`user.id`" + ` values) are added to the store (same sender), then the harness waits as for the seed.
GET /api/v1/journey?key=user.id&value=journey-user-0001&since=7d is timed from Go (request to the last byte): the
first request after ingest (one sample), then 5 rounds of 2 warm-ups and 20 timed requests (p50/p95 per round;
the table gives the median, min and max of the rounds); then the same with ` + "`limit=10000`" + ` (one round: each request
takes over a second). Every answer's trace count is checked (500, or 10,000). The engine's part is timed alone too:
the same trace search the handler runs (` + "`SearchTraces`" + ` with ` + "`{ .user.id = \"journey-user-0001\" }`" + `, since 7d), called in
process, no HTTP, no JSON. The Journeys page for that key (which asks for ` + "`limit=200`" + `) is loaded cold 5 times, to
` + "`#journey-traces .tl-item`" + ` in the DOM.

**Targets** compare the median of the runs. Result "REPORT" rows have no target.
`

// ---- machine facts ----------------------------------------------------------

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return ""
	}
	d := strings.TrimSpace(string(out))
	if rev, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil && !strings.HasPrefix(d, strings.TrimSpace(string(rev))) {
		d += " (" + strings.TrimSpace(string(rev)) + ")"
	}
	return d
}

func chromiumVersion() string {
	out, err := exec.Command(chromiumPath, "--version").Output() // stderr (the wrapper's noise) is dropped
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func benchRepoRoot(b *testing.B) string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			b.Fatalf("no go.mod above %s", dir)
		}
	}
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
