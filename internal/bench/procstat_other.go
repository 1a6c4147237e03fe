//go:build !linux

package bench

import "time"

// readProcCPU needs /proc/PID/stat: elsewhere it reports that it cannot measure.
func readProcCPU(pid int) (time.Duration, error) { return 0, errNoProc }

// readThreadsNice needs /proc: elsewhere it reports that it cannot measure.
func readThreadsNice(pid int) (int, error) { return 0, errNoProc }
