package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/process"
)

// commitProbe runs the WAL's commit loop through the process's policy and
// records the nice value of the thread the loop runs on.
type commitProbe struct {
	*process.Background
	loops atomic.Int32 // commit loops started
	nice  atomic.Int32
	ended chan struct{} // closed when the loop has returned
}

func (c *commitProbe) RunCommit(loop func()) {
	c.loops.Add(1)
	c.Background.RunCommit(func() {
		c.nice.Store(int32(threadNiceValue()))
		loop()
		close(c.ended)
	})
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

// TestWALCommitRunsLowered: the engine runs its WAL's commit loop (which
// writes, fsyncs and fills the write buffer) through the process's policy,
// on a thread at IngestNice, once; appends are acknowledged and visible
// through it, and the loop ends with Close (no lowered thread is left
// behind).
func TestWALCommitRunsLowered(t *testing.T) {
	bg := &commitProbe{Background: &process.Background{IngestNice: 10}, ended: make(chan struct{})}
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
	if n, nice := bg.loops.Load(), bg.nice.Load(); n != 1 || nice != 10 {
		t.Errorf("%d commit loops through the policy at nice %d; want 1 at nice 10", n, nice)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bg.ended:
	case <-time.After(10 * time.Second):
		t.Error("the commit loop still runs 10 s after Close")
	}
}
