package bench

import (
	"context"
	"math"
	"strings"
	"testing"
)

func TestRunSuiteRotatesAndRefuses(t *testing.T) {
	var order []string
	mk := func(name string, run func(round int) Result) Scenario {
		round := 0
		return Scenario{Name: name, Params: map[string]string{"p": name}, Run: func(ctx context.Context, env *RunEnv) Result {
			order = append(order, name)
			round++
			return run(round)
		}}
	}
	s := &Suite{
		Name: "fake", DefaultSpans: 1000,
		Plan: func(ctx context.Context, cfg Config) ([]Scenario, error) {
			return []Scenario{
				mk("a", func(r int) Result { return Result{Metrics: map[string]float64{"x": float64(r), "nan": math.NaN()}} }),
				mk("b", func(r int) Result {
					if r == 2 {
						return refused("stored count 1 is short of 2 acknowledged spans")
					}
					return Result{Metrics: map[string]float64{"x": 100}}
				}),
				mk("c", func(r int) Result { return Result{NotWired: "engine missing"} }),
				mk("skipped", func(r int) Result { t.Error("--only did not filter"); return Result{} }),
			}, nil
		},
		Columns: []Column{{Title: "X", Metric: "x", Spread: true}},
		Targets: func(rec *Record) []Target { return []Target{{Name: "t", Status: "REPORT"}} },
	}
	rec, err := RunSuite(context.Background(), s, Config{Runs: 3, Only: []string{"a", "b", "c$"}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "abcbcacab" {
		t.Errorf("run order %q, want round-robin rotated abc bca cab", got)
	}
	a, _ := rec.Scenario("a")
	if a.Status != "ok" || a.Summary["x"] != (Spread{Median: 2, Min: 1, Max: 3, N: 3}) {
		t.Errorf("a: %+v", a)
	}
	if _, ok := a.Summary["nan"]; ok {
		t.Error("a NaN metric was kept (JSON cannot carry it)")
	}
	b, _ := rec.Scenario("b")
	if b.Status != "refused" || b.Summary != nil || len(b.Reasons) != 1 || !strings.Contains(b.Reasons[0], "round 2: stored count 1 is short") {
		t.Errorf("b: status %s summary %v reasons %q", b.Status, b.Summary, b.Reasons)
	}
	c, _ := rec.Scenario("c")
	if c.Status != "not wired" {
		t.Errorf("c: %+v", c)
	}
	md := Markdown(s, rec, "")
	for _, want := range []string{"| a | 2 (1-3) |", "| b | FAILED |", "| c | not wired |", "b (REFUSED): round 2: stored count", "| t |  |  | REPORT |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if !math.IsNaN(rec.median("b", "x")) || rec.median("a", "x") != 2 {
		t.Error("median of a refused scenario must be NaN, of an ok one its median")
	}
	if _, err := RunSuite(context.Background(), s, Config{Only: []string{"zzz"}}); err == nil {
		t.Error("an --only matching nothing was accepted")
	}
	if _, err := RunSuite(context.Background(), s, Config{Spans: 5}); err == nil {
		t.Error("5 spans per run accepted")
	}
}
