package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
			body, points := gaugeBatch(series, t0, n)
			ok, err := postOTLP(ctx, client, c, "/v1/metrics", "", body)
			if ok {
				ackedMu.Lock()
				maps.Copy(acked, points)
				ackedMu.Unlock()
			}
			return ok, err
		}, "a sealed metrics block in the manifest", func(*child) bool { return publishedFiles(dir+"/metrics", "blocks") > 0 })
	c := startChild(t, dir)
	verify(c)
	if len(acked) == 0 {
		t.Fatal("no batch was ever acknowledged")
	}
	blocks := publishedFiles(dir+"/metrics", "blocks")
	if blocks == 0 {
		t.Fatal("no metrics block was sealed during the crash runs")
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	t.Logf("%d iterations, %d acknowledged points verified, %d blocks", iterations, len(acked), blocks)
}

// gaugeBatch builds an OTLP metrics request of 20 points of the gauge
// crash.points in series (its label w), a millisecond apart from t0 (Unix
// milliseconds), point i valued 100n+i. points maps "series@ms" to each
// value, as verify reads them back.
func gaugeBatch(series string, t0 int64, n int) (body []byte, points map[string]float64) {
	points = map[string]float64{}
	var pts []*metricspb.NumberDataPoint
	for i := range 20 {
		v := float64(n*100 + i)
		pts = append(pts, &metricspb.NumberDataPoint{
			Attributes:   []*commonpb.KeyValue{{Key: "w", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: series}}}},
			TimeUnixNano: uint64(t0+int64(i)) * 1e6, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v},
		})
		points[fmt.Sprintf("%s@%d", series, t0+int64(i))] = v
	}
	req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{
		Metrics: []*metricspb.Metric{{Name: "crash.points", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: pts}}}}}}}}}
	body, err := proto.Marshal(req)
	if err != nil {
		panic(fmt.Sprintf("encode a metrics request: %v", err)) // a fixed, valid message: a broken invariant
	}
	return body, points
}
