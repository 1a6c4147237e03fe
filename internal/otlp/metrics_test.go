package otlp

import (
	"fmt"
	"math"
	"strings"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

func (g *gen) f64() float64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.Inf(1 - 2*g.r.IntN(2))
	case 2:
		return float64(g.r.IntN(1000))
	}
	return g.r.NormFloat64() * 1e3
}

func (g *gen) opt() *float64 {
	if g.r.IntN(2) == 0 {
		return nil
	}
	v := g.f64()
	return &v
}

func (g *gen) exemplars() []*metricspb.Exemplar {
	var out []*metricspb.Exemplar
	for range g.r.IntN(3) {
		e := &metricspb.Exemplar{FilteredAttributes: g.kvs(2, 0), TimeUnixNano: g.u64(), TraceId: g.logID(16), SpanId: g.logID(8)}
		if g.r.IntN(2) == 0 {
			e.Value = &metricspb.Exemplar_AsInt{AsInt: int64(g.r.Uint64())}
		} else {
			e.Value = &metricspb.Exemplar_AsDouble{AsDouble: g.f64()}
		}
		out = append(out, e)
	}
	return out
}

func (g *gen) numberPoints() []*metricspb.NumberDataPoint {
	var out []*metricspb.NumberDataPoint
	for range g.r.IntN(4) {
		p := &metricspb.NumberDataPoint{Attributes: g.kvs(3, 0), StartTimeUnixNano: g.u64(), TimeUnixNano: g.u64(), Exemplars: g.exemplars(), Flags: g.u32()}
		switch g.r.IntN(3) {
		case 0:
			p.Value = &metricspb.NumberDataPoint_AsInt{AsInt: int64(g.r.Uint64())}
		case 1:
			p.Value = &metricspb.NumberDataPoint_AsDouble{AsDouble: g.f64()}
		}
		out = append(out, p)
	}
	return out
}

func (g *gen) counts(n int) []uint64 {
	var out []uint64
	for range n {
		out = append(out, uint64(g.r.IntN(100)))
	}
	return out
}

func (g *gen) metric() *metricspb.Metric {
	m := &metricspb.Metric{Name: g.str(), Description: g.str(), Unit: g.str()}
	temp := metricspb.AggregationTemporality(g.r.IntN(3))
	switch g.r.IntN(6) {
	case 0:
		m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: g.numberPoints()}}
	case 1:
		m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: g.numberPoints(), AggregationTemporality: temp, IsMonotonic: g.r.IntN(2) == 0}}
	case 2:
		h := &metricspb.Histogram{AggregationTemporality: temp}
		for range g.r.IntN(3) {
			nb := g.r.IntN(5)
			var bounds []float64
			for i := range nb {
				bounds = append(bounds, float64(i)*2.5)
			}
			h.DataPoints = append(h.DataPoints, &metricspb.HistogramDataPoint{Attributes: g.kvs(3, 0), StartTimeUnixNano: g.u64(), TimeUnixNano: g.u64(),
				Count: g.u64(), Sum: g.opt(), Min: g.opt(), Max: g.opt(), BucketCounts: g.counts(nb + 1), ExplicitBounds: bounds, Exemplars: g.exemplars(), Flags: g.u32()})
		}
		m.Data = &metricspb.Metric_Histogram{Histogram: h}
	case 3:
		h := &metricspb.ExponentialHistogram{AggregationTemporality: temp}
		for range g.r.IntN(3) {
			p := &metricspb.ExponentialHistogramDataPoint{Attributes: g.kvs(3, 0), StartTimeUnixNano: g.u64(), TimeUnixNano: g.u64(),
				Count: g.u64(), Sum: g.opt(), Min: g.opt(), Max: g.opt(), Scale: int32(g.r.IntN(40)) - 10, ZeroCount: g.u64(), ZeroThreshold: g.f64(),
				Exemplars: g.exemplars(), Flags: g.u32()}
			if g.r.IntN(3) > 0 {
				p.Positive = &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: int32(g.r.IntN(100)) - 50, BucketCounts: g.counts(g.r.IntN(5))}
			}
			if g.r.IntN(3) == 0 {
				p.Negative = &metricspb.ExponentialHistogramDataPoint_Buckets{Offset: -int32(g.r.IntN(1 << 20)), BucketCounts: g.counts(g.r.IntN(5))}
			}
			h.DataPoints = append(h.DataPoints, p)
		}
		m.Data = &metricspb.Metric_ExponentialHistogram{ExponentialHistogram: h}
	case 4:
		s := &metricspb.Summary{}
		for range g.r.IntN(3) {
			p := &metricspb.SummaryDataPoint{Attributes: g.kvs(3, 0), StartTimeUnixNano: g.u64(), TimeUnixNano: g.u64(), Count: g.u64(), Sum: g.f64(), Flags: g.u32()}
			for _, q := range []float64{0, 0.5, 0.99, 1}[:g.r.IntN(5)] {
				p.QuantileValues = append(p.QuantileValues, &metricspb.SummaryDataPoint_ValueAtQuantile{Quantile: q, Value: g.f64()})
			}
			s.DataPoints = append(s.DataPoints, p)
		}
		m.Data = &metricspb.Metric_Summary{Summary: s}
	}
	if g.r.IntN(5) == 0 {
		m.Metadata = g.kvs(2, 0)
	}
	return m
}

