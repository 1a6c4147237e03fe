package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestTelemetrygenLoad(t *testing.T) {
	l := TelemetrygenIssueLoad
	if l.Spans() != 200_000 {
		t.Errorf("the issue's load generates %d spans, want 200,000", l.Spans())
	}
	const want = "OTEL_BSP_MAX_QUEUE_SIZE=200000 telemetrygen traces --otlp-http --otlp-insecure --otlp-endpoint 127.0.0.1:4318 " +
		"--workers 4 --traces 25000 --child-spans 1 --rate 0 --batch-size 1000"
	if got := l.Command("127.0.0.1:4318"); got != want {
		t.Errorf("command\n got %s\nwant %s", got, want)
	}
	if got := (TelemetrygenLoad{Workers: 2, Traces: 10, ChildSpans: 3, BatchSize: 5}).Spans(); got != 80 {
		t.Errorf("2 workers x 10 traces x (1 + 3 children) = %d spans, want 80", got)
	}
	env := l.Env([]string{"HOME=/root", "OTEL_EXPORTER_OTLP_COMPRESSION=gzip", "OTEL_BSP_MAX_QUEUE_SIZE=2048", "XOTEL_KEEP=1", "PATH=/bin"})
	wantEnv := []string{"HOME=/root", "XOTEL_KEEP=1", "PATH=/bin", "OTEL_BSP_MAX_QUEUE_SIZE=200000"}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("environment %q, want %q", env, wantEnv)
	}
}

func TestCheckTelemetrygenBuild(t *testing.T) {
	bi := func(path, version string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: path, Version: version}}
	}
	if err := checkTelemetrygenBuild(bi(TelemetrygenModule, TelemetrygenVersion)); err != nil {
		t.Errorf("the pinned build refused: %v", err)
	}
	for name, b := range map[string]*debug.BuildInfo{
		"other version": bi(TelemetrygenModule, "v0.160.0"),
		"devel build":   bi(TelemetrygenModule, "(devel)"),
		"other program": bi("example.com/telemetrygen", TelemetrygenVersion),
	} {
		if err := checkTelemetrygenBuild(b); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestAwaitStats(t *testing.T) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"spans": 100 * n, "buffer_spans": max(0, 300-100*n)})
	}))
	defer ts.Close()
	srv := &Server{HTTPAddr: strings.TrimPrefix(ts.URL, "http://"), exited: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	st, err := awaitStats(context.Background(), srv, 10*time.Second, time.Millisecond, func(st ServerStats) bool { return st.BufferSpans == 0 })
	if err != nil || st.Spans != 300 || calls.Load() != 3 {
		t.Errorf("got %+v, %v after %d reads; want 300 spans on the third read", st, err, calls.Load())
	}
	st, err = awaitStats(context.Background(), srv, 20*time.Millisecond, time.Millisecond, func(st ServerStats) bool { return st.Spans < 0 })
	if err == nil || !strings.Contains(err.Error(), "not within 20ms: last stats:") {
		t.Errorf("a condition never met returned %+v, %v", st, err)
	}
	close(srv.exited)
	if _, err := awaitStats(context.Background(), srv, time.Minute, time.Hour, func(ServerStats) bool { return false }); err == nil || !strings.Contains(err.Error(), "server exited") {
		t.Errorf("an exited server: %v", err)
	}
}

func TestTelemetrygenTargetsAndDetail(t *testing.T) {
	rec := func(status string, cpu, rss float64) *Record {
		sr := ScenarioRecord{Name: telemetrygenScenarioName, Status: status}
		if status == "ok" {
			sr.Summary = map[string]Spread{
				"cpu_us_per_span_sealed": {Median: cpu, Min: cpu, Max: cpu, N: 1},
				"peak_rss_sealed_mib":    {Median: rss, Min: rss, Max: rss, N: 1},
				"spans_stored":           {Median: 200000, Min: 200000, Max: 200000, N: 1},
			}
		} else {
			sr.Reasons = []string{"round 1: telemetrygen is not installed and `" + TelemetrygenInstall + "` failed"}
		}
		return &Record{Scenarios: []ScenarioRecord{sr}}
	}
	for _, c := range []struct {
		name string
		rec  *Record
		want string
	}{
		{"both met", rec("ok", 3.5, 200), "PASS,PASS"},
		{"cpu over", rec("ok", 3.51, 150), "FAIL,PASS"},
		{"rss over", rec("ok", 2, 200.1), "PASS,FAIL"},
		{"refused", rec("refused", 0, 0), "FAIL,FAIL"},
		{"not run", &Record{}, "NOT RUN,NOT RUN"},
	} {
		if got := targetStatuses(telemetrygenTargets(c.rec)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if got := telemetrygenTargets(rec("ok", 3.25, 180))[0].Got; got != "3.25" {
		t.Errorf("cpu target shows %q", got)
	}
	d := telemetrygenDetail(rec("ok", 3.25, 180))
	for _, want := range []string{"telemetrygen " + TelemetrygenVersion, "--child-spans 1", "| Spans stored | 200,000 (200,000-200,000) |",
		"| Server CPU us/span, through the seal of every span | 3.25 (3.25-3.25) |", "| Seals (with the final one at shutdown) | n/a |"} {
		if !strings.Contains(d, want) {
			t.Errorf("detail lacks %q:\n%s", want, d)
		}
	}
	if d := telemetrygenDetail(rec("refused", 0, 0)); !strings.Contains(d, "was refused") || strings.Contains(d, "| Spans stored") {
		t.Errorf("detail of a refused scenario:\n%s", d)
	}
	if telemetrygenDetail(&Record{}) != "" {
		t.Error("detail without the scenario is not empty")
	}
	if microsPerSpan(2*time.Second, 1_000_000) != 2 {
		t.Errorf("2 s over 1M spans = %v us/span", microsPerSpan(2*time.Second, 1_000_000))
	}
}

// targetStatuses lists the targets' statuses, comma-separated.
func targetStatuses(ts []Target) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Status)
	}
	return strings.Join(s, ",")
}
