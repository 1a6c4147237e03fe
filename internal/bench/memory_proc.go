package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// procMemory is a process's memory as the kernel reports it in
// /proc/PID/status, in bytes.
type procMemory struct {
	RSS int64 // VmRSS: resident set now
	HWM int64 // VmHWM: peak resident set since start or the last peak reset
}

// parseProcStatus reads VmRSS and VmHWM from the text of /proc/PID/status.
// Both must be present with a kB unit: a status file without them is an error
// (a kernel thread, or not Linux), never a silent zero.
func parseProcStatus(r io.Reader) (procMemory, error) {
	var m procMemory
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("parse %s: want \"N kB\", got %q", key, strings.TrimSpace(val))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return m, fmt.Errorf("parse %s: bad number %q", key, f[0])
		}
		if key == "VmRSS" {
			m.RSS, haveRSS = n<<10, true
		} else {
			m.HWM, haveHWM = n<<10, true
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("read process status: %w", err)
	}
	if !haveRSS || !haveHWM {
		return m, errors.New("process status has no VmRSS or VmHWM line")
	}
	return m, nil
}
