package vfs

import (
	"fmt"
	"os"
	"path"
	"strings"
)

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old file or the new one, never a mix: it writes path+".tmp", syncs it,
// renames it over path and syncs the directory. On an error the temporary
// file is removed (best effort) and path is as it was.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err == nil {
		err = fsys.SyncDir(path.Dir(name))
	}
	if err != nil {
		fsys.Remove(tmp)
	}
	return err
}

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
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
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
