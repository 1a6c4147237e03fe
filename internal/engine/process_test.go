package engine

import (
	"context"
	"math"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/process"
	"github.com/rastro-dev/rastro/internal/store"
)

// overlapping runs merges through the process policy, holding the first two
// merges until both are inside it, then ending the first before the second:
// two engines' merges overlap for sure, in the order in which a guard per
// merge (each restoring the limit it found) left a stale limit behind.
type overlapping struct {
	bg        *process.Background
	mu        sync.Mutex
	arrived   int
	both      chan struct{} // closed when two merges are inside the guard
	firstDone chan struct{} // closed when the first has left it
	lowered   []bool        // per merge: was the memory limit below the one before, inside the guard
	limitPre  int64
}

func wait(ch chan struct{}) {
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
	}
}

func (o *overlapping) RunMerge(busy func() bool, merge func()) {
	var order int
	o.bg.RunMerge(busy, func() {
		o.mu.Lock()
		o.arrived++
		order = o.arrived
		if order == 2 {
			close(o.both)
		}
		o.mu.Unlock()
		if order <= 2 {
			wait(o.both)
		}
		if order == 2 {
			wait(o.firstDone)
		}
		o.mu.Lock()
		o.lowered = append(o.lowered, debug.SetMemoryLimit(-1) < o.limitPre)
		o.mu.Unlock()
		merge()
	})
	if order == 1 {
		close(o.firstDone) // after RunMerge: the first lease is given back
	}
}

func (o *overlapping) MergesDone() { o.bg.MergesDone() }

func (o *overlapping) RunSeal(seal func()) { o.bg.RunSeal(seal) }

// TestTwoEnginesMergingAtOnceLeaveNoStaleLimit: two engines in one process
// share the process's merge policy and compact at the same moment (a traces
// engine and a logs engine, say). While they merge the soft memory limit is
// held below the operator's; when both are done the operator's limit is in
// force again, whichever merge ends first. (With a guard per merge, each
// restoring the limit it found, the second merge restored the first one's
// lowered limit and left it in force.)
func TestTwoEnginesMergingAtOnceLeaveNoStaleLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	const operator = math.MaxInt64 - 7
	debug.SetMemoryLimit(operator)
	o := &overlapping{bg: &process.Background{MergeHeadroom: 16 << 20, MergeNice: process.DefaultMergeNice},
		both: make(chan struct{}), firstDone: make(chan struct{}), limitPre: operator}
	var engines []*Engine
	var stored []int64
	for i := 0; i < 2; i++ {
		e, err := Open(Options{Dir: t.TempDir(), NoCompaction: true, Background: o})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		g := newGen(uint64(10 + i))
		var n int64
		for j := 0; j < 4; j++ {
			spans := g.spans(200)
			n += int64(len(spans))
			appendSpans(t, e, "default", spans)
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
		e.lastAppend.Store(0) // ingest idle: the guard holds the limit
		engines = append(engines, e)
		stored = append(stored, n)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(engines))
	merges := make([]int, len(engines))
	for i, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Compact(context.Background())
			errs[i], merges[i] = err, res.Merges
		}()
	}
	wg.Wait()
	for i := range engines {
		if errs[i] != nil || merges[i] == 0 {
			t.Fatalf("engine %d: compact: %d merges, %v", i, merges[i], errs[i])
		}
		if st := testStats(engines[i], "default"); st.Spans != stored[i] || st.Segments != 1 {
			t.Fatalf("engine %d after compaction: %d spans in %d segments, want %d in 1", i, st.Spans, st.Segments, stored[i])
		}
	}
	select {
	case <-o.both:
	default:
		t.Fatal("the two engines' merges never ran at the same time")
	}
	for i, low := range o.lowered {
		if !low {
			t.Fatalf("merge %d ran with the operator's limit: the guard did not hold", i)
		}
	}
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Fatalf("after both engines merged the memory limit is %d, want the operator's %d", got, operator)
	}
}

// sealCounter is a Background that counts the seals run through it.
type sealCounter struct {
	mu    sync.Mutex
	seals int
}

func (c *sealCounter) RunMerge(busy func() bool, merge func()) { merge() }
func (c *sealCounter) MergesDone()                             {}
func (c *sealCounter) RunSeal(seal func()) {
	c.mu.Lock()
	c.seals++
	c.mu.Unlock()
	seal()
}

func (c *sealCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seals
}

// TestSealBehindRunsAtNormalPriority: a seal that starts with the buffer
// half a seal past SealBytes runs as it is, not through the process's
// background policy (which lowers its priority), and is counted; a seal
// that starts on time goes through the policy.
func TestSealBehindRunsAtNormalPriority(t *testing.T) {
	bg := &sealCounter{}
	const sealBytes = 1 << 20
	e, err := Open(Options{Dir: t.TempDir(), SealBytes: sealBytes, Background: bg, SealAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g := newGen(7)
	request := func(spans []model.Span) *store.Write {
		body := otlp.EncodeProto(spans)
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		return &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}
	}
	// What a span of this generator costs in the buffer's estimate, from
	// an engine that does not seal.
	calib, err := Open(Options{Dir: t.TempDir(), SealBytes: 1 << 30, SealAge: time.Hour, MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	sample := g.spans(500)
	if err := calib.Append(context.Background(), request(sample)); err != nil {
		t.Fatal(err)
	}
	perSpan := calib.bufferBytes() / int64(len(sample))
	calib.Close()
	// appendOnce stores about n bytes' worth of spans in one request: the
	// seal loop sees the buffer grow by all of it at once.
	appendOnce := func(n int64) {
		t.Helper()
		var spans []model.Span
		for int64(len(spans))*perSpan < n {
			spans = append(spans, g.trace()...)
		}
		if err := e.Append(context.Background(), request(spans)); err != nil {
			t.Fatal(err)
		}
	}
	waitSeals := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for e.Counters().Seals < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d seals after 30 s, want %d", e.Counters().Seals, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	appendOnce(sealBytes + sealBytes/5)
	waitSeals(1)
	if got, behind := bg.count(), e.Counters().SealsBehind; got != 1 || behind != 0 {
		t.Fatalf("a seal on time: %d seals through the policy, %d counted behind; want 1, 0", got, behind)
	}

	appendOnce(2 * sealBytes)
	waitSeals(2)
	if got, behind := bg.count(), e.Counters().SealsBehind; got != 1 || behind != 1 {
		t.Fatalf("a seal behind: %d seals through the policy, %d counted behind; want 1, 1", got, behind)
	}
}
