package valuestore

import (
	"os"
	"syscall"
)

// Sync flushes the file's data with fdatasync: appends change the size, which
// fdatasync flushes too; timestamps are not needed.
func (f osFile) Sync() error {
	rc, err := f.File.SyscallConn()
	if err != nil {
		return f.File.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
