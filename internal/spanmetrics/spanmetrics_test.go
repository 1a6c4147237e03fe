package spanmetrics

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rastro-dev/rastro/internal/bench"
	rmodel "github.com/rastro-dev/rastro/internal/model"
)

func span(service, name string, kind rmodel.SpanKind, status rmodel.StatusCode, durNanos uint64) rmodel.Span {
	return rmodel.Span{Service: service, Name: name, Kind: kind, StatusCode: status, StartTimeUnixNano: 1e18, EndTimeUnixNano: 1e18 + durNanos}
}

// parse reads the exposition with Prometheus' own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus' parser refuses the exposition: %v\n%s", err, text)
	}
	return fams
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// Known answers: counts per label combination, bucket bounds inclusive,
// cumulative buckets, sums in seconds, a project's series apart from
// another's.
func TestKnownAnswers(t *testing.T) {
	r := New(0)
	ms := uint64(1e6)
	r.Observe("", []rmodel.Span{
		span("checkout", "POST /pay", rmodel.KindServer, rmodel.StatusError, 2*ms), // exactly on the first bound
		span("checkout", "POST /pay", rmodel.KindServer, rmodel.StatusError, 3*ms), // le 0.004
		span("checkout", "POST /pay", rmodel.KindServer, rmodel.StatusUnset, 20e9), // beyond 16.384 s
		span("auth", `say "hi"\n`, rmodel.KindClient, rmodel.StatusOK, 0),
	})
	r.Observe("", []rmodel.Span{{Service: "auth", Name: `say "hi"\n`, Kind: rmodel.KindClient, StatusCode: rmodel.StatusOK,
		StartTimeUnixNano: 5, EndTimeUnixNano: 3}}) // an end before the start counts as 0 s
	r.Observe("other", []rmodel.Span{span("x", "y", rmodel.KindInternal, rmodel.StatusUnset, ms)})

	var buf bytes.Buffer
	if err := r.WriteText(&buf, ""); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, buf.Bytes())
	calls := fams[CallsTotal]
	if calls == nil || calls.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("no counter %s in:\n%s", CallsTotal, buf.String())
	}
	got := map[string]float64{}
	for _, m := range calls.Metric {
		got[labels(m)] = m.GetCounter().GetValue()
	}
	want := map[string]float64{
		"service=auth,span_kind=SPAN_KIND_CLIENT,span_name=say \"hi\"\\n,status_code=STATUS_CODE_OK":    2,
		"service=checkout,span_kind=SPAN_KIND_SERVER,span_name=POST /pay,status_code=STATUS_CODE_ERROR": 2,
		"service=checkout,span_kind=SPAN_KIND_SERVER,span_name=POST /pay,status_code=STATUS_CODE_UNSET": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls:\n got %v\nwant %v", got, want)
	}
	lat := fams[Latency]
	if lat == nil || lat.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram %s", Latency)
	}
	for _, m := range lat.Metric {
		h := m.GetHistogram()
		if len(h.Bucket) != 15 || h.Bucket[0].GetUpperBound() != 0.002 || h.Bucket[13].GetUpperBound() != 16.384 || !math.IsInf(h.Bucket[14].GetUpperBound(), 1) {
			t.Fatalf("%s: buckets %v, want Tempo's 0.002 doubling to 16.384, then +Inf", labels(m), h.Bucket)
		}
		cum := make([]uint64, len(h.Bucket))
		for i, b := range h.Bucket {
			cum[i] = b.GetCumulativeCount()
		}
		switch l := labels(m); {
		case strings.Contains(l, "STATUS_CODE_ERROR"):
			// 2 ms in le=0.002; 3 ms in le=0.004 and above.
			if cum[0] != 1 || cum[1] != 2 || cum[13] != 2 || h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.005) > 1e-12 {
				t.Errorf("%s: cumulative %v, count %d, sum %g", l, cum, h.GetSampleCount(), h.GetSampleSum())
			}
		case strings.Contains(l, "STATUS_CODE_UNSET"):
			if cum[13] != 0 || h.GetSampleCount() != 1 || h.GetSampleSum() != 20 {
				t.Errorf("%s: a 20 s span: cumulative %v, count %d, sum %g (only +Inf holds it)", l, cum, h.GetSampleCount(), h.GetSampleSum())
			}
		default:
			if cum[0] != 2 || h.GetSampleSum() != 0 {
				t.Errorf("%s: two 0 s spans: cumulative %v, sum %g", l, cum, h.GetSampleSum())
			}
		}
	}
	if other := r.Snapshot("other"); len(other) != 1 || other[0].Calls != 1 || other[0].SpanKind != "SPAN_KIND_INTERNAL" {
		t.Errorf("project other: %+v", other)
	}
	if none := r.Snapshot("none"); len(none) != 0 {
		t.Errorf("a project with no spans has series %+v", none)
	}
}

// Beyond the series limit, new combinations are counted in one overflow
// series; none is lost.
func TestOverflow(t *testing.T) {
	r := New(3)
	var spans []rmodel.Span
	for i := range 10 {
		spans = append(spans, span("svc", fmt.Sprint("op", i), rmodel.KindServer, rmodel.StatusUnset, 1))
	}
	r.Observe("", spans)
	r.Observe("", spans[:2]) // existing series still count
	all := r.Snapshot("")
	if len(all) != 4 {
		t.Fatalf("%d series, want 3 and the overflow: %+v", len(all), all)
	}
	var total uint64
	for _, s := range all {
		total += s.Calls
		if s.SpanName == OverflowName && s.Calls != 7 {
			t.Errorf("overflow counts %d, want 7", s.Calls)
		}
	}
	if total != 12 {
		t.Errorf("%d calls counted, want 12", total)
	}
}

func TestConcurrentObserve(t *testing.T) {
	r := New(0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				r.Observe(fmt.Sprint("p", g%2), []rmodel.Span{span("s", fmt.Sprint("n", i%7), rmodel.KindServer, rmodel.StatusOK, uint64(i)*1e6)})
				if i%50 == 0 {
					var buf bytes.Buffer
					r.WriteText(&buf, "p0")
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range []string{"p0", "p1"} {
		var n uint64
		for _, s := range r.Snapshot(p) {
			n += s.Calls
		}
		if n != 1000 {
			t.Errorf("project %s: %d calls, want 1000", p, n)
		}
	}
}

// BenchmarkObserve: the cost per span the ingest path pays, on the
// canonical corpus's mix of services, names, kinds and statuses.
func BenchmarkObserve(b *testing.B) {
	spans, err := bench.Generate("canonical", bench.CorpusOptions{Seed: 1, Spans: 100_000, Start: time.Unix(1_800_000_000, 0)})
	if err != nil {
		b.Fatal(err)
	}
	r := New(0)
	b.ResetTimer()
	for range b.N {
		for i := 0; i < len(spans); i += 1000 {
			r.Observe("", spans[i:min(i+1000, len(spans))])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
}
