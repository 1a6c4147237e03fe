package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestSummarizeAndAnomaliesCommands: `rastro summarize` prints the
// server's text summary, `rastro anomalies --json` its JSON, and a bad
// sensitivity is refused naming the flag's parameter.
func TestSummarizeAndAnomaliesCommands(t *testing.T) {
	base := seedPayments(t, "6b8efff798038103d269b633813fc6", "fee19b7ec3c1b1")
	t.Setenv("RASTRO_SERVER", base)
	run := func(args ...string) (string, string, int) {
		var out, errb lockedBuffer
		c := Main(context.Background(), args, &out, &errb)
		return out.String(), errb.String(), c
	}
	out, errs, code := run("summarize")
	if code != 0 || !strings.Contains(out, "payments: ") || !strings.Contains(out, `"card declined after <n> tries" x2`) || !strings.Contains(out, "Anomalies (0)") {
		t.Fatalf("rastro summarize: exit %d %s\n%s", code, errs, out)
	}
	out, errs, code = run("anomalies", "--json", "payments")
	var rep struct {
		Sensitivity float64 `json:"sensitivity"`
		Anomalies   []any   `json:"anomalies"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Sensitivity != 1 || rep.Anomalies == nil {
		t.Fatalf("rastro anomalies --json: exit %d %s\n%s", code, errs, out)
	}
	if _, errs, code = run("anomalies", "--sensitivity", "-1"); code == 0 || !strings.Contains(errs, "sensitivity") {
		t.Fatalf("a negative sensitivity: exit %d %s", code, errs)
	}
}

// TestMetricsCommand: `rastro metrics` prints one row per series and says
// which path answered.
func TestMetricsCommand(t *testing.T) {
	base := seedPayments(t, "7b8efff798038103d269b633813fc6", "aee19b7ec3c1b1")
	t.Setenv("RASTRO_SERVER", base)
	var out, errb lockedBuffer
	if c := Main(context.Background(), []string{"metrics", "--since", "2h", "{ } | count_over_time() by (resource.service.name)"}, &out, &errb); c != 0 {
		t.Fatalf("exit %d: %s", c, errb.String())
	}
	if got := out.String(); !strings.Contains(got, "from stored aggregates") || !strings.Contains(got, "resource.service.name=payments") {
		t.Fatalf("rastro metrics:\n%s", got)
	}
	var out2, errb2 lockedBuffer
	if c := Main(context.Background(), []string{"metrics", "{ }"}, &out2, &errb2); c == 0 || !strings.Contains(errb2.String(), "not a metrics query") {
		t.Fatalf("a search query: exit %d %s", c, errb2.String())
	}
}
