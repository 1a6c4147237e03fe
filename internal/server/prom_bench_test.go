package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/metricstore"
	"github.com/rastro-dev/rastro/internal/store"
)

// BenchmarkPromQueryRange times the whole /prom/api/v1/query_range handler
// (store read, evaluation, JSON) over 1,000 counter series scraped every
// 15 s for 2 h, for 1 h at a 15 s step: sealed into a block, and still in
// the write buffer (the head), as right after ingest.
func BenchmarkPromQueryRange(b *testing.B) {
	for _, where := range []string{"block", "head"} {
		b.Run(where, func(b *testing.B) { benchPromQueryRange(b, where == "block") })
	}
}

func benchPromQueryRange(b *testing.B, seal bool) {
	ms, err := metricstore.Open(metricstore.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close()
	for k0 := 0; k0 < 480; k0 += 40 {
		req := &colmetrics.ExportMetricsServiceRequest{}
		for i := range 1000 {
			var dps []*metricspb.NumberDataPoint
			for k := k0; k < k0+40; k++ {
				dps = append(dps, &metricspb.NumberDataPoint{TimeUnixNano: uint64(k) * 15e9,
					Attributes: []*commonpb.KeyValue{{Key: "instance", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprint(i)}}},
						{Key: "job", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprintf("svc-%02d", i%20)}}}},
					Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: float64(k * (i%7 + 1))}})
			}
			req.ResourceMetrics = append(req.ResourceMetrics, &metricspb.ResourceMetrics{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
				{Name: "req", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: dps}}}}}}})
		}
		body, _ := proto.Marshal(req)
		if _, err := ms.AppendMetrics("", store.MetricFormatProto, body); err != nil {
			b.Fatal(err)
		}
	}
	if seal {
		if err := ms.Seal(); err != nil {
			b.Fatal(err)
		}
	}
	s := &Server{}
	s.SetMetrics(ms)
	for _, q := range []string{"req_total", "rate(req_total[1m])", "sum by (job) (rate(req_total[5m]))"} {
		b.Run(q, func(b *testing.B) {
			u := "/prom/api/v1/query_range?" + url.Values{"query": {q}, "start": {"3600"}, "end": {"7200"}, "step": {"15"}}.Encode()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest("GET", u, nil)
				s.handlePromQueryRange(w, r.WithContext(context.WithValue(r.Context(), projectKey{}, "")))
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body.Bytes())
				}
				b.SetBytes(int64(w.Body.Len()))
			}
			// CPU time per query (user + system, the whole process): what
			// the query costs, whatever else the host is running.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
