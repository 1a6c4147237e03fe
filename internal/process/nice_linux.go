package process

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// schedIdle is Linux's SCHED_IDLE scheduling policy (sched(7)).
const schedIdle = 5

// lowerThreadPriority sets the calling OS thread's nice value (Linux nice
// values are per thread) and, with idle, moves it to the SCHED_IDLE policy;
// if the kernel refuses the policy the thread keeps the nice value. The
// caller must have locked its goroutine to the thread, and must let the
// thread exit with the goroutine.
func lowerThreadPriority(nice int, idle bool) error {
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice); err != nil {
		return err
	}
	if !idle {
		return nil
	}
	// pid 0: the calling thread. An unprivileged thread may always move
	// itself to SCHED_IDLE (never back, which a lowered thread never needs).
	return unix.SchedSetAttr(0, &unix.SchedAttr{Policy: schedIdle, Nice: int32(nice)}, 0)
}

// LowerPriority sets the nice value of every thread of the process, and so of
// every thread created from them later (a new thread inherits its creator's).
// It is for a process that must yield the CPU to others on the same machine,
// such as a load generator beside the server it loads.
func LowerPriority(nice int) error {
	// Until a listing shows no thread it has not lowered: a thread the
	// runtime starts while a pass runs, from a thread not yet lowered, is
	// caught by the next pass (two fixed passes missed one now and then:
	// a load process read back at nice 0 in CI).
	lowered := map[int]bool{}
	for pass := 0; ; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("lower priority: %w", err)
		}
		found := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || lowered[tid] {
				continue
			}
			found = true
			// A thread that ended since the listing is no error.
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("lower priority of thread %d to nice %d: %w", tid, nice, err)
			}
			lowered[tid] = true
		}
		if !found {
			return nil
		}
		if pass == 100 {
			return fmt.Errorf("lower priority: the process kept starting threads through %d passes", pass)
		}
	}
}
