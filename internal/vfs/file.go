package vfs

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// WriteFileAtomic replaces name with data so that a crash leaves either the
// old file or the new one, never a mix: it writes name+".tmp", syncs it,
// renames it over name and syncs the directory, in that order. An error
// before the rename removes the temporary file (best effort) and leaves name
// as it was. An error of the directory sync is a *DirSyncError: name already
// holds the new data, but a power cut may bring back the old.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	n, err := f.WriteAt(data, 0)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err != nil {
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		return &DirSyncError{Err: err}
	}
	return nil
}

// DirSyncError is WriteFileAtomic's error when the file was renamed into
// place but the sync of its directory failed: readers see the new content
// from then on, while a power cut may still bring back the old. A caller
// that must know whether the replacement happened tests for it with
// errors.As.
type DirSyncError struct{ Err error }

func (e *DirSyncError) Error() string { return e.Err.Error() }

// Unwrap returns the directory sync's error.
func (e *DirSyncError) Unwrap() error { return e.Err }

// ReadFile returns the whole of name; a missing file is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	// A ReaderAt may answer a read that reaches the end with io.EOF: only a
	// short read is an error (an empty file reads as empty).
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, fmt.Errorf("read %s: %w", name, cmp.Or(err, io.ErrUnexpectedEOF))
	}
	return b, nil
}

// RemoveLeftovers removes from dir the files an interrupted write left:
// every "*.tmp" file, and every file ending in suffix that listed does not
// name. It tells logf of each removal (why names the writer, e.g. "an
// interrupted seal").
func RemoveLeftovers(fsys FS, dir, suffix string, listed map[string]bool, why string, logf func(string, ...any)) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if (strings.HasSuffix(n, suffix) && !listed[n]) || strings.HasSuffix(n, ".tmp") {
			logf("removing %s, left by %s", n, why)
			if err := fsys.Remove(dir + "/" + n); err != nil {
				return err
			}
		}
	}
	return nil
}
