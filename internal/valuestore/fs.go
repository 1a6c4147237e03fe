package valuestore

import (
	"io"
	"os"

	"github.com/rastro-dev/rastro/internal/durable"
)

// FS is the seam under the store: every file operation it performs goes
// through here, so tests can fail any step and simulate a crash that keeps
// only what was synced. Names are full paths.
type FS interface {
	// MkdirAll creates dir and its parents if missing.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the regular files in dir.
	List(dir string) ([]string, error)
	// OpenFile opens name with os.O_* flags (O_RDONLY, O_RDWR, O_CREATE, O_EXCL, O_TRUNC).
	OpenFile(name string, flag int) (File, error)
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// Remove deletes name.
	Remove(name string) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's data durable (fdatasync where available).
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// OSFS is the operating system's filesystem.
type OSFS struct{}

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// List implements FS.
func (OSFS) List(dir string) ([]string, error) {
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
func (OSFS) OpenFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error { return durable.SyncDir(dir) }

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
