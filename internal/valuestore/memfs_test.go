package valuestore

import (
	"errors"
	"math/rand/v2"
	"sync"

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
