package chstore

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chserver"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

var (
	ingestSpans     = flag.Int("ingest-spans", benchCorpus, "canonical spans BenchmarkIngest inserts per run")
	ingestRequest   = flag.Int("ingest-request", 1000, "spans per Append of BenchmarkIngest (rastro bench's --batch)")
	ingestWriters   = flag.Int("ingest-writers", 4, "concurrent writers of BenchmarkIngest (rastro bench's workers)")
	ingestInserters = flag.Int("ingest-inserters", 0, "Options.Inserters of BenchmarkIngest (0: the default; the WAL's shipper runs at most 2)")
	ingestWindow    = flag.Duration("ingest-window", 0, "Options.BatchWindow of BenchmarkIngest (0: the default)")
	ingestDrop      = flag.String("ingest-drop", "", "materialized views BenchmarkIngest drops before it ingests (comma-separated; to weigh each view's cost)")
	ingestWAL       = flag.Bool("ingest-wal", false, "BenchmarkIngest through the WAL in front of ClickHouse (Options.WALDir), timed until ClickHouse has every span")
	ingestWALBatch  = flag.Int("ingest-wal-batch", 0, "Options.MaxBatchSpans of BenchmarkIngest -ingest-wal (0: the default; the shipper inserts at most 50,000 spans at once)")
)

// BenchmarkIngest: the ingest path alone, as the OTLP receivers drive it:
// -ingest-spans canonical spans through Append (-ingest-writers closed-loop
// writers of -ingest-request spans, a refused one sent again after 5 ms, as
// rastro bench's load does over HTTP) into a fresh database of the shared
// test server, every view in place. It reports spans/s and the processor
// time per span of this (Go) process and of the clickhouse-server process
// (its inserts, views and background merges) over the same interval, read
// from /proc. Run it alone, a few times:
//
//	go test ./internal/chstore -run XXX -bench 'Ingest$' -benchtime 1x -count 5 [-cpuprofile cpu.out]
//
// With -ingest-wal the requests carry their protobuf bodies (encoded
// before the timer) and go through the WAL in front of ClickHouse; the
// time runs until the shipper has inserted every span, and the peaks of the
// heap (its objects, and the live heap after each GC) are reported.
func BenchmarkIngest(b *testing.B) {
	spans := benchSpans(b, *ingestSpans)
	srv := chtest.Shared(b)
	b.Logf("load average %s", loadavg())
	for range b.N {
		b.StopTimer()
		opts := Options{URL: chtestURL(b), Inserters: *ingestInserters, BatchWindow: *ingestWindow}
		if *ingestWAL {
			opts.WALDir, opts.MaxBatchSpans = b.TempDir(), *ingestWALBatch
		}
		s, err := Open(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		var bodies [][]byte
		if *ingestWAL {
			for i := 0; i < len(spans); i += *ingestRequest {
				bodies = append(bodies, otlp.EncodeProto(spans[i:min(i+*ingestRequest, len(spans))]))
			}
		}
		for _, v := range strings.Split(*ingestDrop, ",") {
			if v != "" {
				if err := s.conn.Exec(b.Context(), "DROP TABLE "+v); err != nil {
					b.Fatal(err)
				}
			}
		}
		goCPU0, err := chserver.ProcessCPU("self")
		if err != nil {
			b.Fatal(err)
		}
		chCPU0, err := srv.CPU()
		if err != nil {
			b.Fatal(err)
		}
		var stopHeap func() (uint64, uint64)
		if *ingestWAL {
			stopHeap = peakHeap()
		}
		b.StartTimer()
		t0 := time.Now()
		if err := appendConcurrently(s, spans, bodies, *ingestWriters, *ingestRequest); err != nil {
			b.Fatal(err)
		}
		acked := time.Since(t0)
		if s.wf != nil {
			if err := s.wf.flush(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(t0)
		b.StopTimer()
		if stopHeap != nil {
			peak, live := stopHeap()
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(live)/(1<<20), "peak-live-MiB")
			b.ReportMetric(float64(len(spans))/acked.Seconds(), "acked-spans/s")
		}
		goCPU1, _ := chserver.ProcessCPU("self")
		chCPU1, _ := srv.CPU()
		s.Close()
		n := float64(len(spans))
		b.ReportMetric(n/el.Seconds(), "spans/s")
		b.ReportMetric(float64((goCPU1-goCPU0).Microseconds())/n, "go-cpu-us/span")
		b.ReportMetric(float64((chCPU1-chCPU0).Microseconds())/n, "ch-cpu-us/span")
		b.ReportMetric(n/float64(s.spanInserts.Load()), "spans/insert")
		b.Logf("%d spans in %v: %.0f spans/s; CPU: go %v, clickhouse-server %v", len(spans), el.Round(time.Millisecond), n/el.Seconds(),
			goCPU1-goCPU0, chCPU1-chCPU0)
		b.StartTimer()
	}
}

// appendConcurrently appends spans to be through writers closed-loop
// writers of request spans each (copies: Append keeps them), a refused
// request sent again after 5 ms (as a client backs off a 429). bodies, if
// not nil, are the requests' protobuf bodies, in order.
func appendConcurrently(be store.Backend, spans []model.Span, bodies [][]byte, writers, request int) error {
	type req struct {
		spans []model.Span
		body  []byte
	}
	next := make(chan req)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for part := range next {
				for {
					w := &store.Write{Project: "p", Spans: slices.Clone(part.spans)}
					if part.body != nil {
						w.Type, w.Body = otlp.RecordOTLPProto, part.body
					}
					err := be.Append(context.Background(), w)
					if errors.Is(err, store.ErrOverloaded) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	var err error
feed:
	for i := 0; i < len(spans); i += request {
		select {
		case next <- req{spans: spans[i:min(i+request, len(spans))], body: bodyAt(bodies, i/request)}:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func bodyAt(bodies [][]byte, i int) []byte {
	if bodies == nil {
		return nil
	}
	return bodies[i]
}

// BenchmarkInsertBlock: one insert (trace index, spans and their views) of
// a block of n canonical spans, one at a time, into a fresh database: the
// cost of an insert and of each span in it (the batch size's trade-off).
// It reports the time and processor time per span of both processes.
func BenchmarkInsertBlock(b *testing.B) {
	spans := benchSpans(b, 64_000)
	srv := chtest.Shared(b)
	for _, n := range []int{1000, 4000, 16000, 64000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := Open(b.Context(), Options{URL: chtestURL(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			goCPU0, _ := chserver.ProcessCPU("self")
			chCPU0, _ := srv.CPU()
			total := 0
			b.ResetTimer()
			for i := range b.N {
				at := (i * n) % len(spans)
				batch := []*pending{{project: "p", spans: slices.Clone(spans[at:min(at+n, len(spans))])}}
				total += len(batch[0].spans)
				if err := s.insert(b.Context(), batch, uint64(time.Now().UnixNano())); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			goCPU1, _ := chserver.ProcessCPU("self")
			chCPU1, _ := srv.CPU()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(total), "us/span")
			b.ReportMetric(float64((goCPU1-goCPU0).Microseconds())/float64(total), "go-cpu-us/span")
			b.ReportMetric(float64((chCPU1-chCPU0).Microseconds())/float64(total), "ch-cpu-us/span")
		})
	}
}
