package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// TestCrashKeepsEveryAcknowledgedMetricPoint SIGKILLs the server at random
// moments while clients send OTLP gauges and seals run (small --seal-bytes):
// after each restart every acknowledged point is readable with its value
// through /prom.
func TestCrashKeepsEveryAcknowledgedMetricPoint(t *testing.T) {
	iterations := crashIterations(5)
	dir := t.TempDir()
	var ackedMu sync.Mutex
	acked := map[string]float64{} // "series@ms" -> value
	verify := func(c *child) {
		t.Helper()
		q := url.Values{"query": {`crash_points[1h]`}, "time": {strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)}}
		resp, err := http.Get(c.base + "/prom/api/v1/query?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Values [][2]any          `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		err = dec.Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("query: %d %v %s", resp.StatusCode, err, out.Error)
		}
		seen := map[string]float64{}
		for _, s := range out.Data.Result {
			for _, v := range s.Values {
				sec, _ := v[0].(json.Number).Float64()
				val, _ := strconv.ParseFloat(v[1].(string), 64)
				seen[fmt.Sprintf("%s@%d", s.Metric["w"], int64(sec*1000+0.5))] = val
			}
		}
		ackedMu.Lock()
		defer ackedMu.Unlock()
		for k, v := range acked {
			got, ok := seen[k]
			if !ok {
				t.Fatalf("acknowledged point %s is missing after the crash (%d points read)", k, len(seen))
			}
			if got != v {
				t.Fatalf("point %s = %g, acknowledged %g", k, got, v)
			}
		}
	}
	// Each writer's series gets 20 points a request, a millisecond apart,
	// after every earlier one.
	var lastMu sync.Mutex
	last := map[string]int64{}
	crashRounds(t, dir, iterations, 3, []string{"--seal-bytes", "2KiB"}, verify,
		func(ctx context.Context, client *http.Client, c *child, it, w, n int) (bool, error) {
			series := fmt.Sprintf("it%d-w%d", it, w)
			lastMu.Lock()
			t0 := max(time.Now().UnixMilli(), last[series]+1)
			last[series] = t0 + 19
			lastMu.Unlock()
			var pts []*metricspb.NumberDataPoint
			for i := range 20 {
				pts = append(pts, &metricspb.NumberDataPoint{
					Attributes:   []*commonpb.KeyValue{{Key: "w", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: series}}}},
					TimeUnixNano: uint64(t0+int64(i)) * 1e6, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: float64(n*100 + i)},
				})
			}
			req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{
				Metrics: []*metricspb.Metric{{Name: "crash.points", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: pts}}}}}}}}}
			body, _ := proto.Marshal(req)
			hreq, _ := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/metrics", bytes.NewReader(body))
			hreq.Header.Set("Content-Type", "application/x-protobuf")
			resp, err := client.Do(hreq)
			if err != nil {
				return false, err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return false, nil
			}
			ackedMu.Lock()
			for i := range 20 {
				acked[fmt.Sprintf("%s@%d", series, t0+int64(i))] = float64(n*100 + i)
			}
			ackedMu.Unlock()
			return true, nil
		}, "a sealed metrics block", func(*child) bool { return filesWithSuffix(dir+"/metrics", ".rmet") > 0 })
	c := startChild(t, dir)
	verify(c)
	if len(acked) == 0 {
		t.Fatal("no batch was ever acknowledged")
	}
	blocks := filesWithSuffix(dir+"/metrics", ".rmet")
	if blocks == 0 {
		t.Fatal("no metrics block was sealed during the crash runs")
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	t.Logf("%d iterations, %d acknowledged points verified, %d blocks", iterations, len(acked), blocks)
}
