//go:build !linux

package wal

// Sync flushes the file with the platform's fsync (F_FULLFSYNC on macOS).
func (f osFile) Sync() error { return f.File.Sync() }
