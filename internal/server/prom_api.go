package server

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/parallel"
	"github.com/rastro-dev/rastro/internal/promql"
	"github.com/rastro-dev/rastro/internal/store"
)

// The Prometheus-compatible query API under /prom (docs/metrics.md), with
// the request parameters and response shapes of Prometheus' HTTP API, so
// that Grafana's Prometheus data source can use it. Each route answers GET
// and POST (a form body), as Prometheus does.

// maxPromPoints bounds the steps of a range query, as Prometheus does.
const maxPromPoints = 11000

// maxPromSamples bounds the samples one query reads.
const maxPromSamples = 20_000_000

func (s *Server) promRoutes() []route {
	var rs []route
	for _, r := range []struct {
		pattern, name string
		h             http.HandlerFunc
	}{
		{"/prom/api/v1/query", "prom_query", s.handlePromQuery},
		{"/prom/api/v1/query_range", "prom_query_range", s.handlePromQueryRange},
		{"/prom/api/v1/series", "prom_series", s.handlePromSeries},
		{"/prom/api/v1/labels", "prom_labels", s.handlePromLabels},
		{"/prom/api/v1/label/{name}/values", "prom_label_values", s.handlePromLabelValues},
		{"/prom/api/v1/query_exemplars", "prom_query_exemplars", s.handlePromExemplars},
	} {
		rs = append(rs, route{method: "GET", pattern: r.pattern, access: accessRead, name: r.name, handler: r.h},
			route{method: "POST", pattern: r.pattern, access: accessRead, name: r.name, handler: r.h})
	}
	rs = append(rs, route{pattern: "/prom/", access: accessPublic, handler: func(w http.ResponseWriter, r *http.Request) {
		promError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s (Rastro's Prometheus API answers query, query_range, series, labels, label/{name}/values and query_exemplars)", r.Method, r.URL.Path))
	}})
	return rs
}

// promSuccess writes {"status":"success","data":DATA}.
func promSuccess(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"success","data":`))
	w.Write(data)
	w.Write([]byte("}\n"))
}

// promError writes Prometheus' error shape.
func promError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"status":"error","errorType":%s,"error":%s}`+"\n", jsonQuote(typ), jsonQuote(msg))
}

func badData(w http.ResponseWriter, format string, args ...any) {
	promError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf(format, args...))
}

