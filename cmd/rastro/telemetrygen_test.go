package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
)

// TestTelemetrygen: the OpenTelemetry Collector's load generator (the
// pinned telemetrygen, a client nobody here wrote) sends log records over
// OTLP/HTTP and gRPC and traces over gRPC to the real binary; every record
// and span is stored and read back as it was sent.
func TestTelemetrygen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tg, err := bench.Telemetrygen(ctx, t.Logf)
	if err != nil {
		t.Fatalf("%v (.ci/run installs it)", err)
	}
	srv := startChild(t, t.TempDir())
	defer srv.stop(t)
	httpAddr := strings.TrimPrefix(srv.base, "http://")

	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, tg, args...)
		// The SDK reads OTEL_* variables, which would change what is sent.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "OTEL_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("telemetrygen %s: %v\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
	}
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	run("logs", "--otlp-http", "--otlp-insecure", "--otlp-endpoint", httpAddr, "--workers", "2", "--logs", "300", "--rate", "0",
		"--service", "tg-http", "--body", "telemetrygen record over http", "--severity-number", "13", "--severity-text", "Warn",
		"--trace-id", traceID, "--span-id", spanID, "--telemetry-attributes", `order.id="o-17"`)
	run("logs", "--otlp-insecure", "--otlp-endpoint", srv.grpc, "--workers", "1", "--logs", "200", "--rate", "0",
		"--service", "tg-grpc", "--body", "telemetrygen record over grpc")
	run("traces", "--otlp-insecure", "--otlp-endpoint", srv.grpc, "--workers", "1", "--traces", "50", "--child-spans", "2", "--rate", "0",
		"--service", "tg-traces")

	type logRecord struct {
		Body           any            `json:"body"`
		SeverityNumber int            `json:"severity_number"`
		SeverityText   string         `json:"severity_text"`
		Service        string         `json:"service"`
		TraceID        string         `json:"trace_id"`
		SpanID         string         `json:"span_id"`
		Attributes     map[string]any `json:"attributes"`
		Time           string         `json:"time"`
	}
	logs := func(params url.Values) []logRecord {
		t.Helper()
		params.Set("since", "1h")
		params.Set("limit", "10000")
		var out struct {
			Logs       []logRecord `json:"logs"`
			NextCursor string      `json:"next_cursor"`
		}
		getJSON(t, srv.base+"/api/v1/logs?"+params.Encode(), &out)
		if out.NextCursor != "" {
			t.Fatalf("logs %v: more than one page", params)
		}
		return out.Logs
	}
	// Wait for the counts (each telemetrygen run has exited, so every
	// export was answered; the wait covers nothing but a slow machine).
	waitFor(t, 30*time.Second, "all 500 log records", func() bool {
		return len(logs(url.Values{"service": {"tg-http"}})) == 600 && len(logs(url.Values{"service": {"tg-grpc"}})) == 200
	})
	for _, r := range logs(url.Values{"service": {"tg-http"}}) {
		if r.Body != "telemetrygen record over http" || r.SeverityNumber != 13 || r.SeverityText != "Warn" ||
			r.TraceID != traceID || r.SpanID != spanID || r.Attributes["order.id"] != "o-17" || r.Time == "" {
			t.Fatalf("an HTTP record came back as %+v", r)
		}
	}
	if got := len(logs(url.Values{"content": {"grpc"}})); got != 200 {
		t.Errorf("content=grpc: %d records, want the 200 sent over gRPC", got)
	}
	if got := len(logs(url.Values{"trace_id": {traceID}, "severity": {"warn"}})); got != 600 {
		t.Errorf("trace_id and severity warn: %d records, want 600", got)
	}
	var trLogs struct {
		Logs []logRecord `json:"logs"`
	}
	getJSON(t, srv.base+"/api/v1/traces/"+traceID+"/logs?limit=1000", &trLogs)
	if len(trLogs.Logs) != 600 {
		t.Errorf("the trace's logs: %d, want 600", len(trLogs.Logs))
	}

	var spans struct {
		Spans []struct {
			TraceID string `json:"trace_id"`
			Name    string `json:"name"`
		} `json:"spans"`
	}
	waitFor(t, 30*time.Second, "150 spans", func() bool {
		getJSON(t, srv.base+"/api/v1/spans?since=1h&limit=1000&service=tg-traces", &spans)
		return len(spans.Spans) == 150
	})
	traces := map[string]int{}
	for _, s := range spans.Spans {
		traces[s.TraceID]++
	}
	if len(traces) != 50 {
		t.Errorf("%d traces, want 50", len(traces))
	}
	for id, n := range traces {
		if n != 3 {
			t.Errorf("trace %s: %d spans, want 3 (a root and 2 children)", id, n)
		}
	}
}

func getJSON(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
