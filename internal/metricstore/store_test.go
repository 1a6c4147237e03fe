package metricstore

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func strKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func request(service string, ms ...*metricspb.Metric) []byte {
	req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource:     &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strKV("service.name", service)}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: ms}},
	}}}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

func gauge(name string, tMs int64, v float64, attrs ...*commonpb.KeyValue) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{
		{Attributes: attrs, TimeUnixNano: uint64(tMs) * 1e6, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}}}}}
}

func counter(name, unit string, temp metricspb.AggregationTemporality, tMs int64, v int64) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Unit: unit, Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: temp,
		DataPoints: []*metricspb.NumberDataPoint{{TimeUnixNano: uint64(tMs) * 1e6, Value: &metricspb.NumberDataPoint_AsInt{AsInt: v}}}}}}
}

func eq(name string) []*store.LabelMatcher {
	m, _ := store.NewLabelMatcher(store.MatchEqual, store.MetricName, name)
	return []*store.LabelMatcher{m}
}

const cum = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE

// Names follow Prometheus' OTLP translation.
func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		name, unit string
		typ        metricType
		want       string
	}{
		{"http.server.request.duration", "s", typeHistogram, "http_server_request_duration_seconds"},
		{"http.server.requests", "{request}", typeCounter, "http_server_requests_total"},
		{"requests_total", "", typeCounter, "requests_total"},
		{"system.cpu.utilization", "1", typeGauge, "system_cpu_utilization_ratio"},
		{"process.runtime.go.mem.heap_alloc", "By", typeGauge, "process_runtime_go_mem_heap_alloc_bytes"},
		{"net.io", "By/s", typeNonMonotonic, "net_io_bytes_per_second"},
		{"gen_ai.client.token.usage", "{token}", typeHistogram, "gen_ai_client_token_usage"},
		{"2xx.count", "", typeGauge, "_2xx_count"},
		{"latency.seconds", "s", typeGauge, "latency_seconds"},
	} {
		if got := MetricName(c.name, c.unit, c.typ); got != c.want {
			t.Errorf("MetricName(%q, %q) = %q, want %q", c.name, c.unit, got, c.want)
		}
	}
	for k, want := range map[string]string{"http.method": "http_method", "9lives": "key_9lives", "a-b/c": "a_b_c"} {
		if got := LabelName(k); got != want {
			t.Errorf("LabelName(%q) = %q, want %q", k, got, want)
		}
	}
}

