package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "overload",
		Summary:      "overload: twice the saturation rate for 60 s, one project flooding beside a quiet one",
		DefaultSpans: 1_000_000,
		Plan:         planOverload,
		Method: `Each run starts the real ` + "`rastro serve`" + ` (wal durability, defaults) on a fresh data directory and first
measures its saturation rate S on that protocol: a closed loop of 4 workers sending 1000-span batches of the canonical
corpus for 15 s into a calibration project. Then, for 60 s and at the same time, the *noisy* project offers 2 x S
spans/s and the *quiet* project 5% of S (at least 1,000 spans/s), each as an open loop (batch i is due at start +
spans before it / rate; 32 workers for the noisy project, 2 for the quiet one). The issue says "a closed loop at 2x
the saturation rate"; a closed loop has no rate, so the offered load is an open loop at that rate. Every load (the
calibration, the noisy and the quiet project) is a ` + "`rastro load`" + ` process of its own at nice 10 (` + "`--load-nice`" + `; the
nice read from its threads is recorded): it stands for senders on other machines, so the two CPUs go first to the
server. The noisy and quiet processes generate their corpora first and start sending together. Both loop over their
corpus (` + "`--spans`" + ` spans of the noisy project, a tenth for the quiet one); a re-sent span replaces its earlier copy.
Accepted spans/s counts acknowledged spans over the 60 s; "other errors" is every answer that is neither 2xx nor 429
(gRPC: OK nor RESOURCE_EXHAUSTED) plus connections the server shed. Latency is over acknowledged requests only, two
ways: from each batch's due time ("due": what a sender on a schedule sees, the generator's own backlog included; the
target is on this one) and from the moment the batch was sent ("send": the server's answer time). The detail table
gives the sends that started late and by how much, the requests due in the window that a load had not sent when it
ended (each load stops at the end of the 60 s on the wall clock; its backlog then is counted, not sent), the requests the engine held while its write buffers were two
seals deep (` + "`rastro_ingest_paced_total`" + `, at most 1 s each) and the 429s by the server's reason
(` + "`rastro_ingest_rejected_total`" + `), both over the 60 s. Peak RSS is the server's VmHWM over the 60 s (reset just
before). Afterwards every batch a load process reported acknowledged (` + "`rastro load --acked-file`" + `) is checked: one of
its traces is read back by id from its project and must hold every span of that trace the batch carried. Figures are
medians of the runs, with min-max. ` + "`--ingest-for`" + ` shortens the 60 s (the calibration is then a quarter of it, at most
15 s).`,
		Columns: []Column{
			{Title: "Protocol", Param: "protocol"},
			{Title: "Saturation spans/s", Metric: "saturation_spans_per_s", Spread: true},
			{Title: "Accepted spans/s (all)", Metric: "accepted_spans_per_s", Spread: true},
			{Title: "Accepted / S", Metric: "accepted_ratio", Digits: 2},
			{Title: "429s", Metric: "status_429"},
			{Title: "Other errors", Metric: "other_errors"},
			{Title: "p99 ms noisy (due)", Metric: "noisy_p99_ms", Digits: 1},
			{Title: "p99 ms noisy (send)", Metric: "noisy_send_p99_ms", Digits: 1},
			{Title: "p99 ms quiet (due)", Metric: "quiet_p99_ms", Digits: 1},
			{Title: "p99 ms quiet (send)", Metric: "quiet_send_p99_ms", Digits: 1},
			{Title: "Quiet kept", Metric: "quiet_kept", Digits: 3},
			{Title: "Peak RSS MiB", Metric: "peak_rss_mib", Digits: 1},
			{Title: "Batches verified", Metric: "verified_batches"},
		},
		Targets: overloadTargets,
		Detail:  overloadDetail,
	})
}

// Overload targets of issue 18.
const (
	overloadMinAcceptedRatio = 0.90
	overloadMaxP99Ms         = 100
	overloadMaxPeakRSSMiB    = 512
	overloadMinQuietKept     = 0.95
)

// overloadProject is one project's corpus in an overload run: how its load
// process generates it, and what each of its batches must leave stored.
type overloadProject struct {
	name   string
	corpus CorpusOptions
	traces []overloadCheck // per batch: a trace it carries and its span ids there
}

type overloadCheck struct {
	trace model.TraceID
	spans []model.SpanID
}

