package server

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// telemetrygenPath finds the OpenTelemetry Collector's telemetrygen (the
// benchmark harness installs it: `rastro bench telemetrygen`).
func telemetrygenPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("telemetrygen"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "telemetrygen")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("telemetrygen is not installed: go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0")
	return ""
}

// telemetrygen metrics, over HTTP and gRPC, for every metric type it
// makes: each run must succeed (telemetrygen stops on any rejected point),
// and its series come back through /prom with their exemplars' trace.
func TestTelemetrygenMetrics(t *testing.T) {
	ts := startMetricsServer(t)
	bin := telemetrygenPath(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, transport := range []string{"http", "grpc"} {
		for _, typ := range []string{"Gauge", "Sum", "Histogram", "ExponentialHistogram"} {
			args := []string{"metrics", "--otlp-insecure", "--metrics", "6", "--rate", "50", "--metric-type", typ,
				"--aggregation-temporality", "cumulative", "--otlp-metric-name", "tg." + strings.ToLower(typ),
				"--service", "tg-" + transport, "--trace-id", traceID, "--span-id", "00f067aa0ba902b7"}
			if transport == "http" {
				args = append(args, "--otlp-http", "--otlp-endpoint", ts.srv.HTTPAddr())
			} else {
				args = append(args, "--otlp-endpoint", ts.srv.GRPCAddr())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("telemetrygen %s over %s: %v\n%s", typ, transport, err, out)
			}
		}
	}
	for q, want := range map[string]int{
		`tg_gauge{job=~"tg-.*"}`:                       2,
		`tg_sum_total`:                                 2,
		`tg_histogram_bucket{le="+Inf"}`:               2,
		`tg_histogram_count`:                           2,
		`tg_exponentialhistogram_count`:                2,
		`count by (job) (tg_histogram_bucket)`:         2,
		`histogram_quantile(0.5, tg_histogram_bucket)`: 2,
	} {
		code, r := ts.prom("/prom/api/v1/query", url.Values{"query": {q}})
		if code != 200 || len(r.Data.Result) != want {
			t.Errorf("%s: %d, %d series, want %d: %+v", q, code, len(r.Data.Result), want, r)
		}
	}
	var ex struct {
		Data []struct {
			Exemplars []struct {
				Labels map[string]string `json:"labels"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if code := ts.get("/prom/api/v1/query_exemplars?"+url.Values{"query": {"tg_sum_total"}}.Encode(), &ex); code != 200 ||
		len(ex.Data) != 2 || ex.Data[0].Exemplars[0].Labels["trace_id"] != traceID {
		t.Fatalf("exemplars: %d %+v", code, ex)
	}
}
