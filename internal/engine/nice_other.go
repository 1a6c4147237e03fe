//go:build !linux

package engine

// lowerThreadPriority is a no-op where thread priorities are not per thread.
func lowerThreadPriority(int) error { return nil }
