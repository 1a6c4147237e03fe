package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rastro-dev/rastro/internal/vfs"
)

// TestPowerCutAtEverySyncPoint runs appends from several goroutines, file
// rotations and removals over a MemFS, and takes the image a power cut would
// leave just before every file sync and directory sync. Each image must
// replay every record acknowledged before that point, each exactly once and
// in its appender's order, and nothing that was never appended; a WAL
// reopened on the image must then take new records and replay them too.
func TestPowerCutAtEverySyncPoint(t *testing.T) {
	m := vfs.NewMemFS()
	dir := "/data/wal"
	var (
		syncs  atomic.Int64
		mu     sync.Mutex
		images []*vfs.MemFS
		rng    = rand.New(rand.NewPCG(7, 7))
		// RemoveBefore drops files on purpose: records acknowledged
		// before removable (in acknowledgement order) may be gone.
		removable   atomic.Int64
		removableAt []int64 // per image
		acks        atomic.Int64
	)
	fs := &vfs.Faulty{FS: m, Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			mu.Lock()
			// Alternate what the filesystem keeps beyond the synced state.
			n := len(images)
			images = append(images, m.Crash(vfs.CrashOptions{KeepDirOps: n%2 == 1, Torn: n%3 == 2, Rand: rng}))
			removableAt = append(removableAt, removable.Load())
			syncs.Add(1)
			mu.Unlock()
		}
		return vfs.Fault{}
	}}
	w, err := Open(Options{Dir: dir, FS: fs, Mode: ModeSync, FileBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Replay(0, func(Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 4, 60
	// ackedAt[id] is the number of syncs begun when Append(id) returned:
	// the record is durable in every image taken at or after that count.
	// Both are set by the record's apply callback, which the commit
	// goroutine runs once the record is durable, serialised with rotations.
	ackedAt := make([]int64, writers*perWriter)  // syncs begun by then
	ackOrder := make([]int64, writers*perWriter) // commit order
	var rotMu sync.Mutex
	rotAcks := map[uint64]int64{} // file seq -> records committed before it started
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				id := g*perWriter + i
				body := fmt.Appendf(nil, "w%d-%04d-%s", g, i, make([]byte, 50+id%200))
				if err := w.Append(Record{Type: 1, Project: "p", Body: body}, func() {
					ackedAt[id] = syncs.Load()
					ackOrder[id] = acks.Add(1)
				}); err != nil {
					t.Error(err)
					return
				}
				if i%25 == 24 {
					seq, err := w.Rotate(func(seq uint64) {
						rotMu.Lock()
						rotAcks[seq] = acks.Load()
						rotMu.Unlock()
					})
					rotMu.Lock()
					prev, ok := rotAcks[seq-1]
					rotMu.Unlock()
					if err == nil && g == 0 && ok {
						// Files before seq-1 hold only records committed
						// before file seq-1 started.
						removable.Store(max(removable.Load(), prev))
						err = w.RemoveBefore(seq - 1)
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(images) < 50 {
		t.Fatalf("only %d sync points", len(images))
	}
	for k, img := range images {
		w2, err := Open(Options{Dir: dir, FS: img, Mode: ModeSync})
		if err != nil {
			t.Fatalf("image %d: open: %v", k, err)
		}
		seen := map[string]bool{}
		last := make([]int, writers)
		for i := range last {
			last[i] = -1
		}
		if _, err := w2.Replay(0, func(r Record) error {
			var g, i int
			if _, err := fmt.Sscanf(string(r.Body), "w%d-%04d-", &g, &i); err != nil || g >= writers || i >= perWriter {
				return fmt.Errorf("image %d: a record never appended: %.20q", k, r.Body)
			}
			key := fmt.Sprintf("w%d-%04d", g, i)
			if seen[key] {
				return fmt.Errorf("image %d: record %s replayed twice", k, key)
			}
			seen[key] = true
			if i <= last[g] {
				return fmt.Errorf("image %d: writer %d's record %d after its record %d", k, g, i, last[g])
			}
			last[g] = i
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Every record acknowledged before the cut is there, unless its
		// file was removed on purpose (RemoveBefore drops sealed data).
		for id, at := range ackedAt {
			g, i := id/perWriter, id%perWriter
			if at <= int64(k) && ackOrder[id] > removableAt[k] && !seen[fmt.Sprintf("w%d-%04d", g, i)] {
				t.Fatalf("image %d (power cut before sync %d): acknowledged record w%d-%04d lost", k, k, g, i)
			}
		}
		// The reopened log takes new records.
		if err := w2.Append(Record{Type: 1, Project: "p", Body: []byte("after-the-cut")}, func() {}); err != nil {
			t.Fatalf("image %d: append after reopening: %v", k, err)
		}
		if err := w2.Close(); err != nil {
			t.Fatal(err)
		}
		w3, err := Open(Options{Dir: dir, FS: img.Crash(vfs.CrashOptions{}), Mode: ModeSync})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		if _, err := w3.Replay(0, func(r Record) error {
			found = found || string(r.Body) == "after-the-cut"
			return nil
		}); err != nil || !found {
			t.Fatalf("image %d: the record appended after reopening is lost (%v)", k, err)
		}
		w3.Close()
	}
	if names := m.Names(".wal"); len(names) == 0 || filepath.Dir(names[0]) != dir {
		t.Fatalf("log files: %v", names)
	}
}

// TestDiskFullRefusesTheBatchAndResumes: a write that finds the disk full
// fails its batch with ErrNoSpace and leaves no partial record; the log keeps
// working, later appends succeed once space is back, and replay returns
// exactly the acknowledged records.
func TestDiskFullRefusesTheBatchAndResumes(t *testing.T) {
	m := vfs.NewMemFS()
	disk := vfs.NewDisk(1 << 20)
	fs := &vfs.Faulty{FS: m, Inject: disk.Inject}
	for _, mode := range []Mode{ModeSync, ModeBuffered} {
		dir := fmt.Sprintf("/data/wal-%s", mode)
		disk.SetFree(1 << 20)
		w, err := Open(Options{Dir: dir, FS: fs, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		var acked []string
		app := func(body string) error {
			err := w.Append(Record{Type: 1, Project: "p", Body: []byte(body)}, func() {})
			if err == nil {
				acked = append(acked, body)
			}
			return err
		}
		for i := range 3 {
			if err := app(fmt.Sprintf("before-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		disk.SetFree(10) // the next record's header fits, its body does not
		err = app("refused-" + string(make([]byte, 100)))
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
			t.Fatalf("%s: append on a full disk: %v; want ErrNoSpace wrapping ENOSPC, not ErrFailed", mode, err)
		}
		if st := w.Stats(); st.NoSpace != 1 {
			t.Fatalf("%s: NoSpace = %d", mode, st.NoSpace)
		}
		disk.SetFree(1 << 20)
		for i := range 3 {
			if err := app(fmt.Sprintf("after-%d", i)); err != nil {
				t.Fatalf("%s: append once space is back: %v", mode, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w2, err := Open(Options{Dir: dir, FS: m.Crash(vfs.CrashOptions{}), Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		st, err := w2.Replay(0, func(r Record) error { got = append(got, string(r.Body)); return nil })
		if err != nil || len(st.Corruptions) > 0 {
			t.Fatalf("%s: replay: %v, corruptions %v", mode, err, st.Corruptions)
		}
		if fmt.Sprint(got) != fmt.Sprint(acked) {
			t.Fatalf("%s: replayed %q, acknowledged %q", mode, got, acked)
		}
		w2.Close()
	}
}
