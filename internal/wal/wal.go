package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// WAL is an open write-ahead log. Its methods are safe for concurrent use.
type WAL struct {
	opts Options

	// mu guards the fields below it. No I/O is done while holding it.
	mu sync.Mutex
	// space is signalled when the pending batch is taken, or the WAL fails or closes.
	space   sync.Cond
	pending *batch       // batch being filled by appenders
	rotates []*rotateReq // rotations waiting for the commit goroutine
	closing bool
	failed  error // first write/fsync error, wrapping ErrFailed; nil while healthy
	// files lists the live files, ascending; the last one is the active file.
	files []liveFile

	// lastOldSeq is the highest sequence that existed before Open (0 if none);
	// Replay reads only files <= lastOldSeq. Set by Open, read-only afterwards.
	lastOldSeq uint64
	// replayMu serialises Replay calls; removeMu serialises RemoveBefore calls.
	replayMu, removeMu sync.Mutex

	wake    chan struct{} // capacity 1: "something is pending"
	stopped chan struct{} // closed when the commit goroutine exits

	// Owned by the commit goroutine (and by Close after stopped is closed).
	f            file
	fseq         uint64
	fsize        int64
	dirty        bool      // written but not fsynced (ModeBuffered)
	lastSync     time.Time // last fsync of the active file (ModeBuffered)
	closeErr     error
	spareBuf     []byte
	spareApplies []func()

	size  atomic.Int64 // bytes in live files
	stats struct {
		records, batches, syncs, bytes, writeNanos, syncNanos, noSpace atomic.Uint64
	}
}

type liveFile struct {
	seq  uint64
	size int64
}

// batch is one group commit: the encoded records of many appenders.
type batch struct {
	buf     []byte
	applies []func()
	n       int
	done    chan struct{} // closed when err is set and applies have run
	err     error
}

type rotateReq struct {
	fn   func(seq uint64)
	seq  uint64
	err  error
	done chan struct{}
}

// Stats are cumulative counters since Open.
type Stats struct {
	Records      uint64 // records made durable (per Mode)
	Batches      uint64 // group commits (one write each)
	Syncs        uint64 // fsyncs of log data
	BytesWritten uint64 // bytes written by group commits
	WriteNanos   uint64 // time spent in write(2)
	SyncNanos    uint64 // time spent in fsync
	NoSpace      uint64 // batches refused because the disk was full (ErrNoSpace)
}

