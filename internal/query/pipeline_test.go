package query

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// randomTrace builds a trace of n spans: each span's parent is an earlier
// span, or none (a root), or an id not in the trace (a span whose parent
// has not arrived).
func randomTrace(rng *rand.Rand, n int) []model.Span {
	spans := make([]model.Span, n)
	tid := model.TraceID{1, byte(rng.IntN(256))}
	for i := range spans {
		s := &spans[i]
		s.TraceID = tid
		s.SpanID = model.SpanID{0xab, byte(i >> 8), byte(i), 1}
		switch r := rng.IntN(10); {
		case i == 0 || r == 0:
		case r == 1:
			s.ParentSpanID = model.SpanID{0xee, byte(rng.IntN(3))} // missing parent
		default:
			s.ParentSpanID = spans[rng.IntN(i)].SpanID
		}
		s.Service = []string{"a", "b", "c"}[rng.IntN(3)]
		s.Resource = &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(s.Service)}}}
		s.Name = fmt.Sprintf("n%d", rng.IntN(3))
		if rng.IntN(4) == 0 {
			s.StatusCode = model.StatusError
		}
		s.StartTimeUnixNano = uint64(1e9 + i*1000)
		s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(rng.IntN(5000))
		if rng.IntN(3) > 0 {
			s.Attributes = []model.KeyValue{{Key: "x", Value: model.IntValue(int64(rng.IntN(4)))}}
		}
	}
	rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	return spans
}

// naive is the reference: a query built alongside its text and evaluated
// with parent walks, independently of traceView's nested sets.
type naive interface {
	eval(spans []model.Span, in [][]int) [][]int
}

type nFilter struct{ e Expr }

func (f nFilter) eval(spans []model.Span, in [][]int) [][]int {
	var out [][]int
	for _, ss := range in {
		var keep []int
		for _, i := range ss {
			if f.e.Match(&spans[i]) {
				keep = append(keep, i)
			}
		}
		if len(keep) > 0 {
			out = append(out, keep)
		}
	}
	return out
}

type nOp struct {
	op   string
	l, r naive
}

func parentOf(spans []model.Span, i int) int {
	p := spans[i].ParentSpanID
	if p.IsZero() {
		return -1
	}
	for j := range spans {
		if spans[j].SpanID == p && j != i {
			return j
		}
	}
	return -1
}

func ancestorOf(spans []model.Span, a, d int) bool {
	for x, steps := parentOf(spans, d), 0; x >= 0 && steps <= len(spans); x, steps = parentOf(spans, x), steps+1 {
		if x == a {
			return true
		}
	}
	return false
}

func (o nOp) eval(spans []model.Span, in [][]int) [][]int {
	var out [][]int
	for _, ss := range in {
		lhs, rhs := o.l.eval(spans, [][]int{ss}), o.r.eval(spans, [][]int{ss})
		flat := func(x [][]int) []int {
			var all []int
			for _, s := range x {
				all = append(all, s...)
			}
			return all
		}
		var res []int
		switch o.op {
		case "&&":
			if len(lhs) > 0 && len(rhs) > 0 {
				res = append(flat(lhs), flat(rhs)...)
			}
		case "||":
			res = append(flat(lhs), flat(rhs)...)
		default:
			l, r := flat(lhs), flat(rhs)
			base := strings.TrimLeft(o.op, "!&")
			rel := map[string]func(x, y int) bool{
				">":  func(x, y int) bool { return parentOf(spans, x) == y },
				"<":  func(x, y int) bool { return parentOf(spans, y) == x },
				">>": func(x, y int) bool { return ancestorOf(spans, y, x) },
				"<<": func(x, y int) bool { return ancestorOf(spans, x, y) },
				"~": func(x, y int) bool {
					return x != y && parentOf(spans, x) >= 0 && parentOf(spans, x) == parentOf(spans, y)
				},
			}[base]
			for _, x := range r {
				any := false
				for _, y := range l {
					if rel(x, y) {
						any = true
						if strings.HasPrefix(o.op, "&") {
							res = append(res, y)
						}
					}
				}
				if any != strings.HasPrefix(o.op, "!") {
					res = append(res, x)
				}
			}
		}
		slices.Sort(res)
		res = slices.Compact(res)
		if len(res) > 0 {
			out = append(out, res)
		}
	}
	return out
}

type nCount struct {
	x   naive
	min int
}

func (c nCount) eval(spans []model.Span, in [][]int) [][]int {
	var out [][]int
	for _, ss := range c.x.eval(spans, in) {
		if len(ss) > c.min {
			out = append(out, ss)
		}
	}
	return out
}

