package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/wal"
)

// BenchmarkLogsIngestHTTP is the logs suite's ingest (`rastro bench logs`)
// in one process: the suite's corpus, encoded as OTLP protobuf requests of
// 1,000 records before the clock starts, posted by 4 closed-loop clients
// over loopback to POST /v1/logs of a real server (HTTP listener, admission,
// the handler) over a log store with wal durability (a 2xx means fsynced)
// and 64 MiB seals, as `rastro serve` opens it. It reports records/s, the
// process's CPU time per record (client, server and store together) and the
// sealed segments' bytes per record, the WAL's group commits and the share
// of the wall time its goroutine spent in write and fsync; run it with -benchtime=1x and
// -cpuprofile to see where a record's CPU goes. RASTRO_LOGS_BENCH_RECORDS
// sets the record count (default 300,000).
func BenchmarkLogsIngestHTTP(b *testing.B) {
	n := 300_000
	if v := os.Getenv("RASTRO_LOGS_BENCH_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal("RASTRO_LOGS_BENCH_RECORDS: ", err)
		}
	}
	batches, _ := bench.GenLogs(1, n, 1000, time.Now())
	payloads := make([][]byte, len(batches))
	for i, bt := range batches {
		payloads[i] = otlp.EncodeLogsProto(bt)
	}
	batches = nil
	var total, cpu time.Duration
	var segBytes, segRecords int64
	var walBatches, walWrite, walSync uint64
	for range b.N {
		b.StopTimer()
		srv, ls, stop := startLogsBenchServer(b)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		b.StartTimer()
		cpu0 := cpuTime()
		t0 := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(payloads) {
						return
					}
					resp, err := client.Post("http://"+srv.HTTPAddr()+"/v1/logs", "application/x-protobuf", bytes.NewReader(payloads[i]))
					if err != nil {
						errs <- err
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						errs <- &httpStatusError{resp.Status, string(body)}
						return
					}
				}
			})
		}
		wg.Wait()
		total += time.Since(t0)
		cpu += cpuTime() - cpu0
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		st := ls.Stats()
		if st.Records != n {
			b.Fatalf("the store holds %d records, want %d", st.Records, n)
		}
		segBytes += st.SegmentBytes
		segRecords += int64(st.Records - st.BufferedRecords)
		walBatches += st.WAL.Batches
		walWrite += st.WAL.WriteNanos
		walSync += st.WAL.SyncNanos
		client.CloseIdleConnections()
		stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*b.N), "cpu-ns/record")
	if segRecords > 0 {
		b.ReportMetric(float64(segBytes)/float64(segRecords), "disk-B/record")
	}
	// The WAL's group commits (fewer is more requests a fsync) and the
	// share of the wall time its one goroutine spent writing and fsyncing.
	b.ReportMetric(float64(walBatches)/float64(b.N), "wal-commits")
	b.ReportMetric(float64(walWrite+walSync)/float64(total.Nanoseconds()), "wal-busy")
}

type httpStatusError struct{ status, body string }

func (e *httpStatusError) Error() string { return "POST /v1/logs: " + e.status + ": " + e.body }

// startLogsBenchServer starts a real server with an engine and a log store
// (wal durability, 64 MiB seals) in a fresh directory.
func startLogsBenchServer(b *testing.B) (*Server, *logstore.Store, func()) {
	dir := b.TempDir()
	srv, err := New(Options{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: dir + "/engine"})
	if err != nil {
		b.Fatal(err)
	}
	srv.SetBackend(eng)
	ls, err := logstore.Open(logstore.Options{Dir: dir + "/logs", WALMode: wal.ModeSync, SealBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	srv.SetLogs(ls)
	return srv, ls, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		ls.Close()
		eng.Close()
	}
}
