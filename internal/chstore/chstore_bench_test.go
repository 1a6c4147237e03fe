package chstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// benchCorpus is how many canonical spans the read benchmarks load.
const benchCorpus = 200_000

// loaded opens a store holding benchCorpus canonical spans (one per benchmark).
func loaded(b *testing.B) (*Store, []model.Span) {
	b.Helper()
	spans := benchSpans(b, benchCorpus)
	s, err := Open(b.Context(), Options{URL: chtestURL(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	t0 := time.Now()
	appendAllB(b, s, spans)
	b.Logf("ingested %d spans in %v (%.0f spans/s, one writer)", len(spans), time.Since(t0), float64(len(spans))/time.Since(t0).Seconds())
	return s, spans
}

// BenchmarkTraceByID: a trace lookup (trace index, then the trace's minutes).
func BenchmarkTraceByID(b *testing.B) {
	s, spans := loaded(b)
	b.ResetTimer()
	for i := range b.N {
		id := spans[(i*7919)%len(spans)].TraceID
		tr, _, err := s.Trace(b.Context(), "p", id)
		if err != nil || len(tr) == 0 {
			b.Fatalf("trace %s: %d spans, %v", id, len(tr), err)
		}
	}
}

// BenchmarkSearchAttribute: the newest 20 spans with a selective attribute
// value, over the whole store.
func BenchmarkSearchAttribute(b *testing.B) {
	s, spans := loaded(b)
	var f query.Filter
	for i := len(spans) / 3; ; i++ {
		if a := spans[i].Attributes; len(a) > 0 && a[0].Value.Type == model.ValueString {
			expr, err := query.ParseTraceQL(fmt.Sprintf("{ span.%s = %q }", a[0].Key, a[0].Value.Str))
			if err != nil {
				b.Fatal(err)
			}
			f.Expr = expr
			break
		}
	}
	b.Logf("filter %s", f.Expr)
	b.ResetTimer()
	for range b.N {
		got, _, _, err := s.SearchSpans(b.Context(), "p", &f, 20, nil)
		if err != nil || len(got) == 0 {
			b.Fatalf("%d spans, %v", len(got), err)
		}
	}
}

// BenchmarkSearchSelective: the newest 20 spans with an attribute value few
// spans hold (the rarest span-scope string pair of the corpus held by at
// least 5 spans), and with a value no span holds, with the attribute index
// and from spans alone, on one store.
func BenchmarkSearchSelective(b *testing.B) {
	s, spans := loaded(b)
	count := map[[2]string]int{}
	for i := range spans {
		for _, kv := range spans[i].Attributes {
			if kv.Value.Type == model.ValueString {
				count[[2]string{kv.Key, kv.Value.Str}]++
			}
		}
	}
	var rare [2]string
	best := len(spans) + 1
	for p, n := range count {
		if n >= 5 && (n < best || n == best && fmt.Sprint(p) < fmt.Sprint(rare)) {
			rare, best = p, n
		}
	}
	for _, c := range []struct{ name, q string }{
		{"rare", fmt.Sprintf("{ span.%s = %q }", rare[0], rare[1])},
		{"absent", fmt.Sprintf("{ span.%s = %q }", rare[0], "no such value")},
	} {
		expr, err := query.ParseTraceQL(c.q)
		if err != nil {
			b.Fatal(err)
		}
		f := query.Filter{Expr: expr}
		b.Logf("%s: %s (%d spans hold it)", c.name, c.q, count[rare])
		for _, noIndex := range []bool{false, true} {
			name := c.name + "/index"
			if noIndex {
				name = c.name + "/spans"
			}
			b.Run(name, func(b *testing.B) {
				s.opts.NoAttrIndex = noIndex
				defer func() { s.opts.NoAttrIndex = false }()
				for range b.N {
					got, _, _, err := s.SearchSpans(b.Context(), "p", &f, 20, nil)
					if err != nil || (c.name == "rare") != (len(got) > 0) {
						b.Fatalf("%d spans, %v", len(got), err)
					}
				}
			})
		}
	}
}

// BenchmarkIngestViews: the cost of the materialized views (LLM rollup,
// attribute index) on ingest: benchCorpus canonical spans through Append
// (4 writers of 5,000-span requests) into a fresh database with the views,
// then into another without them, back to back.
func BenchmarkIngestViews(b *testing.B) {
	spans := benchSpans(b, benchCorpus)
	for _, views := range []bool{true, false} {
		name := "views"
		if !views {
			name = "no-views"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				s, err := Open(b.Context(), Options{URL: chtestURL(b)})
				if err != nil {
					b.Fatal(err)
				}
				if !views {
					for _, v := range []string{"llm_rollup_mv", "llm_rollup_hour_mv", "attr_index_span_mv", "attr_index_res_mv"} {
						if err := s.conn.Exec(b.Context(), "DROP TABLE "+v); err != nil {
							b.Fatal(err)
						}
					}
				}
				el := ingest(b, s, spans)
				b.ReportMetric(float64(len(spans))/el.Seconds(), "spans/s")
				s.Close()
			}
		})
	}
}