func openMem(t *testing.T, fsys vfs.FS) *Store {
	t.Helper()
	s, err := Open(Options{Dir: "/data/metrics", FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A histogram becomes cumulative _bucket series with le labels, _sum and
// _count; resource attributes give job, instance and service_name; an
// exemplar lands on the bucket its value falls in, with its ids.
func TestHistogramSeriesAndExemplars(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	sum := 12.5
	trace := []byte("0123456789abcdef")
	span := []byte("01234567")
	req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strKV("service.name", "api"), strKV("service.namespace", "shop"), strKV("service.instance.id", "i-1")}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: "rpc.duration", Unit: "ms", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
			AggregationTemporality: cum,
			DataPoints: []*metricspb.HistogramDataPoint{{Attributes: []*commonpb.KeyValue{strKV("rpc.method", "Get")}, TimeUnixNano: 60_000 * 1e6,
				Count: 6, Sum: &sum, ExplicitBounds: []float64{1, 5, 10}, BucketCounts: []uint64{1, 2, 0, 3},
				Exemplars: []*metricspb.Exemplar{{TimeUnixNano: 59_000 * 1e6, Value: &metricspb.Exemplar_AsDouble{AsDouble: 4}, TraceId: trace, SpanId: span}}}},
		}}}}}},
	}}}
	b, _ := proto.Marshal(req)
	res, err := s.AppendMetrics("", store.MetricFormatProto, b)
	if err != nil || res.Accepted != 1 || res.Rejected != 0 {
		t.Fatalf("append: %+v %v", res, err)
	}
	re, _ := store.NewLabelMatcher(store.MatchRegexp, store.MetricName, "rpc_duration_milliseconds_.*")
	got, err := s.SelectSeries("", 0, 100_000, []*store.LabelMatcher{re})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, sd := range got {
		lines = append(lines, fmt.Sprintf("%s %v", sd.Labels, sd.Samples))
	}
	want := []string{
		`{__name__="rpc_duration_milliseconds_bucket", instance="i-1", job="shop/api", le="+Inf", rpc_method="Get", service_name="api"} [{60000 6}]`,
		`{__name__="rpc_duration_milliseconds_bucket", instance="i-1", job="shop/api", le="1", rpc_method="Get", service_name="api"} [{60000 1}]`,
		`{__name__="rpc_duration_milliseconds_bucket", instance="i-1", job="shop/api", le="10", rpc_method="Get", service_name="api"} [{60000 3}]`,
		`{__name__="rpc_duration_milliseconds_bucket", instance="i-1", job="shop/api", le="5", rpc_method="Get", service_name="api"} [{60000 3}]`,
		`{__name__="rpc_duration_milliseconds_count", instance="i-1", job="shop/api", rpc_method="Get", service_name="api"} [{60000 6}]`,
		`{__name__="rpc_duration_milliseconds_sum", instance="i-1", job="shop/api", rpc_method="Get", service_name="api"} [{60000 12.5}]`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("series:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	ex, err := s.Exemplars("", 0, 100_000, []*store.LabelMatcher{re})
	if err != nil || len(ex) != 1 || ex[0].Labels.Get("le") != "5" || string(ex[0].Exemplars[0].TraceID[:]) != string(trace) ||
		string(ex[0].Exemplars[0].SpanID[:]) != string(span) || ex[0].Exemplars[0].T != 59_000 {
		t.Fatalf("exemplars: %+v %v, want one on le=5 with its ids", ex, err)
	}
}

// Sums of unspecified temporality are refused with a message naming the
// metric; the cumulative ones of the same request are kept.
func TestUnspecifiedTemporalityRefused(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	res, err := s.AppendMetrics("", store.MetricFormatProto, request("svc",
		counter("jobs.done", "", metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_UNSPECIFIED, 1000, 5),
		counter("jobs.started", "", cum, 1000, 7)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Rejected != 1 || !strings.Contains(res.RejectMsg, `"jobs.done": unspecified`) {
		t.Fatalf("result %+v, want 1 accepted and the unspecified one rejected by name", res)
	}
	got, _ := s.SelectSeries("", 0, 2000, eq("jobs_started_total"))
	if len(got) != 1 || got[0].Samples[0].V != 7 {
		t.Fatalf("cumulative counter: %+v", got)
	}
	got, _ = s.SelectSeries("", 0, 2000, eq("jobs_done_total"))
	if len(got) != 0 {
		t.Fatalf("the unspecified counter was stored: %+v", got)
	}
}

// The GenAI client histograms are the exception: their delta points are
// kept as sent, marked otel_temporality="delta", apart from the cumulative
// series of the same labels; another metric's delta histogram is converted
// to cumulative, without the mark.
func TestGenAIDeltaHistogramsKept(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	hist := func(name, unit string, temp metricspb.AggregationTemporality, tMs int64, count uint64, sum float64) *metricspb.Metric {
		return &metricspb.Metric{Name: name, Unit: unit, Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{AggregationTemporality: temp,
			DataPoints: []*metricspb.HistogramDataPoint{{Attributes: []*commonpb.KeyValue{strKV("gen_ai.token.type", "input")}, TimeUnixNano: uint64(tMs) * 1e6,
				Count: count, Sum: &sum, ExplicitBounds: []float64{1, 4}, BucketCounts: []uint64{0, 0, count}}}}}}
	}
	const delta = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	res, err := s.AppendMetrics("", store.MetricFormatProto, request("svc",
		hist("gen_ai.client.token.usage", "{token}", delta, 1000, 2, 30),
		hist("gen_ai.client.token.usage", "{token}", cum, 1000, 5, 70),
		hist("rpc.size", "By", delta, 1000, 1, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 3 || res.Rejected != 0 {
		t.Fatalf("result %+v, want every point kept", res)
	}
	if got, _ := s.SeriesLabels("", 0, 2000, eq("rpc_size_bytes_sum")); len(got) != 1 || got[0].Get(TemporalityLabel) != "" {
		t.Fatalf("rpc.size: %v, want one series without %s", got, TemporalityLabel)
	}
	got, _ := s.SelectSeries("", 0, 2000, eq("gen_ai_client_token_usage_sum"))
	if len(got) != 2 {
		t.Fatalf("series %+v, want a delta and a cumulative one", got)
	}
	for _, g := range got {
		want := 70.0
		if g.Labels.Get(TemporalityLabel) == "delta" {
			want = 30
		}
		if g.Samples[0].V != want || g.Labels.Get("gen_ai_token_type") != "input" {
			t.Fatalf("series %v = %v, want %v", g.Labels, g.Samples, want)
		}
	}
}

// Projects do not see each other's series.
func TestProjectsAreApart(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	s.AppendMetrics("a", store.MetricFormatProto, request("svc", gauge("temp", 1000, 1)))
	s.AppendMetrics("b", store.MetricFormatProto, request("svc", gauge("temp", 1000, 2)))
	s.Seal()
	s.AppendMetrics("b", store.MetricFormatProto, request("svc", gauge("temp", 2000, 3)))
	for p, want := range map[string][]store.Sample{"a": {{T: 1000, V: 1}}, "b": {{T: 1000, V: 2}, {T: 2000, V: 3}}} {
		got, err := s.SelectSeries(p, 0, 5000, eq("temp"))
		if err != nil || len(got) != 1 || !slices.Equal(got[0].Samples, want) {
			t.Fatalf("project %s: %+v %v, want %v", p, got, err, want)
		}
	}
}

// corpus sends random gauges over series in random batches and remembers
// every acknowledged sample.
type corpus struct {
	r     *rand.Rand
	t     map[string]int64 // newest time per series name
	acked map[string][]store.Sample
}

func newCorpus(seed uint64) *corpus {
	return &corpus{r: rand.New(rand.NewPCG(seed, 1)), t: map[string]int64{}, acked: map[string][]store.Sample{}}
}

func (c *corpus) batch() []byte {
	var ms []*metricspb.Metric
	for range 1 + c.r.IntN(20) {
		name := fmt.Sprintf("g%d", c.r.IntN(12))
		c.t[name] += 1000 + int64(c.r.IntN(30000))
		v := math.Round(c.r.NormFloat64()*1000) / 8
		ms = append(ms, gauge(name, c.t[name], v))
		c.acked[name] = append(c.acked[name], store.Sample{T: c.t[name], V: v})
	}
	return request("svc", ms...)
}

func (c *corpus) check(t *testing.T, s *Store, upto map[string]int, what string) {
	t.Helper()
	re, _ := store.NewLabelMatcher(store.MatchRegexp, store.MetricName, "g.*")
	got, err := s.SelectSeries("", math.MinInt64, math.MaxInt64, []*store.LabelMatcher{re})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	n := 0
	for name, ss := range c.acked {
		if upto != nil {
			ss = ss[:upto[name]]
		}
		if len(ss) == 0 {
			continue
		}
		n++
		i := slices.IndexFunc(got, func(sd store.SeriesData) bool { return sd.Labels.Get(store.MetricName) == name })
		if i < 0 {
			t.Fatalf("%s: series %s missing", what, name)
		}
		if !slices.Equal(got[i].Samples, ss) {
			t.Fatalf("%s: series %s has %d samples, want %d:\n%v\n%v", what, name, len(got[i].Samples), len(ss), got[i].Samples, ss)
		}
	}
	if len(got) != n {
		t.Fatalf("%s: %d series, want %d", what, len(got), n)
	}
}

// Reads over the head, sealed blocks and a reopened store equal the
// acknowledged samples, and windows select exactly what a scan selects.
func TestSelectEqualsBruteForce(t *testing.T) {
	fsys := vfs.NewMemFS()
	s := openMem(t, fsys)
	c := newCorpus(3)
	for round := range 40 {
		if _, err := s.AppendMetrics("", store.MetricFormatProto, c.batch()); err != nil {
			t.Fatal(err)
		}
		if round%7 == 3 {
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.check(t, s, nil, "open")
	// Windows.
	for range 50 {
		lo := c.r.Int64N(c.t["g0"] + 1)
		hi := lo + c.r.Int64N(200_000)
		got, err := s.SelectSeries("", lo, hi, eq("g0"))
		if err != nil {
			t.Fatal(err)
		}
		var want []store.Sample
		for _, x := range c.acked["g0"] {
			if x.T >= lo && x.T <= hi {
				want = append(want, x)
			}
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if len(got) != 1 || !slices.Equal(got[0].Samples, want) {
			t.Fatalf("window [%d,%d]: %v, want %v", lo, hi, got, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fsys)
	defer s.Close()
	c.check(t, s, nil, "reopened")
}

// A power cut at any moment (with torn writes and lost directory
// operations) loses no acknowledged sample.
func TestPowerCutKeepsAcknowledgedSamples(t *testing.T) {
	fsys := vfs.NewMemFS()
	s, err := Open(Options{Dir: "/data/metrics", FS: fsys, SealBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	c := newCorpus(5)
	type image struct {
		fs   *vfs.MemFS
		upto map[string]int
	}
	var images []image
	rng := rand.New(rand.NewPCG(9, 9))
	for round := range 30 {
		if _, err := s.AppendMetrics("", store.MetricFormatProto, c.batch()); err != nil {
			t.Fatal(err)
		}
		upto := map[string]int{}
		for k, v := range c.acked {
			upto[k] = len(v)
		}
		var wg sync.WaitGroup
		if round%4 == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); _ = s.Seal() }()
		}
		for n := range 3 {
			images = append(images, image{fsys.Crash(vfs.CrashOptions{KeepDirOps: n%2 == 1, Torn: n == 2, Rand: rng}), upto})
		}
		wg.Wait()
	}
	s.Close()
	for i, im := range images {
		s, err := Open(Options{Dir: "/data/metrics", FS: im.fs})
		if err != nil {
			t.Fatalf("image %d: reopen: %v", i, err)
		}
		c.check(t, s, im.upto, fmt.Sprintf("image %d", i))
		s.Close()
	}
}

// A damaged series record is skipped with a warning naming the file and
// offset; the other series of the block stay readable.
func TestCorruptBlockRecordIsSkipped(t *testing.T) {
	fsys := vfs.NewMemFS()
	s := openMem(t, fsys)
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 1000, 1), gauge("b", 1000, 2)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names := fsys.Names(".rmet")
	if len(names) != 1 {
		t.Fatalf("blocks %v", names)
	}
	data, _ := fsys.ReadFile(names[0])
	// The first record's payload starts after the magic and its header.
	f, _ := fsys.OpenFile(names[0], os.O_RDWR)
	f.WriteAt([]byte{data[len(fileMagic)+10] ^ 0xff}, int64(len(fileMagic)+10))
	f.Close()
	var warnings []string
	s, err := Open(Options{Dir: "/data/metrics", FS: fsys, Logf: func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "checksum mismatch") || !strings.Contains(warnings[0], names[0]) || !strings.Contains(warnings[0], "offset 8") {
		t.Fatalf("warnings %q, want one checksum mismatch naming %s at offset 8", warnings, names[0])
	}
	got, _ := s.SelectSeries("", 0, 5000, nil)
	if len(got) != 1 || got[0].Labels.Get(store.MetricName) != "b" {
		t.Fatalf("after damage: %+v, want series b only", got)
	}
}

// Retention removes whole blocks older than the cutoff and nothing newer.
func TestDropBefore(t *testing.T) {
	fsys := vfs.NewMemFS()
	s := openMem(t, fsys)
	defer s.Close()
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 1000, 1)))
	s.Seal()
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 9000, 2)))
	s.Seal()
	n, err := s.DropBefore(func(string) int64 { return 5000 })
	if err != nil || n != 1 {
		t.Fatalf("DropBefore: %d %v, want 1 sample", n, err)
	}
	got, _ := s.SelectSeries("", 0, 10000, eq("a"))
	if len(got) != 1 || !slices.Equal(got[0].Samples, []store.Sample{{T: 9000, V: 2}}) {
		t.Fatalf("after retention: %+v", got)
	}
	if len(fsys.Names(".rmet")) != 1 {
		t.Fatalf("block files %v, want one left", fsys.Names(".rmet"))
	}
}

// Out-of-order samples are dropped and counted; an exact re-send is not.
func TestOutOfOrderCounted(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 5000, 1)))
	res, _ := s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 5000, 1)))
	if res.Rejected != 0 {
		t.Fatalf("re-send counted as rejected: %+v", res)
	}
	res, _ = s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 4000, 2)))
	if res.Rejected != 1 || !strings.Contains(res.RejectMsg, "out of order") {
		t.Fatalf("older sample: %+v, want 1 rejected as out of order", res)
	}
	// Another value in the same millisecond replaces the newest, in the
	// head and once sealed.
	res, _ = s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 5000, 7)))
	if res.Rejected != 0 {
		t.Fatalf("same millisecond: %+v", res)
	}
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 6000, 8)))
	for _, when := range []string{"head", "block"} {
		got, _ := s.SelectSeries("", 0, 10000, eq("a"))
		if len(got) != 1 || !slices.Equal(got[0].Samples, []store.Sample{{T: 5000, V: 7}, {T: 6000, V: 8}}) {
			t.Fatalf("%s: %+v, want 5000=7 and 6000=8", when, got)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
}

// A head past its bound refuses writes (nothing stored) until a seal
// empties it.
func TestHeadBoundRefuses(t *testing.T) {
	s, err := Open(Options{Dir: "/data/metrics", FS: vfs.NewMemFS(), SealBytes: 1 << 30, MaxHeadBytes: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var refused error
	n := 0
	for i := range 100 {
		_, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge(fmt.Sprintf("g%d", i), 1000, 1)))
		if err != nil {
			refused = err
			break
		}
		n++
	}
	if !errors.Is(refused, store.ErrOverloaded) || !strings.Contains(refused.Error(), "limit is 4000") {
		t.Fatalf("after %d requests: %v, want ErrOverloaded naming the limit", n, refused)
	}
	if got, _ := s.SelectSeries("", 0, 5000, eq(fmt.Sprintf("g%d", n))); len(got) != 0 {
		t.Fatal("the refused request was stored")
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("after", 1000, 1))); err != nil {
		t.Fatalf("after a seal: %v", err)
	}
}

