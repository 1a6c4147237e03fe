package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// TestServiceRoutesAgree: RED, heatmap, error groups and dependencies from
// the engine (stored per-block aggregates where a segment or block lies
// inside the window, rows elsewhere and in the write buffer) equal a
// brute-force computation over the spans, for random corpora, windows,
// steps and filters.
func TestServiceRoutesAgree(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			start := time.Now().Add(-5 * time.Hour).Truncate(time.Second)
			window := 4 * time.Hour
			api, err := bench.Generate(bench.CorpusAPI, bench.CorpusOptions{Seed: seed, Spans: 4000, Start: start, Window: window})
			if err != nil {
				t.Fatal(err)
			}
			llmSpans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: seed, Spans: 1500, Start: start, Window: window})
			if err != nil {
				t.Fatal(err)
			}
			spans := append(api, llmSpans...)
			// Error spans with exceptions and messages that normalise together.
			for i := range spans {
				if rng.IntN(40) == 0 {
					sp := &spans[i]
					sp.StatusCode = model.StatusError
					sp.StatusMessage = fmt.Sprintf("upstream timed out after %d ms", rng.IntN(5000))
					if rng.IntN(2) == 0 {
						sp.StatusMessage = ""
						sp.Events = append(sp.Events, model.Event{TimeUnixNano: sp.StartTimeUnixNano, Name: "exception",
							Attributes: []model.KeyValue{{Key: "exception.type", Value: model.StringValue("ValueError")},
								{Key: "exception.message", Value: model.StringValue(fmt.Sprintf("bad order %x", rng.Uint64()))}}})
					}
				}
			}
			rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
			e, err := engine.Open(engine.Options{Dir: t.TempDir(), BlockSpans: 200})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := memstore.New(memstore.Options{})
			for i := 0; i < len(spans); i += 400 {
				b := spans[i:min(i+400, len(spans))]
				for _, be := range []store.Backend{e, m} {
					w := &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(b), Spans: slices.Clone(b)}
					if err := be.Append(ctx, w); err != nil {
						t.Fatal(err)
					}
				}
				if i%1600 == 0 || i+400 >= len(spans)-800 && i+400 < len(spans)-400 {
					if err := e.Seal(); err != nil {
						t.Fatal(err)
					}
				}
			}
			services, _, _ := m.Services(ctx, "p", 0, 0)
			base := uint64(start.UnixNano())
			for round := range 12 {
				q := &store.OpsQuery{Step: time.Duration(1+rng.IntN(90)) * time.Minute, ByOperation: rng.IntN(2) == 0}
				if round > 0 {
					q.Start = base + uint64(rng.Int64N(int64(window)))
					q.End = q.Start + uint64(rng.Int64N(int64(window)))
				}
				if round > 0 && rng.IntN(3) == 0 {
					q.Service = services[rng.IntN(len(services))].Name
				}
				// Some rounds add a span filter (answered from rows): a
				// TraceQL condition, or one the aggregates can serve.
				switch {
				case round > 0 && round%4 == 1:
					expr, err := query.ParseTraceQL(`{ duration > 20ms || status = error }`)
					if err != nil {
						t.Fatal(err)
					}
					q.Filter = &query.Filter{Expr: expr}
				case round > 0 && round%4 == 2:
					q.Filter = &query.Filter{Service: q.Service}
				}
				what := fmt.Sprintf("round %d %+v", round, *q)
				re, _, err := e.RED(ctx, "p", q)
				if err != nil {
					t.Fatal(err)
				}
				rm, _, _ := m.RED(ctx, "p", q)
				if round == 0 && len(re) == 0 {
					t.Fatal("RED over the whole store is empty")
				}
				if !reflect.DeepEqual(redCounts(re), redCounts(rm)) {
					t.Fatalf("%s: RED differs:\nengine %v\nbrute  %v", what, redCounts(re), redCounts(rm))
				}
				he, _, err := e.Heatmap(ctx, "p", q)
				if err != nil {
					t.Fatal(err)
				}
				hm, _, _ := m.Heatmap(ctx, "p", q)
				if !reflect.DeepEqual(he, hm) {
					t.Fatalf("%s: heatmap differs:\nengine %v\nbrute  %v", what, he.Cells, hm.Cells)
				}
				ee, _, err := e.ErrorGroups(ctx, "p", q, 0)
				if err != nil {
					t.Fatal(err)
				}
				em, _, _ := m.ErrorGroups(ctx, "p", q, 0)
				if round == 0 && len(ee) < 3 {
					t.Fatalf("only %d error groups over the whole store", len(ee))
				}
				if !reflect.DeepEqual(ee, em) {
					t.Fatalf("%s: error groups differ:\nengine %v\nbrute  %v", what, ee, em)
				}
				de, _, err := e.Dependencies(ctx, "p", q.Start, q.End)
				if err != nil {
					t.Fatal(err)
				}
				dm, _, _ := m.Dependencies(ctx, "p", q.Start, q.End)
				if !reflect.DeepEqual(de, dm) || round == 0 && len(de) == 0 {
					t.Fatalf("%s: dependencies differ:\nengine %v\nbrute  %v", what, de, dm)
				}
			}
		})
	}
}

// redCounts keeps what must agree exactly: counts per series and bucket,
// and the maximum duration (percentiles are sketched in the engine, exact
// in the reference).
func redCounts(series []store.REDSeries) []string {
	var out []string
	for _, s := range series {
		out = append(out, fmt.Sprintf("%s/%s %d %d max %v", s.Service, s.Operation, s.Calls, s.Errors, s.Latency.Max))
		for _, b := range s.Buckets {
			out = append(out, fmt.Sprintf("  %d %d %d max %v", b.Start, b.Calls, b.Errors, b.Latency.Max))
		}
	}
	return out
}