func (g *gen) metricsRequest() *colmetrics.ExportMetricsServiceRequest {
	req := &colmetrics.ExportMetricsServiceRequest{}
	for range 1 + g.r.IntN(3) {
		rm := &metricspb.ResourceMetrics{SchemaUrl: g.str()}
		if g.r.IntN(5) > 0 {
			rm.Resource = &resourcepb.Resource{Attributes: g.kvs(4, 0), DroppedAttributesCount: g.u32()}
		}
		for range 1 + g.r.IntN(3) {
			sm := &metricspb.ScopeMetrics{SchemaUrl: g.str()}
			if g.r.IntN(4) > 0 {
				sm.Scope = &commonpb.InstrumentationScope{Name: g.str(), Version: g.str(), Attributes: g.kvs(2, 0)}
			}
			for range g.r.IntN(4) {
				sm.Metrics = append(sm.Metrics, g.metric())
			}
			rm.ScopeMetrics = append(rm.ScopeMetrics, sm)
		}
		req.ResourceMetrics = append(req.ResourceMetrics, rm)
	}
	return req
}

// expectedMetrics converts an official request to what the decoders must
// return, and the count of exemplars with malformed ids.
func expectedMetrics(req *colmetrics.ExportMetricsServiceRequest) ([]Metric, int) {
	var out []Metric
	rejected := 0
	var p model.Problems
	exemplars := func(es []*metricspb.Exemplar) []Exemplar {
		var o []Exemplar
		for _, e := range es {
			if checkLogIDs(len(e.TraceId), len(e.SpanId)) != "" {
				rejected++
				continue
			}
			x := Exemplar{FilteredAttributes: convKVs(e.FilteredAttributes), TimeUnixNano: e.TimeUnixNano}
			switch v := e.Value.(type) {
			case *metricspb.Exemplar_AsInt:
				x.IsInt, x.IntValue, x.Value = true, v.AsInt, float64(v.AsInt)
			case *metricspb.Exemplar_AsDouble:
				x.Value = v.AsDouble
			}
			copy(x.TraceID[:], pad(e.TraceId, 16))
			copy(x.SpanID[:], pad(e.SpanId, 8))
			model.NormalizeResource(&model.Resource{Attributes: x.FilteredAttributes}, &p)
			o = append(o, x)
		}
		return o
	}
	for _, rm := range req.ResourceMetrics {
		res := &model.Resource{SchemaURL: rm.SchemaUrl}
		if rm.Resource != nil {
			res.Attributes = convKVs(rm.Resource.Attributes)
			res.DroppedAttributesCount = rm.Resource.DroppedAttributesCount
		}
		model.NormalizeResource(res, &p)
		for _, sm := range rm.ScopeMetrics {
			sc := &model.Scope{SchemaURL: sm.SchemaUrl}
			if sm.Scope != nil {
				sc.Name, sc.Version, sc.Attributes, sc.DroppedAttributesCount = sm.Scope.Name, sm.Scope.Version, convKVs(sm.Scope.Attributes), sm.Scope.DroppedAttributesCount
			}
			model.NormalizeScope(sc, &p)
			for _, pm := range sm.Metrics {
				m := Metric{Resource: res, Scope: sc, Name: strings.ToValidUTF8(pm.Name, "\uFFFD"), Description: pm.Description, Unit: pm.Unit}
				common := func(attrs []*commonpb.KeyValue, start, t uint64, flags uint32) MetricPoint {
					mp := MetricPoint{Attributes: convKVs(attrs), StartTimeUnixNano: start, TimeUnixNano: t, Flags: flags}
					model.NormalizeResource(&model.Resource{Attributes: mp.Attributes}, &p)
					return mp
				}
				num := func(ps []*metricspb.NumberDataPoint) {
					for _, pp := range ps {
						mp := common(pp.Attributes, pp.StartTimeUnixNano, pp.TimeUnixNano, pp.Flags)
						switch v := pp.Value.(type) {
						case *metricspb.NumberDataPoint_AsInt:
							mp.IsInt, mp.IntValue, mp.Value = true, v.AsInt, float64(v.AsInt)
						case *metricspb.NumberDataPoint_AsDouble:
							mp.Value = v.AsDouble
						}
						mp.Exemplars = exemplars(pp.Exemplars)
						m.Points = append(m.Points, mp)
					}
				}
				opt := func(dst *float64, has *bool, v *float64) {
					if v != nil {
						*dst, *has = *v, true
					}
				}
				switch d := pm.Data.(type) {
				case *metricspb.Metric_Gauge:
					m.Kind = KindGauge
					num(d.Gauge.GetDataPoints())
				case *metricspb.Metric_Sum:
					m.Kind, m.Temporality, m.Monotonic = KindSum, Temporality(d.Sum.GetAggregationTemporality()), d.Sum.GetIsMonotonic()
					num(d.Sum.GetDataPoints())
				case *metricspb.Metric_Histogram:
					m.Kind, m.Temporality = KindHistogram, Temporality(d.Histogram.GetAggregationTemporality())
					for _, pp := range d.Histogram.GetDataPoints() {
						mp := common(pp.Attributes, pp.StartTimeUnixNano, pp.TimeUnixNano, pp.Flags)
						mp.Count, mp.BucketCounts, mp.ExplicitBounds = pp.Count, pp.BucketCounts, pp.ExplicitBounds
						opt(&mp.Sum, &mp.HasSum, pp.Sum)
						opt(&mp.Min, &mp.HasMin, pp.Min)
						opt(&mp.Max, &mp.HasMax, pp.Max)
						mp.Exemplars = exemplars(pp.Exemplars)
						m.Points = append(m.Points, mp)
					}
				case *metricspb.Metric_ExponentialHistogram:
					m.Kind, m.Temporality = KindExponentialHistogram, Temporality(d.ExponentialHistogram.GetAggregationTemporality())
					for _, pp := range d.ExponentialHistogram.GetDataPoints() {
						mp := common(pp.Attributes, pp.StartTimeUnixNano, pp.TimeUnixNano, pp.Flags)
						mp.Count, mp.Scale, mp.ZeroCount, mp.ZeroThreshold = pp.Count, pp.Scale, pp.ZeroCount, pp.ZeroThreshold
						opt(&mp.Sum, &mp.HasSum, pp.Sum)
						opt(&mp.Min, &mp.HasMin, pp.Min)
						opt(&mp.Max, &mp.HasMax, pp.Max)
						if pp.Positive != nil {
							mp.Positive = ExpBuckets{pp.Positive.Offset, pp.Positive.BucketCounts}
						}
						if pp.Negative != nil {
							mp.Negative = ExpBuckets{pp.Negative.Offset, pp.Negative.BucketCounts}
						}
						mp.Exemplars = exemplars(pp.Exemplars)
						m.Points = append(m.Points, mp)
					}
				case *metricspb.Metric_Summary:
					m.Kind = KindSummary
					for _, pp := range d.Summary.GetDataPoints() {
						mp := common(pp.Attributes, pp.StartTimeUnixNano, pp.TimeUnixNano, pp.Flags)
						mp.Count, mp.Sum, mp.HasSum = pp.Count, pp.Sum, true
						for _, q := range pp.QuantileValues {
							mp.Quantiles = append(mp.Quantiles, Quantile{q.Quantile, q.Value})
						}
						m.Points = append(m.Points, mp)
					}
				}
				out = append(out, m)
			}
		}
	}
	return out, rejected
}

