package metricstore

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// point is one sample of one series, as translated from OTLP.
type point struct {
	src       int // the OTLP data point it comes from (translation.accepted counts them)
	labels    store.Labels
	t         int64 // milliseconds
	v         float64
	exemplars []store.MetricExemplar
	// delta, when set, makes v an increase over the interval it gives,
	// added to the series' running total (delta.go).
	delta *deltaInfo
}

// translation is a decoded request turned into Prometheus samples.
type translation struct {
	points    []point
	expDeltas []expDelta // delta exponential histogram points (delta.go)
	accepted  int        // OTLP data points stored
	rejected  int
	rejectMsg string
	// bases are the newest stored samples of the delta series the store
	// holds no running total for, looked up before apply (lookupBases).
	bases map[string]store.Sample
	// groupLes are the le bounds stored for the exponential histograms in
	// expDeltas the store holds no bounds for.
	groupLes map[string][]expLe
	cur      *deltaInfo // set on the points tr.add adds
	// stale holds the data points with a sample older than its series'
	// newest (apply).
	stale map[int]bool
}

func (tr *translation) markStale(src int) {
	if tr.stale == nil {
		tr.stale = map[int]bool{}
	}
	tr.stale[src] = true
}

func (tr *translation) reject(n int, msg string) {
	if tr.rejected == 0 {
		tr.rejectMsg = msg
	}
	tr.rejected += n
}

// TemporalityLabel marks the series of a delta histogram kept as sent
// (KeepsDelta): each sample is the increase over its own interval, not a
// running total.
const TemporalityLabel = "otel_temporality"

// KeepsDelta reports whether delta histograms of the OTLP metric name are
// stored as sent (marked with TemporalityLabel) rather than refused: the
// OpenTelemetry GenAI client metrics, which the LLM statistics read
// (internal/llmmetrics) by adding the deltas of a window, as an SDK
// configured for delta sends them.
func KeepsDelta(name string) bool {
	return name == "gen_ai.client.token.usage" || name == "gen_ai.client.operation.duration"
}

// translate turns OTLP metrics into Prometheus series following Prometheus'
// own OTLP translation (docs/metrics.md lists the rules and the deviations).
// Delta points come out as increases (point.delta, expDeltas), which apply
// adds to running totals in WAL order.
func translate(b *otlp.MetricBatch) translation {
	var tr translation
	if b.Rejected > 0 {
		tr.reject(b.Rejected, b.RejectMsg)
	}
	for mi := range b.Metrics {
		m := &b.Metrics[mi]
		res := resourceLabels(m.Resource)
		delta := false // converted to running totals (delta.go)
		switch m.Kind {
		case otlp.KindNone:
			continue
		case otlp.KindSum, otlp.KindHistogram, otlp.KindExponentialHistogram:
			if m.Temporality == otlp.TemporalityDelta && m.Kind == otlp.KindHistogram && KeepsDelta(m.Name) {
				res = withLabel(res, TemporalityLabel, "delta")
			} else if m.Temporality == otlp.TemporalityDelta {
				delta = true
			} else if m.Temporality != otlp.TemporalityCumulative {
				tr.reject(len(m.Points), "metric "+strconv.Quote(m.Name)+": unspecified ("+strconv.Itoa(int(m.Temporality))+") aggregation temporality is not stored: send cumulative or delta "+m.Kind.String()+"s")
				continue
			}
		}
		typ := typeGauge
		switch {
		case m.Kind == otlp.KindSum && m.Monotonic:
			typ = typeCounter
		case m.Kind == otlp.KindSum:
			typ = typeNonMonotonic
		case m.Kind == otlp.KindHistogram || m.Kind == otlp.KindExponentialHistogram:
			typ = typeHistogram
		case m.Kind == otlp.KindSummary:
			typ = typeSummary
		}
		name := MetricName(m.Name, m.Unit, typ)
		if name == "" {
			tr.reject(len(m.Points), "a metric named "+strconv.Quote(m.Name)+" has no Prometheus name (it needs a letter or digit): not stored")
			continue
		}
		for pi := range m.Points {
			p := &m.Points[pi]
			if p.Flags&1 != 0 { // FLAG_NO_RECORDED_VALUE
				continue
			}
			if m.Kind == otlp.KindExponentialHistogram {
				if msg := checkExpScale(p); msg != "" {
					tr.reject(1, "metric "+strconv.Quote(m.Name)+": "+msg+": point not stored")
					continue
				}
			}
			tr.cur = nil
			if delta {
				if p.TimeUnixNano < p.StartTimeUnixNano {
					tr.reject(1, "metric "+strconv.Quote(m.Name)+": a delta point ends (time_unix_nano) before it starts (start_time_unix_nano): not stored")
					continue
				}
				tr.cur = &deltaInfo{metric: m.Name, start: p.StartTimeUnixNano}
			}
			tr.accepted++
			base := pointLabels(res, p.Attributes)
			t := int64(p.TimeUnixNano / 1e6)
			ex := exemplarsOf(p.Exemplars)
			if delta && m.Kind == otlp.KindExponentialHistogram {
				tr.expDeltas = append(tr.expDeltas, expDelta{src: tr.accepted - 1, info: tr.cur, base: base, name: name, t: t,
					buckets: classicBuckets(p), count: p.Count, sum: p.Sum, hasSum: p.HasSum, exemplars: ex})
				continue
			}
			switch m.Kind {
			case otlp.KindGauge, otlp.KindSum:
				tr.add(base, name, t, p.Value, ex)
			case otlp.KindHistogram:
				cum := uint64(0)
				for i, bound := range p.ExplicitBounds {
					if i < len(p.BucketCounts) {
						cum += p.BucketCounts[i]
					}
					tr.add(withLabel(base, "le", formatLe(bound)), name+"_bucket", t, float64(cum), exemplarsIn(ex, bound, i, p.ExplicitBounds))
				}
				tr.add(withLabel(base, "le", "+Inf"), name+"_bucket", t, float64(p.Count), exemplarsIn(ex, math.Inf(1), len(p.ExplicitBounds), p.ExplicitBounds))
				if p.HasSum {
					tr.add(base, name+"_sum", t, p.Sum, nil)
				}
				tr.add(base, name+"_count", t, float64(p.Count), nil)
			case otlp.KindExponentialHistogram:
				bs := classicBuckets(p)
				bounds := make([]float64, len(bs))
				for i, b := range bs {
					bounds[i] = b.upper
				}
				cum := uint64(0)
				for i, b := range bs {
					cum += b.count
					tr.add(withLabel(base, "le", formatLe(b.upper)), name+"_bucket", t, float64(cum), exemplarsIn(ex, b.upper, i, bounds))
				}
				tr.add(withLabel(base, "le", "+Inf"), name+"_bucket", t, float64(p.Count), exemplarsIn(ex, math.Inf(1), len(bounds), bounds))
				if p.HasSum {
					tr.add(base, name+"_sum", t, p.Sum, nil)
				}
				tr.add(base, name+"_count", t, float64(p.Count), nil)
			case otlp.KindSummary:
				for _, q := range p.Quantiles {
					tr.add(withLabel(base, "quantile", strconv.FormatFloat(q.Quantile, 'f', -1, 64)), name, t, q.Value, nil)
				}
				tr.add(base, name+"_sum", t, p.Sum, nil)
				tr.add(base, name+"_count", t, float64(p.Count), nil)
			}
		}
	}
	return tr
}

