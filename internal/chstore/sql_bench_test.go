package chstore

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"

	"github.com/rastro-dev/rastro/internal/store"
)

// BenchmarkCheckSQL: validating and rebuilding a statement (no ClickHouse).
func BenchmarkCheckSQL(b *testing.B) {
	s := &Store{opts: Options{Now: time.Now}}
	views := s.sqlViews("p")
	const stmt = "SELECT model, count() AS calls, sum(cost_usd) AS cost FROM llm_calls AS l /* by model */ " +
		"WHERE start >= 1700000000000000000 AND trace_id IN (SELECT trace_id FROM spans WHERE status = 2) GROUP BY model ORDER BY cost DESC"
	b.ReportAllocs()
	b.SetBytes(int64(len(stmt)))
	for range b.N {
		if _, err := checkSQL(stmt, views); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSQLMode: SQL-mode statements over benchCorpus canonical spans
// and 50,000 spans of the LLM corpus in one project, next to the API's
// answer to the same question on the same store (the views read the
// project's whole visible rows; the API's statistics read rollups).
func BenchmarkSQLMode(b *testing.B) {
	s, _ := loaded(b)
	llmSpans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 2, Spans: 50_000, Start: time.Now().Add(-time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	appendAllB(b, s, llmSpans)
	for _, c := range []struct{ name, sql string }{
		{"sql_spans_by_service", "SELECT service, count() FROM spans GROUP BY service"},
		{"sql_newest_20_spans", "SELECT trace_id, span_id, name FROM spans ORDER BY start DESC LIMIT 20"},
		{"sql_llm_calls_by_model", "SELECT model, count(), sum(cost_usd) FROM llm_calls GROUP BY model"},
		{"sql_llm_minutes_by_model", "SELECT model, sum(calls), sum(cost_nano_usd) FROM llm_minutes GROUP BY model"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				res, err := s.SQL(b.Context(), "p", store.SQLQuery{SQL: c.sql})
				if err != nil || len(res.Rows) == 0 {
					b.Fatalf("%d rows, %v", len(res.Rows), err)
				}
			}
		})
	}
	b.Run("api_services", func(b *testing.B) {
		for range b.N {
			if got, _, err := s.Services(b.Context(), "p", 0, 0); err != nil || len(got) == 0 {
				b.Fatalf("%d services, %v", len(got), err)
			}
		}
	})
	b.Run("api_llm_stats_by_model", func(b *testing.B) {
		for range b.N {
			if st, err := s.LLMStats(b.Context(), "p", &store.LLMQuery{GroupBy: []string{"model"}}); err != nil || len(st.Groups) == 0 {
				b.Fatalf("%+v, %v", st, err)
			}
		}
	})
}
