//go:build !linux

package process

// lowerThreadPriority is a no-op where thread priorities are not per thread.
func lowerThreadPriority(int) error { return nil }
