package bench

import (
	"fmt"
	"os"
)

// readProcMemory reads VmRSS and VmHWM of process pid from /proc.
func readProcMemory(pid int) (procMemory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	defer f.Close()
	m, err := parseProcStatus(f)
	if err != nil {
		return m, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	return m, nil
}

// resetPeakRSS resets the kernel's VmHWM of process pid to its current RSS
// (writing 5 to /proc/PID/clear_refs, Linux 4.0 and later), so that VmHWM
// read later is the peak of what happened in between.
func resetPeakRSS(pid int) error {
	path := fmt.Sprintf("/proc/%d/clear_refs", pid)
	if err := os.WriteFile(path, []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS of process %d: %w", pid, err)
	}
	return nil
}
