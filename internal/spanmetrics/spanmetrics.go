// Package spanmetrics derives RED metrics from the spans the server
// acknowledges: a call counter and a duration histogram per project,
// service, span name, span kind and status code, with the names, labels and
// buckets of Tempo's metrics-generator (modules/generator/processor/
// spanmetrics: traces_spanmetrics_calls_total and traces_spanmetrics_latency,
// intrinsic dimensions service, span_name, span_kind and status_code, buckets
// prometheus.ExponentialBuckets(0.002, 2, 14)), so that dashboards and
// Grafana's Tempo views built on Tempo's span metrics read them unchanged.
// They are cumulative from the process's start, as a Prometheus counter is:
// a restart is a counter reset, which rate() and increase() handle.
package spanmetrics

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// Metric names, as Tempo's metrics-generator writes them.
const (
	CallsTotal = "traces_spanmetrics_calls_total"
	Latency    = "traces_spanmetrics_latency"
)

// Buckets are the latency histogram's upper bounds in seconds: Tempo's
// default, 2 ms doubling to 16.384 s (and +Inf).
var Buckets = func() []float64 {
	b := make([]float64, 14)
	for i := range b {
		b[i] = 0.002 * math.Pow(2, float64(i))
	}
	return b
}()

// OverflowName is the span_name of the one series (with no service, kind or
// status) that counts the spans of new label combinations once a project
// has its maximum of series.
const OverflowName = "__rastro_overflow__"

// DefaultMaxSeries bounds the label combinations kept per project.
const DefaultMaxSeries = 10000

type key struct {
	service, name string
	kind          model.SpanKind
	status        model.StatusCode
}

type series struct {
	calls   uint64
	sum     float64    // seconds
	buckets [15]uint64 // per bucket (not cumulative); the last is +Inf
}

type project struct {
	series map[key]*series
}

// Registry holds the counters. Its zero value is not usable: use New.
type Registry struct {
	maxSeries int
	mu        sync.Mutex
	projects  map[string]*project
}

// New returns an empty registry keeping at most maxSeries label
// combinations per project (DefaultMaxSeries when maxSeries <= 0).
func New(maxSeries int) *Registry {
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	return &Registry{maxSeries: maxSeries, projects: map[string]*project{}}
}

// Observe counts spans acknowledged for proj.
func (r *Registry) Observe(proj string, spans []model.Span) {
	if len(spans) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.projects[proj]
	if p == nil {
		p = &project{series: map[key]*series{}}
		r.projects[proj] = p
	}
	var last key
	var s *series
	for i := range spans {
		sp := &spans[i]
		k := key{sp.Service, sp.Name, sp.Kind, sp.StatusCode}
		if s == nil || k != last {
			last = k
			s = p.series[k]
			if s == nil {
				if len(p.series) >= r.maxSeries {
					k = key{name: OverflowName} // one series for every combination beyond the limit
					s = p.series[k]
				}
				if s == nil {
					s = &series{}
					p.series[k] = s
				}
			}
		}
		secs := 0.0
		if sp.EndTimeUnixNano > sp.StartTimeUnixNano {
			secs = float64(sp.EndTimeUnixNano-sp.StartTimeUnixNano) / 1e9
		}
		s.calls++
		s.sum += secs
		b, _ := slices.BinarySearch(Buckets, secs) // the first bound >= secs: le is inclusive
		s.buckets[b]++
	}
}

// Series is one label combination's values.
type Series struct {
	Service, SpanName, SpanKind, StatusCode string
	Calls                                   uint64
	Sum                                     float64  // seconds
	Cumulative                              []uint64 // per bound of Buckets, then +Inf (= Calls)
}

// Snapshot returns the project's series, sorted by their labels.
func (r *Registry) Snapshot(proj string) []Series {
	r.mu.Lock()
	p := r.projects[proj]
	var out []Series
	if p != nil {
		out = make([]Series, 0, len(p.series))
		for k, s := range p.series {
			cum := make([]uint64, len(s.buckets))
			var n uint64
			for i, c := range s.buckets {
				n += c
				cum[i] = n
			}
			out = append(out, Series{Service: k.service, SpanName: k.name, SpanKind: KindLabel(k.kind), StatusCode: StatusLabel(k.status),
				Calls: s.calls, Sum: s.sum, Cumulative: cum})
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Series) int {
		for _, c := range [][2]string{{a.Service, b.Service}, {a.SpanName, b.SpanName}, {a.SpanKind, b.SpanKind}, {a.StatusCode, b.StatusCode}} {
			if x := strings.Compare(c[0], c[1]); x != 0 {
				return x
			}
		}
		return 0
	})
	return out
}

// KindLabel is the span_kind label value of k, as Tempo writes it.
func KindLabel(k model.SpanKind) string {
	switch k {
	case model.KindInternal:
		return "SPAN_KIND_INTERNAL"
	case model.KindServer:
		return "SPAN_KIND_SERVER"
	case model.KindClient:
		return "SPAN_KIND_CLIENT"
	case model.KindProducer:
		return "SPAN_KIND_PRODUCER"
	case model.KindConsumer:
		return "SPAN_KIND_CONSUMER"
	}
	return "SPAN_KIND_UNSPECIFIED"
}

