package vfs

import (
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// MemFS is a filesystem in memory that remembers what was made durable:
// file data only through File.Sync, directory entries (creations, renames,
// removals) only through SyncDir of their directory. Crash returns the
// filesystem a machine finds after losing power. Directories exist
// implicitly; MkdirAll only records them for List.
//
// Its methods are safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	cur  map[string]*inode // the running process's view: path -> file
	dur  map[string]*inode // entries made durable by SyncDir
	dirs map[string]bool
}

type inode struct {
	data   []byte // what reads see
	synced []byte // what survives a power cut
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{cur: map[string]*inode{}, dur: map[string]*inode{}, dirs: map[string]bool{}}
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		m.dirs[d] = true
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	var out []string
	for name := range m.cur {
		if filepath.Dir(name) == dir {
			out = append(out, filepath.Base(name))
		}
	}
	if len(out) == 0 && !m.dirs[dir] {
		return nil, &os.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	slices.Sort(out)
	return out, nil
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.cur[name]
	switch {
	case flag&os.O_CREATE != 0:
		if ok && flag&os.O_EXCL != 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
		}
		if !ok {
			ino = &inode{}
			m.cur[name] = ino
			m.dirs[filepath.Dir(name)] = true
		}
	case !ok:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if flag&os.O_TRUNC != 0 {
		ino.data = nil
	}
	return &memFile{m: m, ino: ino, name: name, write: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.cur[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	m.cur[newname] = ino
	delete(m.cur, oldname)
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.cur[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.cur, name)
	return nil
}

// SyncDir implements FS: the entries of dir become durable as they are now.
func (m *MemFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.dur {
		if filepath.Dir(name) == dir {
			delete(m.dur, name)
		}
	}
	for name, ino := range m.cur {
		if filepath.Dir(name) == dir {
			m.dur[name] = ino
		}
	}
	return nil
}

// CrashOptions say what a power cut keeps beyond what was made durable.
type CrashOptions struct {
	// KeepDirOps keeps the directory operations not yet synced (as many
	// filesystems end up doing), instead of losing them.
	KeepDirOps bool
	// Torn keeps, of each file, a random prefix of the data written since
	// its last Sync (a torn write), drawn from Rand; without it they are lost.
	Torn bool
	Rand *rand.Rand
}

// Crash returns the filesystem found after a power cut now: every file
// holds what its last Sync made durable, and exists under the names its
// directory's last SyncDir made durable.
func (m *MemFS) Crash(o CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.dur
	if o.KeepDirOps {
		names = m.cur
	}
	out := NewMemFS()
	for d := range m.dirs {
		out.dirs[d] = true
	}
	for name, ino := range names {
		data := ino.synced
		if o.Torn && o.Rand != nil && len(ino.data) > len(ino.synced) && bytes.HasPrefix(ino.data, ino.synced) {
			data = ino.data[:len(ino.synced)+o.Rand.IntN(len(ino.data)-len(ino.synced)+1)]
		}
		c := slices.Clone(data)
		out.cur[name] = &inode{data: c, synced: slices.Clone(c)}
	}
	out.dur = maps(out.cur)
	return out
}

// Restart returns the filesystem as the process left it, every write kept
// (a process crash: the operating system keeps the page cache).
func (m *MemFS) Restart() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMemFS()
	for d := range m.dirs {
		out.dirs[d] = true
	}
	for name, ino := range m.cur {
		c := slices.Clone(ino.data)
		out.cur[name] = &inode{data: c, synced: slices.Clone(c)}
	}
	out.dur = maps(out.cur)
	return out
}

// Names lists the files whose path ends with suffix, sorted.
func (m *MemFS) Names(suffix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.cur {
		if strings.HasSuffix(name, suffix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ReadFile returns a copy of a file's current content.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.cur[filepath.Clean(name)]
	if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(ino.data), nil
}

func maps(m map[string]*inode) map[string]*inode {
	out := make(map[string]*inode, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type memFile struct {
	m     *MemFS
	ino   *inode
	name  string
	write bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
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
	if !f.write {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: os.ErrPermission}
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.ino.data)) {
		f.ino.data = append(f.ino.data, make([]byte, end-int64(len(f.ino.data)))...)
	}
	copy(f.ino.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.ino.synced = slices.Clone(f.ino.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if size < int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, size-int64(len(f.ino.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error { return nil }
