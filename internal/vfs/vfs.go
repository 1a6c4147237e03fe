// Package vfs is the filesystem seam under Rastro's storage: every file
// operation of the WAL and the value store goes through an FS, so that tests
// can run them over a filesystem that loses power (MemFS) or fails on
// demand (Faulty), and production over the operating system's (OS).
//
// Names are full paths. The model is the one durability depends on: data
// written to a file is durable only after File.Sync; a file's creation,
// rename or removal is durable only after SyncDir of its directory.
package vfs

import (
	"errors"
	"io"
	"os"

	"github.com/rastro-dev/rastro/internal/durable"
)

// FS is a filesystem.
type FS interface {
	// MkdirAll creates dir and its parents if missing.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the regular files in dir; a
	// missing dir is an error satisfying errors.Is(err, fs.ErrNotExist).
	List(dir string) ([]string, error)
	// OpenFile opens name with os.O_* flags (O_RDONLY, O_WRONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC).
	OpenFile(name string, flag int) (File, error)
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// Remove deletes name.
	Remove(name string) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS. Writes are positional; Appender turns a
// File into an io.Writer that writes at its end.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's data durable (fdatasync where available).
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// Or returns fs, or the operating system's filesystem when fs is nil.
func Or(fs FS) FS {
	if fs == nil {
		return OS{}
	}
	return fs
}

// OS is the operating system's filesystem.
type OS struct{}

// MkdirAll implements FS.
func (OS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// List implements FS.
func (OS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// SyncDir implements FS.
func (OS) SyncDir(dir string) error { return durable.SyncDir(dir) }

type osFile struct{ *os.File }

// Sync flushes the file's data (fdatasync on Linux).
func (f osFile) Sync() error { return durable.DataSync(f.File) }

func (f osFile) Size() (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// Appender writes at the end of a File: each Write goes at the offset the
// previous one ended at, starting from the file's size when made.
type Appender struct {
	F   File
	Off int64
}

// NewAppender returns an Appender positioned at f's end.
func NewAppender(f File) (*Appender, error) {
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	return &Appender{F: f, Off: n}, nil
}

// Write implements io.Writer. A short write advances by what was written.
func (a *Appender) Write(p []byte) (int, error) {
	n, err := a.F.WriteAt(p, a.Off)
	a.Off += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

// Sync syncs the file.
func (a *Appender) Sync() error { return a.F.Sync() }

// Truncate cuts the file to n bytes; the next Write goes there.
func (a *Appender) Truncate(n int64) error {
	if err := a.F.Truncate(n); err != nil {
		return err
	}
	a.Off = n
	return nil
}

// Close closes the file.
func (a *Appender) Close() error { return a.F.Close() }

// ErrInjected is the error of a fault a test injected without naming one.
var ErrInjected = errors.New("vfs: injected fault")
