//go:build !linux

package bench

import "errors"

var errNoProc = errors.New("reading a process's resident set needs Linux /proc")

// readProcMemory needs /proc: elsewhere it reports that it cannot measure.
func readProcMemory(pid int) (procMemory, error) { return procMemory{}, errNoProc }

// resetPeakRSS needs /proc/PID/clear_refs: elsewhere it reports that it cannot.
func resetPeakRSS(pid int) error { return errNoProc }