// newOverloadProject generates the corpus the project's load process will
// generate again, to keep what each batch must leave stored.
func newOverloadProject(name string, seed uint64, n, batch int) (*overloadProject, error) {
	o := CorpusOptions{Seed: seed, Spans: n, Start: time.Now().Add(-50 * time.Minute).Truncate(time.Minute), Window: 40 * time.Minute}
	spans, err := Generate(CorpusCanonical, o)
	if err != nil {
		return nil, err
	}
	batches := Batches(spans, batch)
	op := &overloadProject{name: name, corpus: o, traces: make([]overloadCheck, len(batches))}
	for i, b := range batches {
		c := overloadCheck{trace: b[len(b)/2].TraceID}
		for _, s := range b {
			if s.TraceID == c.trace {
				c.spans = append(c.spans, s.SpanID)
			}
		}
		op.traces[i] = c
	}
	return op, nil
}

// overloadDuration is the overload window, and overloadCalibration the
// saturation measurement's, unless --ingest-for shortens them.
const (
	overloadDuration    = 60 * time.Second
	overloadCalibration = 15 * time.Second
)

// overloadPlan is what every overload run shares.
type overloadPlan struct {
	noisy, quiet        *overloadProject
	window, calibration time.Duration
	batch, nice         int
}

func planOverload(ctx context.Context, cfg Config) ([]Scenario, error) {
	if cfg.LoadNice < 0 || cfg.LoadNice > 19 {
		return nil, fmt.Errorf("overload: --load-nice must be 0-19, got %d", cfg.LoadNice)
	}
	pl := &overloadPlan{window: overloadDuration, calibration: overloadCalibration, batch: cfg.Batch, nice: cfg.LoadNice}
	if cfg.IngestFor > 0 {
		pl.window = cfg.IngestFor
		pl.calibration = min(overloadCalibration, cfg.IngestFor/4)
	}
	var err error
	if pl.noisy, err = newOverloadProject("noisy", cfg.Seed, cfg.Spans, cfg.Batch); err != nil {
		return nil, err
	}
	if pl.quiet, err = newOverloadProject("quiet", cfg.Seed+1, max(cfg.Spans/10, cfg.Batch), cfg.Batch); err != nil {
		return nil, err
	}
	var out []Scenario
	for _, p := range []Protocol{ProtoOTLPProto, ProtoOTLPGRPC} {
		out = append(out, Scenario{
			Name: "overload-" + string(p),
			Params: map[string]string{"protocol": string(p), "window": pl.window.String(), "calibration": pl.calibration.String(),
				"load_nice": strconv.Itoa(cfg.LoadNice)},
			Run: func(ctx context.Context, env *RunEnv) Result {
				return runOverload(ctx, env, p, pl)
			},
		})
	}
	return out, nil
}

// overloadReasons are the reasons of rastro_ingest_rejected_total the
// detail table names, with their titles; other reasons are summed.
var overloadReasons = []struct{ reason, title string }{
	{"buffer_full", "429 buffer full (the write buffers at --max-buffer-bytes)"},
	{"overloaded", "429 in-flight bytes (--max-inflight-bytes)"},
	{"project_buffer_share", "429 project's buffer share (--project-buffer-share)"},
	{"project_rate", "429 project rate (--project-rate)"},
	{"ingest_busy", "429 requests storing at once (--max-concurrent-ingest)"},
	{"project_ingest_busy", "429 project's part of the requests storing at once (3/4 of --max-concurrent-ingest)"},
	{"project_flood", "429 project flooding while the buffers are two seals deep (not held)"},
}

// overloadCounters reads the counters the record keeps from a scrape: the
// requests the engine paced (absent when the server has no such counter)
// and the ingest requests rejected, by reason.
func overloadCounters(m Metrics) map[string]float64 {
	out := map[string]float64{}
	if n, ok := m.Sum("rastro_ingest_paced_total"); ok {
		out["paced_requests"] = n
	}
	for _, x := range m {
		if x.Name == "rastro_ingest_rejected_total" {
			out["rejected_"+x.Labels["reason"]] += x.Value
		}
	}
	return out
}

