package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rastro-dev/rastro/internal/process"
)

// commitProbe runs the WAL's commit steps through the process's policy and
// records the nice value of the threads they run on.
type commitProbe struct {
	*process.Background
	lanes   atomic.Int32 // commit lanes given out
	steps   atomic.Int32
	badNice atomic.Int32  // steps on a thread at another nice value than 10
	stopped chan struct{} // closed when the lane has been stopped
}

func (c *commitProbe) CommitLane() (func(func()), func()) {
	c.lanes.Add(1)
	run, stop := c.Background.CommitLane()
	return func(step func()) {
			run(func() {
				c.steps.Add(1)
				if threadNiceValue() != 10 {
					c.badNice.Add(1)
				}
				step()
			})
		}, func() {
			stop()
			close(c.stopped)
		}
}

// threadNiceValue reads the calling thread's nice value (field 19 of its
// /proc stat line); -100 when it cannot.
func threadNiceValue() int {
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return -100
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		return -100
	}
	return n
}

// TestWALCommitRunsLowered: the engine runs its WAL's commits (which write,
// fsync and fill the write buffer) through the process's policy, on a lane
// of its own at IngestNice; appends are acknowledged and visible through
// it, and the lane is stopped with Close (no lowered thread is left
// behind).
func TestWALCommitRunsLowered(t *testing.T) {
	bg := &commitProbe{Background: &process.Background{IngestNice: 10}, stopped: make(chan struct{})}
	e, err := Open(Options{Dir: t.TempDir(), Background: bg})
	if err != nil {
		t.Fatal(err)
	}
	spans := newGen(3).spans(20)
	appendSpans(t, e, "default", spans)
	st, err := e.Stats(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if st.Spans != int64(len(spans)) {
		t.Errorf("%d spans stored after the appends, want %d", st.Spans, len(spans))
	}
	if n, steps, bad := bg.lanes.Load(), bg.steps.Load(), bg.badNice.Load(); n != 1 || steps == 0 || bad != 0 {
		t.Errorf("%d commit lanes, %d steps through the policy, %d of them not at nice 10; want 1 lane, every step at nice 10", n, steps, bad)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bg.stopped:
	default:
		t.Error("Close returned without stopping the commit lane")
	}
}
