package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestBenchSustainedEndToEnd runs the sustained scenario for real and small:
// `rastro bench ingest --only sustained` starts the real server and the real
// `rastro load` process; every span sent must be acknowledged and stored,
// and every figure the targets read must be recorded. The targets read NOT
// RUN at this size, with the figures shown.
func TestBenchSustainedEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "ingest", "--only", "sustained", "--runs", "1", "--spans", "3000",
		"--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench ingest --only sustained: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "ingest")
	if len(rec.Scenarios) != 1 {
		t.Fatalf("--only sustained ran %d scenarios, want 1", len(rec.Scenarios))
	}
	sc, ok := rec.Scenario(sustainedScenarioName)
	if !ok || sc.Status != "ok" {
		t.Fatalf("sustained not ok: %+v", sc)
	}
	if sc.Params["spans"] != "3000" || sc.Params["concurrency"] != "4" || sc.Params["protocol"] != "otlp-proto" {
		t.Errorf("params %v, want 3000 spans (--spans), 4 workers, otlp-proto", sc.Params)
	}
	for metric, want := range map[string]float64{"spans_accepted": 3000, "spans_stored": 3000, "status_429": 0} {
		if got := sc.Summary[metric]; got.N != 1 || got.Median != want {
			t.Errorf("%s = %+v, want %v", metric, got, want)
		}
	}
	if !(sc.Summary["spans_per_s"].Median > 0) || !(sc.Summary["wall_s"].Median > 0) {
		t.Errorf("no rate recorded: %+v", sc.Summary)
	}
	if runtime.GOOS == "linux" {
		// 3000 spans may take less than a 10 ms clock tick: the CPU
		// figure must be there, not above zero.
		if _, ok := sc.Summary["cpu_us_per_span"]; !ok || !(sc.Summary["peak_rss_mib"].Median > 0) {
			t.Errorf("server CPU per span or peak RSS not recorded: %+v", sc.Summary)
		}
	}
	var sustained []Target
	for _, tg := range rec.Targets {
		if strings.HasPrefix(tg.Name, "Sustained:") {
			sustained = append(sustained, tg)
		}
	}
	if len(sustained) != 3 {
		t.Fatalf("%d sustained targets, want 3: %+v", len(sustained), rec.Targets)
	}
	for _, tg := range sustained {
		if tg.Status != "NOT RUN" || !strings.Contains(tg.Got, "but 3,000 spans in batches of 1000") {
			t.Errorf("target %q at 3000 spans: %s %q, want NOT RUN naming the size", tg.Name, tg.Status, tg.Got)
		}
	}
	doc, err := os.ReadFile(filepath.Join(out, "ingest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| sustained | otlp-proto | /v1/traces | wal | true | 4 |", "Sustained run: 3,000 unique canonical spans",
		"| Spans stored (must equal those accepted) | 3,000 (3,000-3,000) |", "| Requests answered 429 (counted, not re-sent) | 0 (0-0) |"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("ingest.md lacks %q:\n%s", want, doc)
		}
	}
}

// TestSustainedRunRefusesWhatItCannotCount runs the sustained run against
// the real server with stand-in load processes that report what no real
// load did: acknowledged spans the server never stored, and failed
// batches, refuse the run; 429s are counted and refuse nothing. The load
// process gets the sustained command line.
func TestSustainedRunRefusesWhatItCannotCount(t *testing.T) {
	bin := builtRastro(t)
	argsFile := filepath.Join(t.TempDir(), "args")
	start := `echo "$@" > ` + argsFile + `; echo "` + LoadStartLine + ` 3000 spans in 3 requests" >&2; `
	run := func(result string) Result {
		t.Helper()
		env := &RunEnv{Config: Config{Binary: bin, Harness: fakeLoad(t, start+`echo '`+result+`'`), Batch: 1000, Seed: 7}, Dir: t.TempDir()}
		return runSustained(t.Context(), env, 3000)
	}

	// Acknowledged, never sent: the stored count (0) refuses the run.
	res := run(`{"requests": 3, "acked_requests": 3, "sent_spans": 3000, "accepted_spans": 3000, "spans_per_second": 1000}`)
	if len(res.Refusals) != 1 || !strings.Contains(res.Refusals[0], "stored count 0 differs from the 3000 spans acknowledged") {
		t.Errorf("spans acknowledged and not stored: refusals %q", res.Refusals)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"load ", "--protocol otlp-proto", "--corpus canonical", "--concurrency 4", "--batch 1000",
		"--spans 3000", "--seed 7", "--rate 0 ", "--keepalive=true", "--retry-429=false", "--nice 0", "--endpoint http://127.0.0.1:"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("load command line %q lacks %q", args, want)
		}
	}

	// Every batch answered 429 and not re-sent: nothing acknowledged,
	// nothing stored; counted, not refused.
	res = run(`{"requests": 3, "sent_spans": 3000, "accepted_spans": 0, "status_429": 3, "first_error": "429 Too Many Requests"}`)
	if len(res.Refusals) != 0 || res.Metrics["status_429"] != 3 || res.Metrics["spans_stored"] != 0 || res.Metrics["spans_per_s"] != 0 {
		t.Errorf("429s only: refusals %q, metrics %v; want counted, not refused", res.Refusals, res.Metrics)
	}

	// A batch failed with a 500 and one was sent short: refused for both.
	res = run(`{"requests": 2, "sent_spans": 2000, "errors": 1, "first_error": "POST /v1/traces: 500 Internal Server Error"}`)
	if got := strings.Join(res.Refusals, "; "); !strings.Contains(got, "1 of 2 batches failed with an error other than 429: first failure: POST /v1/traces: 500") ||
		!strings.Contains(got, "2000 of 3000 spans were sent") {
		t.Errorf("a failed batch: refusals %q", res.Refusals)
	}
}