var leafFilters = []string{`{ }`, `{ resource.service.name = "a" }`, `{ status = error }`, `{ span.x > 1 }`,
	`{ name = "n1" || name = "n2" }`, `{ resource.service.name != "c" && span.x != nil }`}

var structuralOps = []string{">", "<", ">>", "<<", "~", "!>", "!<", "!>>", "!<<", "!~", "&>", "&<", "&>>", "&<<", "&~", "&&", "||"}

// randomQuery returns a query's text and its reference evaluator.
func randomQuery(t *testing.T, rng *rand.Rand, depth int) (string, naive) {
	if depth == 0 || rng.IntN(3) == 0 {
		src := leafFilters[rng.IntN(len(leafFilters))]
		e, err := ParseTraceQL(src)
		if err != nil {
			t.Fatal(err)
		}
		return src, nFilter{e}
	}
	ls, ln := randomQuery(t, rng, depth-1)
	rs, rn := randomQuery(t, rng, depth-1)
	op := structuralOps[rng.IntN(len(structuralOps))]
	q := "(" + ls + ") " + op + " (" + rs + ")"
	var n naive = nOp{op, ln, rn}
	if rng.IntN(4) == 0 {
		k := rng.IntN(4)
		q = "(" + q + fmt.Sprintf(" | count() > %d)", k)
		n = nCount{n, k}
	}
	return q, n
}

// TestStructuralOperatorsAgreeWithBruteForce evaluates random queries over
// random trace trees with the engine-facing evaluator and with the naive
// reference.
func TestStructuralOperatorsAgreeWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 3000 {
		spans := randomTrace(rng, 1+rng.IntN(30))
		src, ref := randomQuery(t, rng, 1+rng.IntN(3))
		q, err := ParseQuery(src)
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, src, err)
		}
		got, err := q.Eval(spans)
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, src, err)
		}
		all := make([]int, len(spans))
		for i := range all {
			all[i] = i
		}
		want := ref.eval(spans, [][]int{all})
		var gotSets [][]int
		for _, ss := range got {
			gotSets = append(gotSets, ss.Spans)
		}
		if !reflect.DeepEqual(gotSets, want) {
			t.Fatalf("round %d: %s over %d spans:\ngot  %v\nwant %v", round, src, len(spans), gotSets, want)
		}
		// The canonical form parses back to itself.
		again, err := ParseQuery(q.String())
		if err != nil || again.String() != q.String() {
			t.Fatalf("round %d: %s renders as %s, which parses as %v (%v)", round, src, q.String(), again, err)
		}
	}
}

func TestPipelineAggregatesAndGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 500 {
		spans := randomTrace(rng, 1+rng.IntN(25))
		var xs []float64
		var errs int
		bySvc := map[string][]int{}
		for i := range spans {
			if v, ok := model.Lookup(spans[i].Attributes, "x"); ok {
				xs = append(xs, float64(v.Int))
			}
			if spans[i].StatusCode == model.StatusError {
				errs++
			}
			bySvc[spans[i].Service] = append(bySvc[spans[i].Service], i)
		}
		check := func(src string, want int) {
			t.Helper()
			q, err := ParseQuery(src)
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			got, err := q.Eval(spans)
			if err != nil || len(got) != want {
				t.Fatalf("round %d: %s: %d spansets (err %v), want %d", round, src, len(got), err, want)
			}
		}
		b2i := func(b bool) int {
			if b {
				return 1
			}
			return 0
		}
		sum, mx := 0.0, -1.0
		for _, x := range xs {
			sum += x
			mx = max(mx, x)
		}
		check(fmt.Sprintf("{ status = error } | count() = %d", errs), b2i(errs > 0))
		check("{ } | count() > 3", b2i(len(spans) > 3))
		check(fmt.Sprintf("{ span.x != nil } | sum(span.x) = %d", int(sum)), b2i(len(xs) > 0))
		check(fmt.Sprintf("{ } | max(span.x) >= %d", int(mx)), b2i(len(xs) > 0))
		check("{ } | avg(span.x) > 1.5", b2i(len(xs) > 0 && sum/float64(len(xs)) > 1.5))
		check("{ } | by(resource.service.name)", len(bySvc))
		check("{ } | by(resource.service.name) | coalesce()", 1)
		check("{ } | by(resource.service.name) | count() > 2", func() int {
			n := 0
			for _, s := range bySvc {
				n += b2i(len(s) > 2)
			}
			return n
		}())
		check("{ } | select(span.x, name) | { status = error }", b2i(errs > 0))
	}
	// A structural operator over several spansets is Tempo's error.
	q, err := ParseQuery(`({ } | by(resource.service.name)) >> { }`)
	if err != nil {
		t.Fatal(err)
	}
	spans := randomTrace(rng, 30)
	if _, err := q.Eval(spans); err != ErrMultipleSpansets {
		t.Fatalf("structural operator over by(): err %v", err)
	}
}