// An attribute with an empty value is no label (as in Prometheus); a
// metric whose name has no letter or digit is refused by name.
func TestEmptyLabelsAndNames(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	res, err := s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("g", 1000, 1, strKV("empty", ""), strKV("k", "v")), gauge("...", 1000, 2)))
	if err != nil || res.Accepted != 1 || res.Rejected != 1 || !strings.Contains(res.RejectMsg, `"..."`) {
		t.Fatalf("%+v %v, want the nameless metric rejected by name", res, err)
	}
	got, _ := s.SeriesLabels("", 0, 5000, eq("g"))
	if len(got) != 1 || got[0].String() != `{__name__="g", job="svc", k="v", service_name="svc"}` {
		t.Fatalf("labels %v", got)
	}
}

// The collector reports what the store holds and what it refused.
func TestCollector(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 1000, 1), gauge("b", 1000, 2)))
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 500, 1)))
	s.Seal()
	s.AppendMetrics("", store.MetricFormatProto, request("svc", gauge("a", 2000, 3)))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(func() *Store { return s }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	for name, want := range map[string]float64{"rastro_metric_points_accepted_total": 3, "rastro_metric_points_rejected_total": 1,
		"rastro_metric_seals_total": 1, "rastro_metric_blocks": 1, "rastro_metric_block_points": 2, "rastro_metric_head_series": 1, "rastro_metric_head_points": 1} {
		if got[name] != want {
			t.Errorf("%s = %g, want %g", name, got[name], want)
		}
	}
}

