package query

import (
	"errors"
	"math/rand/v2"

	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

func FuzzParseTraceQL(f *testing.F) {
	for _, q := range []string{
		`{ }`,
		`{ span.http.status_code >= 500 && resource.service.name = "checkout" }`,
		`{ (kind = server || kind = client) && !(status = ok) }`,
		`{ span."my key" =~ "a.*\n" || .x != nil }`,
		`{ duration > 1.5s && duration < 1h30m0s && duration != 10µs }`,
		`{ span.ratio < -2.5e-3 && span.n = -7 && span.b = true }`,
		`{ name = "\x41\u00e9\U0001F600" }`,
		`{ span:name = "x" && span:statusMessage !~ "y" }`,
		`{ span.a = 1 } | count() > 2`,
		`{ kind = banana }`,
		`{ "unterminated }`,
		"{ name = \"\xff\" }",
		`{ content = "refund \"order 42\" naïve" && resource.service.name = "support" }`,
		`{ !(content = "退款 👍") || content != "x" }`,
		`{ .0 = -(0) || .a = -(1s) || .b = -(-(2.5)) }`,
	} {
		f.Add(q)
	}
	r := rand.New(rand.NewPCG(5, 6))
	spans := []*model.Span{fixture()}
	for range 20 {
		spans = append(spans, randSpan(r))
	}
	f.Fuzz(func(t *testing.T, q string) {
		e, err := ParseTraceQL(q)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(q) {
				t.Fatalf("ParseTraceQL(%q): bad error %#v", q, err)
			}
			return
		}
		text := e.String()
		e2, err := ParseTraceQL(text)
		if err != nil {
			t.Fatalf("ParseTraceQL(%q) renders %s, which does not parse: %v", q, text, err)
		}
		if e2.String() != text {
			t.Fatalf("String not a fixed point: %s then %s", text, e2)
		}
		for _, s := range spans {
			if e.Match(s) != e2.Match(s) {
				t.Fatalf("%q and its canonical form %s disagree", q, text)
			}
		}
	})
}

// FuzzParseQuery: whole queries never panic, report errors with a position
// inside the query, render to a fixed point, and evaluate their canonical
// form alike.
func FuzzParseQuery(f *testing.F) {
	for _, q := range []string{
		`{ .a } >> { .b && status = error }`, `{ } !~ { } &>> { .c = 1 } || { }`,
		`({ } | by(span.a)) | coalesce() | count() > 2`, `{ } | avg(duration) > 1s | select(span.a, name)`,
		`{ } | rate() by (resource.service.name) | topk(3)`, `{ } | quantile_over_time(duration, .5, .99) by (name)`,
		`{ } | compare({ status = error }, 5)`, `{ span.a + span.b * 2 > 3 }`, `{ 3 < span.a ^ 2 }`,
		`{ span:childCount > 2 } ~ { } with (most_recent = true)`, `{ duration / (2 + 1) > 1ms }`,
		`({} | rate()) * -2 + 3 / (1.5 - ({} | rate() by (name))) | topk(2) > 1`, `{ } | max(-(1 + .a) * 2) > 1 - 3`,
		`{ } | by(.a * 2) | count() > 2 / 3`, `-(({ "x)" = .a } | count_over_time()) > 1s)`,
	} {
		f.Add(q)
	}
	r := rand.New(rand.NewPCG(7, 8))
	var trace []model.Span
	for range 12 {
		trace = append(trace, *randSpan(r))
	}
	f.Fuzz(func(t *testing.T, q string) {
		pq, err := ParseQuery(q)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(q) {
				t.Fatalf("ParseQuery(%q): bad error %#v", q, err)
			}
			return
		}
		text := pq.String()
		again, err := ParseQuery(text)
		if err != nil || again.String() != text {
			t.Fatalf("ParseQuery(%q) renders %s, which parses as %v (%v)", q, text, again, err)
		}
		a, errA := pq.Spans().Eval(trace)
		b, errB := again.Spans().Eval(trace)
		if (errA == nil) != (errB == nil) || len(a) != len(b) {
			t.Fatalf("%q and its canonical form %s evaluate differently", q, text)
		}
	})
}
