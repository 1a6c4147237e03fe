package cli

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestREDAndErrorsCommands: `rastro red` lists services with their calls
// and error rates, `rastro red SERVICE` its operations, and `rastro errors`
// the error groups with a link to a sample trace in the web UI.
func TestREDAndErrorsCommands(t *testing.T) {
	base := seedPayments(t, "5b8efff798038103d269b633813fc6", "eee19b7ec3c1b1")
	t.Setenv("RASTRO_SERVER", base)
	run := func(args ...string) string {
		var out, errb lockedBuffer
		if c := Main(context.Background(), args, &out, &errb); c != 0 {
			t.Fatalf("%v: exit %d: %s", args, c, errb.String())
		}
		return out.String()
	}
	got := run("red")
	if !strings.Contains(got, "payments") || !regexpFind(`payments\s+10\s+\S+\s+2\s+20\.0\s+2\.0ms`, got) {
		t.Errorf("rastro red:\n%s", got)
	}
	if got := run("red", "payments"); !strings.Contains(got, "OPERATION") || !strings.Contains(got, "POST /pay") {
		t.Errorf("rastro red payments:\n%s", got)
	}
	got = run("errors")
	if !strings.Contains(got, "card declined after <n> tries") || !strings.Contains(got, base+"/traces/5b8efff798038103d269b633813fc605") {
		t.Errorf("rastro errors (the sample is the latest failing span):\n%s", got)
	}
}

// seedPayments starts a test server holding ten "POST /pay" spans of
// service payments from the last minute, two of them failing ("card
// declined after N tries"); ids are the prefixes plus two hex digits.
func seedPayments(t *testing.T, tracePrefix, spanPrefix string) (base string) {
	t.Helper()
	base, _ = startTestServer(t)
	now := time.Now().Add(-time.Minute).UnixNano()
	var spans []string
	for i := range 10 {
		status := ""
		if i%5 == 0 {
			status = fmt.Sprintf(`,"status":"error","status_message":"card declined after %d tries"`, i+1)
		}
		spans = append(spans, fmt.Sprintf(`{"trace_id":"%s%02x","span_id":"%s%02x","name":"POST /pay","service":"payments","start_time":%d,"duration_ns":2000000%s}`,
			tracePrefix, i, spanPrefix, i, now+int64(i)*1e6, status))
	}
	resp, err := http.Post(base+"/v1/spans", "application/json", strings.NewReader("["+strings.Join(spans, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %s", resp.Status)
	}
	return base
}

func regexpFind(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
