package valuestore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rastro-dev/rastro/internal/vfs"
)

// memFS is a vfs.MemFS (it remembers what was made durable: file data only
// through File.Sync, directory entries only through SyncDir) that stops
// like a process would: with a limit, every mutating operation after the
// first limit ones fails with errInjected, and the failing write leaves half
// its bytes.
type memFS struct {
	*vfs.Faulty
	mem   *vfs.MemFS
	mu    sync.Mutex
	limit int // mutating operations allowed; < 0: unlimited
	ops   int
}

var errInjected = errors.New("injected fault")

func newMemFS() *memFS { return wrapMemFS(vfs.NewMemFS()) }

func wrapMemFS(m *vfs.MemFS) *memFS {
	fs := &memFS{mem: m, limit: -1}
	fs.Faulty = &vfs.Faulty{FS: m, Inject: fs.inject}
	return fs
}

func (fs *memFS) inject(op vfs.Op, name string, size int) vfs.Fault {
	if op == vfs.OpRead || op == vfs.OpOpen {
		return vfs.Fault{}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.ops++
	if fs.limit < 0 || fs.ops <= fs.limit {
		return vfs.Fault{}
	}
	return vfs.Fault{Err: errInjected, Written: size / 2} // the write in flight when the process stopped
}

// crashImage returns the filesystem found after a power loss now. keepDirOps
// keeps directory operations that were not synced (as many filesystems do);
// keepUnsynced keeps a random prefix of data appended since the last Sync (a
// torn write).
func (fs *memFS) crashImage(keepDirOps, keepUnsynced bool, rng *rand.Rand) *memFS {
	return wrapMemFS(fs.mem.Crash(vfs.CrashOptions{KeepDirOps: keepDirOps, Torn: keepUnsynced, Rand: rng}))
}

// running returns the filesystem as the process sees it, without faults (a
// process restart without a machine crash).
func (fs *memFS) running() *memFS { return wrapMemFS(fs.mem.Restart()) }

// names lists the files whose path ends with suffix.
func (fs *memFS) names(suffix string) []string { return fs.mem.Names(suffix) }

// TestEmptiedFilesOnMemFS: a MANIFEST or pack index found empty (as a
// filesystem that keeps a rename but not the data before it can leave them)
// is damage the store reports and works around at Open, on the vfs seam as
// on the OS: every value still reads back.
func TestEmptiedFilesOnMemFS(t *testing.T) {
	for _, name := range []string{manifestName, idxName(1)} {
		t.Run(name, func(t *testing.T) {
			fs := newMemFS()
			s := mustOpen(t, Options{Dir: "/vs", PackBytes: 2048, FS: fs})
			var vals [][]byte
			for i := range 10 {
				v := text(uint64(i), 700)
				if _, _, err := s.Put(v); err != nil {
					t.Fatal(err)
				}
				vals = append(vals, v)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := fs.mem.OpenFile("/vs/"+name, os.O_RDWR)
			if err != nil {
				t.Fatalf("the store wrote no %s: %v", name, err)
			}
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			f.Close()

			s, err = Open(Options{Dir: "/vs", PackBytes: 2048, FS: fs})
			if err != nil {
				t.Fatalf("open with an empty %s must report damage, not fail: %v", name, err)
			}
			defer s.Close()
			c := s.Corruptions()
			if len(c) != 1 || filepath.Base(c[0].File) != name {
				t.Fatalf("reported %v, want the damage of %s", c, name)
			}
			for i, v := range vals {
				if got, err := s.Get(RefOf(v)); err != nil || !bytes.Equal(got, v) {
					t.Fatalf("value %d after an empty %s: %v", i, name, err)
				}
			}
		})
	}
}