// StatusLabel is the status_code label value of c, as Tempo writes it.
func StatusLabel(c model.StatusCode) string {
	switch c {
	case model.StatusOK:
		return "STATUS_CODE_OK"
	case model.StatusError:
		return "STATUS_CODE_ERROR"
	}
	return "STATUS_CODE_UNSET"
}

// WriteText writes the project's series in the Prometheus text exposition
// format (version 0.0.4).
func (r *Registry) WriteText(w io.Writer, proj string) error {
	all := r.Snapshot(proj)
	var b []byte
	b = append(b, "# HELP "+CallsTotal+" Spans acknowledged, by service, span name, kind and status (since the server started).\n"...)
	b = append(b, "# TYPE "+CallsTotal+" counter\n"...)
	for i := range all {
		b = appendName(b, CallsTotal, &all[i], "")
		b = strconv.AppendUint(b, all[i].Calls, 10)
		b = append(b, '\n')
	}
	b = append(b, "# HELP "+Latency+" Span durations in seconds (end - start; 0 when the end is not after the start).\n"...)
	b = append(b, "# TYPE "+Latency+" histogram\n"...)
	for i := range all {
		s := &all[i]
		for j, c := range s.Cumulative {
			le := "+Inf"
			if j < len(Buckets) {
				le = strconv.FormatFloat(Buckets[j], 'g', -1, 64)
			}
			b = appendName(b, Latency+"_bucket", s, le)
			b = strconv.AppendUint(b, c, 10)
			b = append(b, '\n')
		}
		b = appendName(b, Latency+"_sum", s, "")
		b = strconv.AppendFloat(b, s.Sum, 'g', -1, 64)
		b = append(b, '\n')
		b = appendName(b, Latency+"_count", s, "")
		b = strconv.AppendUint(b, s.Calls, 10)
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}

func appendName(b []byte, name string, s *Series, le string) []byte {
	b = append(b, name...)
	b = append(b, `{service="`...)
	b = appendEscaped(b, s.Service)
	b = append(b, `",span_name="`...)
	b = appendEscaped(b, s.SpanName)
	b = append(b, `",span_kind="`...)
	b = append(b, s.SpanKind...)
	b = append(b, `",status_code="`...)
	b = append(b, s.StatusCode...)
	if le != "" {
		b = append(b, `",le="`...)
		b = append(b, le...)
	}
	return append(b, `"} `...)
}

// appendEscaped escapes a label value as the text format asks: backslash,
// double quote and line feed.
func appendEscaped(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// Projects returns the projects that have series, sorted.
func (r *Registry) Projects() []string {
	r.mu.Lock()
	out := make([]string, 0, len(r.projects))
	for p := range r.projects {
		out = append(out, p)
	}
	r.mu.Unlock()
	slices.Sort(out)
	return out
}

// ExportRequest encodes the project's series as an OTLP metrics export
// request (protobuf): the calls as a cumulative monotonic sum named
// traces_spanmetrics_calls, the latency as a cumulative histogram named
// traces_spanmetrics_latency, their labels as data point attributes, the
// series' start at start and their values at now. A store that follows
// Prometheus' OTLP naming (as Rastro's metric store does) keeps them under
// the names /spanmetrics shows. Nil when the project has no series.
func (r *Registry) ExportRequest(proj string, start, now time.Time) ([]byte, error) {
	all := r.Snapshot(proj)
	if len(all) == 0 {
		return nil, nil
	}
	t0, t1 := uint64(start.UnixNano()), uint64(now.UnixNano())
	calls := make([]*metricspb.NumberDataPoint, len(all))
	hists := make([]*metricspb.HistogramDataPoint, len(all))
	for i := range all {
		s := &all[i]
		attrs := []*commonpb.KeyValue{strAttr("service", s.Service), strAttr("span_name", s.SpanName),
			strAttr("span_kind", s.SpanKind), strAttr("status_code", s.StatusCode)}
		calls[i] = &metricspb.NumberDataPoint{Attributes: attrs, StartTimeUnixNano: t0, TimeUnixNano: t1,
			Value: &metricspb.NumberDataPoint_AsInt{AsInt: int64(s.Calls)}}
		counts := make([]uint64, len(s.Cumulative))
		var prev uint64
		for j, c := range s.Cumulative {
			counts[j] = c - prev
			prev = c
		}
		sum := s.Sum
		hists[i] = &metricspb.HistogramDataPoint{Attributes: attrs, StartTimeUnixNano: t0, TimeUnixNano: t1,
			Count: s.Calls, Sum: &sum, BucketCounts: counts, ExplicitBounds: Buckets}
	}
	cumulative := metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	req := &colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{},
		ScopeMetrics: []*metricspb.ScopeMetrics{{
			Scope: &commonpb.InstrumentationScope{Name: "rastro/spanmetrics"},
			Metrics: []*metricspb.Metric{
				{Name: strings.TrimSuffix(CallsTotal, "_total"), Description: "Spans acknowledged, by service, span name, kind and status.",
					Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: calls, AggregationTemporality: cumulative, IsMonotonic: true}}},
				{Name: Latency, Description: "Span durations in seconds.",
					Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{DataPoints: hists, AggregationTemporality: cumulative}}},
			},
		}},
	}}}
	return proto.Marshal(req)
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}
