package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseProcStatCPU returns utime + stime, in clock ticks, from the text of
// /proc/PID/stat: the CPU time the kernel has charged to every thread of the
// process, live or exited, in user and in system mode (proc(5), fields 14
// and 15).
//
// Field 2 is the command name in parentheses, and the name may itself hold
// spaces and parentheses ("(a) b)"), so the fields are counted from the last
// ')' of the line, never by splitting the whole line.
func parseProcStatCPU(stat string) (uint64, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return 0, errors.New("parse process stat: no command name in parentheses")
	}
	f := strings.Fields(stat[end+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("parse process stat: %d fields after the command name, want at least %d", len(f), stime+1)
	}
	u, err := strconv.ParseUint(f[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse process stat: utime %q: %w", f[utime], err)
	}
	s, err := strconv.ParseUint(f[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse process stat: stime %q: %w", f[stime], err)
	}
	return u + s, nil
}

// atClkTck is the auxiliary vector entry carrying the clock tick: what
// sysconf(_SC_CLK_TCK) returns.
const atClkTck = 17

// auxvValue returns the value of entry key in an auxiliary vector (the bytes
// of /proc/self/auxv): (key, value) pairs of words of wordSize bytes in the
// given byte order, ended by a zero key.
func auxvValue(auxv []byte, key uint64, wordSize int, order binary.ByteOrder) (uint64, bool) {
	word := func(b []byte) uint64 {
		if wordSize == 4 {
			return uint64(order.Uint32(b))
		}
		return order.Uint64(b)
	}
	for len(auxv) >= 2*wordSize {
		k, v := word(auxv[:wordSize]), word(auxv[wordSize:2*wordSize])
		if k == 0 {
			break
		}
		if k == key {
			return v, true
		}
		auxv = auxv[2*wordSize:]
	}
	return 0, false
}

// parseProcStatNice returns the nice value (field 19) of a /proc stat line.
func parseProcStatNice(stat string) (int, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("parse process stat: no command name in parentheses")
	}
	f := strings.Fields(stat[end+1:])
	const nice = 19 - 3
	if len(f) <= nice {
		return 0, fmt.Errorf("parse process stat: %d fields after the command name, want at least %d", len(f), nice+1)
	}
	n, err := strconv.Atoi(f[nice])
	if err != nil {
		return 0, fmt.Errorf("parse process stat: nice %q: %w", f[nice], err)
	}
	return n, nil
}
