package bench

import (
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	// A real line (cat) with utime 7 and stime 5 written into fields 14 and 15.
	const tail = " R 25849 25849 21242 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 2451772 3133440 388 18446744073709551615 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	for name, comm := range map[string]string{
		"plain":                     "(cat)",
		"spaces":                    "(my server)",
		"parentheses":               "(a) b (c))",
		"fake fields after a paren": "(x) R 1 1 1 0 -1 0 0 0 0 0 999 999)",
		"empty":                     "()",
	} {
		got, err := parseProcStatCPU("25851 " + comm + tail)
		if err != nil || got != 12 {
			t.Errorf("%s: %q: got %d, %v; want 12 ticks", name, comm, got, err)
		}
	}
	for name, bad := range map[string]string{
		"no parentheses":     "25851 cat R 1 2 3",
		"no closing":         "25851 (cat R 1 2 3 4 5 6 7 8 9 10 11 12 13 14",
		"too few fields":     "25851 (cat) R 1 2 3 4 5 6 7 8 9 10",
		"utime not a number": "25851 (cat) R 1 1 1 0 -1 0 0 0 0 0 x 5 0 0",
		"negative stime":     "25851 (cat) R 1 1 1 0 -1 0 0 0 0 0 7 -5 0 0",
		"empty":              "",
	} {
		if got, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%s: %q accepted as %d ticks", name, bad, got)
		}
	}
}

func TestParseProcStatNice(t *testing.T) {
	// Field 18 is the priority (20 + nice for normal threads), 19 the nice value.
	const line = "25851 (my (load) gen) S 25849 25849 21242 0 -1 4194304 100 0 0 0 7 5 0 0 30 10 1 0 2451772 3133440 388\n"
	if got, err := parseProcStatNice(line); err != nil || got != 10 {
		t.Errorf("got %d, %v; want nice 10", got, err)
	}
	if got, err := parseProcStatNice("25851 (cat) S 1 1 1 0 -1 0 0 0 0 0 7 5 0 0 30"); err == nil {
		t.Errorf("a line without field 19 read as nice %d", got)
	}
}

func TestAuxvValue(t *testing.T) {
	vec := func(order binary.AppendByteOrder, size int, words ...uint64) []byte {
		var b []byte
		for _, w := range words {
			if size == 4 {
				b = order.AppendUint32(b, uint32(w))
			} else {
				b = order.AppendUint64(b, w)
			}
		}
		return b
	}
	le := vec(binary.LittleEndian, 8, 33, 0x7fff0000, 6, 4096, atClkTck, 100, 0, 0, atClkTck, 5)
	if v, ok := auxvValue(le, atClkTck, 8, binary.LittleEndian); !ok || v != 100 {
		t.Errorf("64-bit little-endian: got %d, %v; want 100", v, ok)
	}
	if v, ok := auxvValue(le, 6, 8, binary.LittleEndian); !ok || v != 4096 {
		t.Errorf("AT_PAGESZ: got %d, %v; want 4096", v, ok)
	}
	be := vec(binary.BigEndian, 4, 6, 4096, atClkTck, 1024, 0, 0)
	if v, ok := auxvValue(be, atClkTck, 4, binary.BigEndian); !ok || v != 1024 {
		t.Errorf("32-bit big-endian: got %d, %v; want 1024", v, ok)
	}
	for name, b := range map[string][]byte{
		"absent":             vec(binary.LittleEndian, 8, 6, 4096, 0, 0),
		"after the zero key": vec(binary.LittleEndian, 8, 0, 0, atClkTck, 100),
		"truncated pair":     vec(binary.LittleEndian, 8, 6, 4096, atClkTck)[:20],
		"empty":              nil,
	} {
		if v, ok := auxvValue(b, atClkTck, 8, binary.LittleEndian); ok {
			t.Errorf("%s: found %d", name, v)
		}
	}
}

// TestReadProcCPUSeesWork reads this process's own CPU time around a busy
// loop.
func TestReadProcCPUSeesWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := readProcCPU(os.Getpid()); err == nil {
			t.Fatal("readProcCPU claims to work without /proc")
		}
		return
	}
	before, err := readProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until at least 50 ms of CPU show (a tick is 10 ms); the wall
	// deadline only stops a broken reader from hanging the test.
	x, deadline := 0, time.Now().Add(10*time.Second)
	var after time.Duration
	for after-before < 50*time.Millisecond && time.Now().Before(deadline) {
		for i := 0; i < 1_000_000; i++ {
			x += i ^ x
		}
		if after, err = readProcCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if d := after - before; d < 50*time.Millisecond || d > 10*time.Second {
		t.Errorf("CPU time went from %v to %v around a busy loop (x=%d)", before, after, x)
	}
	if _, err := readProcCPU(-1); err == nil {
		t.Error("read the CPU time of process -1")
	}
}
