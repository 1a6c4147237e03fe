//go:build !linux

package valuestore

// Sync flushes the file with the platform's fsync.
func (f osFile) Sync() error { return f.File.Sync() }