// Open opens or creates the log in opts.Dir. It always starts a new file for
// this process's appends, with sequence max(highest existing + 1,
// opts.MinSeq, 1), so files written before (which may end in a torn record)
// are never appended to. It does not replay: call Replay before the first
// Append.
//
// Open starts the commit goroutine; Close stops it.
func Open(opts Options) (*WAL, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.FS.MkdirAll(opts.Dir); err != nil {
		return nil, fmt.Errorf("create wal dir %s: %w", opts.Dir, err)
	}
	files, err := listFiles(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	w := &WAL{
		opts:    opts,
		files:   files,
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	w.space.L = &w.mu
	for _, lf := range files {
		w.size.Add(lf.size)
	}
	seq := max(1, opts.MinSeq)
	if len(files) > 0 {
		w.lastOldSeq = files[len(files)-1].seq
		seq = max(seq, w.lastOldSeq+1)
	}
	f, _, err := w.createLogFile(seq)
	if err != nil {
		return nil, err
	}
	w.f, w.fseq, w.fsize, w.lastSync = f, seq, fileHeaderSize, time.Now()
	w.files = append(w.files, liveFile{seq: seq, size: fileHeaderSize})
	w.size.Add(fileHeaderSize)
	w.pending = w.newBatch()
	go w.run()
	return w, nil
}

// createLogFile creates file seq with its header, fsyncs it and the directory.
// On failure it removes the file; clean reports whether that succeeded
// (nothing of file seq is left), so that a rotation may be tried again.
func (w *WAL) createLogFile(seq uint64) (f file, clean bool, err error) {
	path := filepath.Join(w.opts.Dir, fileName(seq))
	f, err = w.opts.createFile(path)
	if err != nil {
		return nil, true, fmt.Errorf("create wal file %s: %w", path, err)
	}
	if _, err = f.Write(fileHeader(seq)); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = w.opts.FS.SyncDir(w.opts.Dir)
	}
	if err != nil {
		_ = f.Close()
		rerr := w.opts.FS.Remove(path)
		return nil, rerr == nil || errors.Is(rerr, os.ErrNotExist), fmt.Errorf("create wal file %s: %w", path, err)
	}
	return f, true, nil
}

func (w *WAL) path(seq uint64) string { return filepath.Join(w.opts.Dir, fileName(seq)) }

// newBatch returns an empty batch, reusing the buffers of a committed one.
// Called by Open and by the commit goroutine with mu held.
func (w *WAL) newBatch() *batch {
	b := &batch{buf: w.spareBuf[:0], applies: w.spareApplies[:0], done: make(chan struct{})}
	w.spareBuf, w.spareApplies = nil, nil
	return b
}

// Append writes r and returns once it is durable per Mode. After the batch
// holding r is durable, and before Append returns, the commit goroutine calls
// apply (if not nil), in log order with the other records of the batch and
// serialised with Rotate. On a write or fsync error apply is not called and
// the WAL fails: this and every later Append return an error wrapping
// ErrFailed and the first error. After Close, Append returns ErrClosed.
// apply runs in the commit goroutine: it must not call methods of w, and
// appends wait while it runs.
func (w *WAL) Append(r Record, apply func()) error {
	if err := checkRecord(&r); err != nil {
		return err
	}
	h := recordHeader(&r)
	size := recordSize(&r)
	w.mu.Lock()
	for {
		if w.failed != nil {
			err := w.failed
			w.mu.Unlock()
			return fmt.Errorf("wal append: %w", err)
		}
		if w.closing {
			w.mu.Unlock()
			return ErrClosed
		}
		if w.pending.n == 0 || len(w.pending.buf)+size <= w.opts.MaxBatchBytes {
			break
		}
		w.space.Wait()
	}
	b := w.pending
	b.buf = appendRecord(b.buf, &h, &r)
	b.applies = append(b.applies, apply)
	b.n++
	w.mu.Unlock()
	w.signal()
	<-b.done
	if b.err != nil {
		return fmt.Errorf("wal append: %w", b.err)
	}
	return nil
}

func (w *WAL) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Rotate makes the commit goroutine, between two batches, close the active
// file and start file seq. Every record whose apply ran before fn is in a file
// with sequence < seq; every later one is in a file >= seq. fn (may be nil)
// runs in the commit goroutine at that boundary, before any later apply; it
// must not call methods of w.
func (w *WAL) Rotate(fn func(seq uint64)) (seq uint64, err error) {
	req := &rotateReq{fn: fn, done: make(chan struct{})}
	w.mu.Lock()
	if w.failed != nil {
		err := w.failed
		w.mu.Unlock()
		return 0, fmt.Errorf("wal rotate: %w", err)
	}
	if w.closing {
		w.mu.Unlock()
		return 0, ErrClosed
	}
	w.rotates = append(w.rotates, req)
	w.mu.Unlock()
	w.signal()
	<-req.done
	if req.err != nil {
		return 0, fmt.Errorf("wal rotate: %w", req.err)
	}
	return req.seq, nil
}

// RemoveBefore deletes the whole files with sequence < seq (their records
// live in sealed segments now). The active file is never removed.
func (w *WAL) RemoveBefore(seq uint64) error {
	w.removeMu.Lock()
	defer w.removeMu.Unlock()
	w.mu.Lock()
	var victims []liveFile
	keep := w.files[:0]
	for i, lf := range w.files {
		if lf.seq < seq && i < len(w.files)-1 {
			victims = append(victims, lf)
		} else {
			keep = append(keep, lf)
		}
	}
	w.files = keep
	w.mu.Unlock()
	if len(victims) == 0 {
		return nil
	}
	var errs []error
	var failed []liveFile
	for _, lf := range victims {
		err := w.opts.FS.Remove(w.path(lf.seq))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove wal file: %w", err))
			failed = append(failed, lf)
			continue
		}
		w.size.Add(-lf.size)
	}
	if len(failed) > 0 {
		w.mu.Lock()
		w.files = append(w.files, failed...)
		sort.Slice(w.files, func(i, j int) bool { return w.files[i].seq < w.files[j].seq })
		w.mu.Unlock()
	}
	if err := w.opts.FS.SyncDir(w.opts.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Size returns the bytes in all live log files.
func (w *WAL) Size() int64 { return w.size.Load() }

// Stats returns the counters.
func (w *WAL) Stats() Stats {
	return Stats{
		Records:      w.stats.records.Load(),
		Batches:      w.stats.batches.Load(),
		Syncs:        w.stats.syncs.Load(),
		BytesWritten: w.stats.bytes.Load(),
		WriteNanos:   w.stats.writeNanos.Load(),
		SyncNanos:    w.stats.syncNanos.Load(),
		NoSpace:      w.stats.noSpace.Load(),
	}
}

// Close commits every record already handed to Append, fsyncs and closes the
// active file, and stops the commit goroutine. Appends that had not yet
// joined a batch return ErrClosed. A second Close returns ErrClosed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		<-w.stopped
		return ErrClosed
	}
	w.closing = true
	w.space.Broadcast()
	w.mu.Unlock()
	w.signal()
	<-w.stopped
	return w.closeErr
}