func (tr *translation) add(base store.Labels, name string, t int64, v float64, ex []store.MetricExemplar) {
	tr.points = append(tr.points, point{src: tr.accepted - 1, labels: withLabel(base, store.MetricName, name), t: t, v: v, exemplars: ex, delta: tr.cur})
}

// withLabel returns a sorted copy of base with name=value set.
func withLabel(base store.Labels, name, value string) store.Labels {
	out := make(store.Labels, 0, len(base)+1)
	done := false
	for _, l := range base {
		if !done && l.Name >= name {
			done = true
			out = append(out, store.Label{Name: name, Value: value})
			if l.Name == name {
				continue
			}
		}
		out = append(out, l)
	}
	if !done {
		out = append(out, store.Label{Name: name, Value: value})
	}
	return out
}

// formatLe formats a bucket bound as Prometheus' translator does.
func formatLe(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func exemplarsOf(es []otlp.Exemplar) []store.MetricExemplar {
	if len(es) == 0 {
		return nil
	}
	out := make([]store.MetricExemplar, len(es))
	for i, e := range es {
		out[i] = store.MetricExemplar{T: int64(e.TimeUnixNano / 1e6), V: e.Value, TraceID: e.TraceID, SpanID: e.SpanID}
	}
	return out
}

// exemplarsIn keeps the exemplars that fall in bucket i (le bound): the
// lowest bucket whose bound is at least the value, as Prometheus attaches
// an exemplar to one bucket series.
func exemplarsIn(es []store.MetricExemplar, bound float64, i int, bounds []float64) []store.MetricExemplar {
	var out []store.MetricExemplar
	for _, e := range es {
		if e.V <= bound && (i == 0 || e.V > bounds[i-1]) {
			out = append(out, e)
		}
	}
	return out
}

// resourceLabels are the labels a resource gives every series: job from
// service.namespace and service.name, instance from service.instance.id,
// and service_name (a Rastro addition, documented).
func resourceLabels(res *model.Resource) store.Labels {
	if res == nil {
		return nil
	}
	var svc, ns, inst string
	for _, kv := range res.Attributes {
		switch kv.Key {
		case "service.name":
			svc = kv.Value.AsString()
		case "service.namespace":
			ns = kv.Value.AsString()
		case "service.instance.id":
			inst = kv.Value.AsString()
		}
	}
	var ls store.Labels
	job := svc
	if ns != "" && svc != "" {
		job = ns + "/" + svc
	}
	if job != "" {
		ls = append(ls, store.Label{Name: "job", Value: job})
	}
	if inst != "" {
		ls = append(ls, store.Label{Name: "instance", Value: inst})
	}
	if svc != "" {
		ls = append(ls, store.Label{Name: "service_name", Value: svc})
	}
	return store.SortLabels(ls)
}

// pointLabels are res plus the point's attributes, names sanitised; two
// attributes that sanitise to one name have their values joined with ";"
// in the order of their original keys, as Prometheus joins them; a
// resource label wins over an attribute of the same name.
func pointLabels(res store.Labels, attrs []model.KeyValue) store.Labels {
	if len(attrs) == 0 {
		return res
	}
	type kv struct{ orig, name, value string }
	tmp := make([]kv, 0, len(attrs))
	for _, a := range attrs {
		n := LabelName(a.Key)
		v := a.Value.AsString()
		if n == "" || v == "" {
			continue // Prometheus: a label with an empty value is no label
		}
		tmp = append(tmp, kv{a.Key, n, v})
	}
	slices.SortFunc(tmp, func(a, b kv) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.orig, b.orig)
	})
	ls := slices.Clone(res)
	for i := 0; i < len(tmp); {
		j := i + 1
		v := tmp[i].value
		for j < len(tmp) && tmp[j].name == tmp[i].name {
			if tmp[j].orig != tmp[j-1].orig {
				v += ";" + tmp[j].value
			}
			j++
		}
		if res.Get(tmp[i].name) == "" {
			ls = append(ls, store.Label{Name: tmp[i].name, Value: v})
		}
		i = j
	}
	return store.SortLabels(ls)
}

