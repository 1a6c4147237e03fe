package otlp

import (
	"strconv"

	"github.com/rastro-dev/rastro/internal/model"
)

// DecodeMetricsJSON decodes an ExportMetricsServiceRequest in OTLP/JSON with
// DecodeJSON's mapping rules (lowerCamelCase or snake_case keys, hex ids,
// 64-bit integers as numbers or strings, enums as numbers or names, doubles
// as numbers or "NaN"/"Infinity"/"-Infinity", unknown keys ignored, null
// meaning "not set"). Exemplars with malformed ids are dropped and counted
// in Rejected, as DecodeMetricsProto does.
func DecodeMetricsJSON(b []byte) (MetricBatch, error) {
	d := metricsJSONDecoder{jsonDecoder: jsonDecoder{r: newJReader(b)}}
	if err := d.request(); err != nil {
		return MetricBatch{}, finish(err, "otlp-json")
	}
	return d.out, nil
}

type metricsJSONDecoder struct {
	jsonDecoder
	out MetricBatch
}

var temporalityNames = []string{"AGGREGATION_TEMPORALITY_UNSPECIFIED", "AGGREGATION_TEMPORALITY_DELTA", "AGGREGATION_TEMPORALITY_CUMULATIVE"}

func (d *metricsJSONDecoder) request() error {
	return d.exportRequest("resourceMetrics", "resource_metrics", d.resourceMetrics)
}

func (d *metricsJSONDecoder) resourceMetrics(rsIdx int) error {
	res := &model.Resource{}
	first := len(d.out.Metrics)
	d.scopes = d.scopes[:0]
	err := d.group("resource", func() error { return d.resource(res) },
		"scopeMetrics", "scope_metrics", func(i int) error { return d.scopeMetrics(res, rsIdx, i) },
		&res.SchemaURL)
	if err != nil {
		return err
	}
	finishMetricResource(&d.out, res, d.scopes, first)
	return nil
}

func (d *metricsJSONDecoder) scopeMetrics(res *model.Resource, rsIdx, ssIdx int) error {
	sc := &model.Scope{}
	d.scopes = append(d.scopes, sc)
	return d.group("scope", func() error { return d.scopeJSON(sc) },
		"metrics", "metrics", func(i int) error {
			m := Metric{Resource: res, Scope: sc}
			pos := func() string {
				return "resourceMetrics[" + strconv.Itoa(rsIdx) + "].scopeMetrics[" + strconv.Itoa(ssIdx) + "].metrics[" + strconv.Itoa(i) + "]"
			}
			if err := d.metric(&m, pos); err != nil {
				return err
			}
			d.out.Metrics = append(d.out.Metrics, m)
			return nil
		},
		&sc.SchemaURL)
}

func (d *metricsJSONDecoder) metric(m *Metric, pos func() string) error {
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	return d.members(func(k string) error {
		kind := KindNone
		switch k {
		case "name":
			return d.str(&m.Name, "name")
		case "description":
			return d.str(&m.Description, "description")
		case "unit":
			return d.str(&m.Unit, "unit")
		case "metadata":
			var kvs []model.KeyValue
			return d.kvs(&kvs, "metadata", 0)
		case "gauge":
			kind = KindGauge
		case "sum":
			kind = KindSum
		case "histogram":
			kind = KindHistogram
		case "exponentialHistogram", "exponential_histogram":
			kind = KindExponentialHistogram
		case "summary":
			kind = KindSummary
		default:
			return d.r.skip()
		}
		if isNull, err := d.r.null(); isNull || err != nil {
			return wrap(err, k)
		}
		if m.Kind != kind {
			m.Kind, m.Points, m.Temporality, m.Monotonic = kind, nil, 0, false
		}
		return wrap(d.metricData(m, pos), kind.String())
	})
}

func (d *metricsJSONDecoder) metricData(m *Metric, pos func() string) error {
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	return d.members(func(k string) error {
		switch k {
		case "dataPoints", "data_points":
			return d.elems("dataPoints", func(i int) error {
				m.Points = append(m.Points, MetricPoint{})
				ppos := func() string { return pos() + ".dataPoints[" + strconv.Itoa(i) + "]" }
				return d.point(m.Kind, &m.Points[len(m.Points)-1], ppos)
			})
		case "aggregationTemporality", "aggregation_temporality":
			v, err := d.enum("aggregationTemporality", temporalityNames)
			if m.Kind != KindGauge && m.Kind != KindSummary {
				m.Temporality = Temporality(v)
			}
			return err
		case "isMonotonic", "is_monotonic":
			if isNull, err := d.r.null(); isNull || err != nil {
				return wrap(err, "isMonotonic")
			}
			v, err := d.r.boolean()
			if m.Kind == KindSum {
				m.Monotonic = v
			}
			return wrap(err, "isMonotonic")
		}
		return d.r.skip()
	})
}

func (d *metricsJSONDecoder) float(dst *float64, has *bool, field string) error {
	if isNull, err := d.r.null(); isNull || err != nil {
		return wrap(err, field)
	}
	v, err := d.double()
	if err != nil {
		return wrap(err, field)
	}
	*dst = v
	if has != nil {
		*has = true
	}
	return nil
}

