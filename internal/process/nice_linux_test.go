package process

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// threadStat reads field n (1-based, as in proc(5)) of the calling
// thread's stat line.
func threadStat(t *testing.T, n int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	v, err := strconv.Atoi(f[n-3])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// threadNice is the calling thread's nice value (field 19).
func threadNice(t *testing.T) int { return threadStat(t, 19) }

// threadPolicy is the calling thread's scheduling policy (field 41): 0
// SCHED_OTHER, 5 SCHED_IDLE.
func threadPolicy(t *testing.T) int { return threadStat(t, 41) }

// TestBackgroundWorkRunsLowered: seals, ingest work, WAL commits and merges
// run on threads at their nice values, seals and merges in SCHED_IDLE when
// the policy says IdleBackground, decoding and commits when it says
// IdleIngest, each in the normal policy otherwise, and the caller's thread
// keeps its own; the zero policy leaves priorities alone.
func TestBackgroundWorkRunsLowered(t *testing.T) {
	for _, c := range []struct{ background, ingest bool }{{false, false}, {true, false}, {true, true}, {false, true}} {
		bg := &Background{MergeNice: 7, IngestNice: 12, IdleBackground: c.background, IdleIngest: c.ingest}
		type prio struct{ nice, policy int }
		read := func(p *prio) func() {
			return func() { *p = prio{threadNice(t), threadPolicy(t)} }
		}
		var merge, seal, ingest, commit prio
		bg.RunMerge(nil, read(&merge))
		bg.RunSeal(read(&seal))
		bg.RunIngest(read(&ingest))
		run, stop := bg.CommitLane()
		run(read(&commit))
		stop()
		bg.Close()
		policy := func(idle bool) int {
			if idle {
				return schedIdle
			}
			return 0
		}
		pb, pi := policy(c.background), policy(c.ingest)
		if merge != (prio{7, pb}) || seal != (prio{12, pb}) || ingest != (prio{12, pi}) || commit != (prio{12, pi}) {
			t.Errorf("%+v: nice and policy of merge %v, seal %v, ingest %v, commit %v; want nice 7, 12, 12, 12 and policies %d, %d, %d, %d",
				c, merge, seal, ingest, commit, pb, pb, pi, pi)
		}
		if n, p := threadNice(t), threadPolicy(t); n != 0 || p != 0 {
			t.Errorf("%+v: the caller's thread at nice %d, policy %d afterwards; want 0, 0", c, n, p)
		}
	}
	var zero Background
	var seal, ingest, commit, policy int
	zero.RunSeal(func() { seal, policy = threadNice(t), threadPolicy(t) })
	zero.RunIngest(func() { ingest = threadNice(t) })
	run, _ := zero.CommitLane()
	run(func() { commit = threadNice(t) })
	if seal != 0 || ingest != 0 || commit != 0 || policy != 0 {
		t.Errorf("zero policy: nice of seal %d, ingest %d, commit %d, seal's policy %d; want 0", seal, ingest, commit, policy)
	}
}

// TestRefusalsKeepWorkOutOfIdle: while ingest refuses requests
// (IngestRefused, for PressureHold) work the policy would put in SCHED_IDLE
// runs at its nice value in the normal policy, on a lane thread that never
// was idle (an unprivileged thread cannot leave SCHED_IDLE); once the hold
// has passed it runs idle again.
func TestRefusalsKeepWorkOutOfIdle(t *testing.T) {
	bg := &Background{MergeNice: 7, IngestNice: 12, IdleBackground: true, IdleIngest: true, PressureHold: time.Hour}
	defer bg.Close()
	run, stop := bg.CommitLane()
	defer stop()
	type prio struct{ nice, policy int }
	each := func() (merge, seal, ingest, commit prio) {
		read := func(p *prio) func() {
			return func() { *p = prio{threadNice(t), threadPolicy(t)} }
		}
		bg.RunMerge(nil, read(&merge))
		bg.RunSeal(read(&seal))
		bg.RunIngest(read(&ingest))
		run(read(&commit))
		return
	}
	check := func(when string, policy int) {
		t.Helper()
		m, s, i, c := each()
		if m != (prio{7, policy}) || s != (prio{12, policy}) || i != (prio{12, policy}) || c != (prio{12, policy}) {
			t.Errorf("%s: nice and policy of merge %v, seal %v, ingest %v, commit %v; want nice 7, 12, 12, 12, policy %d", when, m, s, i, c, policy)
		}
	}
	check("before any refusal", schedIdle)
	if bg.Pressed() {
		t.Error("pressed before any refusal")
	}
	bg.IngestRefused()
	check("after a refusal, within the hold", 0)
	if !bg.Pressed() {
		t.Error("not pressed within the hold after a refusal (merges would not wait)")
	}
	bg.refused.Store(time.Now().Add(-time.Hour - time.Second).UnixNano()) // the hold has passed
	check("after the hold", schedIdle)
	if bg.Pressed() {
		t.Error("still pressed after the hold")
	}
}

// TestRunIngestOneAtATime: ingest work from many goroutines runs on the one
// lowered worker, one job at a time, and each caller returns after its own
// job has run.
func TestRunIngestOneAtATime(t *testing.T) {
	bg := &Background{IngestNice: 5}
	defer bg.Close()
	var mu sync.Mutex
	running, most, ran := 0, 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			done := false
			bg.RunIngest(func() {
				mu.Lock()
				running++
				most = max(most, running)
				mu.Unlock()
				for range 1000 { // some work while others wait
					_ = strconv.Itoa(ran)
				}
				mu.Lock()
				running--
				ran++
				mu.Unlock()
				done = true
			})
			if !done {
				t.Error("RunIngest returned before its job ran")
			}
		})
	}
	wg.Wait()
	if ran != 16 || most != 1 {
		t.Errorf("%d jobs ran, at most %d at once; want 16, 1", ran, most)
	}
}

