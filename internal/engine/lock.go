package engine

import (
	"io"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// lockDirFS takes the exclusive lock on DATA_DIR/LOCK (durable.LockDir), so
// that two processes never open the same store, on the operating system's
// filesystem; on any other (a test's vfs.MemFS) there is no other process
// to keep out, and nothing is locked.
func lockDirFS(fsys vfs.FS, dir string) (io.Closer, error) {
	if _, ok := fsys.(vfs.OS); !ok {
		return io.NopCloser(nil), nil
	}
	return durable.LockDir(dir)
}
