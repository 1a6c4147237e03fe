package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// TestAbsentValuesReadNoBlock checks issue 23's promise that an absent
// value costs almost nothing: over sealed segments of the canonical corpus
// (and a segment of Unicode names), a search for a value no span has reads
// no block, whether the value shares a prefix, the case or a Unicode normal
// form with a present one, and whether the query names the span scope or
// no scope (as Tempo's tags become); every segment is ruled out on its
// resident attribute value summary. Present values still find their spans,
// as a brute-force scan does.
func TestAbsentValuesReadNoBlock(t *testing.T) {
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Durability: engine.DurabilityBuffered})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now().Add(-2 * time.Hour)
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 1, Spans: 40_000, Start: start, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(spans); i += 10_000 {
		appendSealed(t, e, spans[i:i+10_000], 1000) // one segment each
	}
	names := []string{"Zoë", "Ångström", "café", "İstanbul", "straße"}
	var named []model.Span
	for i := range 500 {
		s := spans[i]
		s.TraceID[15] ^= 0xa5
		s.Attributes = append([]model.KeyValue{{Key: "customer.name", Value: model.StringValue(norm.NFC.String(names[i%len(names)]))},
			{Key: "order.total", Value: model.DoubleValue(float64(i % 7))}}, s.Attributes...)
		named = append(named, s)
	}
	appendSealed(t, e, named, 100)
	const segments = 5
	all := append(append([]model.Span(nil), spans...), named...)

	search := func(q string) (n int, c0, c1 engine.Counters) {
		t.Helper()
		expr, err := query.ParseTraceQL(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		f := &query.Filter{Expr: expr}
		c0 = e.Counters()
		got, _, _, err := e.SearchSpans(context.Background(), "default", f, 20, nil)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		tr, _, err := e.SearchTraces(context.Background(), "default", f, 20)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		c1 = e.Counters()
		want := 0
		for i := range all {
			if f.Match(&all[i]) {
				want++
			}
		}
		if (want == 0) != (len(got) == 0) || (want == 0) != (len(tr) == 0) || len(got) > 20 {
			t.Fatalf("%s: %d spans and %d traces, brute force finds %d spans", q, len(got), len(tr), want)
		}
		return want, c0, c1
	}

	absent := []string{"u-absent", "u-0010", "u-00", "U-001", "u-001 ", "u-1000", "u-100"}
	var queries []string
	for _, v := range absent {
		queries = append(queries, fmt.Sprintf(`{ span.user.id = %q }`, v), fmt.Sprintf(`{ .user.id = %q }`, v))
	}
	for _, n := range names {
		c := norm.NFC.String(n)
		for _, v := range []string{norm.NFD.String(c), norm.NFKD.String(c), c + "s", c[:len(c)-1]} {
			if v != c {
				queries = append(queries, fmt.Sprintf(`{ span.customer.name = %q }`, v))
			}
		}
	}
	queries = append(queries, `{ span.customer.name = "ZOË" }`, `{ resource.user.id = "u-001" }`, `{ span.no.such.key = "x" }`,
		`{ span.user.id = "u-001" && span.cloud.region = "mars-1" }`,
		// Numbers: an int no span has, Tempo's tag search for a value that
		// reads as a number (the string or the number), a double no span
		// has, an integer no double equals.
		`{ span.http.response.status_code = 299 }`, `{ (.user.id = "123456" || .user.id = 123456) }`,
		`{ (.http.response.status_code = "299" || .http.response.status_code = 299) }`,
		`{ span.order.total = 9 }`, `{ span.order.total = 9.0 }`, `{ .order.total = -1 }`)
	for _, q := range queries {
		n, c0, c1 := search(q)
		if n != 0 {
			t.Fatalf("%s: brute force finds %d spans: not an absent value", q, n)
		}
		if read := c1.BlocksExamined - c0.BlocksExamined; read != 0 {
			t.Errorf("%s: %d blocks read for an absent value", q, read)
		}
		if pruned := c1.AttrSegPruned - c0.AttrSegPruned; pruned != 2*segments {
			t.Errorf("%s: %d segment visits ruled out by the summary, want %d (two searches, %d segments)", q, pruned, 2*segments, segments)
		}
	}
	for _, q := range []string{`{ span.user.id = "u-001" }`, `{ .user.id = "u-042" }`,
		`{ (.http.response.status_code = "200" || .http.response.status_code = 200) }`,
		`{ span.order.total = 3 }`, `{ (.order.total = "6" || .order.total = 6) }`, `{ span.order.total = 0.0 }`,
		fmt.Sprintf(`{ span.customer.name = %q }`, norm.NFC.String("Zoë"))} {
		if n, _, _ := search(q); n == 0 {
			t.Fatalf("%s: the corpus has no match", q)
		}
	}
}