// promFailed answers an error from the store or the evaluator.
func promFailed(w http.ResponseWriter, err error) {
	var pe *promql.Error
	switch {
	case errors.As(err, &pe):
		badData(w, "%v", err)
	case errors.Is(err, store.ErrBadRequest):
		badData(w, "%v", err)
	case errors.Is(err, promql.ErrTooManySamples):
		promError(w, http.StatusUnprocessableEntity, "execution", err.Error())
	case errors.Is(err, store.ErrClosed):
		promError(w, http.StatusServiceUnavailable, "unavailable", "the server is stopping")
	default:
		promError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func (s *Server) promBackend(w http.ResponseWriter) store.MetricBackend {
	ms, ierr := s.currentMetrics()
	if ierr != nil {
		typ := "unavailable"
		if ierr.status == http.StatusNotImplemented {
			typ = "not_implemented"
		}
		promError(w, ierr.status, typ, ierr.msg)
		return nil
	}
	return ms
}

// promTime reads a time as Prometheus does: Unix seconds (with a fraction)
// or RFC 3339; def when absent.
func promTime(r *http.Request, name string, def int64) (int64, error) {
	v := r.Form.Get(name)
	if v == "" {
		return def, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<52/1000 {
			return 0, fmt.Errorf("invalid parameter %q: cannot parse %q to a valid timestamp", name, v)
		}
		return int64(math.Round(f * 1000)), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UnixMilli(), nil
	}
	return 0, fmt.Errorf("invalid parameter %q: cannot parse %q to a valid timestamp", name, v)
}

// minPromTime and maxPromTime are the defaults of series and labels.
const (
	minPromTime = math.MinInt64 / 2
	maxPromTime = math.MaxInt64 / 2
)

func parsePromForm(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		badData(w, "invalid form: %v", err)
		return false
	}
	return true
}

func (s *Server) handlePromQuery(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	if !parsePromForm(w, r) {
		return
	}
	ms := s.promBackend(w)
	if ms == nil {
		return
	}
	expr, err := promql.Parse(r.Form.Get("query"))
	if err != nil {
		badData(w, "invalid parameter \"query\": %v", err)
		return
	}
	ts, err := promTime(r, "time", time.Now().UnixMilli())
	if err != nil {
		badData(w, "%v", err)
		return
	}
	res, err := promql.Instant(ms, promql.Query{Project: projectFrom(r.Context()), Expr: expr, Start: ts, MaxSamples: maxPromSamples})
	if err != nil {
		promFailed(w, err)
		return
	}
	writePromResult(w, t0, res)
}

func (s *Server) handlePromQueryRange(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	if !parsePromForm(w, r) {
		return
	}
	ms := s.promBackend(w)
	if ms == nil {
		return
	}
	for _, p := range []string{"start", "end", "step"} {
		if r.Form.Get(p) == "" {
			badData(w, "invalid parameter %q: missing", p)
			return
		}
	}
	start, err := promTime(r, "start", 0)
	if err != nil {
		badData(w, "%v", err)
		return
	}
	end, err := promTime(r, "end", 0)
	if err != nil {
		badData(w, "%v", err)
		return
	}
	if end < start {
		badData(w, "invalid parameter \"end\": end timestamp must not be before start time")
		return
	}
	step, err := promql.ParseDuration(r.Form.Get("step"))
	if err != nil {
		badData(w, "invalid parameter \"step\": cannot parse %q to a valid duration", r.Form.Get("step"))
		return
	}
	if step <= 0 || step.Milliseconds() <= 0 {
		badData(w, "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer")
		return
	}
	if (end-start)/step.Milliseconds() >= maxPromPoints {
		badData(w, "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")
		return
	}
	expr, err := promql.Parse(r.Form.Get("query"))
	if err != nil {
		badData(w, "invalid parameter \"query\": %v", err)
		return
	}
	res, err := promql.Range(ms, promql.Query{Project: projectFrom(r.Context()), Expr: expr, Start: start, End: end, Step: step.Milliseconds(), MaxSamples: maxPromSamples})
	if err != nil {
		promFailed(w, err)
		return
	}
	writePromResult(w, t0, res)
}

// promMatchers parses the match[] parameters; each is a vector selector.
func promMatchers(r *http.Request) ([][]*store.LabelMatcher, error) {
	var out [][]*store.LabelMatcher
	for _, m := range r.Form["match[]"] {
		n, err := promql.Parse(m)
		if err != nil {
			return nil, fmt.Errorf("invalid parameter \"match[]\": %v", err)
		}
		vs, ok := n.(*promql.VectorSelector)
		if !ok {
			return nil, fmt.Errorf("invalid parameter \"match[]\": %q is not a series selector", m)
		}
		out = append(out, vs.Matchers)
	}
	return out, nil
}

// promLabelSets answers the label sets of the series matching any match[]
// (every series without one) in the start/end window.
func (s *Server) promLabelSets(w http.ResponseWriter, r *http.Request, needMatch bool) ([]store.Labels, bool) {
	if !parsePromForm(w, r) {
		return nil, false
	}
	ms := s.promBackend(w)
	if ms == nil {
		return nil, false
	}
	sets, err := promMatchers(r)
	if err != nil {
		badData(w, "%v", err)
		return nil, false
	}
	if len(sets) == 0 {
		if needMatch {
			badData(w, "no match[] parameter provided")
			return nil, false
		}
		sets = [][]*store.LabelMatcher{nil}
	}
	start, err := promTime(r, "start", minPromTime)
	if err == nil {
		var end int64
		if end, err = promTime(r, "end", maxPromTime); err == nil {
			seen := map[string]bool{}
			var out []store.Labels
			for _, m := range sets {
				ls, err := ms.SeriesLabels(projectFrom(r.Context()), start, end, m)
				if err != nil {
					promFailed(w, err)
					return nil, false
				}
				for _, l := range ls {
					if k := l.Key(); !seen[k] {
						seen[k] = true
						out = append(out, l)
					}
				}
			}
			slices.SortFunc(out, store.CompareLabels)
			return out, true
		}
	}
	badData(w, "%v", err)
	return nil, false
}

func (s *Server) handlePromSeries(w http.ResponseWriter, r *http.Request) {
	sets, ok := s.promLabelSets(w, r, true)
	if !ok {
		return
	}
	b := []byte{'['}
	for i, ls := range sets {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPromLabels(b, ls)
	}
	promSuccess(w, append(b, ']'))
}

func (s *Server) handlePromLabels(w http.ResponseWriter, r *http.Request) {
	sets, ok := s.promLabelSets(w, r, false)
	if !ok {
		return
	}
	names := map[string]bool{}
	for _, ls := range sets {
		for _, l := range ls {
			names[l.Name] = true
		}
	}
	promSuccess(w, appendStrings(nil, names))
}

func (s *Server) handlePromLabelValues(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		badData(w, "invalid label name %q: UTF-8 escaped label names are not supported", name)
		return
	}
	sets, ok := s.promLabelSets(w, r, false)
	if !ok {
		return
	}
	values := map[string]bool{}
	for _, ls := range sets {
		if v := ls.Get(name); v != "" {
			values[v] = true
		}
	}
	promSuccess(w, appendStrings(nil, values))
}

