//go:build !linux

package process

import "errors"

// lowerThreadPriority is a no-op where thread priorities are not per thread.
func lowerThreadPriority(int) error { return nil }

// LowerPriority is supported on Linux only.
func LowerPriority(int) error {
	return errors.New("lowering the process's priority is supported on Linux only")
}
