package query

import (
	"slices"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// MetricsFunc is a TraceQL metrics function.
type MetricsFunc uint8

// The metrics functions.
const (
	FuncRate MetricsFunc = iota
	FuncCountOverTime
	FuncMinOverTime
	FuncMaxOverTime
	FuncAvgOverTime
	FuncSumOverTime
	FuncQuantileOverTime
	FuncHistogramOverTime
	FuncCompare
)

var metricsFuncNames = [...]string{"rate", "count_over_time", "min_over_time", "max_over_time", "avg_over_time",
	"sum_over_time", "quantile_over_time", "histogram_over_time", "compare"}

func (f MetricsFunc) String() string { return metricsFuncNames[f] }

// Metrics is the metrics stage ending a query: `| rate() by (x)`,
// `| quantile_over_time(duration, .5, .99)`, then optionally `| topk(n)` or
// `| bottomk(n)`.
type Metrics struct {
	Func      MetricsFunc
	field     field     // the measured field (not for rate and count_over_time)
	Quantiles []float64 // quantile_over_time
	by        []field
	// Second are the stages after the function, in order: topk/bottomk
	// and filters on the series' values (`| rate() > 10`).
	Second []SecondStage
	// compare(): the selection filter, the values kept per attribute, and
	// the selection's time range (unix ns; 0: the query's).
	selection              node
	CompareTopN            int
	CompareFrom, CompareTo uint64
}

// Selected reports whether a span belongs to compare()'s selection.
func (m *Metrics) Selected(s *model.Span) bool {
	if m.CompareFrom != 0 && (s.StartTimeUnixNano <= m.CompareFrom || s.StartTimeUnixNano > m.CompareTo) {
		return false
	}
	return m.selection.Match(s)
}

// By names the grouping fields as written (labels of the series).
func (m *Metrics) By() []string {
	out := make([]string, len(m.by))
	for i, f := range m.by {
		out[i] = f.String()
	}
	return out
}

// Field names the measured field ("" for rate and count_over_time).
func (m *Metrics) Field() string {
	if m.Func == FuncRate || m.Func == FuncCountOverTime || m.Func == FuncCompare {
		return ""
	}
	return m.field.String()
}

// FieldIsDuration reports whether the measured field is the span duration.
func (m *Metrics) FieldIsDuration() bool { return m.field.intr == intrDuration }

// Value reads the measured field of a span as a number (durations in
// nanoseconds); false when the span has no numeric value.
func (m *Metrics) Value(s *model.Span) (float64, bool) {
	v, ok := fieldValue(m.field, s)
	if !ok {
		return 0, false
	}
	x, _, ok := numeric(v)
	return x, ok
}

// GroupKey reads the by() fields of a span: their values (nil when absent).
func (m *Metrics) GroupKey(s *model.Span) []model.Value {
	out := make([]model.Value, len(m.by))
	for i, f := range m.by {
		if v, ok := fieldValue(f, s); ok {
			out[i] = v
		}
	}
	return out
}

// ByKinds reports, for each by() field, whether it is exactly
// resource.service.name or the span name (what stored service aggregates
// are keyed by): "service", "name", or "" for anything else.
func (m *Metrics) ByKinds() []string {
	out := make([]string, len(m.by))
	for i, f := range m.by {
		switch {
		case f.intr == intrName:
			out[i] = "name"
		case f.intr == intrNone && f.scope == ScopeResource && f.key == "service.name":
			out[i] = "service"
		}
	}
	return out
}

func (m *Metrics) appendTo(b []byte) []byte {
	b = append(append(b, m.Func.String()...), '(')
	if m.Func == FuncCompare {
		b = filterStage{n: m.selection}.appendTo(b)
		b = strconv.AppendInt(append(b, ", "...), int64(m.CompareTopN), 10)
		if m.CompareFrom != 0 {
			b = strconv.AppendUint(append(b, ", "...), m.CompareFrom, 10)
			b = strconv.AppendUint(append(b, ", "...), m.CompareTo, 10)
		}
		return append(b, ')')
	}
	if m.Func != FuncRate && m.Func != FuncCountOverTime {
		b = m.field.appendTo(b)
	}
	for _, q := range m.Quantiles {
		b = strconv.AppendFloat(append(b, ", "...), q, 'g', -1, 64)
	}
	b = append(b, ')')
	if len(m.by) > 0 {
		b = append(b, " by ("...)
		for i, f := range m.by {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = f.appendTo(b)
		}
		b = append(b, ')')
	}
	return appendSecond(b, m.Second)
}

// appendSecond renders stages after a metrics function or arithmetic.
func appendSecond(b []byte, stages []SecondStage) []byte {
	for _, st := range stages {
		switch {
		case st.TopK > 0:
			name := "topk"
			if st.BottomK {
				name = "bottomk"
			}
			b = strconv.AppendInt(append(append(b, " | "...), name+"("...), int64(st.TopK), 10)
			b = append(b, ')')
		default:
			b = append(append(append(b, ' '), st.Op.String()...), ' ')
			b = strconv.AppendFloat(b, st.Value, 'g', -1, 64)
		}
	}
	return b
}

// SecondStage is a stage after a metrics function: topk(n) or bottomk(n)
// (TopK > 0), else a filter keeping the points whose value compares true.
type SecondStage struct {
	TopK    int
	BottomK bool
	Op      op
	Value   float64
}

// Keep reports whether a filter stage keeps a point of value v.
func (st SecondStage) Keep(v float64) bool { return compareFloat(v, st.Op, st.Value) }

// Metrics returns the query's metrics stage, or nil for a search query.
func (q *Query) Metrics() *Metrics { return q.metrics }

// Spans returns the query without its metrics stage: the spans it selects.
func (q *Query) Spans() *Query { return &Query{root: q.root} }

// isMetricsFunc reports whether w names a metrics function.
func isMetricsFunc(w string) (MetricsFunc, bool) {
	i := slices.Index(metricsFuncNames[:], w)
	return MetricsFunc(max(i, 0)), i >= 0
}

// parseMetrics reads a metrics function after `|` (its name already read,
// the current token its opening parenthesis's successor), its by (...),
// and an optional `| topk(n)` or `| bottomk(n)`.
func (p *parser) parseMetrics(fn MetricsFunc) (*Metrics, error) {
	m := &Metrics{Func: fn}
	if fn == FuncCompare {
		return p.parseCompare(m)
	}
	if fn != FuncRate && fn != FuncCountOverTime {
		f, err := p.parseField()
		if err != nil {
			return nil, err
		}
		m.field = f
		// The lexer has no comma: the quantiles' are read from the source.
		end := p.tok.end
		for fn == FuncQuantileOverTime {
			rest := strings.TrimLeft(p.src[end:], " \t\r\n")
			if !strings.HasPrefix(rest, ",") {
				break
			}
			p.pos = len(p.src) - len(rest) + 1
			if err := p.advance(); err != nil {
				return nil, err
			}
			var q float64
			if l, ok := p.literalToken(); ok && (l.kind == litFloat || l.kind == litInt) {
				q = l.f
				if l.kind == litInt {
					q = float64(l.i)
				}
			} else if t := p.src[p.tok.pos:p.tok.end]; p.tok.kind == tAttr && len(t) > 1 {
				// `.95` lexes as an attribute; as a quantile it is a number.
				x, err := strconv.ParseFloat("0"+t, 64)
				if err != nil {
					return nil, p.errf(p.tok.pos, "expected a quantile between 0 and 1, got %s", p.desc())
				}
				q = x
			} else {
				return nil, p.errf(p.tok.pos, "expected a quantile between 0 and 1, got %s", p.desc())
			}
			if !(q >= 0 && q <= 1) {
				return nil, p.errf(p.tok.pos, "quantile %v is not between 0 and 1", q)
			}
			m.Quantiles = append(m.Quantiles, q)
			end = p.tok.end
		}
		if fn == FuncQuantileOverTime && len(m.Quantiles) == 0 {
			return nil, p.errf(p.tok.pos, "quantile_over_time needs at least one quantile: quantile_over_time(duration, .5, .99)")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.tok.kind != tRParen {
		return nil, p.errf(p.tok.pos, "expected ) to close %s(, got %s", fn, p.desc())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tIdent && p.src[p.tok.pos:p.tok.end] == "by" {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tLParen {
			return nil, p.errf(p.tok.pos, "expected ( after by")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		by, err := p.parseFieldList()
		if err != nil {
			return nil, err
		}
		m.by = by
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) to close by(, got %s", p.desc())
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	for {
		switch {
		case p.tok.kind == tOp && p.tok.op != opRe && p.tok.op != opNre:
			o, pos := p.tok.op, p.tok.pos
			if err := p.advance(); err != nil {
				return nil, err
			}
			l, ok, err := p.constValue()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, p.errf(pos, "expected a number after %s in a filter on the series' values", o)
			}
			v := float64(l.i)
			switch l.kind {
			case litFloat:
				v = l.f
			case litDuration:
				v = float64(l.i) / 1e9 // series values of durations are seconds
			}
			m.Second = append(m.Second, SecondStage{Op: o, Value: v})
			continue
		case p.tok.kind == tPipe:
		default:
			return m, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		w := ""
		if p.tok.kind == tIdent {
			w = p.src[p.tok.pos:p.tok.end]
		}
		if w != "topk" && w != "bottomk" {
			return nil, p.errf(p.tok.pos, "only topk(n), bottomk(n) or a comparison may follow a metrics function, got %s", p.desc())
		}
		st := SecondStage{BottomK: w == "bottomk"}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tLParen {
			return nil, p.errf(p.tok.pos, "expected ( after %s", w)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		l, ok := p.literalToken()
		if !ok || l.kind != litInt || l.i < 1 || l.i > 10000 {
			return nil, p.errf(p.tok.pos, "expected a whole number from 1 to 10000 in %s(), got %s", w, p.desc())
		}
		st.TopK = int(l.i)
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) to close %s(", w)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		m.Second = append(m.Second, st)
	}
}

// OpsScope is what a spanset filter asks of stored service aggregates
// (keyed by service, span name and minute, with error counts and a duration
// sketch): one service, one span name, error spans only.
type OpsScope struct {
	Service, Name string
	ErrorsOnly    bool
}

// OpsCovered reports whether e selects spans by nothing but an exact
// resource.service.name, an exact span name and status = error, joined
// with &&: stored service aggregates then answer for it without reading
// spans.
func OpsCovered(e Expr) (OpsScope, bool) {
	var sc OpsScope
	var walk func(n node) bool
	walk = func(n node) bool {
		switch n := n.(type) {
		case allExpr:
			return true
		case andExpr:
			return walk(n.l) && walk(n.r)
		case boundExpr:
			return walk(n.node)
		case *cond:
			switch {
			case n.op != opEq:
				return false
			case n.f.intr == intrNone && n.f.scope == ScopeResource && n.f.key == "service.name" && n.lit.kind == litString:
				if sc.Service != "" && sc.Service != n.lit.s {
					return false
				}
				sc.Service = n.lit.s
				return true
			case n.f.intr == intrName && n.lit.kind == litString:
				if sc.Name != "" && sc.Name != n.lit.s {
					return false
				}
				sc.Name = n.lit.s
				return true
			case n.f.intr == intrStatus && n.lit.kind == litStatus && model.StatusCode(n.lit.i) == model.StatusError:
				sc.ErrorsOnly = true
				return true
			}
		}
		return false
	}
	n, ok := e.(node)
	if !ok || !walk(n) {
		return OpsScope{}, false
	}
	return sc, true
}

// parseCompare reads compare({ filter }[, topN[, start, end]]) after its
// opening parenthesis: Tempo's form, start and end in Unix nanoseconds.
func (p *parser) parseCompare(m *Metrics) (*Metrics, error) {
	if p.tok.kind != tLBrace {
		return nil, p.errf(p.tok.pos, "compare() takes a spanset filter first: compare({ status = error })")
	}
	sel, err := p.parseFilterBody()
	if err != nil {
		return nil, err
	}
	m.selection, m.CompareTopN = sel, 10
	var nums []int64
	end := p.tok.end // the closing }
	for {
		rest := strings.TrimLeft(p.src[end:], " \t\r\n")
		if !strings.HasPrefix(rest, ",") {
			p.pos = end
			break
		}
		p.pos = len(p.src) - len(rest) + 1
		if err := p.advance(); err != nil {
			return nil, err
		}
		l, ok := p.literalToken()
		if !ok || l.kind != litInt || l.i < 0 {
			return nil, p.errf(p.tok.pos, "expected a whole number in compare(), got %s", p.desc())
		}
		nums = append(nums, l.i)
		end = p.tok.end
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	switch len(nums) {
	case 0:
	case 1, 3:
		if nums[0] < 1 || nums[0] > 1000 {
			return nil, p.errf(p.tok.pos, "compare()'s top count must be from 1 to 1000")
		}
		m.CompareTopN = int(nums[0])
		if len(nums) == 3 {
			m.CompareFrom, m.CompareTo = uint64(nums[1]), uint64(nums[2])
		}
	default:
		return nil, p.errf(p.tok.pos, "compare() takes a filter, then a top count, then optionally a start and an end")
	}
	if p.tok.kind != tRParen {
		return nil, p.errf(p.tok.pos, "expected ) to close compare(, got %s", p.desc())
	}
	return m, p.advance()
}

// CompareAttributes calls f with every attribute of a span compare()
// counts: span and resource attributes of scalar types, and the name,
// status and kind intrinsics (Tempo leaves out durations, ids and times).
func CompareAttributes(s *model.Span, f func(name string, v model.Value)) {
	f("name", model.StringValue(s.Name))
	f("status", model.StringValue(s.StatusCode.String()))
	f("kind", model.StringValue(s.Kind.String()))
	scalar := func(v model.Value) bool {
		switch v.Type {
		case model.ValueString, model.ValueInt, model.ValueDouble, model.ValueBool:
			return true
		}
		return false
	}
	for _, kv := range s.Attributes {
		if scalar(kv.Value) {
			f("span."+kv.Key, kv.Value)
		}
	}
	if s.Resource != nil {
		for _, kv := range s.Resource.Attributes {
			if scalar(kv.Value) {
				f("resource."+kv.Key, kv.Value)
			}
		}
	}
}
