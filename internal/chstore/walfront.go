package chstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/wal"
)

// walFront is the write-ahead log in front of ClickHouse (Options.WALDir;
// rastro serve --storage clickhouse --durability wal). Append returns once
// the request is fsynced in the local log, not once ClickHouse has it; a
// shipper goroutine inserts what was logged in large blocks and removes
// the log files it has inserted. So:
//
//   - a ClickHouse outage is absorbed: requests are acknowledged and kept
//     in the log (and in memory) until ClickHouse takes them again, up to
//     Options.MaxWALBytes of requests not yet inserted; beyond that Append
//     refuses with store.ErrOverloaded;
//   - a crash loses nothing acknowledged: Open replays what the log holds
//     and inserts it. A batch ClickHouse acknowledged just before the crash,
//     whose files were not removed yet, is inserted again: reads keep one
//     copy of a re-sent span, the rollups count it twice (as for a client's
//     retry);
//   - inserts hold whatever arrived while the previous one ran (group
//     commit over the log), far more spans than the clients have in flight,
//     which is what costs ClickHouse less per span;
//   - a span is visible to queries once its batch is inserted (within
//     Options.WALWindow plus the insert), not when Append returns; an
//     erasure first waits for everything logged before it to be inserted.
//
// The decoded spans of what is logged stay in memory until inserted (the
// log is read only at Open), so MaxWALBytes bounds memory as well (decoded,
// a span takes several times its protobuf bytes).
type walFront struct {
	s    *Store
	log  *wal.WAL
	lock io.Closer

	// An insert holds at most insertSpans spans, and at most inserters run
	// at once: a block is built in memory whole (about 2.5 KiB a canonical
	// span in the driver's columns, more while they grow), so these bound
	// the shipper's memory. Larger or more inserts gained little here:
	// BenchmarkIngest -ingest-wal, 1M spans, 100,000 x 4 against 50,000 x 2:
	// 61,000 against 55,000 spans/s (one run each) for about 1 GiB more of
	// live heap.
	insertSpans, inserters int

	mu       sync.Mutex
	gen      []*pending // logged, not yet taken by the shipper
	genSpans int
	logged   uint64        // records logged since Open (replayed ones included)
	shipped  uint64        // records of logged whose insert ClickHouse acknowledged
	moved    chan struct{} // closed, and replaced, when shipped moves or the shipper stops
	stopped  bool          // the shipper has ended: shipped moves no more
	failure  error         // the last failed insert, until one succeeds

	backlog   atomic.Int64 // body bytes logged and not yet inserted
	recovered int          // spans replayed at Open

	wake chan struct{} // something was logged
	full chan struct{} // the generation holds a whole insert's worth
	stop chan struct{} // Close: ship what is left, then end
	done chan struct{}
}

// The most spans one insert of the shipper holds, and the most inserts it
// runs at once (walFront.insertSpans, inserters).
const (
	walInsertSpans = 50_000
	walInserters   = 2
)

// walRecordBytes is what a logged request counts against MaxWALBytes.
func walRecordBytes(body []byte) int64 { return int64(len(body)) + 64 }