func pad(b []byte, n int) []byte {
	if len(b) != n {
		return make([]byte, n)
	}
	return b
}

// metricString renders a metric with every field, floats by their bits (so
// NaN equals NaN) and attributes by value.
func metricString(m *Metric) string {
	var b strings.Builder
	f := func(x float64) string { return fmt.Sprintf("%x", math.Float64bits(x)) }
	fmt.Fprintf(&b, "res{%s %d %q} scope{%q %q %s %q} %q %q %q %v %d %v\n", kvString(m.Resource.Attributes), m.Resource.DroppedAttributesCount, m.Resource.SchemaURL,
		m.Scope.Name, m.Scope.Version, kvString(m.Scope.Attributes), m.Scope.SchemaURL, m.Name, m.Description, m.Unit, m.Kind, m.Temporality, m.Monotonic)
	for _, p := range m.Points {
		fmt.Fprintf(&b, " pt{%s %d %d %d %s %v %d %d %s %v %s %v %s %v %v", kvString(p.Attributes), p.StartTimeUnixNano, p.TimeUnixNano, p.Flags,
			f(p.Value), p.IsInt, p.IntValue, p.Count, f(p.Sum), p.HasSum, f(p.Min), p.HasMin, f(p.Max), p.HasMax, p.BucketCounts)
		for _, x := range p.ExplicitBounds {
			b.WriteString(" " + f(x))
		}
		fmt.Fprintf(&b, " %d %d %s %d%v %d%v", p.Scale, p.ZeroCount, f(p.ZeroThreshold), p.Positive.Offset, p.Positive.Counts, p.Negative.Offset, p.Negative.Counts)
		for _, q := range p.Quantiles {
			b.WriteString(" q" + f(q.Quantile) + "=" + f(q.Value))
		}
		for _, e := range p.Exemplars {
			fmt.Fprintf(&b, " ex{%s %d %s %v %d %x %x}", kvString(e.FilteredAttributes), e.TimeUnixNano, f(e.Value), e.IsInt, e.IntValue, e.TraceID, e.SpanID)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func kvString(kvs []model.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%q=%s,", kv.Key, valueString(kv.Value))
	}
	return b.String()
}

func valueString(v model.Value) string {
	switch v.Type {
	case model.ValueArray:
		var parts []string
		for _, e := range v.Elems() {
			parts = append(parts, valueString(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case model.ValueKvList:
		return "{" + kvString(v.Fields()) + "}"
	case model.ValueDouble:
		return fmt.Sprintf("d%x", math.Float64bits(v.Double))
	}
	return fmt.Sprintf("%d:%q:%d", v.Type, v.Str, v.Int)
}

func diffMetrics(got, want []Metric) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d metrics, want %d", len(got), len(want))
	}
	for i := range got {
		if g, w := metricString(&got[i]), metricString(&want[i]); g != w {
			return fmt.Sprintf("metric %d:\n got %s\nwant %s", i, g, w)
		}
	}
	return ""
}

// Both decoders agree with the official protobuf types on random requests
// that use every metric kind and field, with malformed exemplar ids.
func TestDecodeMetricsDifferential(t *testing.T) {
	g := newGen(31)
	g.badIDs = true
	for iter := range 800 {
		req := g.metricsRequest()
		want, rejected := expectedMetrics(req)
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeMetricsProto(b)
		if err != nil {
			t.Fatalf("iter %d: DecodeMetricsProto: %v", iter, err)
		}
		if d := diffMetrics(got.Metrics, want); d != "" {
			t.Fatalf("iter %d: protobuf: %s", iter, d)
		}
		if got.Rejected != rejected || (rejected > 0 && !strings.HasPrefix(got.RejectMsg, "resource_metrics[")) {
			t.Fatalf("iter %d: protobuf: Rejected = %d (%q), want %d naming the position", iter, got.Rejected, got.RejectMsg, rejected)
		}
		pj, err := protojson.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		gotJ, err := DecodeMetricsJSON(hexIDs(t, pj))
		if err != nil {
			t.Fatalf("iter %d: DecodeMetricsJSON: %v\n%.2000s", iter, err, pj)
		}
		if d := diffMetrics(gotJ.Metrics, want); d != "" {
			t.Fatalf("iter %d: otlp-json: %s\n%.3000s", iter, d, pj)
		}
		if gotJ.Rejected != rejected {
			t.Fatalf("iter %d: otlp-json: Rejected = %d (%q), want %d", iter, gotJ.Rejected, gotJ.RejectMsg, rejected)
		}
	}
}

func TestDecodeMetricsErrorsNameTheField(t *testing.T) {
	req := &colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
		{Name: "a", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{DataPoints: []*metricspb.HistogramDataPoint{{BucketCounts: []uint64{1, 2}}}}}}}}}}}}
	b, _ := proto.Marshal(req)
	// Cut the packed bucket_counts run short by shortening the whole message.
	_, err := DecodeMetricsProto(b[:len(b)-3])
	if err == nil || !strings.Contains(err.Error(), "resource_metrics[0]") {
		t.Fatalf("truncated request: %v, want an error naming resource_metrics[0]", err)
	}
	_, err = DecodeMetricsJSON([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","sum":{"dataPoints":[{"asInt":"12x"}]}}]}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "resourceMetrics[0].scopeMetrics[0].metrics[0].sum.dataPoints[0].asInt") {
		t.Fatalf("bad asInt: %v, want an error naming the field path", err)
	}
}