// TestRunIngestPanicReachesTheCaller: a panic in ingest work is the caller's
// (as without the worker: net/http recovers a handler's panic), and the
// worker goes on serving the next caller.
func TestRunIngestPanicReachesTheCaller(t *testing.T) {
	bg := &Background{IngestNice: 5}
	defer bg.Close()
	got := func() (v any) {
		defer func() { v = recover() }()
		bg.RunIngest(func() { panic("bad request body") })
		return nil
	}()
	if got != "bad request body" {
		t.Fatalf("the caller recovered %v, want the work's panic", got)
	}
	ran := false
	bg.RunIngest(func() { ran = true })
	if !ran {
		t.Error("the worker did not run the next job after a panic")
	}
}

// TestLowerPriority lowers every thread of a child process: it runs in a
// re-executed test binary, since a process cannot raise its priority again.
func TestLowerPriority(t *testing.T) {
	if os.Getenv("RASTRO_TEST_LOWER_PRIORITY") == "1" {
		if err := LowerPriority(9); err != nil {
			t.Fatal(err)
		}
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); f[19-3] != "9" {
				t.Errorf("thread %s at nice %s after LowerPriority(9)", task.Name(), f[19-3])
			}
		}
		var wg sync.WaitGroup // threads started afterwards inherit it
		wg.Go(func() {
			if n := threadNice(t); n != 9 {
				t.Errorf("a goroutine's thread at nice %d after LowerPriority(9)", n)
			}
		})
		wg.Wait()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLowerPriority$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "RASTRO_TEST_LOWER_PRIORITY=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestIdleAvailable: on Linux a thread may move itself to SCHED_IDLE, and
// the probe leaves the caller's thread as it was.
func TestIdleAvailable(t *testing.T) {
	if err := IdleAvailable(); err != nil {
		t.Fatalf("IdleAvailable: %v", err)
	}
	if n, p := threadNice(t), threadPolicy(t); n != 0 || p != 0 {
		t.Errorf("the caller's thread at nice %d, policy %d after the probe; want 0, 0", n, p)
	}
}