// openWALFront locks dir, replays what its log holds into the first
// generation and starts the shipper, which inserts it first.
func openWALFront(s *Store, dir string) (*walFront, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create WAL directory: %w", err)
	}
	lock, err := durable.LockDir(dir)
	if err != nil {
		return nil, err
	}
	log, err := wal.Open(wal.Options{Dir: dir, Mode: wal.ModeSync, Logf: func(format string, args ...any) {
		s.opts.Logger.Warn(fmt.Sprintf(format, args...), "wal", dir)
	}})
	if err != nil {
		lock.Close()
		return nil, err
	}
	f := &walFront{s: s, log: log, lock: lock, moved: make(chan struct{}),
		insertSpans: min(s.opts.MaxBatchSpans, walInsertSpans), inserters: min(s.opts.Inserters, walInserters),
		wake: make(chan struct{}, 1), full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	var rejected int
	st, err := log.Replay(0, func(r wal.Record) error {
		b, err := otlp.Decode(otlp.RecordType(r.Type), bytes.Clone(r.Body))
		if err != nil {
			// A record is only written after it decoded once; failing now
			// means the decoder changed. Losing one request beats refusing
			// to start.
			rejected++
			s.opts.Logger.Error("WAL record no longer decodes; skipped", "type", r.Type, "project", r.Project, "err", err)
			return nil
		}
		llm.Enrich(b.Spans, s.opts.Prices)
		f.gen = append(f.gen, &pending{project: r.Project, spans: b.Spans, bytes: walRecordBytes(r.Body)})
		f.genSpans += len(b.Spans)
		f.logged++
		f.backlog.Add(walRecordBytes(r.Body))
		f.recovered += len(b.Spans)
		return nil
	})
	if err != nil {
		log.Close()
		lock.Close()
		return nil, fmt.Errorf("replay the WAL in front of ClickHouse: %w", err)
	}
	s.opts.Logger.Info("clickhouse wal replayed", "dir", dir, "spans", f.recovered, "records", f.logged, "rejected_records", rejected,
		"files", st.Files, "bytes", st.Bytes, "corruptions", len(st.Corruptions))
	go f.run()
	if f.logged > 0 {
		f.signal(f.wake)
	}
	return f, nil
}

func (f *walFront) signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// append logs w (fsynced) and hands it to the shipper.
func (f *walFront) append(w *store.Write) error {
	n := walRecordBytes(w.Body)
	if b := f.backlog.Add(n); b > f.s.opts.MaxWALBytes && b != n {
		f.backlog.Add(-n)
		f.mu.Lock()
		cause := f.failure
		f.mu.Unlock()
		why := "ClickHouse inserts are behind"
		if cause != nil {
			why = "ClickHouse refuses inserts: " + cause.Error()
		}
		return fmt.Errorf("the WAL in front of ClickHouse holds %.1f MiB of requests not yet inserted (at most %.1f MiB; %s): %w",
			float64(b-n)/(1<<20), float64(f.s.opts.MaxWALBytes)/(1<<20), why, store.ErrOverloaded)
	}
	p := &pending{project: w.Project, spans: w.Spans, bytes: n}
	err := f.log.Append(wal.Record{Type: uint8(w.Type), Project: w.Project, Body: w.Body}, func() {
		f.mu.Lock()
		f.gen = append(f.gen, p)
		f.genSpans += len(p.spans)
		f.logged++
		full := f.genSpans >= f.insertSpans*f.inserters
		f.mu.Unlock()
		if full {
			f.signal(f.full)
		}
	})
	if err != nil {
		f.backlog.Add(-n)
		if errors.Is(err, wal.ErrClosed) {
			return store.ErrClosed
		}
		return fmt.Errorf("append to the WAL in front of ClickHouse: %w", err)
	}
	f.signal(f.wake)
	f.s.tails.Offer(w.Project, w.Spans)
	return nil
}

// run is the shipper: it waits for something logged, lets a generation
// gather for WALWindow (less if it fills an insert per inserter), cuts the
// log there and inserts the generation, again and again until it succeeds;
// then it removes the generation's log files. On stop it ships what is
// left (for up to WALCloseWait) and ends; what it could not insert stays
// in the log for the next Open.
func (f *walFront) run() {
	defer close(f.done)
	defer func() {
		f.mu.Lock()
		f.stopped = true
		close(f.moved)
		f.mu.Unlock()
	}()
	for {
		now := false // a full generation, or a flush: no window
		select {
		case <-f.wake:
		case <-f.full:
			now = true
		case <-f.stop:
			f.shipFinal()
			return
		}
		if !now {
			t := time.NewTimer(f.s.opts.WALWindow)
			select {
			case <-t.C:
			case <-f.full:
			case <-f.stop:
			}
			t.Stop()
		}
		select {
		case <-f.stop:
			f.shipFinal()
			return
		default:
		}
		if !f.shipNext(f.stop) {
			return
		}
	}
}

// shipFinal ships what is left at Close.
func (f *walFront) shipFinal() {
	f.mu.Lock()
	left := len(f.gen)
	f.mu.Unlock()
	if left == 0 {
		return
	}
	giveUp := make(chan struct{})
	t := time.AfterFunc(f.s.opts.WALCloseWait, func() { close(giveUp) })
	defer t.Stop()
	f.shipNext(giveUp)
}