func TestQuerySyntaxErrors(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{`{ } >>`, "expected { or ("},
		{`{ } | count()`, "expected a comparison"},
		{`{ } | count() > "a"`, "expected a number"},
		{`{ } | frobnicate()`, "unknown pipeline element"},
		{`{ } | by(nope)`, "unknown intrinsic"},
		{`({ } >> { }`, "expected ) to close"},
		{`{ } { }`, "unexpected"},
		{`{ } | select(span.a,)`, "expected condition"},
		// Refused by Tempo's parser too (pkg/traceql/test_examples.yaml's
		// categories), or not supported here yet (metrics).
		{`{ true } + { true }`, "unexpected character '+'"},
		{`{ true } = { true }`, "unexpected"},
		{`{ true } <= { true }`, "expected { or ("},
		{`{} > 10`, "expected { or ("},
	} {
		_, err := ParseQuery(c.q)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.q, err, c.want)
		}
	}
	for _, q := range []string{`{ .a = 1 } >> { .b = 2 }`, `{ } ~ { } && { status = error }`, `{ } !>> { }`, `{ } &~ { }`,
		`({ } | count() > 1) || { }`, `{ } | by(span.a) | coalesce() | avg(duration) > 10ms`, `{ } | select(span.a, resource.b)`,
		`{ span.gen_ai.operation.name = "chat" } | count() > 20`,
		`{ true } && { true }`, `{ true } >> { true }`, `{ true } ~ { true }`, `{ true } | count() = 1`, `{ true } | select(.a)`,
		`({ true } | count() > 1) > ({ true })`, `{ .a } !< { .b } &< { .c } !<< { .d } &<< { } || { }`,
		`{ } >> { } with (most_recent=true)`, `count() = 1 | { true }`, `by(.a) | { true }`, `select(.a)`, `max(duration) >= 1s`} {
		if _, err := ParseQuery(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	q, _ := ParseQuery(`{ .a = 1 }`)
	if e, ok := q.Simple(); !ok || e.String() != `{ .a = 1 }` {
		t.Errorf("a lone filter is simple: %v %v", e, ok)
	}
	q, _ = ParseQuery(`{ .a = 1 } >> { .b = 2 }`)
	if _, ok := q.Simple(); ok || len(q.Required()) != 2 {
		t.Errorf(">> is not simple and requires both sides: %v", q.Required())
	}
}

func TestMetricsQueriesParse(t *testing.T) {
	for _, c := range []struct{ q, canon string }{
		{`{ } | rate()`, `{ } | rate()`},
		{`{ status = error } | rate() by (resource.service.name)`, `{ status = error } | rate() by (resource.service.name)`},
		{`{ span.gen_ai.request.model != nil } | quantile_over_time(duration, .95) by (span.gen_ai.request.model)`,
			`{ span.gen_ai.request.model != nil } | quantile_over_time(duration, 0.95) by (span.gen_ai.request.model)`},
		{`{ } | quantile_over_time(duration, .5, .95, .99) by (name, resource.service.name)`, `{ } | quantile_over_time(duration, 0.5, 0.95, 0.99) by (name, resource.service.name)`},
		{`{ } | count_over_time() by (name) | topk(5)`, `{ } | count_over_time() by (name) | topk(5)`},
		{`{ } | histogram_over_time(duration)`, `{ } | histogram_over_time(duration)`},
		{`{ } | avg_over_time(span.x) | bottomk(2)`, `{ } | avg_over_time(span.x) | bottomk(2)`},
		{`{ .a } >> { .b } | count() > 1 | max_over_time(duration)`, `{ .a = true } >> { .b = true } | count() > 1 | max_over_time(duration)`},
		{`{ } | rate() with (sample=true, most_recent = "x)")`, `{ } | rate()`},
		{`{ } | rate() by (name) >= 5.5 | bottomk(3)`, `{ } | rate() by (name) >= 5.5 | bottomk(3)`},
		{`{ } | count_over_time() | topk(10) != 0 with(sample=0.1)`, `{ } | count_over_time() | topk(10) != 0`},
	} {
		q, err := ParseQuery(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		if q.Metrics() == nil || q.String() != c.canon {
			t.Errorf("%s: metrics %v, renders %s, want %s", c.q, q.Metrics(), q.String(), c.canon)
		}
		if _, simple := q.Simple(); simple {
			t.Errorf("%s: a metrics query is not simple", c.q)
		}
	}
	for _, c := range []struct{ q, want string }{
		{`{ } | quantile_over_time(duration)`, "at least one quantile"},
		{`{ } | quantile_over_time(duration, 2)`, "between 0 and 1"},
		{`{ } | rate() | count() > 1`, "only topk(n), bottomk(n) or a comparison"},
		{`{ } >> ({ } | rate())`, "must end the query"},
		{`{ } | rate() by (nope)`, "unknown intrinsic"},
		{`{ } | topk(0)`, "unknown pipeline element topk"},
		{`{ } | rate() | topk(0)`, "from 1 to 10000"},
	} {
		if _, err := ParseQuery(c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.q, err, c.want)
		}
	}
}

// TestMetricsMathParse: arithmetic between metrics queries and numbers
// parses with * and / binding tighter than + and -, folds numbers (integers
// divide as integers, as in Tempo), and keeps filters and topk where they
// were written.
func TestMetricsMathParse(t *testing.T) {
	for _, c := range []struct{ q, canon string }{
		{`({ } | rate())`, `({ } | rate())`},
		{`({} | rate()) * 100`, `({ } | rate()) * 100`},
		{`100 * ({} | rate())`, `100 * ({ } | rate())`},
		{`({ status = error } | rate()) / ({ } | rate())`, `({ status = error } | rate()) / ({ } | rate())`},
		{`({} | rate()) + 3 * 2`, `({ } | rate()) + 6`},
		{`(1 + 2) * ({} | rate())`, `3 * ({ } | rate())`},
		{`1 / 2 + ({} | rate())`, `0 + ({ } | rate())`},
		{`1.0 / 2 + ({} | rate())`, `0.5 + ({ } | rate())`},
		{`-5 + ({} | rate())`, `-5 + ({ } | rate())`},
		{`({} | rate()) - -1.5`, `({ } | rate()) - -1.5`},
		{`({} | rate()) + 1 + 2`, `(({ } | rate()) + 1) + 2`},
		{`5 + ({} | rate()) * 10`, `5 + (({ } | rate()) * 10)`},
		{`({} | rate()) > 1 / 2`, `({ } | rate()) > 0`},
		{`({} | max_over_time(duration)) > 10s`, `({ } | max_over_time(duration)) > 10`},
		{`({} | rate() > 6) * 100 > 5`, `({ } | rate() > 6) * 100 > 5`},
		{`({} | rate()) + ({} | rate()) | topk(5) > 10`, `({ } | rate()) + ({ } | rate()) | topk(5) > 10`},
		{`(({} | rate()) * ({} | count_over_time())) + ({} | rate())`, `(({ } | rate()) * ({ } | count_over_time())) + ({ } | rate())`},
		{`({ } | count_over_time() by (name)) * 100`, `({ } | count_over_time() by (name)) * 100`},
		{`({ .a = "x)" } | rate()) * 2`, `({ .a = "x)" } | rate()) * 2`},
	} {
		q, err := ParseQuery(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		if q.Math() == nil || !q.IsMetrics() || q.String() != c.canon {
			t.Errorf("%s: math %v, renders %s, want %s", c.q, q.Math(), q.String(), c.canon)
		}
		if _, simple := q.Simple(); simple {
			t.Errorf("%s: arithmetic is not simple", c.q)
		}
		// The canonical form parses to itself.
		if q2, err := ParseQuery(q.String()); err != nil || q2.String() != q.String() {
			t.Errorf("%s: canonical %s reparses to %v, %v", c.q, q.String(), q2, err)
		}
	}
	for _, c := range []struct{ q, want string }{
		{`1 + 2`, "numbers only"},
		{`(1 + 2)`, "numbers only"},
		{`({ } | rate()) * 1s`, "duration cannot be a scalar operand"},
		{`1s * 2 + ({ } | rate())`, "duration cannot be used in arithmetic"},
		{`({ } | rate()) / (1 / 0)`, "division by zero"},
		{`({ .a = 1 }) * 2`, "end it with a metrics function"},
		{`({ } | rate()) * ({ } | rate()`, "missing )"},
		{`({ } | rate()) % 2`, "unexpected \"%\""},
		{`({ } | rate()) | count() > 1`, "only topk(n), bottomk(n)"},
		{`({} | compare({status=error})) + ({} | rate())`, "compare() cannot be used"},
		{`({ } | rate(x)) * 2`, "position 12"},
	} {
		if _, err := ParseQuery(c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.q, err, c.want)
		}
	}
	// Aggregate comparisons take constant expressions too.
	for q, canon := range map[string]string{
		`{ } | min(span:childCount) < 2 / 6`: `{ } | min(span:childCount) < 0`,
		`{ } | avg(.field) > 1 - 3`:          `{ } | avg(.field) > -2`,
		`{ } | max(duration) > 1s`:           `{ } | max(duration) > 1s`,
		`{ } | count() > 2.5 * 2`:            `{ } | count() > 5.0`,
	} {
		got, err := ParseQuery(q)
		if err != nil || got.String() != canon {
			t.Errorf("%s: %v %v, want %s", q, got, err, canon)
		}
	}
}

// TestChildCount: span:childCount counts a span's children in the trace;
// it needs the whole trace, so a lone filter with it is not simple, and the
// single-filter parser refuses it.
func TestChildCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 300 {
		spans := randomTrace(rng, 1+rng.IntN(30))
		k := rng.IntN(4)
		q, err := ParseQuery(fmt.Sprintf("{ span:childCount >= %d }", k))
		if err != nil {
			t.Fatal(err)
		}
		if _, simple := q.Simple(); simple {
			t.Fatal("a childCount filter is not simple")
		}
		got, err := q.Eval(spans)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for i := range spans {
			n := 0
			for j := range spans {
				if parentOf(spans, j) == i {
					n++
				}
			}
			if n >= k {
				want = append(want, i)
			}
		}
		var gotSpans []int
		if len(got) == 1 {
			gotSpans = got[0].Spans
		}
		if !reflect.DeepEqual(gotSpans, want) {
			t.Fatalf("childCount >= %d: %v, want %v", k, gotSpans, want)
		}
	}
	if _, err := ParseTraceQL(`{ span:childCount > 1 }`); err == nil || !strings.Contains(err.Error(), "needs the trace's structure") {
		t.Fatalf("single-filter parse: %v", err)
	}
	if _, err := ParseQuery(`{ span:childCount > "a" }`); err == nil {
		t.Fatal("childCount compared with a string")
	}
}