func metricsRequestDepth(req *colmetrics.ExportMetricsServiceRequest) int {
	deepest := 0
	kvs := func(l []*commonpb.KeyValue) {
		for _, kv := range l {
			deepest = max(deepest, anyDepth(kv.GetValue()))
		}
	}
	for _, rm := range req.GetResourceMetrics() {
		kvs(rm.GetResource().GetAttributes())
		for _, sm := range rm.GetScopeMetrics() {
			kvs(sm.GetScope().GetAttributes())
			for _, m := range sm.GetMetrics() {
				kvs(m.GetMetadata())
				var ex []*metricspb.Exemplar
				for _, p := range m.GetGauge().GetDataPoints() {
					kvs(p.GetAttributes())
					ex = append(ex, p.GetExemplars()...)
				}
				for _, p := range m.GetSum().GetDataPoints() {
					kvs(p.GetAttributes())
					ex = append(ex, p.GetExemplars()...)
				}
				for _, p := range m.GetHistogram().GetDataPoints() {
					kvs(p.GetAttributes())
					ex = append(ex, p.GetExemplars()...)
				}
				for _, p := range m.GetExponentialHistogram().GetDataPoints() {
					kvs(p.GetAttributes())
					ex = append(ex, p.GetExemplars()...)
				}
				for _, p := range m.GetSummary().GetDataPoints() {
					kvs(p.GetAttributes())
				}
				for _, e := range ex {
					kvs(e.GetFilteredAttributes())
				}
			}
		}
	}
	return deepest
}

