package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// readProcCPU returns the CPU time (user + system) process pid has used so
// far, from /proc/PID/stat. Its resolution is one clock tick (10 ms).
func readProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	ticks, err := parseProcStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / time.Duration(clockTick()), nil
}

// clockTick is the unit of /proc/PID/stat's times in ticks per second:
// sysconf(_SC_CLK_TCK), which the C library reads from the auxiliary vector
// (AT_CLKTCK), and so does this. Without it, 100: USER_HZ is 100 on every
// architecture Go builds Linux binaries for.
var clockTick = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	if hz, ok := auxvValue(b, atClkTck, strconv.IntSize/8, binary.NativeEndian); ok && hz > 0 {
		return hz
	}
	return 100
})

// readThreadsNice returns the lowest nice value (the highest priority) of
// the threads of process pid.
func readThreadsNice(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read threads of process %d: %w", pid, err)
	}
	lowest, seen := 0, false
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		n, err := parseProcStatNice(string(b))
		if err != nil {
			return 0, fmt.Errorf("thread %s of process %d: %w", t.Name(), pid, err)
		}
		if !seen || n < lowest {
			lowest, seen = n, true
		}
	}
	if !seen {
		return 0, fmt.Errorf("process %d has no thread left", pid)
	}
	return lowest, nil
}