// shipNext takes the generation logged so far and inserts it, retrying
// until it succeeds or quit is closed (then it reports false: the
// generation stays in the log for the next Open).
func (f *walFront) shipNext(quit <-chan struct{}) bool {
	var gen []*pending
	var upto uint64
	seq, err := f.log.Rotate(func(uint64) {
		f.mu.Lock()
		gen, upto = f.gen, f.logged
		f.gen, f.genSpans = nil, 0
		f.mu.Unlock()
	})
	if err != nil {
		// The log failed (Append fails too) or is closed: keep what is in
		// memory for another try; its files stay.
		f.s.opts.Logger.Error("clickhouse wal: cannot cut the log", "err", err)
		return !errors.Is(err, wal.ErrClosed)
	}
	if len(gen) == 0 {
		return true
	}
	batches := splitBatches(gen, f.insertSpans)
	wait := 100 * time.Millisecond
	for {
		batches = f.insertAll(batches)
		if len(batches) == 0 {
			break
		}
		select {
		case <-quit:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
	var bytes int64
	for _, p := range gen {
		bytes += p.bytes
	}
	if err := f.log.RemoveBefore(seq); err != nil {
		// The records are in ClickHouse; files left are inserted again at
		// the next Open (a re-sent span).
		f.s.opts.Logger.Warn("clickhouse wal: inserted files not removed", "err", err)
	}
	f.backlog.Add(-bytes)
	f.mu.Lock()
	f.shipped, f.failure = upto, nil
	close(f.moved)
	f.moved = make(chan struct{})
	f.mu.Unlock()
	return true
}

// insertAll inserts the batches, up to f.inserters at once, and returns
// those that failed.
func (f *walFront) insertAll(batches [][]*pending) [][]*pending {
	var (
		mu     sync.Mutex
		failed [][]*pending
		wg     sync.WaitGroup
		slots  = make(chan struct{}, f.inserters)
	)
	for _, b := range batches {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := f.s.insertQuorum(ctx, b)
			cancel()
			if err == nil {
				return
			}
			mu.Lock()
			failed = append(failed, b)
			mu.Unlock()
			f.mu.Lock()
			first := f.failure == nil
			f.failure = err
			f.mu.Unlock()
			if first {
				f.s.opts.Logger.Warn("clickhouse wal: insert failed; the spans stay in the WAL and are tried again", "err", err)
			}
		}()
	}
	wg.Wait()
	return failed
}

// splitBatches cuts gen into batches of at most most spans (a request is
// never cut).
func splitBatches(gen []*pending, most int) [][]*pending {
	var out [][]*pending
	var cur []*pending
	n := 0
	for _, p := range gen {
		if len(cur) > 0 && n+len(p.spans) > most {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur, n = append(cur, p), n+len(p.spans)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// flush waits until everything logged before it is in ClickHouse.
func (f *walFront) flush(ctx context.Context) error {
	f.mu.Lock()
	target, shipped := f.logged, f.shipped
	f.mu.Unlock()
	if shipped >= target {
		return nil
	}
	f.signal(f.full)
	for {
		f.mu.Lock()
		shipped, moved, stopped, cause := f.shipped, f.moved, f.stopped, f.failure
		f.mu.Unlock()
		if shipped >= target {
			return nil
		}
		if stopped {
			return store.ErrClosed
		}
		select {
		case <-moved:
		case <-ctx.Done():
			if cause != nil {
				return fmt.Errorf("spans logged before this request are not in ClickHouse yet (%v): %w", cause, ctx.Err())
			}
			return fmt.Errorf("spans logged before this request are not in ClickHouse yet: %w", ctx.Err())
		}
	}
}

// close stops the shipper (after one last try to insert what is left) and
// closes the log.
func (f *walFront) close() error {
	close(f.stop)
	<-f.done
	err := f.log.Close()
	if lerr := f.lock.Close(); err == nil {
		err = lerr
	}
	return err
}