func TestSustainedRefusals(t *testing.T) {
	clean := LoadResult{Requests: 3000, AckedRequests: 3000, SentSpans: 3_000_000, AcceptedSpans: 3_000_000}
	for _, c := range []struct {
		name   string
		load   func(*LoadResult)
		stored int64
		want   []string // substrings of the refusals, in order; none: the run counts
	}{
		{"clean", nil, 3_000_000, nil},
		{"429s counted", func(l *LoadResult) { l.Status429, l.AcceptedSpans = 12, 2_988_000 }, 2_988_000, nil},
		{"429s and a short store", func(l *LoadResult) { l.Status429, l.AcceptedSpans = 12, 2_988_000 }, 2_987_999, []string{"stored count 2987999 differs from the 2988000"}},
		{"more stored than acknowledged", nil, 3_000_001, []string{"stored count 3000001 differs"}},
		{"store unreadable", nil, -1, []string{"could not be read"}},
		{"error", func(l *LoadResult) { l.Errors, l.AcceptedSpans, l.FirstError = 1, 2_999_000, "boom" }, 2_999_000, []string{"1 of 3000 batches failed with an error other than 429: first failure: boom"}},
		{"shed", func(l *LoadResult) { l.Shed, l.SentSpans, l.AcceptedSpans = 1, 2_999_000, 2_999_000 }, 2_999_000, []string{"shed 1 connections", "2999000 of 3000000 spans were sent"}},
		{"partial success", func(l *LoadResult) { l.RejectedSpans, l.AcceptedSpans = 5, 2_999_995 }, 2_999_995, []string{"rejected 5 spans as partial success"}},
	} {
		l := clean
		if c.load != nil {
			c.load(&l)
		}
		got := sustainedRefusals(RunFacts{Load: l, Expected: 3_000_000, Stored: c.stored})
		if len(got) != len(c.want) {
			t.Errorf("%s: refusals %q, want %d", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: refusal %q lacks %q", c.name, got[i], w)
			}
		}
	}
}

func TestSustainedTargets(t *testing.T) {
	rec := func(spans, batch int, status string, rate, max429, rss float64) *Record {
		one := func(v float64) Spread { return Spread{Median: v, Min: v, Max: v, N: 1} }
		sr := ScenarioRecord{Name: sustainedScenarioName, Status: status,
			Params: map[string]string{"protocol": "otlp-proto", "durability": "wal", "keepalive": "true", "spans": strconv.Itoa(spans)}}
		if status == "ok" {
			sr.Summary = map[string]Spread{"spans_per_s": one(rate), "status_429": {Median: 0, Max: max429, N: 3}, "peak_rss_mib": one(rss)}
		} else {
			sr.Reasons = []string{"round 1: stored count 1 differs from the 2 spans acknowledged"}
		}
		return &Record{Batch: batch, Scenarios: []ScenarioRecord{sr}}
	}
	for _, c := range []struct {
		name string
		rec  *Record
		want string
	}{
		{"all met", rec(SustainedSpans, 1000, "ok", 300_000, 0, 256), "PASS,PASS,PASS"},
		{"slow", rec(SustainedSpans, 1000, "ok", 299_999, 0, 200), "FAIL,PASS,PASS"},
		{"a 429 in one run", rec(SustainedSpans, 1000, "ok", 400_000, 1, 200), "PASS,FAIL,PASS"},
		{"rss over", rec(SustainedSpans, 1000, "ok", 400_000, 0, 256.1), "PASS,PASS,FAIL"},
		{"refused", rec(SustainedSpans, 1000, "refused", 0, 0, 0), "FAIL,FAIL,FAIL"},
		{"another size", rec(3000, 1000, "ok", 400_000, 0, 200), "NOT RUN,NOT RUN,NOT RUN"},
		{"another batch", rec(SustainedSpans, 500, "ok", 400_000, 0, 200), "NOT RUN,NOT RUN,NOT RUN"},
		{"not run", &Record{Batch: 1000}, "NOT RUN,NOT RUN,NOT RUN"},
	} {
		if got := targetStatuses(sustainedTargets(c.rec)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if got := sustainedTargets(rec(SustainedSpans, 1000, "ok", 400_000, 2, 200))[1].Got; got != "2 in the worst run" {
		t.Errorf("429 target shows %q", got)
	}
	// The sustained row is not a candidate for the short-run target.
	r := rec(SustainedSpans, 1000, "ok", 900_000, 0, 200)
	if tg := ingestTargets(r)[0]; tg.Status != "NOT RUN" {
		t.Errorf("the short-run ingest target took the sustained row: %+v", tg)
	}
	if d := ingestDetail(r); !strings.Contains(d, "Sustained run: 3,000,000 unique canonical spans") || !strings.Contains(d, "| Spans/s accepted | 900,000 (900,000-900,000) |") {
		t.Errorf("detail:\n%s", d)
	}
	if d := sustainedDetail(rec(SustainedSpans, 1000, "refused", 0, 0, 0)); !strings.Contains(d, "was refused") || strings.Contains(d, "| Spans") {
		t.Errorf("detail of a refused run:\n%s", d)
	}
}