// LabelName sanitises an attribute key into a Prometheus label name:
// characters other than letters, digits and "_" become "_", and a name that
// starts with a digit gets "key_" in front.
func LabelName(key string) string {
	if key == "" {
		return ""
	}
	b := []byte(key)
	out := make([]byte, 0, len(b))
	for _, r := range key {
		if r < 128 && (r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			out = append(out, byte(r))
		} else {
			out = append(out, '_')
		}
	}
	if out[0] >= '0' && out[0] <= '9' {
		return "key_" + string(out)
	}
	return string(out)
}

type metricType int

const (
	typeGauge metricType = iota
	typeCounter
	typeNonMonotonic
	typeHistogram
	typeSummary
)

// unitWords maps UCUM units to the words Prometheus' translator appends.
var unitWords = map[string]string{
	"d": "days", "h": "hours", "min": "minutes", "s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds",
	"By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes", "TiBy": "tibibytes",
	"KBy": "kilobytes", "MBy": "megabytes", "GBy": "gigabytes", "TBy": "terabytes",
	"m": "meters", "V": "volts", "A": "amperes", "J": "joules", "W": "watts", "g": "grams",
	"Cel": "celsius", "Hz": "hertz", "1": "", "%": "percent",
}

// perUnitWords maps the denominator of a "x/y" unit.
var perUnitWords = map[string]string{"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year"}

func validNameRune(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == ':'
}

// unitToken cleans a unit word into name characters.
func unitToken(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return !validNameRune(r) }), "_")
}

// MetricName is the Prometheus name of an OTLP metric: the name split into
// tokens at every character other than a letter, digit or ":" and joined
// with "_", the unit's word appended (and "per_<word>" for "x/y"), "total"
// for monotonic sums, "ratio" for gauges of unit "1", and "_" in front of a
// leading digit. This is Prometheus' otlptranslator (UnderscoreEscapingWithSuffixes).
func MetricName(name, unit string, typ metricType) string {
	toks := strings.FieldsFunc(name, func(r rune) bool { return !validNameRune(r) })
	// Annotations in braces ("{request}") carry no unit.
	for {
		i := strings.IndexByte(unit, '{')
		j := strings.IndexByte(unit, '}')
		if i < 0 || j < i {
			break
		}
		unit = unit[:i] + unit[j+1:]
	}
	unit = strings.TrimSpace(unit)
	main, per, _ := strings.Cut(unit, "/")
	mainWord := main
	if w, ok := unitWords[main]; ok {
		mainWord = w
	}
	mainWord = unitToken(mainWord)
	perWord := ""
	if per != "" {
		w := per
		if x, ok := perUnitWords[per]; ok {
			w = x
		}
		if w = unitToken(w); w != "" {
			perWord = "per_" + w
		}
	}
	if mainWord != "" && !slices.Contains(toks, mainWord) {
		toks = append(toks, mainWord)
	}
	if perWord != "" && !slices.Contains(toks, perWord) {
		toks = append(toks, perWord)
	}
	if typ == typeCounter {
		toks = append(slices.DeleteFunc(toks, func(s string) bool { return s == "total" }), "total")
	}
	if unit == "1" && typ == typeGauge {
		toks = append(slices.DeleteFunc(toks, func(s string) bool { return s == "ratio" }), "ratio")
	}
	n := strings.Join(toks, "_")
	if n != "" && n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	return n
}
