package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// directEngineWorkers is the concurrency of the direct-engine scenario.
const directEngineWorkers = 8

// runDirectEngine appends the decoded corpus straight into internal/engine
// (no HTTP, no decoding) from 8 goroutines: the ceiling the server can
// approach. The wal run closes and reopens the engine and re-verifies the
// stored count (an in-process run cannot be killed; the HTTP scenarios are).
func runDirectEngine(ctx context.Context, env *RunEnv, dur string, batches [][]model.Span, bodies []Payload) Result {
	mode := engine.DurabilityWAL
	if dur == "buffered" {
		mode = engine.DurabilityBuffered
	}
	// The engine owns what it is given: copy before the clock starts.
	type job struct {
		body  []byte
		spans []model.Span
	}
	jobs := make([]job, len(batches))
	total := 0
	for i, b := range batches {
		jobs[i] = job{body: slices.Clone(bodies[i].Body), spans: slices.Clone(b)}
		total += len(b)
	}
	e, err := engine.Open(engine.Options{Dir: env.Dir, Durability: mode})
	if err != nil {
		return refused("open engine: %v", err)
	}
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	lat := make([][]time.Duration, directEngineWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < directEngineWorkers; w++ {
		wg.Add(1)
		go func(w int) { // one appender; ends when the jobs run out or ctx ends
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				t0 := time.Now()
				if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: jobs[i].body, Spans: jobs[i].spans}); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	l := SummarizeLatency(all)
	lr := LoadResult{Requests: len(all), Errors: int(failed.Load()), SentSpans: int64(total), AcceptedSpans: int64(total)}
	if failed.Load() > 0 {
		lr.AcceptedSpans = 0
		lr.FirstError = (*firstErr.Load()).Error()
	}
	if ctx.Err() != nil {
		lr.SentSpans = 0
	}
	facts := RunFacts{Load: lr, Expected: int64(total), Stored: storedSpans(e), RestartStored: -1}
	res := Result{Metrics: map[string]float64{
		"spans_per_s": float64(total) / elapsed.Seconds(),
		"p50_ms":      l.P50, "p95_ms": l.P95, "p99_ms": l.P99, "max_ms": l.Max,
	}}
	if err := e.Close(); err != nil {
		res.Refusals = append(res.Refusals, fmt.Sprintf("close engine: %v", err))
	}
	if mode == engine.DurabilityWAL {
		facts.Restarted = true
		e2, err := engine.Open(engine.Options{Dir: env.Dir, Durability: mode})
		if err != nil {
			res.Refusals = append(res.Refusals, fmt.Sprintf("reopen engine: %v", err))
		} else {
			facts.RestartStored = storedSpans(e2)
			if err := e2.Close(); err != nil {
				res.Refusals = append(res.Refusals, fmt.Sprintf("close reopened engine: %v", err))
			}
		}
	}
	res.Refusals = append(Refusals(facts), res.Refusals...)
	return res
}

// storedSpans is the count of spans the engine holds in the default project
// (-1 when it cannot say).
func storedSpans(e *engine.Engine) int64 {
	st, err := e.Stats(context.Background(), "default")
	if err != nil {
		return -1
	}
	return st.Spans
}
