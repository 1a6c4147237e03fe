package process

import "syscall"

// lowerThreadPriority sets the calling OS thread's nice value (Linux nice
// values are per thread). The caller must have locked its goroutine to the
// thread, and must let the thread exit with the goroutine.
func lowerThreadPriority(nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}
