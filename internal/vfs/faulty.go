package vfs

import (
	"os"
	"sync"
	"syscall"
)

// Op is a kind of file operation, as Faulty reports it to its injector.
type Op int

// The operations Faulty can fail.
const (
	OpCreate   Op = iota // OpenFile with O_CREATE
	OpOpen               // OpenFile without O_CREATE
	OpWrite              // File.WriteAt (size: the bytes asked)
	OpSync               // File.Sync
	OpRead               // File.ReadAt (size: the bytes asked)
	OpTruncate           // File.Truncate (size: the new size)
	OpRename             // Rename (name: the old name)
	OpRemove             // Remove
	OpSyncDir            // SyncDir (name: the directory)
)

var opNames = [...]string{"create", "open", "write", "sync", "read", "truncate", "rename", "remove", "syncdir"}

func (o Op) String() string { return opNames[o] }

// Fault is an injector's answer for one operation.
type Fault struct {
	// Err fails the operation; nil lets it run.
	Err error
	// Written, for a failed write: how many of its bytes reach the file
	// before the error (a short or torn write); 0 writes nothing.
	Written int
}

// Faulty wraps an FS and asks Inject before every operation whether to fail
// it. Inject is called with no lock held, possibly concurrently.
type Faulty struct {
	FS     FS
	Inject func(op Op, name string, size int) Fault
}

// Errno wraps a system error number as an os.PathError, as the OS would.
func Errno(op Op, name string, e syscall.Errno) error {
	return &os.PathError{Op: op.String(), Path: name, Err: e}
}

func (f *Faulty) fault(op Op, name string, size int) Fault {
	if f.Inject == nil {
		return Fault{}
	}
	return f.Inject(op, name, size)
}

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(dir string) error { return f.FS.MkdirAll(dir) }

// List implements FS.
func (f *Faulty) List(dir string) ([]string, error) { return f.FS.List(dir) }

// OpenFile implements FS.
func (f *Faulty) OpenFile(name string, flag int) (File, error) {
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		op = OpCreate
	}
	if ft := f.fault(op, name, 0); ft.Err != nil {
		return nil, ft.Err
	}
	file, err := f.FS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f, name: name}, nil
}

// Rename implements FS.
func (f *Faulty) Rename(oldname, newname string) error {
	if ft := f.fault(OpRename, oldname, 0); ft.Err != nil {
		return ft.Err
	}
	return f.FS.Rename(oldname, newname)
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error {
	if ft := f.fault(OpRemove, name, 0); ft.Err != nil {
		return ft.Err
	}
	return f.FS.Remove(name)
}

// SyncDir implements FS.
func (f *Faulty) SyncDir(dir string) error {
	if ft := f.fault(OpSyncDir, dir, 0); ft.Err != nil {
		return ft.Err
	}
	return f.FS.SyncDir(dir)
}

type faultyFile struct {
	File
	fs   *Faulty
	name string
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	ft := f.fs.fault(OpWrite, f.name, len(p))
	if ft.Err == nil {
		return f.File.WriteAt(p, off)
	}
	n := 0
	if k := min(max(ft.Written, 0), len(p)); k > 0 {
		n, _ = f.File.WriteAt(p[:k], off)
	}
	return n, ft.Err
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if ft := f.fs.fault(OpRead, f.name, len(p)); ft.Err != nil {
		return 0, ft.Err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultyFile) Sync() error {
	if ft := f.fs.fault(OpSync, f.name, 0); ft.Err != nil {
		return ft.Err
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if ft := f.fs.fault(OpTruncate, f.name, int(size)); ft.Err != nil {
		return ft.Err
	}
	return f.File.Truncate(size)
}

// Disk is an injector that models a disk of limited free space: writes that
// do not fit fail with ENOSPC after writing what fits (a short write), until
// SetFree gives space back. Freed space is not returned by removals.
type Disk struct {
	mu   sync.Mutex
	free int64
}

// NewDisk returns a Disk with free bytes.
func NewDisk(free int64) *Disk { return &Disk{free: free} }

// SetFree sets the free space.
func (d *Disk) SetFree(n int64) {
	d.mu.Lock()
	d.free = n
	d.mu.Unlock()
}

// Inject is a Faulty.Inject.
func (d *Disk) Inject(op Op, name string, size int) Fault {
	if op != OpWrite {
		return Fault{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if int64(size) <= d.free {
		d.free -= int64(size)
		return Fault{}
	}
	fit := int(max(d.free, 0))
	d.free = 0
	return Fault{Err: Errno(op, name, syscall.ENOSPC), Written: fit}
}
