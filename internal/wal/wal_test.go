package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rastro-dev/rastro/internal/vfs"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openT opens a WAL in dir and registers a Close.
func openT(t testing.TB, opts Options) *WAL {
	t.Helper()
	w, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// replayAll reopens dir, replays everything, and closes.
func replayAll(t testing.TB, opts Options) ([]Record, ReplayStats) {
	t.Helper()
	w := openT(t, opts)
	var got []Record
	st, err := w.Replay(0, func(r Record) error {
		got = append(got, Record{Type: r.Type, Project: r.Project, Body: append([]byte(nil), r.Body...)})
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return got, st
}

func body(g, i int) []byte { return []byte(fmt.Sprintf("g%03d-i%05d", g, i)) }

func TestRoundTripConcurrent(t *testing.T) {
	for _, mode := range []Mode{ModeSync, ModeBuffered} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := Options{Dir: t.TempDir(), Mode: mode, FileBytes: 16 << 10}
			w := openT(t, opts)
			if _, err := w.Replay(0, func(Record) error { t.Fatal("fresh log replayed a record"); return nil }); err != nil {
				t.Fatal(err)
			}
			const goroutines, perG = 16, 150
			var applied []string // written only by the commit goroutine
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perG {
						b := body(g, i)
						r := Record{Type: uint8(g), Project: fmt.Sprintf("p%d", g%3), Body: b}
						if err := w.Append(r, func() { applied = append(applied, string(b)) }); err != nil {
							t.Errorf("append: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if len(applied) != goroutines*perG {
				t.Fatalf("applied %d records, want %d", len(applied), goroutines*perG)
			}
			got, st := replayAll(t, opts)
			if len(got) != len(applied) {
				t.Fatalf("replayed %d records, applied %d", len(got), len(applied))
			}
			for i, r := range got {
				if string(r.Body) != applied[i] {
					t.Fatalf("record %d: replayed %q, applied %q (log order differs from apply order)", i, r.Body, applied[i])
				}
				var g, n int
				if _, err := fmt.Sscanf(string(r.Body), "g%03d-i%05d", &g, &n); err != nil {
					t.Fatal(err)
				}
				if r.Type != uint8(g) || r.Project != fmt.Sprintf("p%d", g%3) {
					t.Fatalf("record %d: type %d project %q do not match body %q", i, r.Type, r.Project, r.Body)
				}
			}
			if st.Files < 3 {
				t.Errorf("expected several files with FileBytes=16KiB, replay read %d", st.Files)
			}
			if len(st.Corruptions) != 0 || st.TruncatedBytes != 0 {
				t.Errorf("clean log reported damage: %+v", st)
			}
		})
	}
}

func TestGroupCommitGroups(t *testing.T) {
	w := openT(t, Options{Dir: t.TempDir(), Mode: ModeSync})
	const goroutines, perG = 32, 40
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				if err := w.Append(Record{Body: body(g, i)}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := w.Stats()
	if st.Records != goroutines*perG {
		t.Fatalf("Records = %d, want %d", st.Records, goroutines*perG)
	}
	if st.Syncs >= st.Records || st.Batches >= st.Records {
		t.Fatalf("no group commit: %d records, %d batches, %d syncs", st.Records, st.Batches, st.Syncs)
	}
	t.Logf("%d records in %d batches, %d syncs", st.Records, st.Batches, st.Syncs)
}

// TestGroupCommitOneBatch holds the first batch's fsync until every other
// appender has joined the pending batch, then checks they share one write.
func TestGroupCommitOneBatch(t *testing.T) {
	gate := make(chan struct{})
	var armed atomic.Bool
	opts := Options{Dir: t.TempDir(), Mode: ModeSync}
	opts.createFile = func(path string) (file, error) {
		f, err := createFile(vfs.OS{}, path)
		if err != nil {
			return nil, err
		}
		return &hookFile{file: f, sync: func() error {
			if armed.CompareAndSwap(true, false) {
				<-gate
			}
			return nil
		}}, nil
	}
	w := openT(t, opts)
	armed.Store(true)
	const n = 20
	errs := make(chan error, n)
	go func() { errs <- w.Append(Record{Body: []byte("first")}, nil) }()
	waitFor(t, func() bool { return !armed.Load() }) // first batch is in fsync
	for i := 1; i < n; i++ {
		go func() { errs <- w.Append(Record{Body: body(0, i)}, nil) }()
	}
	waitFor(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.pending.n == n-1
	})
	close(gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.Batches != 2 || st.Records != n {
		t.Fatalf("stats %+v, want %d records in 2 batches", st, n)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// hookFile wraps a real file with optional fault hooks.
type hookFile struct {
	file
	write func(p []byte) (int, error, bool) // handled=true: use its result
	sync  func() error
}

func (h *hookFile) Write(p []byte) (int, error) {
	if h.write != nil {
		if n, err, handled := h.write(p); handled {
			return n, err
		}
	}
	return h.file.Write(p)
}

func (h *hookFile) Sync() error {
	if h.sync != nil {
		if err := h.sync(); err != nil {
			return err
		}
	}
	return h.file.Sync()
}

func TestRotateOrdering(t *testing.T) {
	opts := Options{Dir: t.TempDir(), Mode: ModeSync, FileBytes: 8 << 10}
	w := openT(t, opts)
	type boundary struct {
		seq     uint64
		applied int
	}
	var applied []string      // commit goroutine only
	var boundaries []boundary // commit goroutine only
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				b := string(body(g, i))
				if err := w.Append(Record{Body: []byte(b)}, func() { applied = append(applied, b) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	rotDone := make(chan []uint64)
	go func() {
		var seqs []uint64
		for {
			select {
			case <-stop:
				rotDone <- seqs
				return
			default:
			}
			seq, err := w.Rotate(func(seq uint64) { boundaries = append(boundaries, boundary{seq, len(applied)}) })
			if err != nil {
				t.Error(err)
			}
			seqs = append(seqs, seq)
		}
	}()
	wg.Wait()
	close(stop)
	seqs := <-rotDone
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(boundaries) != len(seqs) || len(boundaries) < 2 {
		t.Fatalf("%d rotations returned, %d fns ran", len(seqs), len(boundaries))
	}
	for i, b := range boundaries {
		if b.seq != seqs[i] {
			t.Fatalf("rotation %d: fn saw seq %d, Rotate returned %d", i, b.seq, seqs[i])
		}
	}
	w2 := openT(t, opts)
	for _, b := range boundaries {
		var got []string
		if _, err := w2.Replay(b.seq, func(r Record) error { got = append(got, string(r.Body)); return nil }); err != nil {
			t.Fatal(err)
		}
		want := applied[b.applied:]
		if len(got) != len(want) {
			t.Fatalf("replay from %d: %d records, want the %d applied after the boundary", b.seq, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("replay from %d: record %d is %q, want %q", b.seq, i, got[i], want[i])
			}
		}
	}
}

// dirSize sums the sizes of the log files on disk.
func dirSize(t *testing.T, dir string) (int64, []uint64) {
	t.Helper()
	files, err := listFiles(vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	var seqs []uint64
	for _, f := range files {
		n += f.size
		seqs = append(seqs, f.seq)
	}
	return n, seqs
}

func TestRemoveBeforeAndSize(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, Options{Dir: dir, Mode: ModeBuffered})
	var rotated []uint64
	for round := range 4 {
		for i := range 10 {
			if err := w.Append(Record{Project: "p", Body: body(round, i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		seq, err := w.Rotate(nil)
		if err != nil {
			t.Fatal(err)
		}
		rotated = append(rotated, seq)
	}
	onDisk, seqs := dirSize(t, dir)
	if w.Size() != onDisk {
		t.Fatalf("Size() = %d, files on disk hold %d", w.Size(), onDisk)
	}
	if len(seqs) != 5 {
		t.Fatalf("files %v, want 5", seqs)
	}
	if err := w.RemoveBefore(rotated[1]); err != nil {
		t.Fatal(err)
	}
	onDisk, seqs = dirSize(t, dir)
	if seqs[0] != rotated[1] || len(seqs) != 4-1 {
		t.Fatalf("after RemoveBefore(%d) files are %v", rotated[1], seqs)
	}
	if w.Size() != onDisk {
		t.Fatalf("Size() = %d, files on disk hold %d", w.Size(), onDisk)
	}
	// Never the active file.
	if err := w.RemoveBefore(^uint64(0)); err != nil {
		t.Fatal(err)
	}
	_, seqs = dirSize(t, dir)
	if len(seqs) != 1 || seqs[0] != rotated[3] {
		t.Fatalf("RemoveBefore(max) left %v, want only the active file %d", seqs, rotated[3])
	}
	if err := w.Append(Record{Body: []byte("after")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	onDisk, _ = dirSize(t, dir)
	if w.Size() != onDisk {
		t.Fatalf("Size() = %d, files on disk hold %d", w.Size(), onDisk)
	}
}

func TestBufferedModeWritesBeforeAck(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, Options{Dir: dir, Mode: ModeBuffered, SyncInterval: 5 * time.Millisecond})
	if err := w.Append(Record{Body: []byte("in page cache")}, nil); err != nil {
		t.Fatal(err)
	}
	// A second handle (standing in for the process after kill -9) reads the
	// record although nothing was closed: write(2) happened before the ack.
	w2 := openT(t, Options{Dir: dir})
	var got []string
	if _, err := w2.Replay(0, func(r Record) error { got = append(got, string(r.Body)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "in page cache" {
		t.Fatalf("second handle replayed %q", got)
	}
	waitFor(t, func() bool { return w.Stats().Syncs > 0 }) // the interval fsync runs
}

func TestCloseSemantics(t *testing.T) {
	w := openT(t, Options{Dir: t.TempDir()})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(Record{Body: []byte("x")}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := w.Rotate(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Rotate after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}

func TestAppendRejectsBadRecord(t *testing.T) {
	w := openT(t, Options{Dir: t.TempDir()})
	long := string(make([]byte, 256))
	if err := w.Append(Record{Project: long}, nil); err == nil {
		t.Fatal("256-byte project accepted")
	}
	if err := w.Append(Record{Project: long[:255]}, nil); err != nil {
		t.Fatalf("255-byte project rejected: %v", err)
	}
}

func TestFailure(t *testing.T) {
	injected := errors.New("injected EIO")
	cases := []struct {
		name  string
		write func(p []byte) (int, error, bool)
		sync  func() error
	}{
		{name: "write error", write: func(p []byte) (int, error, bool) { return 0, injected, true }},
		{name: "short write", write: func(p []byte) (int, error, bool) { return len(p) / 2, nil, true }},
		{name: "fsync error", sync: func() error { return injected }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			opts := Options{Dir: t.TempDir(), Mode: ModeSync}
			opts.createFile = func(path string) (file, error) {
				f, err := createFile(vfs.OS{}, path)
				if err != nil {
					return nil, err
				}
				h := &hookFile{file: f}
				if tc.write != nil {
					h.write = func(p []byte) (int, error, bool) {
						if armed.Load() {
							return tc.write(p)
						}
						return 0, nil, false
					}
				}
				if tc.sync != nil {
					h.sync = func() error {
						if armed.Load() {
							return tc.sync()
						}
						return nil
					}
				}
				return h, nil
			}
			w := openT(t, opts)
			if err := w.Append(Record{Body: []byte("ok")}, nil); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			var applied atomic.Int32
			err := w.Append(Record{Body: []byte("fails")}, func() { applied.Add(1) })
			if err == nil || !errors.Is(err, ErrFailed) {
				t.Fatalf("Append with failing file: %v, want ErrFailed", err)
			}
			if tc.name != "short write" && !errors.Is(err, injected) {
				t.Fatalf("error %v does not wrap the injected one", err)
			}
			if applied.Load() != 0 {
				t.Fatal("apply ran for a failed batch")
			}
			armed.Store(false) // the file works again: the WAL must stay failed (no fsync retry)
			err2 := w.Append(Record{Body: []byte("later")}, func() { applied.Add(1) })
			if !errors.Is(err2, ErrFailed) || (tc.name != "short write" && !errors.Is(err2, injected)) {
				t.Fatalf("later Append: %v, want the first failure", err2)
			}
			if _, err := w.Rotate(nil); !errors.Is(err, ErrFailed) {
				t.Fatalf("Rotate on failed WAL: %v", err)
			}
			if applied.Load() != 0 {
				t.Fatal("apply ran on a failed WAL")
			}
			_ = w.Close()
			// The log stays readable: the acknowledged record is there.
			got, _ := replayAll(t, Options{Dir: opts.Dir})
			if len(got) == 0 || string(got[0].Body) != "ok" {
				t.Fatalf("replay after failure: %d records", len(got))
			}
		})
	}
}

// putU32 overwrites 4 bytes of a file.
func putU32(t *testing.T, path string, off int64, v uint32) {
	t.Helper()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	writeAt(t, path, off, b[:])
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileLen(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func TestCRCSmallMatchesStdlib(t *testing.T) {
	for _, s := range []string{"", "a", "project-name", string(make([]byte, 255))} {
		want := crc32.Update(7, castagnoli, []byte(s))
		if got := crcSmall(7, s); got != want {
			t.Fatalf("crcSmall(%q) = %08x, want %08x", s, got, want)
		}
	}
}

// TestBufferedSyncsUnderLoad checks that the interval fsync happens while
// appenders keep the commit goroutine busy.
func TestBufferedSyncsUnderLoad(t *testing.T) {
	w := openT(t, Options{Dir: t.TempDir(), Mode: ModeBuffered, SyncInterval: time.Millisecond})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.Append(Record{Body: body(g, i)}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	waitFor(t, func() bool { return w.Stats().Syncs >= 3 })
	close(stop)
	wg.Wait()
}

// TestBufferedSyncFailure: a failed interval fsync fails the WAL.
func TestBufferedSyncFailure(t *testing.T) {
	injected := errors.New("injected fsync EIO")
	var armed atomic.Bool
	opts := Options{Dir: t.TempDir(), Mode: ModeBuffered, SyncInterval: time.Millisecond}
	opts.createFile = func(path string) (file, error) {
		f, err := createFile(vfs.OS{}, path)
		if err != nil {
			return nil, err
		}
		return &hookFile{file: f, sync: func() error {
			if armed.Load() {
				return injected
			}
			return nil
		}}, nil
	}
	w := openT(t, opts)
	armed.Store(true)
	var err error
	waitFor(t, func() bool {
		err = w.Append(Record{Body: []byte("x")}, nil)
		return err != nil
	})
	if !errors.Is(err, ErrFailed) || !errors.Is(err, injected) {
		t.Fatalf("Append after failed fsync: %v", err)
	}
	armed.Store(false)
	if err := w.Append(Record{Body: []byte("y")}, nil); !errors.Is(err, injected) {
		t.Fatalf("WAL recovered after a failed fsync: %v", err)
	}
}

// TestMinSeq: a manifest that needs replay from sequence N must never see new
// records written below N, even when the WAL directory was emptied.
func TestMinSeq(t *testing.T) {
	dir := t.TempDir()
	bodies := func(from uint64) []string {
		w := openT(t, Options{Dir: dir})
		var got []string
		if _, err := w.Replay(from, func(r Record) error { got = append(got, string(r.Body)); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	appendOne := func(opts Options, b string) {
		w := openT(t, opts)
		if err := w.Append(Record{Body: []byte(b)}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Empty directory, floor 7: the first file is 7.
	appendOne(Options{Dir: dir, MinSeq: 7}, "a")
	if _, seqs := dirSize(t, dir); fmt.Sprint(seqs) != "[7]" {
		t.Fatalf("files %v, want [7]", seqs)
	}
	// Existing files above the floor: highest + 1 wins.
	appendOne(Options{Dir: dir, MinSeq: 3}, "b")
	if _, seqs := dirSize(t, dir); fmt.Sprint(seqs) != "[7 8]" {
		t.Fatalf("files %v, want [7 8]", seqs)
	}
	// The directory is emptied (lost disk, operator cleanup) while the
	// manifest still says wal_start = 9: new records must land at >= 9.
	for _, seq := range []uint64{7, 8} {
		if err := os.Remove((&WAL{opts: Options{Dir: dir}}).path(seq)); err != nil {
			t.Fatal(err)
		}
	}
	appendOne(Options{Dir: dir, MinSeq: 9}, "c")
	if got := bodies(9); fmt.Sprint(got) != "[c]" {
		t.Fatalf("replay from 9 after emptying the directory: %q, want [c]", got)
	}
	// Without a floor the sequence continues from the files present.
	appendOne(Options{Dir: dir}, "d")
	if _, seqs := dirSize(t, dir); fmt.Sprint(seqs) != "[9 10 11]" {
		t.Fatalf("files %v, want [9 10 11]", seqs)
	}
	if got := bodies(9); fmt.Sprint(got) != "[c d]" {
		t.Fatalf("replay from 9: %q, want [c d]", got)
	}
}
