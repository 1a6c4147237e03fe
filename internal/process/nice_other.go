//go:build !linux

package process

import "errors"

// lowerThreadPriority is a no-op where thread priorities are not per thread;
// SCHED_IDLE is Linux's.
func lowerThreadPriority(_ int, idle bool) error {
	if idle {
		return errors.New("SCHED_IDLE is supported on Linux only")
	}
	return nil
}

// LowerPriority is supported on Linux only.
func LowerPriority(int) error {
	return errors.New("lowering the process's priority is supported on Linux only")
}