// run is the commit goroutine. Open starts it; it returns after Close, once
// everything pending is committed, closing w.stopped.
func (w *WAL) run() {
	defer close(w.stopped)
	var tick <-chan time.Time
	if w.opts.Mode == ModeBuffered {
		t := time.NewTicker(w.opts.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	step := w.opts.Step
	if step == nil {
		step = func(f func()) { f() }
	}
	for {
		select {
		case <-w.wake:
			closed := false
			step(func() { closed = w.drain() })
			if closed {
				return
			}
		case <-tick:
			step(func() {
				if w.dirty && w.failedErr() == nil {
					if err := w.syncActive(); err != nil {
						w.fail(err)
					}
				}
			})
		}
	}
}

// drain commits pending batches and rotations until none is left. It returns
// true when the WAL is closing and the active file has been closed.
func (w *WAL) drain() bool {
	for {
		w.mu.Lock()
		b := w.pending
		if b.n > 0 {
			w.pending = w.newBatch()
			w.space.Broadcast()
		} else {
			b = nil
		}
		rots := w.rotates
		w.rotates = nil
		closing := w.closing
		w.mu.Unlock()

		if b == nil && len(rots) == 0 {
			if closing {
				w.finish()
				return true
			}
			return false
		}
		if b != nil {
			w.commit(b)
			if w.f != nil && w.fsize >= w.opts.FileBytes {
				// A failure here is recorded by rotate and reported to later calls.
				_, _ = w.rotate(nil)
			}
		}
		for _, r := range rots {
			r.seq, r.err = w.rotate(r.fn)
			close(r.done)
		}
	}
}

func (w *WAL) failedErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// fail records the first environment failure and wakes waiting appenders.
func (w *WAL) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		w.space.Broadcast()
	}
	return w.failed
}

