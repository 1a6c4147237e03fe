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
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
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
func (o *overlapping) Pressed() bool       { return o.bg.Pressed() }

func (o *overlapping) CommitLane() (func(func()), func()) { return o.bg.CommitLane() }

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

// spanRequests makes requests of about n bytes of the write buffer's
// estimate from gen's spans, calibrated on an engine that does not seal.
func spanRequests(t *testing.T, g *gen) func(n int64) *store.Write {
	t.Helper()
	request := func(spans []model.Span) *store.Write {
		body := otlp.EncodeProto(spans)
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		return &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}
	}
	calib, err := Open(Options{Dir: t.TempDir(), SealBytes: 1 << 30, SealAge: time.Hour, MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	sample := g.spans(3000) // ~20,000 spans: the estimate's fixed costs (chunks of 4,096 rows) spread thin
	if err := calib.Append(context.Background(), request(sample)); err != nil {
		t.Fatal(err)
	}
	perSpan := calib.bufferBytes() / int64(len(sample))
	calib.Close()
	return func(n int64) *store.Write {
		var spans []model.Span
		for int64(len(spans))*perSpan < n {
			spans = append(spans, g.trace()...)
		}
		return request(spans)
	}
}

// runNow runs step at once, as an engine without a Background does.
func runNow(step func()) { step() }

// sealCounter is a Background that counts the seals run through it.
type sealCounter struct {
	mu    sync.Mutex
	seals int
}

func (c *sealCounter) RunMerge(busy func() bool, merge func()) { merge() }
func (c *sealCounter) MergesDone()                             {}
func (c *sealCounter) CommitLane() (func(func()), func())      { return runNow, func() {} }
func (c *sealCounter) Pressed() bool                           { return false }
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
	request := spanRequests(t, newGen(7))
	// appendOnce stores about n bytes' worth of spans in one request: the
	// seal loop sees the buffer grow by all of it at once.
	appendOnce := func(n int64) {
		t.Helper()
		if err := e.Append(context.Background(), request(n)); err != nil {
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

	// Small requests until the buffer passes SealBytes: the seal loop
	// finds it on time (less than half a seal past).
	for e.bufferBytes() < sealBytes {
		appendOnce(sealBytes / 8)
	}
	waitSeals(1)
	if got, behind := bg.count(), e.Counters().SealsBehind; got != 1 || behind != 0 {
		t.Fatalf("a seal on time: %d seals through the policy, %d counted behind; want 1, 0", got, behind)
	}

	appendOnce(3 * sealBytes) // in one request: the loop finds the buffer behind
	waitSeals(2)
	if got, behind := bg.count(), e.Counters().SealsBehind; got != 1 || behind != 1 {
		t.Fatalf("a seal behind: %d seals through the policy, %d counted behind; want 1, 1", got, behind)
	}
}

// gatedSeals is a Background that holds each seal run through it until
// released.
type gatedSeals struct {
	entered chan struct{} // a seal is waiting for release
	release chan struct{}
}

func (g *gatedSeals) RunMerge(busy func() bool, merge func()) { merge() }
func (g *gatedSeals) MergesDone()                             {}
func (g *gatedSeals) CommitLane() (func(func()), func())      { return runNow, func() {} }
func (g *gatedSeals) Pressed() bool                           { return false }
func (g *gatedSeals) RunSeal(seal func()) {
	select {
	case g.entered <- struct{}{}:
	default: // the test waits for the first seal only
	}
	<-g.release
	seal()
}

// openGated opens an engine whose seals wait at g's gate until release
// (called at cleanup too, before Close, which waits for the seal loop);
// pace holds a request as long as the test wants.
func openGated(t *testing.T, sealBytes int64) (*Engine, *gatedSeals, func()) {
	t.Helper()
	g := &gatedSeals{entered: make(chan struct{}, 1), release: make(chan struct{})}
	e, err := Open(Options{Dir: t.TempDir(), SealBytes: sealBytes, Background: g, SealAge: time.Hour, MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { close(g.release) })
	t.Cleanup(func() { release(); e.Close() })
	e.maxPace = time.Minute // the test, not the cap, decides when the seal ends
	return e, g, release
}

// TestPaceHoldsIngestUntilASeal: while the buffers hold two seals' worth, a
// request is held (not refused) until a seal retires a buffer, and then
// stored.
func TestPaceHoldsIngestUntilASeal(t *testing.T) {
	const sealBytes = 1 << 20
	e, g, release := openGated(t, sealBytes)
	request := spanRequests(t, newGen(9))
	// One seal's worth and a fifth: the seal loop starts a seal (on time,
	// so through the policy), which waits at the gate.
	if err := e.Append(context.Background(), request(sealBytes/5+sealBytes)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no seal started with the buffer past --seal-bytes")
	}
	// More, until the buffers hold two seals' worth (the seal waits).
	for e.bufferBytes() < 2*sealBytes {
		if err := e.Append(context.Background(), request(sealBytes/8)); err != nil {
			t.Fatal(err)
		}
	}
	// Content filters a query builds over the buffer count in its estimate
	// but belong to no project: the project writing alone is held all the
	// same.
	cq, err := text.ParseQuery("refund")
	if err != nil {
		t.Fatal(err)
	}
	searchAll(t, e, "default", &query.Filter{Content: cq}, 10)
	if _, filters := tokenFilters(e); filters == 0 {
		t.Fatal("test premise: the content query built no filter over the buffer")
	}
	held := e.Counters().SealedSpans
	done := make(chan error, 1)
	go func() { done <- e.Append(context.Background(), request(sealBytes/10)) }()
	deadline := time.Now().Add(30 * time.Second)
	for e.Counters().Paced == 0 {
		if time.Now().After(deadline) {
			select {
			case err := <-done:
				t.Fatalf("the third request was not held: it returned %v (buffers %d bytes)", err, e.bufferBytes())
			default:
			}
			t.Fatalf("the third request was not held (buffers %d bytes, %+v)", e.bufferBytes(), e.Counters())
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the held request returned (%v) before any seal ended", err)
	default:
	}
	release() // this seal and any later one go on
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the held request: %v, want it stored", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held request was not let through after the seal")
	}
	c := e.Counters()
	if c.SealedSpans <= held || c.BufferFull != 0 {
		t.Fatalf("sealed spans %d (before %d), buffer-full refusals %d: want a seal and no refusal", c.SealedSpans, held, c.BufferFull)
	}
}

// TestPaceHoldsOnlyTheProjectBehind: while the buffers hold two seals'
// worth, a request of the project holding most of them is held; one of a
// project holding less than an even share, and one the caller marked
// NoHold (its project is refused anyway), are stored at once.
func TestPaceHoldsOnlyTheProjectBehind(t *testing.T) {
	const sealBytes = 1 << 20
	e, g, release := openGated(t, sealBytes)
	request := spanRequests(t, newGen(11))
	as := func(project string, w *store.Write) *store.Write { w.Project = project; return w }
	if err := e.Append(context.Background(), as("big", request(sealBytes/5+sealBytes))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no seal started with the buffer past --seal-bytes")
	}
	if err := e.Append(context.Background(), as("small", request(sealBytes/20))); err != nil {
		t.Fatal(err)
	}
	for e.bufferBytes() < 2*sealBytes {
		if err := e.Append(context.Background(), as("big", request(sealBytes/8))); err != nil {
			t.Fatal(err)
		}
	}
	if c := e.Counters(); c.Paced != 0 {
		t.Fatalf("test premise: %d requests paced before the buffers were two seals deep", c.Paced)
	}
	atOnce := func(what string, w *store.Write) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- e.Append(context.Background(), w) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was held while the seal waits (paced %d)", what, e.Counters().Paced)
		}
	}
	atOnce("the small project's request", as("small", request(sealBytes/20)))
	noHold := as("big", request(sealBytes/20))
	noHold.NoHold = true
	atOnce("the big project's request marked NoHold", noHold)
	if c := e.Counters(); c.Paced != 0 {
		t.Fatalf("%d requests counted as paced; none was held", c.Paced)
	}
	held := make(chan error, 1)
	go func() { held <- e.Append(context.Background(), as("big", request(sealBytes/20))) }()
	deadline := time.Now().Add(30 * time.Second)
	for e.Counters().Paced == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the big project's request was not held (buffers %d bytes)", e.bufferBytes())
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-held; err != nil {
		t.Fatalf("the held request: %v", err)
	}
}