// TestAggregateArithmetic: aggregates and by() take arithmetic over
// fields, and a minus may start an expression; spans whose field is
// missing are left out, as for a plain field.
func TestAggregateArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for range 200 {
		spans := randomTrace(rng, 1+rng.IntN(20))
		var xs []float64
		groups := map[float64]int{}
		for _, s := range spans {
			if len(s.Attributes) > 0 {
				x := float64(s.Attributes[0].Value.Int)
				xs = append(xs, x)
				groups[3*x-2]++
			}
		}
		q, err := ParseQuery(`{ } | max((1 + .x) * 2) >= 0`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := q.Eval(spans)
		if err != nil {
			t.Fatal(err)
		}
		if len(xs) == 0 {
			if len(got) != 0 {
				t.Fatalf("max over no value kept a spanset: %+v", got)
			}
			continue
		}
		if len(got) != 1 || got[0].Scalar == nil || got[0].Scalar.Double != (1+slices.Max(xs))*2 {
			t.Fatalf("max((1 + .x) * 2) over %v: %+v", xs, got)
		}
		q, _ = ParseQuery(`{ -.x <= -2 } | count() > 0`)
		got, _ = q.Eval(spans)
		n := 0
		for _, x := range xs {
			if -x <= -2 {
				n++
			}
		}
		if (n > 0) != (len(got) == 1) || (n > 0 && len(got[0].Spans) != n) {
			t.Fatalf("-.x <= -2 over %v: %+v, want %d spans", xs, got, n)
		}
		q, _ = ParseQuery(`{ .x != nil } | by(3 * .x - 2)`)
		got, _ = q.Eval(spans)
		if len(got) != len(groups) {
			t.Fatalf("by(3 * .x - 2) over %v: %d spansets, want %d", xs, len(got), len(groups))
		}
		for _, ss := range got {
			k := ss.Attrs[len(ss.Attrs)-1]
			if k.Name != "by(3 * .x - 2)" || groups[k.Value.Double] != len(ss.Spans) {
				t.Fatalf("group %+v of %d spans, want %d", k, len(ss.Spans), groups[k.Value.Double])
			}
		}
	}
}
