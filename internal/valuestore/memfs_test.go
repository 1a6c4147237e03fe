package valuestore

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// memFS is an in-memory FS that remembers what was made durable: file data
// only through File.Sync, directory entries (creations, renames, removals)
// only through SyncDir. crashImage builds the filesystem a machine would find
// after losing power. With a limit, every mutating operation after the first
// limit ones fails (the failing write leaves half its bytes), like a process
// that stops at that step.
type memFS struct {
	mu    sync.Mutex
	cur   map[string]*inode // what the running process sees
	dur   map[string]*inode // directory entries made durable by SyncDir
	limit int               // mutating operations allowed; < 0: unlimited
	ops   int
}

type inode struct{ data, synced []byte }

var errInjected = errors.New("injected fault")

func newMemFS() *memFS {
	return &memFS{cur: map[string]*inode{}, dur: map[string]*inode{}, limit: -1}
}

// step counts one mutating operation and reports whether it may run.
func (fs *memFS) step() bool {
	fs.ops++
	return fs.limit < 0 || fs.ops <= fs.limit
}

func (fs *memFS) MkdirAll(string) error { return nil }

func (fs *memFS) List(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for name := range fs.cur {
		if filepath.Dir(name) == filepath.Clean(dir) {
			out = append(out, filepath.Base(name))
		}
	}
	slices.Sort(out)
	return out, nil
}

func (fs *memFS) OpenFile(name string, flag int) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino, ok := fs.cur[name]
	if flag&os.O_CREATE != 0 {
		if !fs.step() {
			return nil, errInjected
		}
		if ok && flag&os.O_EXCL != 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
		}
		if !ok {
			ino = &inode{}
			fs.cur[name] = ino
		}
		if flag&os.O_TRUNC != 0 {
			ino.data = nil
		}
	} else if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return &memFile{fs: fs, ino: ino, name: name}, nil
}

func (fs *memFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.step() {
		return errInjected
	}
	ino, ok := fs.cur[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: os.ErrNotExist}
	}
	fs.cur[newname] = ino
	delete(fs.cur, oldname)
	return nil
}

func (fs *memFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.step() {
		return errInjected
	}
	if _, ok := fs.cur[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(fs.cur, name)
	return nil
}

func (fs *memFS) SyncDir(string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.step() {
		return errInjected
	}
	fs.dur = maps(fs.cur)
	return nil
}

func maps(m map[string]*inode) map[string]*inode {
	out := make(map[string]*inode, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// crashImage returns the filesystem found after a power loss now. keepDirOps
// keeps directory operations that were not synced (as many filesystems do);
// keepUnsynced keeps a random prefix of data appended since the last Sync (a
// torn write).
func (fs *memFS) crashImage(keepDirOps, keepUnsynced bool, rng *rand.Rand) *memFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ns := fs.dur
	if keepDirOps {
		ns = fs.cur
	}
	out := newMemFS()
	for name, ino := range ns {
		data := ino.synced
		if keepUnsynced && len(ino.data) > len(ino.synced) && bytes.HasPrefix(ino.data, ino.synced) {
			data = ino.data[:len(ino.synced)+rng.IntN(len(ino.data)-len(ino.synced)+1)]
		}
		c := slices.Clone(data)
		out.cur[name] = &inode{data: c, synced: slices.Clone(c)}
	}
	out.dur = maps(out.cur)
	return out
}

// running returns the filesystem as the process sees it, without faults (a
// process restart without a machine crash).
func (fs *memFS) running() *memFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := newMemFS()
	for name, ino := range fs.cur {
		c := slices.Clone(ino.data)
		out.cur[name] = &inode{data: c, synced: slices.Clone(c)}
	}
	out.dur = maps(out.cur)
	return out
}

// names lists the files whose path ends with suffix.
func (fs *memFS) names(suffix string) []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for name := range fs.cur {
		if strings.HasSuffix(name, suffix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

type memFile struct {
	fs   *memFS
	ino  *inode
	name string
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	ok := f.fs.step()
	if !ok {
		p = p[:len(p)/2] // the write in flight when the process stopped
	}
	if end := off + int64(len(p)); end > int64(len(f.ino.data)) {
		f.ino.data = append(f.ino.data, make([]byte, end-int64(len(f.ino.data)))...)
	}
	copy(f.ino.data[off:], p)
	if !ok {
		return len(p), errInjected
	}
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if !f.fs.step() {
		return errInjected
	}
	f.ino.synced = slices.Clone(f.ino.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if !f.fs.step() {
		return errInjected
	}
	if size < int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size]
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error { return nil }
