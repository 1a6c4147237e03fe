package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConversationsTargets: the ratios are inline over apart for bytes and
// apart over inline for the read, judged against the bounds; a
// refused scenario fails every target.
func TestConversationsTargets(t *testing.T) {
	sc := okScenario
	rec := &Record{Spans: conversationsTargetSpans, Scenarios: []ScenarioRecord{
		sc(conversationsApartScenario, map[string]float64{"sealed_disk_bytes_per_span": 700, "trace_p95_ms": 3}),
		sc(conversationsInlineScenario, map[string]float64{"sealed_disk_bytes_per_span": 1900, "trace_p95_ms": 1.9}),
	}}
	got := conversationsTargets(rec)
	if len(got) != 2 {
		t.Fatalf("%d targets, want 2: %+v", len(got), got)
	}
	for i, want := range []struct{ status, got string }{{"FAIL", "2.71x"}, {"FAIL", "1.58x"}} {
		if got[i].Status != want.status || !strings.HasPrefix(got[i].Got, want.got) {
			t.Errorf("%s: %s %q, want %s %s", got[i].Name, got[i].Status, got[i].Got, want.status, want.got)
		}
	}
	rec.Scenarios[0].Summary["sealed_disk_bytes_per_span"] = Spread{Median: 600, Min: 600, Max: 600, N: 1}
	if tg := conversationsTargets(rec)[0]; tg.Status != "PASS" || !strings.HasPrefix(tg.Got, "3.17x") {
		t.Errorf("%s: %s %q, want PASS 3.17x", tg.Name, tg.Status, tg.Got)
	}
	rec.Scenarios[1].Status = "refused"
	for _, tg := range conversationsTargets(rec) {
		if tg.Status != "FAIL" {
			t.Errorf("%s: %s with a scenario refused, want FAIL", tg.Name, tg.Status)
		}
	}
}

// TestBenchConversationsEndToEnd runs `rastro bench conversations` for
// real, tiny: both scenarios stream the corpus into the real server, stop,
// restart and read every sampled trace back whole. It asserts that
// the harness works and that the two layouts are what they say, never how
// fast or small anything is.
func TestBenchConversationsEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "conversations", "--runs", "1", "--spans", "3000", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench conversations: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "conversations")
	for _, name := range []string{conversationsApartScenario, conversationsInlineScenario} {
		sr, ok := rec.Scenario(name)
		if !ok || sr.Status != "ok" {
			t.Fatalf("%s not ok: %+v", name, sr)
		}
		m := func(k string) float64 { return sr.Summary[k].Median }
		if m("traces_read") < 500 || !(m("trace_p95_ms") > 0) || !(m("sealed_segment_bytes_per_span") > 0) || !(m("segments") > 0) {
			t.Errorf("%s: %+v", name, sr.Summary)
		}
		// The inline store keeps an empty value store's header (a few bytes).
		if apart := name == conversationsApartScenario; apart != (m("sealed_value_bytes_per_span") > 10) {
			t.Errorf("%s: value store %v B/span", name, m("sealed_value_bytes_per_span"))
		}
	}
	if len(rec.Targets) != 2 {
		t.Errorf("%d targets, want 2: %+v", len(rec.Targets), rec.Targets)
	}
	doc, err := os.ReadFile(filepath.Join(out, "conversations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"| values-apart | stored apart (default) |", "| values-inline | inline (--value-threshold 0) |", "A session's trace read p95"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("conversations.md lacks %q:\n%s", w, doc)
		}
	}
}
