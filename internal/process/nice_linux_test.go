package process

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// threadNice reads the calling thread's nice value from /proc (field 19
// of its stat line).
func threadNice(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackgroundWorkRunsLowered: seals, ingest work and merges run on
// threads at their nice values, and the caller's thread keeps its own; the
// zero policy leaves priorities alone.
func TestBackgroundWorkRunsLowered(t *testing.T) {
	bg := &Background{MergeNice: 7, IngestNice: 12}
	defer bg.Close()
	var merge, seal, ingest, commit int
	bg.RunMerge(nil, func() { merge = threadNice(t) })
	bg.RunSeal(func() { seal = threadNice(t) })
	bg.RunIngest(func() { ingest = threadNice(t) })
	bg.RunCommit(func() { commit = threadNice(t) })
	if merge != 7 || seal != 12 || ingest != 12 || commit != 12 {
		t.Errorf("nice of merge %d, seal %d, ingest %d, commit %d; want 7, 12, 12, 12", merge, seal, ingest, commit)
	}
	var zero Background
	zero.RunSeal(func() { seal = threadNice(t) })
	zero.RunIngest(func() { ingest = threadNice(t) })
	zero.RunCommit(func() { commit = threadNice(t) })
	if seal != 0 || ingest != 0 || commit != 0 {
		t.Errorf("zero policy: nice of seal %d, ingest %d, commit %d; want 0", seal, ingest, commit)
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
