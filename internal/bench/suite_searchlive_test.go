package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAbsentUserIDsAreAbsent: no value the suite asks for as absent is
// carried by any span of the canonical corpus, and the list holds each kind
// of near miss the suite promises (same prefix, a digit more, cut short,
// upper case, a fullwidth digit).
func TestAbsentUserIDsAreAbsent(t *testing.T) {
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: 1, Spans: 20_000, Start: time.Unix(1_700_000_000, 0), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, s := range spans {
		if v, ok := s.Attr("user.id"); ok {
			present[v.Str] = true
		}
	}
	if len(present) != len(CanonicalUsers()) {
		t.Fatalf("corpus carries %d user.id values, CanonicalUsers lists %d", len(present), len(CanonicalUsers()))
	}
	absent := AbsentUserIDs(CanonicalUsers())
	kinds := map[string]int{}
	for _, v := range absent {
		if present[v] {
			t.Errorf("%q is listed as absent and is carried by spans", v)
		}
		kinds[AbsentClass(v)]++
	}
	for v, want := range map[string]string{"u-100": "number", "u-0420": "longer", "u-04": "shorter", "U-042": "upper", "u-04\uff12": "fullwidth"} {
		if got := AbsentClass(v); got != want {
			t.Errorf("AbsentClass(%q) = %q, want %q", v, got, want)
		}
	}
	for _, c := range absentClasses {
		if k := c.name; kinds[k] == 0 {
			t.Errorf("no absent value of kind %q among %q", k, absent)
		}
	}
}

// TestBenchSearchLiveEndToEnd runs `rastro bench search-live` for real,
// tiny and short: the real server is preloaded, restarted, ingests at a
// fixed rate while one client queries, then answers quietly; every answer
// is checked by the suite. It asserts that the harness works and records
// every figure, never how fast anything is.
func TestBenchSearchLiveEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "search-live", "--runs", "1", "--spans", "3000", "--samples", "100",
		"--rate", "4000", "--ingest-for", "2s", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench search-live: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "search-live")
	sc, ok := rec.Scenario(searchLiveScenario)
	if !ok || sc.Status != "ok" {
		t.Fatalf("%s not ok: %+v", searchLiveScenario, sc)
	}
	if v := sc.Summary["live_target_spans_per_s"].Median; v != 4000 {
		t.Errorf("live target %v spans/s, want the --rate 4000", v)
	}
	// The live ingest ran in a process of its own at the default nice 10,
	// as read from its threads.
	if v := sc.Summary["live_load_nice"].Median; v != 10 {
		t.Errorf("the load process ran at nice %v, want 10", v)
	}
	if v := sc.Summary["live_accepted_spans"].Median; v < 4000 {
		t.Errorf("%v spans accepted during a 2 s ingest at 4000 spans/s", v)
	}
	for _, k := range liveKinds {
		if n := sc.Summary["quiet_"+k.name+"_n"].Median; n != 100 {
			t.Errorf("quiet %s: %v timed queries, want 100", k.name, n)
		}
		if n := sc.Summary["settled_"+k.name+"_n"].Median; n != 100 {
			t.Errorf("settled %s: %v timed queries, want 100", k.name, n)
		}
		if n := sc.Summary["live_"+k.name+"_n"].Median; !(n >= 1) {
			t.Errorf("during ingest %s: %v timed queries, want some", k.name, n)
		}
		for _, ph := range []string{"quiet", "live", "settled"} {
			for _, m := range []string{"p95_ms", "server_p95_ms"} {
				if v := sc.Summary[ph+"_"+k.name+"_"+m].Median; !(v > 0) {
					t.Errorf("%s_%s_%s = %v, want a positive time", ph, k.name, m, v)
				}
			}
		}
	}
	if _, ok := sc.Summary["quiet_buffer_spans_start"]; !ok {
		t.Error("the buffer's spans at the start of the quiet phase were not recorded")
	}
	if len(rec.Targets) != 19 {
		t.Errorf("%d targets, want 19: %+v", len(rec.Targets), rec.Targets)
	}
	var classes float64
	for _, c := range absentClasses {
		classes += sc.Summary["quiet_absent_"+c.name+"_n"].Median
	}
	if classes != 100 {
		t.Errorf("absent values by kind add up to %v quiet queries, want 100", classes)
	}
	for _, tg := range rec.Targets {
		if tg.Status != "PASS" && tg.Status != "FAIL" && tg.Status != "REPORT" || strings.Contains(tg.Got, "NaN") {
			t.Errorf("target %q: status %q", tg.Name, tg.Status)
		}
	}
	doc, err := os.ReadFile(filepath.Join(out, "search-live.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"| absent user.id value | during ingest |", "| trace by id | quiet, after the ingest |", "server p95", "| a present value upper-cased | during ingest |"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("search-live.md lacks %q:\n%s", w, doc)
		}
	}
	if strings.Contains(string(doc), "NaN") {
		t.Errorf("search-live.md shows NaN:\n%s", doc)
	}
}

// TestSearchLiveTargetsOfARefusedRecord: a refused run fails every target
// instead of reporting a number, and the detail table shows n/a.
func TestSearchLiveTargetsOfARefusedRecord(t *testing.T) {
	rec := &Record{Scenarios: []ScenarioRecord{{Name: searchLiveScenario, Status: "refused"}}}
	for _, tg := range searchLiveTargets(rec) {
		if tg.Status != "FAIL" {
			t.Errorf("%q: %s, want FAIL", tg.Name, tg.Status)
		}
	}
	if d := searchLiveDetail(rec); !strings.Contains(d, "n/a") || strings.Contains(d, "NaN") {
		t.Errorf("detail of a refused record:\n%s", d)
	}
	rec = &Record{Scenarios: []ScenarioRecord{{Name: searchLiveScenario, Status: "ok", Summary: map[string]Spread{
		"quiet_absent_p95_ms": {Median: 0.5}, "live_absent_p95_ms": {Median: 2.5}, "quiet_trace_p95_ms": {Median: math.NaN()}}}}}
	got := map[string]string{}
	for _, tg := range searchLiveTargets(rec) {
		got[tg.Name] = tg.Status
	}
	for name, want := range map[string]string{
		"absent user.id value p95, quiet, after the ingest (end to end, median of runs)": "PASS",
		"absent user.id value p95, during ingest (end to end, median of runs)":           "FAIL",
		"trace by id p95, quiet, after the ingest (end to end, median of runs)":          "FAIL",
	} {
		if got[name] != want {
			t.Errorf("%q: %q, want %q", name, got[name], want)
		}
	}
}