// handlePromExemplars answers the exemplars of the series the query's
// selectors match, each with its trace_id and span_id labels, so that a
// chart point links to its trace.
func (s *Server) handlePromExemplars(w http.ResponseWriter, r *http.Request) {
	if !parsePromForm(w, r) {
		return
	}
	ms := s.promBackend(w)
	if ms == nil {
		return
	}
	expr, err := promql.Parse(r.Form.Get("query"))
	if err != nil {
		badData(w, "invalid parameter \"query\": %v", err)
		return
	}
	now := time.Now().UnixMilli()
	start, err := promTime(r, "start", minPromTime)
	if err != nil {
		badData(w, "%v", err)
		return
	}
	end, err := promTime(r, "end", now)
	if err != nil {
		badData(w, "%v", err)
		return
	}
	seen := map[string]bool{}
	b := []byte{'['}
	for _, m := range promql.Selectors(expr) {
		es, err := ms.Exemplars(projectFrom(r.Context()), start, end, m)
		if err != nil {
			promFailed(w, err)
			return
		}
		for _, se := range es {
			k := se.Labels.Key()
			if seen[k] {
				continue
			}
			seen[k] = true
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, `{"seriesLabels":`...)
			b = appendPromLabels(b, se.Labels)
			b = append(b, `,"exemplars":[`...)
			for i, e := range se.Exemplars {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"labels":{"trace_id":"`...)
				b = append(b, e.TraceID.String()...)
				b = append(b, `","span_id":"`...)
				b = append(b, e.SpanID.String()...)
				b = append(b, `"},"value":`...)
				b = strconv.AppendQuote(b, formatPromValue(e.V))
				b = append(b, `,"timestamp":`...)
				b = appendPromTime(b, e.T)
				b = append(b, '}')
			}
			b = append(b, "]}"...)
		}
	}
	promSuccess(w, append(b, ']'))
}

func appendStrings(b []byte, set map[string]bool) []byte {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '[')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k)
	}
	return append(b, ']')
}

func appendPromLabels(b []byte, ls store.Labels) []byte {
	b = append(b, '{')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONStr(b, l.Name)
		b = append(b, ':')
		b = appendJSONStr(b, l.Value)
	}
	return append(b, '}')
}

// appendPromTime writes milliseconds as Prometheus does: seconds with the
// milliseconds after a point when there are any (1435781451.781).
func appendPromTime(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if f := t % 1000; f != 0 {
		b = append(b, '.')
		if f < 100 {
			b = append(b, '0')
		}
		if f < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, f, 10)
	}
	return b
}

func formatPromValue(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func appendPromPoint(b []byte, p promql.Point) []byte {
	return appendPromValue(appendPromPointTime(b, p.T), p.F)
}

// appendPromPointTime opens a point at time t: [1435781451.781,".
func appendPromPointTime(b []byte, t int64) []byte {
	b = append(b, '[')
	b = appendPromTime(b, t)
	return append(b, ',', '"')
}

// appendPromValue writes a point's value and closes the point: 12.5"].
func appendPromValue(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		b = append(b, formatPromValue(f)...)
	} else {
		b = appendPromFloat(b, f)
	}
	return append(b, '"', ']')
}

// promTimes keeps the text of a matrix's point times: `[1435781451.781,"`
// for the j-th point of a series. The series of a range answer have their
// points at the same step times, so each time is formatted once (by the
// first series that reaches it) and copied after; formatting the times of
// every point was about a sixth of the encoding.
type promTimes struct {
	t    []int64
	end  []int // text[end[j-1]:end[j]] is the j-th time's text
	text []byte
}

// appendPointTime appends the opening of the j-th point of a series, whose
// time is t.
func (c *promTimes) appendPointTime(b []byte, j int, t int64) []byte {
	if j < len(c.t) && c.t[j] == t {
		start := 0
		if j > 0 {
			start = c.end[j-1]
		}
		return append(b, c.text[start:c.end[j]]...)
	}
	n := len(b)
	b = appendPromPointTime(b, t)
	if j == len(c.t) {
		c.t = append(c.t, t)
		c.text = append(c.text, b[n:]...)
		c.end = append(c.end, len(c.text))
	}
	return b
}

// pow10 are the scales appendPromFloat tries: a value with up to 4 decimals.
var pow10 = [...]float64{1, 10, 100, 1000, 10000}

