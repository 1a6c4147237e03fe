package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
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
	iterations := 5
	if v, err := strconv.Atoi(os.Getenv("RASTRO_CRASH_ITERATIONS")); err == nil {
		iterations = v
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
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
	for it := range iterations {
		c := startChild(t, dir, "--seal-bytes", "2KiB")
		verify(c)
		killAfter := int64(3 + r.IntN(40))
		var acks atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 10 * time.Second}
				series := fmt.Sprintf("it%d-w%d", it, w)
				last := int64(0)
				for n := 0; ctx.Err() == nil && n < 5000; n++ {
					// 20 points of the worker's series per request, a
					// millisecond apart, after every earlier one.
					t0 := max(time.Now().UnixMilli(), last+1)
					var pts []*metricspb.NumberDataPoint
					for i := range 20 {
						pts = append(pts, &metricspb.NumberDataPoint{
							Attributes:   []*commonpb.KeyValue{{Key: "w", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: series}}}},
							TimeUnixNano: uint64(t0+int64(i)) * 1e6, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: float64(n*100 + i)},
						})
					}
					last = t0 + 19
					req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{
						Metrics: []*metricspb.Metric{{Name: "crash.points", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: pts}}}}}}}}}
					body, _ := proto.Marshal(req)
					hreq, _ := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/metrics", bytes.NewReader(body))
					hreq.Header.Set("Content-Type", "application/x-protobuf")
					resp, err := client.Do(hreq)
					if err != nil {
						return // the server died
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						continue
					}
					ackedMu.Lock()
					for i := range 20 {
						acked[fmt.Sprintf("%s@%d", series, t0+int64(i))] = float64(n*100 + i)
					}
					ackedMu.Unlock()
					acks.Add(1)
				}
			}()
		}
		waitFor(t, 60*time.Second, "acknowledged metric batches", func() bool { return acks.Load() >= killAfter })
		if it == iterations-1 {
			// The random kill points may all come before a seal: the last
			// run goes on until one has sealed (see the check below).
			waitFor(t, 60*time.Second, "a sealed metrics block", func() bool { return filesWithSuffix(dir+"/metrics", ".rmet") > 0 })
		}
		c.kill(cancel, &wg)
	}
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