func runOverload(ctx context.Context, env *RunEnv, p Protocol, pl *overloadPlan) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: filepath.Join(env.Dir, "data"), Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	lctx, stopLoads := context.WithCancel(ctx) // ends any load process a refusal leaves running
	defer stopLoads()
	endpoint := srv.HTTPURL()
	if p == ProtoOTLPGRPC {
		endpoint = srv.GRPCAddr
	}
	load := func(proj *overloadProject, o LoadOptions, hold bool, acked string) LoadProcess {
		o.Endpoint, o.Protocol, o.KeepAlive, o.Loop = endpoint, p, true, true
		return LoadProcess{Binary: env.Harness, Corpus: CorpusCanonical, Options: proj.corpus, Batch: pl.batch, Nice: pl.nice,
			Load: o, Hold: hold, AckedFile: acked}
	}
	cal, err := StartLoadProcess(lctx, load(pl.noisy, LoadOptions{Concurrency: 4, Duration: pl.calibration, Project: "calibration"}, false, ""))
	if err != nil {
		return refused("calibration load: %v", err)
	}
	lowestNice := cal.Nice
	cr, err := cal.Wait()
	if err != nil {
		return refused("calibration load: %v", err)
	}
	sat := cr.SpansPerSecond
	if sat <= 0 {
		return refused("calibration accepted nothing: %d requests, 429s %d, errors %d (%s)", cr.Requests, cr.Status429, cr.Errors, cr.FirstError)
	}
	quietRate := max(sat*0.05, 1000)

	// Both generators generate their corpus, held; then both start.
	type side struct {
		proj  *overloadProject
		gen   *RunningLoad
		acked string
		res   LoadResult
		err   error
	}
	sides := []*side{{proj: pl.noisy}, {proj: pl.quiet}}
	for i, sd := range sides {
		rate, conc := 2*sat, 32
		if i == 1 {
			rate, conc = quietRate, 2
		}
		sd.acked = filepath.Join(env.Dir, sd.proj.name+".acked")
		sd.gen, err = StartLoadProcess(lctx, load(sd.proj, LoadOptions{Concurrency: conc, Rate: rate, Duration: pl.window,
			Project: sd.proj.name, Timeout: 10 * time.Second}, true, sd.acked))
		if err != nil {
			return refused("%s load: %v", sd.proj.name, err)
		}
		if sd.gen.Batches != len(sd.proj.traces) {
			return refused("%s load: the process cut its corpus into %d batches, the harness into %d", sd.proj.name, sd.gen.Batches, len(sd.proj.traces))
		}
	}
	before, err := srv.Metrics(ctx)
	if err != nil {
		return refused("%v", err)
	}
	pid := srv.cmd.Process.Pid
	rssErr := resetPeakRSS(pid)
	for _, sd := range sides {
		if err := sd.gen.Release(); err != nil {
			return refused("%s load: %v", sd.proj.name, err)
		}
	}
	for _, sd := range sides {
		sd.res, sd.err = sd.gen.Wait()
		lowestNice = min(lowestNice, sd.gen.Nice)
	}
	mem, memErr := readProcMemory(pid)
	after, aerr := srv.Metrics(ctx)
	for _, sd := range sides {
		if sd.err != nil {
			return refused("%s load: %v", sd.proj.name, sd.err)
		}
	}
	if aerr != nil {
		return refused("%v", aerr)
	}
	nr, qr := sides[0].res, sides[1].res
	window := pl.window.Seconds()
	res := Result{Metrics: map[string]float64{
		"saturation_spans_per_s": sat,
		"offered_spans_per_s":    2*sat + quietRate,
		"accepted_spans_per_s":   float64(nr.AcceptedSpans+qr.AcceptedSpans) / window,
		"accepted_ratio":         float64(nr.AcceptedSpans+qr.AcceptedSpans) / window / sat,
		"status_429":             float64(nr.Status429 + qr.Status429),
		"other_errors":           float64(nr.Errors + nr.Shed + qr.Errors + qr.Shed),
		"noisy_p99_ms":           nr.AckedLatency.P99,
		"quiet_p99_ms":           qr.AckedLatency.P99,
		"noisy_send_p99_ms":      nr.AckedSendLatency.P99,
		"quiet_send_p99_ms":      qr.AckedSendLatency.P99,
		"noisy_p50_ms":           nr.AckedLatency.P50,
		"noisy_send_p50_ms":      nr.AckedSendLatency.P50,
		"quiet_requested":        quietRate,
		"quiet_kept":             float64(qr.AcceptedSpans) / window / quietRate,
		"noisy_requests":         float64(nr.Requests),
		"quiet_requests":         float64(qr.Requests),
		"noisy_late_sends":       float64(nr.LateSends),
		"quiet_late_sends":       float64(qr.LateSends),
		"late_sends":             float64(nr.LateSends + qr.LateSends),
		"noisy_send_lag_p99_ms":  nr.SendLag.P99,
		"quiet_send_lag_p99_ms":  qr.SendLag.P99,
		"noisy_unsent":           float64(nr.Unsent),
		"quiet_unsent":           float64(qr.Unsent),
		"load_nice":              float64(lowestNice),
	}}
	if rssErr == nil && memErr == nil {
		res.Metrics["peak_rss_mib"] = float64(mem.HWM) / mib
	}
	// The server's own account of the window: requests paced, 429s by reason.
	c0, c1 := overloadCounters(before), overloadCounters(after)
	if n, ok := c1["paced_requests"]; ok {
		res.Metrics["paced_requests"] = n - c0["paced_requests"]
	}
	named := map[string]bool{}
	for _, r := range overloadReasons {
		named["rejected_"+r.reason] = true
		res.Metrics["rejected_"+r.reason] = c1["rejected_"+r.reason] - c0["rejected_"+r.reason]
	}
	res.Metrics["rejected_other"] = 0
	for k, v := range c1 {
		if strings.HasPrefix(k, "rejected_") && !named[k] {
			res.Metrics["rejected_other"] += v - c0[k]
		}
	}
	if n := nr.Errors + nr.Shed + qr.Errors + qr.Shed; n > 0 {
		res.Refusals = append(res.Refusals, fmt.Sprintf("%d answers other than 2xx and 429 (first: %s%s)", n, nr.FirstError, qr.FirstError))
	}

	// Every batch a load process reported acknowledged is stored: one trace
	// of each, read back.
	acked, verified := 0, 0
	for _, sd := range sides {
		sends, err := ReadAckedFile(sd.acked)
		if err != nil {
			res.Refusals = append(res.Refusals, fmt.Sprintf("%s load: %v", sd.proj.name, err))
			continue
		}
		if len(sends) != sd.res.AckedRequests {
			res.Refusals = append(res.Refusals, fmt.Sprintf("%s load: %d acknowledged requests listed, %d counted", sd.proj.name, len(sends), sd.res.AckedRequests))
		}
		batches := map[int]bool{}
		for _, n := range sends {
			batches[n%len(sd.proj.traces)] = true
		}
		acked += len(batches)
		for _, b := range slices.Sorted(maps.Keys(batches)) {
			if err := checkOverloadTrace(ctx, srv, sd.proj.name, sd.proj.traces[b]); err != nil {
				res.Refusals = append(res.Refusals, fmt.Sprintf("project %s, acknowledged batch %d: %v", sd.proj.name, b, err))
				break
			}
			verified++
		}
	}
	res.Metrics["acked_batches"] = float64(acked)
	res.Metrics["verified_batches"] = float64(verified)
	if err := srv.Stop(60 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	return res
}

