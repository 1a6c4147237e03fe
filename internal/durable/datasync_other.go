//go:build !linux

package durable

import "os"

// DataSync flushes f's data (fsync where fdatasync is not available).
func DataSync(f *os.File) error { return f.Sync() }