// A summary becomes one series per quantile (a quantile label, Prometheus'
// form), _sum and _count, with the point's values as sent.
func TestSummarySeries(t *testing.T) {
	s := openMem(t, vfs.NewMemFS())
	defer s.Close()
	req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strKV("service.name", "api")}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: "gc.pause", Unit: "s", Data: &metricspb.Metric_Summary{Summary: &metricspb.Summary{
			DataPoints: []*metricspb.SummaryDataPoint{{TimeUnixNano: 30_000 * 1e6, Count: 40, Sum: 2.5,
				QuantileValues: []*metricspb.SummaryDataPoint_ValueAtQuantile{{Quantile: 0.5, Value: 0.04}, {Quantile: 0.99, Value: 0.3}}}},
		}}}}}},
	}}}
	b, _ := proto.Marshal(req)
	res, err := s.AppendMetrics("", store.MetricFormatProto, b)
	if err != nil || res.Accepted != 1 || res.Rejected != 0 {
		t.Fatalf("append: %+v %v", res, err)
	}
	re, _ := store.NewLabelMatcher(store.MatchRegexp, store.MetricName, "gc_pause_seconds.*")
	got, err := s.SelectSeries("", 0, 100_000, []*store.LabelMatcher{re})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, sd := range got {
		lines = append(lines, fmt.Sprintf("%s %v", sd.Labels, sd.Samples))
	}
	want := []string{
		`{__name__="gc_pause_seconds", job="api", quantile="0.5", service_name="api"} [{30000 0.04}]`,
		`{__name__="gc_pause_seconds", job="api", quantile="0.99", service_name="api"} [{30000 0.3}]`,
		`{__name__="gc_pause_seconds_count", job="api", service_name="api"} [{30000 40}]`,
		`{__name__="gc_pause_seconds_sum", job="api", service_name="api"} [{30000 2.5}]`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("series:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