// checkOverloadTrace reads a trace from a project and requires the spans.
func checkOverloadTrace(ctx context.Context, srv *Server, project string, c overloadCheck) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.HTTPURL()+"/api/v1/traces/"+c.trace.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Scope-OrgID", project)
	resp, err := srv.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET trace %s: status %d", c.trace, resp.StatusCode)
	}
	var body struct {
		Spans []struct {
			SpanID string `json:"span_id"`
		} `json:"spans"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET trace %s: %w", c.trace, err)
	}
	have := map[string]bool{}
	for _, s := range body.Spans {
		have[s.SpanID] = true
	}
	for _, id := range c.spans {
		if !have[id.String()] {
			return fmt.Errorf("trace %s lacks acknowledged span %s", c.trace, id)
		}
	}
	return nil
}

func overloadTargets(rec *Record) []Target {
	var out []Target
	for _, sr := range rec.Scenarios {
		get := func(m string) float64 { return rec.median(sr.Name, m) }
		check := func(name, want string, got float64, digits int, ok bool) {
			t := Target{Name: sr.Name + ": " + name, Want: want, Got: num(got, digits), Status: "FAIL"}
			switch {
			case math.IsNaN(got):
				t.Got = "every run refused"
			case ok:
				t.Status = "PASS"
			}
			out = append(out, withBusyNote(rec, t))
		}
		check("answers other than 2xx and 429", "0", get("other_errors"), 0, get("other_errors") == 0)
		check("accepted throughput / saturation", ">= "+num(overloadMinAcceptedRatio, 2), get("accepted_ratio"), 2, get("accepted_ratio") >= overloadMinAcceptedRatio)
		p99 := max(get("noisy_p99_ms"), get("quiet_p99_ms"))
		check("p99 latency of accepted requests from the due time (ms)", "< "+strconv.Itoa(overloadMaxP99Ms), p99, 1, p99 < overloadMaxP99Ms)
		send := Target{Name: sr.Name + ": p99 latency of accepted requests from the send (ms; the server's answer time)", Want: "reported",
			Got: num(max(get("noisy_send_p99_ms"), get("quiet_send_p99_ms")), 1), Status: "REPORT"}
		if sr.Status != "ok" {
			send.Got = "every run refused"
		}
		out = append(out, send)
		if rss := get("peak_rss_mib"); !math.IsNaN(rss) || sr.Status != "ok" {
			check("peak RSS (MiB)", "< "+strconv.Itoa(overloadMaxPeakRSSMiB), rss, 1, rss < overloadMaxPeakRSSMiB)
		}
		check("quiet project's accepted share of its rate", ">= "+num(overloadMinQuietKept, 2), get("quiet_kept"), 3, get("quiet_kept") >= overloadMinQuietKept)
	}
	return out
}

// overloadDetail is the table under the overload record: the generators'
// timeliness and what the server did with the requests it did not accept
// at once, per scenario.
func overloadDetail(rec *Record) string {
	// cell is a metric's median (min-max) across runs.
	cell := func(sr ScenarioRecord, metric string, digits int) string {
		sp, ok := sr.Summary[metric]
		switch {
		case sr.Status != "ok":
			return sr.Status
		case !ok:
			return "n/a"
		case sp.Min == sp.Max:
			return num(sp.Median, digits)
		}
		return fmt.Sprintf("%s (%s-%s)", num(sp.Median, digits), num(sp.Min, digits), num(sp.Max, digits))
	}
	type row struct {
		title   string
		metrics []string // shown as a / b when two
		digits  int
	}
	rows := []row{
		{"Nice of the load processes (lowest read from their threads)", []string{"load_nice"}, 0},
		{"Noisy requests sent", []string{"noisy_requests"}, 0},
		{"Noisy sends started late (> 1 ms after due)", []string{"noisy_late_sends"}, 0},
		{"Noisy send lag p99 ms (send time - due time)", []string{"noisy_send_lag_p99_ms"}, 1},
		{"Noisy requests due in the window but never sent (the backlog at its end)", []string{"noisy_unsent"}, 0},
		{"Noisy p50 ms from the due time / from the send", []string{"noisy_p50_ms", "noisy_send_p50_ms"}, 1},
		{"Quiet requests sent", []string{"quiet_requests"}, 0},
		{"Quiet sends started late", []string{"quiet_late_sends"}, 0},
		{"Quiet send lag p99 ms", []string{"quiet_send_lag_p99_ms"}, 1},
		{"Quiet requests never sent", []string{"quiet_unsent"}, 0},
		{"Requests the engine paced (held up to 1 s, buffers two seals deep)", []string{"paced_requests"}, 0},
	}
	for _, r := range overloadReasons {
		rows = append(rows, row{r.title, []string{"rejected_" + r.reason}, 0})
	}
	rows = append(rows, row{"Rejected for other reasons", []string{"rejected_other"}, 0},
		row{"Batches acknowledged (distinct) / read back", []string{"acked_batches", "verified_batches"}, 0})

	var b strings.Builder
	b.WriteString("The generators, and the server's account of the overload window (`/metrics` before and after it); medians across runs (min-max).\n\n|  |")
	for _, sr := range rec.Scenarios {
		b.WriteString(" " + sr.Name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(rec.Scenarios)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + r.title + " |")
		for _, sr := range rec.Scenarios {
			var cs []string
			for _, m := range r.metrics {
				cs = append(cs, cell(sr, m, r.digits))
			}
			b.WriteString(" " + strings.Join(cs, " / ") + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