// appendPromFloat writes a finite f exactly as strconv.AppendFloat(b, f,
// 'f', -1, 64) does (the shortest decimal that reads back as f), faster for
// the values metrics mostly hold: whole numbers and numbers with a few
// decimals. When f == n/10^k for an integer n with |n| < 10^15, the decimal
// n/10^k reads back as f, and no other decimal of at most 15 significant
// digits does (a double holds 15 decimal digits without loss), so it is the
// shortest one. Other values go to strconv.
func appendPromFloat(b []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(b, '-', '0')
		}
		return append(b, '0')
	}
	for k, p := range pow10 {
		x := f * p
		if math.Abs(x) >= 1e15 {
			break
		}
		n := int64(x)
		if float64(n) != x || float64(n)/p != f {
			continue
		}
		for k > 0 && n%10 == 0 {
			n /= 10
			k--
		}
		if k == 0 {
			return strconv.AppendInt(b, n, 10)
		}
		if n < 0 {
			b = append(b, '-')
			n = -n
		}
		var d [24]byte
		digits := strconv.AppendInt(d[:0], n, 10)
		if len(digits) <= k {
			b = append(b, '0', '.')
			for range k - len(digits) {
				b = append(b, '0')
			}
			return append(b, digits...)
		}
		b = append(b, digits[:len(digits)-k]...)
		b = append(b, '.')
		return append(b, digits[len(digits)-k:]...)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// promBufs holds answer buffers (*[]byte) for reuse: a range answer of
// 1,000 series of 241 points is about 6 MB, and allocating it afresh for
// each query made a large part of a query's garbage. A buffer larger than
// maxPooledPromBuf is left to the collector, so that one huge answer is not
// held for ever.
var promBufs sync.Pool

const maxPooledPromBuf = 32 << 20

// writePromResult writes a query's answer, with the server's time (the
// answer's encoding included) in Server-Timing.
func writePromResult(w http.ResponseWriter, t0 time.Time, res promql.Result) {
	bp, _ := promBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	out := appendPromResult((*bp)[:0], res)
	setServerTiming(w, t0)
	promSuccess(w, out) // Write does not keep out
	if cap(out) <= maxPooledPromBuf {
		*bp = out
		promBufs.Put(bp)
	}
}

// appendPromResult writes {"resultType":...,"result":...}.
func appendPromResult(b []byte, r promql.Result) []byte {
	if r.Type == promql.TypeMatrix {
		// Size the answer once: a point is about 30 bytes, a series' labels
		// a few hundred (growing by doubling would copy it several times).
		n := 64
		for _, s := range r.Matrix {
			n += 256 + 32*len(s.Points)
		}
		b = slices.Grow(b, n)
	}
	switch r.Type {
	case promql.TypeScalar:
		b = append(b, `{"resultType":"scalar","result":`...)
		b = appendPromPoint(b, r.Scalar)
	case promql.TypeVector:
		b = append(b, `{"resultType":"vector","result":[`...)
		for i, s := range r.Vector {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendPromLabels(b, s.Labels)
			b = append(b, `,"value":`...)
			b = appendPromPoint(b, promql.Point{T: r.T, F: s.F})
			b = append(b, '}')
		}
		b = append(b, ']')
	default:
		b = append(b, `{"resultType":"matrix","result":[`...)
		b = appendPromMatrix(b, r.Matrix)
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendPromMatrix writes a matrix's series, comma-separated. A large one
// is encoded on several CPUs (internal/parallel): the first part into b,
// the others into pooled buffers appended after it in order.
func appendPromMatrix(b []byte, m []promql.Series) []byte {
	points := 0
	for _, s := range m {
		points += len(s.Points)
	}
	var (
		mu   sync.Mutex
		rest = map[int]*[]byte{}
	)
	parallel.Parts(len(m), points, func(lo, hi int) {
		if lo == 0 {
			b = appendPromSeries(b, m, 0, hi)
			return
		}
		bp, _ := promBufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		*bp = appendPromSeries((*bp)[:0], m, lo, hi)
		mu.Lock()
		rest[lo] = bp
		mu.Unlock()
	})
	for _, lo := range slices.Sorted(maps.Keys(rest)) {
		bp := rest[lo]
		b = append(b, *bp...)
		if cap(*bp) <= maxPooledPromBuf {
			promBufs.Put(bp)
		}
	}
	return b
}

// appendPromSeries writes series lo..hi-1 of m, each after a comma but the
// first of the matrix.
func appendPromSeries(b []byte, m []promql.Series, lo, hi int) []byte {
	var times promTimes
	for i := lo; i < hi; i++ {
		s := &m[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendPromLabels(b, s.Labels)
		b = append(b, `,"values":[`...)
		for j, p := range s.Points {
			if j > 0 {
				b = append(b, ',')
			}
			b = times.appendPointTime(b, j, p.T)
			b = appendPromValue(b, p.F)
		}
		b = append(b, "]}"...)
	}
	return b
}
