//go:build !linux

package bench

import (
	"errors"
	"os"
)

var errNoProc = errors.New("reading a process's resident set needs Linux /proc")

// readProcMemory needs /proc: elsewhere it reports that it cannot measure.
func readProcMemory(pid int) (procMemory, error) { return procMemory{}, errNoProc }

// resetPeakRSS needs /proc/PID/clear_refs: elsewhere it reports that it cannot.
func resetPeakRSS(pid int) error { return errNoProc }

// exitPeakRSS needs Linux's rusage units: elsewhere it reports that it cannot.
func exitPeakRSS(ps *os.ProcessState) (int64, error) { return 0, errNoProc }