// FuzzDecodeMetricsProto: DecodeMetricsProto agrees with proto.Unmarshal on
// every input that decoder accepts, and never accepts what it refuses
// (except invalid UTF-8, which we repair, and the value-depth limit).
func FuzzDecodeMetricsProto(f *testing.F) {
	g := newGen(41)
	g.badIDs = true
	for range 8 {
		b, err := proto.Marshal(g.metricsRequest())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeMetricsProto(data)
		var req colmetrics.ExportMetricsServiceRequest
		officialErr := proto.Unmarshal(data, &req)
		if officialErr == nil && metricsRequestDepth(&req) > maxValueDepth {
			var de *Error
			if !asError(err, &de) || de.Reason != valueDepthReason {
				t.Fatalf("value nested %d levels: DecodeMetricsProto returned %v, want a depth error", metricsRequestDepth(&req), err)
			}
			return
		}
		if officialErr == nil {
			if err != nil {
				t.Fatalf("proto.Unmarshal accepts, DecodeMetricsProto fails: %v", err)
			}
			want, rejected := expectedMetrics(&req)
			if d := diffMetrics(got.Metrics, want); d != "" {
				t.Fatalf("disagrees with proto.Unmarshal: %s", d)
			}
			if got.Rejected != rejected {
				t.Fatalf("Rejected = %d, proto.Unmarshal-based count %d", got.Rejected, rejected)
			}
		} else if err == nil && !strings.Contains(officialErr.Error(), "UTF-8") && !strings.Contains(officialErr.Error(), "recursion") {
			t.Fatalf("DecodeMetricsProto accepts input proto.Unmarshal rejects: %v", officialErr)
		}
	})
}

// FuzzDecodeMetricsJSON: no input crashes the decoder; an error is an
// *Error with an offset inside the input.
func FuzzDecodeMetricsJSON(f *testing.F) {
	g := newGen(43)
	for range 6 {
		pj, err := protojson.Marshal(g.metricsRequest())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(hexIDs(f, pj))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := DecodeMetricsJSON(data)
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("error %v (%T) does not locate itself in the %d-byte input", err, err, len(data))
			}
		}
	})
}
