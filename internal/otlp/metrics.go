package otlp

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
)

// MetricKind is the type of an OTLP metric (the Metric.data oneof).
type MetricKind uint8

// The kinds of metric data; KindNone is a metric without data.
const (
	KindNone MetricKind = iota
	KindGauge
	KindSum
	KindHistogram
	KindExponentialHistogram
	KindSummary
)

var metricKindNames = [...]string{"none", "gauge", "sum", "histogram", "exponential_histogram", "summary"}

func (k MetricKind) String() string {
	if int(k) < len(metricKindNames) {
		return metricKindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Temporality is OTLP's AggregationTemporality.
type Temporality int32

const (
	TemporalityUnspecified Temporality = 0
	TemporalityDelta       Temporality = 1
	TemporalityCumulative  Temporality = 2
)

// Metric is one OTLP metric with its data points, decoded.
type Metric struct {
	Resource    *model.Resource
	Scope       *model.Scope
	Name        string
	Description string
	Unit        string
	Kind        MetricKind
	// Temporality and Monotonic are set for sums (Monotonic) and for sums and
	// both histogram kinds (Temporality).
	Temporality Temporality
	Monotonic   bool
	Points      []MetricPoint
}

// MetricPoint is a data point of any kind; the fields of other kinds are zero.
type MetricPoint struct {
	Attributes        []model.KeyValue
	StartTimeUnixNano uint64
	TimeUnixNano      uint64
	Flags             uint32
	// Value is a gauge's or sum's value (as_int converted to float64; IsInt
	// tells which it was, IntValue keeps it exactly).
	Value    float64
	IsInt    bool
	IntValue int64
	// Histograms and summaries.
	Count          uint64
	Sum            float64
	HasSum         bool
	Min, Max       float64
	HasMin, HasMax bool
	// Explicit-bucket histograms.
	BucketCounts   []uint64
	ExplicitBounds []float64
	// Exponential histograms.
	Scale              int32
	ZeroCount          uint64
	ZeroThreshold      float64
	Positive, Negative ExpBuckets
	// Summaries.
	Quantiles []Quantile
	Exemplars []Exemplar
}

// ExpBuckets is one side of an exponential histogram.
type ExpBuckets struct {
	Offset int32
	Counts []uint64
}

// Quantile is a summary's value at a quantile.
type Quantile struct{ Quantile, Value float64 }

// Exemplar is a sample measurement with the trace and span it was taken in.
type Exemplar struct {
	FilteredAttributes []model.KeyValue
	TimeUnixNano       uint64
	Value              float64
	IsInt              bool
	IntValue           int64
	TraceID            model.TraceID
	SpanID             model.SpanID
}

// MetricBatch is the result of decoding one metrics export request.
type MetricBatch struct {
	Metrics []Metric
	// Points counts the data points of Metrics.
	Points int
	// Rejected counts exemplars dropped because their ids were malformed
	// (the point is kept). RejectMsg names the first.
	Rejected  int
	RejectMsg string
	Problems  model.Problems
}

func (b *MetricBatch) reject(pos func() string, reason string) {
	if b.Rejected == 0 {
		b.RejectMsg = pos() + ": " + reason
	}
	b.Rejected++
}

// DecodeMetricsProto decodes an ExportMetricsServiceRequest in protobuf wire
// format with DecodeProto's rules: one private copy of b that strings alias,
// protobuf-go's merge semantics (unknown fields skipped, the last scalar and
// the last member of a oneof win, repeated fields append, packed or not),
// invalid UTF-8 repaired and counted. An exemplar whose trace or span id has
// the wrong length is dropped and counted in Rejected; other malformed input
// returns an *Error naming the field path and byte offset.
func DecodeMetricsProto(b []byte) (MetricBatch, error) {
	d := metricsProtoDecoder{protoDecoder: protoDecoder{buf: append([]byte(nil), b...)}}
	if err := d.request(); err != nil {
		return MetricBatch{}, finish(err, "protobuf")
	}
	return d.out, nil
}

type metricsProtoDecoder struct {
	protoDecoder
	out MetricBatch
}

func (d *metricsProtoDecoder) request() error {
	return eachResource(d.buf, "resource_metrics", d.resourceMetrics)
}

func (d *metricsProtoDecoder) resourceMetrics(b []byte, base, rsIdx int) error {
	res := &model.Resource{}
	first := len(d.out.Metrics)
	d.scopesOfRes = d.scopesOfRes[:0]
	err := walkGroup(b, base,
		"resource", func(v []byte, vb int) error { return d.resource(v, vb, res) },
		"scope_metrics", func(v []byte, vb, ssIdx int) error { return d.scopeMetrics(v, vb, res, rsIdx, ssIdx) },
		&res.SchemaURL)
	if err != nil {
		return err
	}
	finishMetricResource(&d.out, res, d.scopesOfRes, first)
	return nil
}

// finishMetricResource normalises a decoded ResourceMetrics: the resource,
// its scopes, and the attributes of its points and exemplars.
func finishMetricResource(out *MetricBatch, res *model.Resource, scopes []*model.Scope, first int) {
	model.NormalizeResource(res, &out.Problems)
	for _, sc := range scopes {
		model.NormalizeScope(sc, &out.Problems)
	}
	for i := first; i < len(out.Metrics); i++ {
		m := &out.Metrics[i]
		fixName := model.Resource{SchemaURL: m.Name}
		model.NormalizeResource(&fixName, &out.Problems)
		m.Name = fixName.SchemaURL
		for j := range m.Points {
			p := &m.Points[j]
			model.NormalizeResource(&model.Resource{Attributes: p.Attributes}, &out.Problems)
			for k := range p.Exemplars {
				model.NormalizeResource(&model.Resource{Attributes: p.Exemplars[k].FilteredAttributes}, &out.Problems)
			}
		}
		out.Points += len(m.Points)
	}
}

func (d *metricsProtoDecoder) scopeMetrics(b []byte, base int, res *model.Resource, rsIdx, ssIdx int) error {
	sc := &model.Scope{}
	d.scopesOfRes = append(d.scopesOfRes, sc)
	return walkGroup(b, base,
		"scope", func(v []byte, vb int) error { return d.scope(v, vb, sc) },
		"metrics", func(v []byte, vb, mIdx int) error {
			m := Metric{Resource: res, Scope: sc}
			pos := func() string {
				return "resource_metrics[" + strconv.Itoa(rsIdx) + "].scope_metrics[" + strconv.Itoa(ssIdx) + "].metrics[" + strconv.Itoa(mIdx) + "]"
			}
			if err := d.metric(v, vb, &m, pos); err != nil {
				return err
			}
			d.out.Metrics = append(d.out.Metrics, m)
			return nil
		},
		&sc.SchemaURL)
}

// metricDataFields maps Metric's data oneof field numbers to kinds.
var metricDataFields = map[protowire.Number]MetricKind{5: KindGauge, 7: KindSum, 9: KindHistogram, 10: KindExponentialHistogram, 11: KindSummary}

func (d *metricsProtoDecoder) metric(b []byte, base int, m *Metric, pos func() string) error {
	var metadata []model.KeyValue
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		if kind, ok := metricDataFields[num]; ok && typ == protowire.BytesType {
			v, vb, err := r.bytes(kind.String())
			if err != nil {
				return err
			}
			if m.Kind != kind {
				// A different member of the oneof replaces the data; the
				// same one merges (protobuf-go's rules).
				m.Kind, m.Points, m.Temporality, m.Monotonic = kind, nil, 0, false
			}
			if err := d.metricData(v, vb, m, pos); err != nil {
				return wrap(err, kind.String())
			}
			continue
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			if m.Name, err = r.str("name"); err != nil {
				return err
			}
			continue
		case num == 2 && typ == protowire.BytesType:
			if m.Description, err = r.str("description"); err != nil {
				return err
			}
			continue
		case num == 3 && typ == protowire.BytesType:
			if m.Unit, err = r.str("unit"); err != nil {
				return err
			}
			continue
		case num == 12 && typ == protowire.BytesType:
			// metadata: validated, not kept
			if err := d.appendKeyValue(&r, "metadata", &metadata, 0, 0); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// metricData decodes a Gauge, Sum, Histogram, ExponentialHistogram or
// Summary message into m.
func (d *metricsProtoDecoder) metricData(b []byte, base int, m *Metric, pos func() string) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			i := len(m.Points)
			v, vb, err := r.bytesAt("data_points", i)
			if err != nil {
				return err
			}
			m.Points = append(m.Points, MetricPoint{})
			ppos := func() string { return pos() + ".data_points[" + strconv.Itoa(i) + "]" }
			if err := d.point(v, vb, m.Kind, &m.Points[i], ppos); err != nil {
				return wrapIdx(err, "data_points", i)
			}
			continue
		case num == 2 && typ == protowire.VarintType && m.Kind != KindGauge && m.Kind != KindSummary:
			x, err := r.varint("aggregation_temporality")
			if err != nil {
				return err
			}
			m.Temporality = Temporality(int32(x))
			continue
		case num == 3 && typ == protowire.VarintType && m.Kind == KindSum:
			x, err := r.varint("is_monotonic")
			if err != nil {
				return err
			}
			m.Monotonic = x != 0
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// pointLayout numbers the fields that the data point messages of several
// kinds share under different numbers (start_time_unix_nano and
// time_unix_nano are 2 and 3 in all); 0, never a valid field number, is a
// field the kind does not have.
type pointLayout struct {
	attributes, exemplars, flags, count, sum, min, max protowire.Number
}

// pointLayouts are NumberDataPoint's (gauges, sums), HistogramDataPoint's,
// ExponentialHistogramDataPoint's and SummaryDataPoint's, by kind.
var pointLayouts = [...]pointLayout{
	KindGauge:                {attributes: 7, exemplars: 5, flags: 8},
	KindSum:                  {attributes: 7, exemplars: 5, flags: 8},
	KindHistogram:            {attributes: 9, count: 4, sum: 5, exemplars: 8, flags: 10, min: 11, max: 12},
	KindExponentialHistogram: {attributes: 1, count: 4, sum: 5, flags: 10, exemplars: 11, min: 12, max: 13},
	KindSummary:              {attributes: 7, count: 4, sum: 5, flags: 8},
}

// point decodes a data point of the given kind into p: the fields its
// layout names here, the kind's own fields in numberField, histogramField,
// expHistogramField or summaryField.
func (d *metricsProtoDecoder) point(b []byte, base int, kind MetricKind, p *MetricPoint, pos func() string) error {
	if kind == KindSummary {
		p.HasSum = true // a summary's sum is not optional
	}
	l := &pointLayouts[kind]
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		done, err := d.pointField(&r, num, typ, l, p, pos)
		if !done {
			switch kind {
			case KindGauge, KindSum:
				done, err = numberField(&r, num, typ, p)
			case KindHistogram:
				done, err = histogramField(&r, num, typ, p)
			case KindExponentialHistogram:
				done, err = expHistogramField(&r, num, typ, p)
			case KindSummary:
				done, err = summaryField(&r, num, typ, p)
			}
		}
		if !done {
			err = r.skip(num, typ)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pointField decodes a field every point kind has, at the number l gives
// it; it reports whether it consumed the field.
func (d *metricsProtoDecoder) pointField(r *reader, num protowire.Number, typ protowire.Type, l *pointLayout, p *MetricPoint, pos func() string) (bool, error) {
	var err error
	switch typ {
	case protowire.BytesType:
		switch num {
		case l.attributes:
			err = d.appendKeyValue(r, "attributes", &p.Attributes, 0, 0)
		case l.exemplars:
			err = d.exemplar(r, p, pos)
		default:
			return false, nil
		}
	case protowire.Fixed64Type:
		switch num {
		case 2:
			p.StartTimeUnixNano, err = r.fixed64("start_time_unix_nano")
		case 3:
			p.TimeUnixNano, err = r.fixed64("time_unix_nano")
		case l.count:
			p.Count, err = r.fixed64("count")
		case l.sum:
			p.Sum, err = r.float("sum")
			p.HasSum = true
		case l.min:
			p.Min, err = r.float("min")
			p.HasMin = true
		case l.max:
			p.Max, err = r.float("max")
			p.HasMax = true
		default:
			return false, nil
		}
	case protowire.VarintType:
		if num != l.flags {
			return false, nil
		}
		p.Flags, err = r.u32("flags")
	default:
		return false, nil
	}
	return true, err
}

// numberField decodes a NumberDataPoint's own fields: its value.
func numberField(r *reader, num protowire.Number, typ protowire.Type, p *MetricPoint) (bool, error) {
	if typ != protowire.Fixed64Type {
		return false, nil
	}
	switch num {
	case 4:
		x, err := r.fixed64("as_double")
		p.Value, p.IsInt, p.IntValue = math.Float64frombits(x), false, 0
		return true, err
	case 6:
		x, err := r.fixed64("as_int")
		p.IntValue, p.IsInt = int64(x), true
		p.Value = float64(p.IntValue)
		return true, err
	}
	return false, nil
}

// histogramField decodes a HistogramDataPoint's own fields: its buckets.
func histogramField(r *reader, num protowire.Number, typ protowire.Type, p *MetricPoint) (bool, error) {
	if typ != protowire.BytesType && typ != protowire.Fixed64Type {
		return false, nil
	}
	var err error
	switch num {
	case 6:
		p.BucketCounts, err = r.fixed64s("bucket_counts", typ, p.BucketCounts)
	case 7:
		var bits []uint64
		bits, err = r.fixed64s("explicit_bounds", typ, nil)
		for _, x := range bits {
			p.ExplicitBounds = append(p.ExplicitBounds, math.Float64frombits(x))
		}
	default:
		return false, nil
	}
	return true, err
}

// expHistogramField decodes an ExponentialHistogramDataPoint's own fields.
func expHistogramField(r *reader, num protowire.Number, typ protowire.Type, p *MetricPoint) (bool, error) {
	var err error
	switch {
	case num == 6 && typ == protowire.VarintType:
		var x uint64
		x, err = r.varint("scale")
		p.Scale = int32(protowire.DecodeZigZag(x & math.MaxUint32))
	case num == 7 && typ == protowire.Fixed64Type:
		p.ZeroCount, err = r.fixed64("zero_count")
	case (num == 8 || num == 9) && typ == protowire.BytesType:
		side, field := &p.Positive, "positive"
		if num == 9 {
			side, field = &p.Negative, "negative"
		}
		var v []byte
		var vb int
		if v, vb, err = r.bytes(field); err == nil {
			err = wrap(expBuckets(v, vb, side), field)
		}
	case num == 14 && typ == protowire.Fixed64Type:
		p.ZeroThreshold, err = r.float("zero_threshold")
	default:
		return false, nil
	}
	return true, err
}

func expBuckets(b []byte, base int, out *ExpBuckets) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, err := r.varint("offset")
			if err != nil {
				return err
			}
			out.Offset = int32(protowire.DecodeZigZag(x & math.MaxUint32))
			continue
		case num == 2 && typ == protowire.BytesType:
			v, vb, err := r.bytes("bucket_counts")
			if err != nil {
				return err
			}
			for len(v) > 0 {
				x, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return wrap(newError(vb, wireReason(n, "packed varint")), "bucket_counts")
				}
				out.Counts = append(out.Counts, x)
				v, vb = v[n:], vb+n
			}
			continue
		case num == 2 && typ == protowire.VarintType:
			x, err := r.varint("bucket_counts")
			if err != nil {
				return err
			}
			out.Counts = append(out.Counts, x)
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// summaryField decodes a SummaryDataPoint's own field: its quantiles.
func summaryField(r *reader, num protowire.Number, typ protowire.Type, p *MetricPoint) (bool, error) {
	if num != 6 || typ != protowire.BytesType {
		return false, nil
	}
	i := len(p.Quantiles)
	v, vb, err := r.bytesAt("quantile_values", i)
	if err != nil {
		return true, err
	}
	var q Quantile
	qr := newReader(v, vb)
	for len(qr.b) > 0 {
		qn, qt, err := qr.next()
		if err != nil {
			return true, wrapIdx(err, "quantile_values", i)
		}
		switch {
		case qn == 1 && qt == protowire.Fixed64Type:
			q.Quantile, err = qr.float("quantile")
		case qn == 2 && qt == protowire.Fixed64Type:
			q.Value, err = qr.float("value")
		default:
			err = qr.skip(qn, qt)
		}
		if err != nil {
			return true, wrapIdx(err, "quantile_values", i)
		}
	}
	p.Quantiles = append(p.Quantiles, q)
	return true, nil
}

// exemplar decodes one exemplar and keeps it unless its ids are malformed.
func (d *metricsProtoDecoder) exemplar(r *reader, p *MetricPoint, pos func() string) error {
	i := len(p.Exemplars)
	v, vb, err := r.bytesAt("exemplars", i)
	if err != nil {
		return err
	}
	var e Exemplar
	traceLen, spanLen := 0, 0
	er := newReader(v, vb)
	for len(er.b) > 0 {
		num, typ, err := er.next()
		if err != nil {
			return wrapIdx(err, "exemplars", i)
		}
		switch {
		case num == 7 && typ == protowire.BytesType:
			err = d.appendKeyValue(&er, "filtered_attributes", &e.FilteredAttributes, 0, 0)
		case num == 2 && typ == protowire.Fixed64Type:
			e.TimeUnixNano, err = er.fixed64("time_unix_nano")
		case num == 3 && typ == protowire.Fixed64Type:
			e.Value, err = er.float("as_double")
			e.IsInt, e.IntValue = false, 0
		case num == 6 && typ == protowire.Fixed64Type:
			var x uint64
			x, err = er.fixed64("as_int")
			e.IsInt, e.IntValue, e.Value = true, int64(x), float64(int64(x))
		case num == 4 && typ == protowire.BytesType:
			var id []byte
			id, _, err = er.bytes("span_id")
			spanLen = setSpanID(&e.SpanID, id)
		case num == 5 && typ == protowire.BytesType:
			var id []byte
			id, _, err = er.bytes("trace_id")
			traceLen = setTraceID(&e.TraceID, id)
		default:
			err = er.skip(num, typ)
		}
		if err != nil {
			return wrapIdx(err, "exemplars", i)
		}
	}
	if reason := checkLogIDs(traceLen, spanLen); reason != "" {
		d.out.reject(func() string { return pos() + ".exemplars[" + strconv.Itoa(i) + "]" }, reason)
		return nil
	}
	p.Exemplars = append(p.Exemplars, e)
	return nil
}
