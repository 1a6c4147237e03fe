package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSummarizeAndAnomaliesCommands: `rastro summarize` prints the
// server's text summary, `rastro anomalies --json` its JSON, and a bad
// sensitivity is refused naming the flag's parameter.
func TestSummarizeAndAnomaliesCommands(t *testing.T) {
	base, _ := startTestServer(t)
	now := time.Now().Add(-time.Minute).UnixNano()
	var spans []string
	for i := range 10 {
		status := ""
		if i%5 == 0 {
			status = fmt.Sprintf(`,"status":"error","status_message":"card declined after %d tries"`, i+1)
		}
		spans = append(spans, fmt.Sprintf(`{"trace_id":"6b8efff798038103d269b633813fc6%02x","span_id":"fee19b7ec3c1b1%02x","name":"POST /pay","service":"payments","start_time":%d,"duration_ns":2000000%s}`,
			i, i, now+int64(i)*1e6, status))
	}
	resp, err := http.Post(base+"/v1/spans", "application/json", strings.NewReader("["+strings.Join(spans, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %s", resp.Status)
	}
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