// commit writes one batch, makes it durable per Mode, runs its applies and
// releases its appenders.
func (w *WAL) commit(b *batch) {
	defer func() {
		close(b.done)
		w.recycle(b)
	}()
	if err := w.failedErr(); err != nil {
		b.err = err
		return
	}
	if w.f == nil { // a failed rotation left no active file; failedErr is set then
		b.err = w.fail(errors.New("no active file"))
		return
	}
	start := time.Now()
	n, err := w.f.Write(b.buf)
	w.stats.writeNanos.Add(uint64(time.Since(start)))
	if err == nil && n < len(b.buf) {
		err = io.ErrShortWrite
	}
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		// A full disk: cut back what part of the batch was written, so the
		// file ends with the last whole batch, and refuse this batch only.
		// A failed cut leaves a torn tail: fail-stop as for any write error.
		if terr := w.f.Truncate(w.fsize); terr == nil {
			w.stats.noSpace.Add(1)
			b.err = fmt.Errorf("write wal file %s: %w: %w", w.path(w.fseq), ErrNoSpace, err)
			return
		}
	}
	w.fsize += int64(n)
	w.size.Add(int64(n))
	w.stats.bytes.Add(uint64(n))
	if err != nil {
		b.err = w.fail(fmt.Errorf("write wal file %s: %w", w.path(w.fseq), err))
		return
	}
	if w.opts.Mode == ModeSync {
		if err := w.syncActive(); err != nil {
			b.err = w.fail(err)
			return
		}
	} else {
		w.dirty = true
		// Under sustained load drain never returns to the ticker: sync here
		// when the interval has passed.
		if time.Since(w.lastSync) >= w.opts.SyncInterval {
			if err := w.syncActive(); err != nil {
				b.err = w.fail(err)
				return
			}
		}
	}
	w.stats.records.Add(uint64(b.n))
	w.stats.batches.Add(1)
	for _, apply := range b.applies {
		if apply != nil {
			apply()
		}
	}
}

// recycle keeps a committed batch's buffers for the next batch unless they
// grew well beyond the batch cap.
func (w *WAL) recycle(b *batch) {
	if cap(b.buf) > 2*w.opts.MaxBatchBytes {
		return
	}
	clear(b.applies)
	w.mu.Lock()
	w.spareBuf, w.spareApplies = b.buf[:0], b.applies[:0]
	w.mu.Unlock()
}

func (w *WAL) syncActive() error {
	start := time.Now()
	err := w.f.Sync()
	w.stats.syncNanos.Add(uint64(time.Since(start)))
	w.stats.syncs.Add(1)
	if err != nil {
		return fmt.Errorf("sync wal file %s: %w", w.path(w.fseq), err)
	}
	w.dirty = false
	w.lastSync = time.Now()
	return nil
}

// rotate starts the next file and closes the active one, then runs fn.
// When the disk is full the next file cannot be created: the active file
// stays active and the rotation fails with ErrNoSpace, without failing the
// log, so that a seal can be tried again once space is back. Commit
// goroutine only.
func (w *WAL) rotate(fn func(uint64)) (uint64, error) {
	if err := w.failedErr(); err != nil {
		return 0, err
	}
	if w.f != nil && w.dirty {
		if err := w.syncActive(); err != nil {
			return 0, w.fail(err)
		}
	}
	seq := w.fseq + 1
	f, clean, err := w.createLogFile(seq)
	if err != nil {
		if clean && w.f != nil && errors.Is(err, syscall.ENOSPC) {
			w.stats.noSpace.Add(1)
			return 0, fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		if w.f != nil {
			_ = w.f.Close()
			w.f = nil
		}
		return 0, w.fail(err)
	}
	if w.f != nil {
		err := w.f.Close()
		w.f = nil
		if err != nil {
			_ = f.Close()
			return 0, w.fail(fmt.Errorf("close wal file %s: %w", w.path(w.fseq), err))
		}
	}
	w.mu.Lock()
	for i := range w.files {
		if w.files[i].seq == w.fseq {
			w.files[i].size = w.fsize
		}
	}
	w.files = append(w.files, liveFile{seq: seq, size: fileHeaderSize})
	w.mu.Unlock()
	w.size.Add(fileHeaderSize)
	w.f, w.fseq, w.fsize = f, seq, fileHeaderSize
	if fn != nil {
		fn(seq)
	}
	return seq, nil
}

// finish fsyncs (if needed) and closes the active file. Commit goroutine only.
func (w *WAL) finish() {
	if w.f == nil {
		return
	}
	var err error
	if w.dirty && w.failedErr() == nil {
		err = w.syncActive()
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close wal file %s: %w", w.path(w.fseq), cerr)
	}
	w.f = nil
	w.closeErr = err
}