func (d *metricsJSONDecoder) point(kind MetricKind, p *MetricPoint, pos func() string) error {
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	if kind == KindSummary {
		p.HasSum = true
	}
	return d.members(func(k string) error {
		var err error
		switch k {
		case "attributes":
			return d.kvs(&p.Attributes, "attributes", 0)
		case "startTimeUnixNano", "start_time_unix_nano":
			p.StartTimeUnixNano, err = d.uint("startTimeUnixNano", 64)
		case "timeUnixNano", "time_unix_nano":
			p.TimeUnixNano, err = d.uint("timeUnixNano", 64)
		case "flags":
			err = d.u32(&p.Flags, "flags")
		case "exemplars":
			return d.elems("exemplars", func(i int) error {
				return d.exemplar(p, func() string { return pos() + ".exemplars[" + strconv.Itoa(i) + "]" })
			})
		case "asDouble", "as_double":
			if kind == KindGauge || kind == KindSum {
				err = d.float(&p.Value, nil, "asDouble")
				p.IsInt, p.IntValue = false, 0
			} else {
				err = d.r.skip()
			}
		case "asInt", "as_int":
			if kind == KindGauge || kind == KindSum {
				var v int64
				var set bool
				if v, set, err = d.int64OrNull("asInt"); set {
					p.IntValue, p.IsInt, p.Value = v, true, float64(v)
				}
			} else {
				err = d.r.skip()
			}
		case "count":
			p.Count, err = d.uint("count", 64)
		case "sum":
			err = d.float(&p.Sum, &p.HasSum, "sum")
		case "min":
			err = d.float(&p.Min, &p.HasMin, "min")
		case "max":
			err = d.float(&p.Max, &p.HasMax, "max")
		case "bucketCounts", "bucket_counts":
			err = d.uints(&p.BucketCounts, "bucketCounts")
		case "explicitBounds", "explicit_bounds":
			err = d.elems("explicitBounds", func(int) error {
				var v float64
				err := d.float(&v, nil, "explicitBounds")
				p.ExplicitBounds = append(p.ExplicitBounds, v)
				return err
			})
		case "scale":
			var v int64
			var set bool
			if v, set, err = d.int64OrNull("scale"); set {
				if err == nil && (v < -1<<31 || v >= 1<<31) {
					err = newError(d.r.i, "scale "+strconv.FormatInt(v, 10)+" out of the 32-bit range")
				}
				p.Scale = int32(v)
			}
		case "zeroCount", "zero_count":
			p.ZeroCount, err = d.uint("zeroCount", 64)
		case "zeroThreshold", "zero_threshold":
			err = d.float(&p.ZeroThreshold, nil, "zeroThreshold")
		case "positive", "negative":
			side := &p.Positive
			if k == "negative" {
				side = &p.Negative
			}
			err = d.members(func(bk string) error {
				switch bk {
				case "offset":
					v, set, err := d.int64OrNull("offset")
					if !set {
						return err
					}
					if err == nil && (v < -1<<31 || v >= 1<<31) {
						err = newError(d.r.i, "offset out of the 32-bit range")
					}
					side.Offset = int32(v)
					return err
				case "bucketCounts", "bucket_counts":
					return d.uints(&side.Counts, "bucketCounts")
				}
				return d.r.skip()
			})
			err = wrap(err, k)
		case "quantileValues", "quantile_values":
			err = d.elems("quantileValues", func(int) error {
				var q Quantile
				err := d.members(func(qk string) error {
					switch qk {
					case "quantile":
						return d.float(&q.Quantile, nil, "quantile")
					case "value":
						return d.float(&q.Value, nil, "value")
					}
					return d.r.skip()
				})
				p.Quantiles = append(p.Quantiles, q)
				return err
			})
		default:
			err = d.r.skip()
		}
		return err
	})
}

func (d *metricsJSONDecoder) exemplar(p *MetricPoint, pos func() string) error {
	var e Exemplar
	traceLen, spanLen := 0, 0
	problem := ""
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	err := d.members(func(k string) error {
		var err error
		switch k {
		case "filteredAttributes", "filtered_attributes":
			return d.kvs(&e.FilteredAttributes, "filteredAttributes", 0)
		case "timeUnixNano", "time_unix_nano":
			e.TimeUnixNano, err = d.uint("timeUnixNano", 64)
		case "asDouble", "as_double":
			err = d.float(&e.Value, nil, "asDouble")
			e.IsInt, e.IntValue = false, 0
		case "asInt", "as_int":
			var v int64
			var set bool
			if v, set, err = d.int64OrNull("asInt"); set {
				e.IntValue, e.IsInt, e.Value = v, true, float64(v)
			}
		case "traceId", "trace_id":
			err = d.id(e.TraceID[:], "traceId", &traceLen, &problem)
		case "spanId", "span_id":
			err = d.id(e.SpanID[:], "spanId", &spanLen, &problem)
		default:
			err = d.r.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	reason := problem
	if reason == "" {
		reason = checkLogIDs(traceLen, spanLen)
	}
	if reason != "" {
		d.out.reject(pos, reason)
		return nil
	}
	p.Exemplars = append(p.Exemplars, e)
	return nil
}
