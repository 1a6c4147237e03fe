package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReplaceBetweenMarkers(t *testing.T) {
	doc := "# Ingest\n\nAnalysis before.\n\n" + MarkerBegin + "\nold table\n" + MarkerEnd + "\n\nAnalysis after.\n"
	got, err := ReplaceBetweenMarkers(doc, "x", "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Ingest\n\nAnalysis before.\n\n" + MarkerBegin + "\nnew table\n" + MarkerEnd + "\n\nAnalysis after.\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	again, _ := ReplaceBetweenMarkers(got, "x", "new table\n")
	if again != got {
		t.Fatalf("replacement is not idempotent:\n%s", again)
	}

	created, err := ReplaceBetweenMarkers("", "Benchmark: ingest", "t\n")
	if err != nil || created != "# Benchmark: ingest\n\n\n"+MarkerBegin+"\nt\n"+MarkerEnd+"\n" {
		t.Fatalf("create: %q, %v", created, err)
	}
	appended, err := ReplaceBetweenMarkers("notes without markers", "x", "t\n")
	if err != nil || !strings.HasPrefix(appended, "notes without markers\n\n"+MarkerBegin) {
		t.Fatalf("append: %q, %v", appended, err)
	}
	if _, err := ReplaceBetweenMarkers("a "+MarkerBegin+" b", "x", "t"); err == nil {
		t.Fatal("begin marker without end accepted")
	}
	if _, err := ReplaceBetweenMarkers("a "+MarkerEnd+" b", "x", "t"); err == nil {
		t.Fatal("end marker without begin accepted")
	}
}

func TestWriteReportKeepsAnalysis(t *testing.T) {
	dir := t.TempDir()
	s := &Suite{Name: "demo", Method: "Method text.", Columns: []Column{
		{Title: "Protocol", Param: "protocol"},
		{Title: "spans/s", Metric: "spans_per_s", Spread: true},
		{Title: "p95 ms", Metric: "p95_ms", Digits: 2},
	}}
	rec := &Record{Suite: "demo", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Runs: 3, Spans: 1000, Batch: 100,
		Machine: Machine{OS: "linux", Arch: "amd64", CPUs: 2, GoVersion: "go1.26", Commit: "abc"},
		Scenarios: []ScenarioRecord{
			{Name: "a", Params: map[string]string{"protocol": "otlp-proto"}, Status: "ok", Summary: map[string]Spread{
				"spans_per_s": SpreadOf([]float64{210000, 190000, 250000}), "p95_ms": SpreadOf([]float64{1.234})}},
			{Name: "b", Params: map[string]string{"protocol": "otlp-json"}, Status: "refused", Reasons: []string{"round 2: stored count 9 is short of 10 acknowledged spans"}},
		},
		Targets: []Target{{Name: "ingest", Want: ">= 200,000 spans/s", Got: "210,000", Status: "PASS"}},
	}
	md := filepath.Join(dir, "demo.md")
	if err := os.WriteFile(md, []byte("# Demo\n\nMy analysis.\n\n"+MarkerBegin+"\nstale\n"+MarkerEnd+"\n\nMore analysis.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mdPath, jsonPath, err := WriteReport(dir, s, rec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(mdPath)
	out := string(b)
	for _, want := range []string{
		"My analysis.", "More analysis.", "Method text.",
		"| a | otlp-proto | 210,000 (190,000-250,000) | 1.23 |",
		"| b | otlp-json | FAILED | FAILED |",
		"b (REFUSED): round 2: stored count 9 is short",
		"| ingest | >= 200,000 spans/s | 210,000 | PASS |",
		"raw/demo-20260102T030405Z.json",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "stale") {
		t.Error("old generated block survived")
	}
	var back Record
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &back); err != nil || back.Scenarios[0].Summary["spans_per_s"].Median != 210000 {
		t.Fatalf("raw JSON does not round-trip: %v", err)
	}
}

func TestNum(t *testing.T) {
	for _, c := range []struct {
		x    float64
		d    int
		want string
	}{{1234567, 0, "1,234,567"}, {999, 0, "999"}, {-1234, 0, "-1,234"}, {0.5, 2, "0.50"}, {math.NaN(), 0, "n/a"}} {
		if got := num(c.x, c.d); got != c.want {
			t.Errorf("num(%v,%d) = %q, want %q", c.x, c.d, got, c.want)
		}
	}
}
