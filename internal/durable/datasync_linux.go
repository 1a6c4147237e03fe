package durable

import (
	"os"
	"syscall"
)

// DataSync flushes f's data with fdatasync: appends change the file size,
// which fdatasync also flushes, so the data is readable after a crash;
// timestamps are not needed.
func DataSync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Sync()
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
