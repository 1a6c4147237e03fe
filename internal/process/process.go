// Package process holds Rastro's process-wide runtime policy: the settings of
// the Go runtime and the operating system that belong to the whole process,
// not to one store. cli/serve drives it; libraries such as the engine never
// change process-wide settings themselves, so that several stores can live in
// one process (a traces engine and, later, a logs engine) without undoing
// each other's settings.
//
//   - Background runs ingest's CPU work and heavy background work at a
//     lower scheduling priority, each on OS threads of its own: seals and
//     merges on a thread per call, request decoding and each WAL's commits
//     on lanes (an idle and a normal thread, picked per job); in SCHED_IDLE
//     too unless ingest has just refused a request for want of capacity
//     (IngestRefused). Merges run under the memory guard, which holds the
//     Go soft memory limit near the live heap while they run. Leases on the
//     guard compose: concurrent merges never leave a stale limit behind
//     (memguard.go).
//   - StartGCFloor keeps the collector from running too often while the live
//     heap is small (gcfloor.go).
package process

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMergeNice is the default of Background.MergeNice: under full ingest
// load a merge yields the CPU (CFS weight 110 against 1024 for ingest's
// threads), and uses it all when the machine is otherwise idle.
const DefaultMergeNice = 10

// DefaultIngestNice is the default of Background.IngestNice.
const DefaultIngestNice = 10

// Background is the process's policy for heavy background work. The zero
// value runs merges as they come, with neither memory guard nor lowered
// priority (MergesDone still returns freed memory to the operating system).
// Its methods are safe for concurrent use; several stores may share one
// Background.
type Background struct {
	// MergeHeadroom: while a merge runs and its store's ingest is idle, the
	// collector runs once garbage reaches this much above the live heap (a
	// soft memory limit, never above GOMEMLIMIT). Not positive: off.
	MergeHeadroom int64
	// MergeNice is the nice value of the OS thread a merge runs on (Linux;
	// 0 leaves the priority alone).
	MergeNice int
	// IngestNice is the nice value of the OS threads that seal write
	// buffers, decode ingest requests and commit the WAL (RunSeal,
	// RunIngest, RunCommit; Linux; 0 leaves the priority alone): queries,
	// at normal priority, keep their latency while spans arrive, and ingest
	// still has every CPU cycle the queries leave.
	IngestNice int
	// IdleBackground puts seals and merges, and IdleIngest the decoding of
	// requests and the WAL commit loop, in Linux's SCHED_IDLE policy on top
	// of their nice value: they run only on CPU time no normal-priority
	// thread wants, and a thread that wakes (a query's) takes a CPU from
	// them at once (the kernel places it on a CPU that runs only SCHED_IDLE
	// threads as on an idle one, and preempts them), where a nice value
	// alone leaves them a share (CFS weight 110 against 1024 at nice 10)
	// and may let them run out their time slice first. The price would be
	// ingest's share when other normal-priority work keeps the CPUs busy
	// (under a flood, the transport's own goroutines read requests that
	// admission then refuses, and idle seals and commits starve), so while
	// ingest refuses requests (IngestRefused) new work runs at its nice
	// value only. Measured with rastro bench search-live and overload
	// (docs/operations.md, "Queries first"). Where the kernel refuses the
	// policy (see IdleAvailable) the threads keep their nice value.
	IdleBackground, IdleIngest bool

	// PressureHold is how long after a refusal (IngestRefused) work runs
	// at its nice value only, out of SCHED_IDLE; 0: DefaultPressureHold.
	PressureHold time.Duration

	refused  atomic.Int64 // time of the last IngestRefused, Unix ns; 0: never
	decodeMu sync.Mutex
	decode   *lane // the ingest lane; nil until the first RunIngest
}

// LoweredLanes is how many of the threads Background lowers in priority
// may run at once: the ingest lane, a seal and a WAL's commit lane
// (IngestNice), a merge (MergeNice). Each holds a Go P while it waits for a
// CPU behind normal-priority work, so a process that gives them a P each on
// top of its CPUs keeps a P per CPU for queries whatever they do (cli/serve
// does).
func (b *Background) LoweredLanes() int {
	n := 0
	if b.IngestNice != 0 {
		n += 3
	}
	if b.MergeNice != 0 {
		n++
	}
	return n
}

// RunMerge runs merge under the policy and returns when it has returned. busy
// reports whether the merging store's ingest is active (the memory guard
// stands aside then); nil means never.
func (b *Background) RunMerge(busy func() bool, merge func()) {
	release := holdMemory(b.MergeHeadroom, busy)
	defer release()
	if b.MergeNice == 0 {
		merge()
		return
	}
	onLoweredThread(b.MergeNice, b.idleNow(b.IdleBackground), merge)
}

// RunSeal runs seal (one seal of a write buffer) under the policy: on an OS
// thread of its own at IngestNice.
func (b *Background) RunSeal(seal func()) {
	if b.IngestNice == 0 {
		seal()
		return
	}
	onLoweredThread(b.IngestNice, b.idleNow(b.IdleBackground), seal)
}

// CommitLane gives a store's WAL its commit lane: run runs one step of the
// commit loop (a group commit: write, fsync, and putting its spans in the
// write buffer; or a timed fsync) under the policy, on an OS thread of the
// lane's own at IngestNice, and returns when the step has; stop ends the
// lane's threads once the WAL is closed. Each WAL has its own lane, so that
// the commits of two stores never wait for each other. The commits are
// about a tenth of the server's CPU during ingest, at normal priority
// before (docs/benchmarks/search-live.md); an appender waits for them, so a
// slower commit gathers larger groups rather than more memory.
func (b *Background) CommitLane() (run func(step func()), stop func()) {
	if b.IngestNice == 0 {
		return func(step func()) { step() }, func() {}
	}
	l := &lane{nice: b.IngestNice}
	return func(step func()) { l.run(b.idleNow(b.IdleIngest), step) }, l.close
}

// RunIngest runs the CPU-bound part of storing a request (decoding it) under
// the policy: on the ingest lane's thread at IngestNice, shared by every
// request, so that ingest holds at most one P while that thread waits for a
// CPU (serve gives each lowered thread a P on top of its CPUs: a query
// finds one free).
// A caller that arrives while the lane is busy waits its turn. A panic in
// work is raised again in the caller's goroutine.
func (b *Background) RunIngest(work func()) {
	if b.IngestNice == 0 {
		work()
		return
	}
	b.decodeMu.Lock()
	if b.decode == nil {
		b.decode = &lane{nice: b.IngestNice}
	}
	l := b.decode
	b.decodeMu.Unlock()
	l.run(b.idleNow(b.IdleIngest), work)
}

// Close ends the ingest lane's threads once the work given to them has run;
// no RunIngest may be under way or follow (a later one starts a new lane).
func (b *Background) Close() {
	b.decodeMu.Lock()
	l := b.decode
	b.decode = nil
	b.decodeMu.Unlock()
	if l != nil {
		l.close()
	}
}

// DefaultPressureHold is the default of Background.PressureHold.
const DefaultPressureHold = 5 * time.Second

// IngestRefused tells the policy that ingest refused a request for want of
// capacity (a full write buffer, the bytes in flight or the concurrent
// requests at their limit): for PressureHold from now, new work runs at its
// nice value only, never in SCHED_IDLE, so that ingest keeps its share of
// the CPU against normal-priority work (a flood's own transport goroutines
// among it) and the seals and commits that free the buffer are not starved.
// A project over its own rate is no such refusal.
func (b *Background) IngestRefused() { b.refused.Store(time.Now().UnixNano()) }

// Pressed reports whether ingest refused a request for want of capacity
// within PressureHold (IngestRefused).
func (b *Background) Pressed() bool { return !b.idleNow(true) }

// idleNow is whether work whose policy says idle goes to SCHED_IDLE now:
// not while ingest is refusing requests (IngestRefused).
func (b *Background) idleNow(idle bool) bool {
	if !idle {
		return false
	}
	last := b.refused.Load()
	if last == 0 {
		return true
	}
	hold := b.PressureHold
	if hold <= 0 {
		hold = DefaultPressureHold
	}
	return time.Since(time.Unix(0, last)) >= hold
}

// lane runs jobs one at a time on OS threads of its own at a nice value:
// one in the normal policy and, once a job asks for it, one in SCHED_IDLE
// as well, each started at its first job and locked to its goroutine until
// close (an unprivileged thread cannot leave SCHED_IDLE, so a job that must
// not run idle needs a thread that never was). One job at a time: the lane
// holds at most one Go P while it waits for a CPU.
type lane struct {
	nice int

	mu      sync.Mutex     // held while a job runs
	threads [2]chan func() // 0: normal policy, 1: SCHED_IDLE; nil until the first job
	exited  [2]chan struct{}
}

// run runs work on the lane's idle thread (idle) or its normal one, after
// the job before it, and returns when it has returned; a panic in work is
// raised again in the caller's goroutine, and the thread lives on.
func (l *lane) run(idle bool, work func()) {
	i := 0
	if idle {
		i = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.threads[i] == nil {
		jobs, exited := make(chan func()), make(chan struct{})
		l.threads[i], l.exited[i] = jobs, exited
		go func() { // until close
			defer close(exited)
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			_ = lowerThreadPriority(l.nice, idle)
			for job := range jobs {
				job()
			}
		}()
	}
	done := make(chan struct{})
	var failure any
	l.threads[i] <- func() {
		defer close(done)
		// A panic goes back to the caller's goroutine, where it would have
		// happened without the lane (net/http recovers a handler's).
		defer func() { failure = recover() }()
		work()
	}
	<-done
	if failure != nil {
		panic(failure)
	}
}

// close ends the lane's threads once their jobs have run; no run may be
// under way or follow.
func (l *lane) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, jobs := range l.threads {
		if jobs != nil {
			close(jobs)
			<-l.exited[i]
			l.threads[i] = nil
		}
	}
}

// IdleAvailable reports why threads cannot be moved to SCHED_IDLE here (a
// kernel or a seccomp profile that refuses sched_setattr; not Linux), or
// nil. It tries on a thread of its own, which ends with the call.
func IdleAvailable() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- lowerThreadPriority(0, true)
	}()
	return <-errc
}

// onLoweredThread runs fn on a new OS thread at nice (and in SCHED_IDLE
// with idle) and returns when fn has returned. The thread is not unlocked:
// it ends with its goroutine, never handed back to the scheduler with its
// priority lowered (an unprivileged process cannot raise it again). Threads
// Go starts while fn runs do not inherit the priority: the runtime starts
// them from a thread of its own when the current one is locked.
func onLoweredThread(nice int, idle bool, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		_ = lowerThreadPriority(nice, idle)
		fn()
	}()
	<-done
}

// MergesDone is called after a run of merges: the memory they used goes back
// to the operating system at once, not left to the background scavenger.
func (b *Background) MergesDone() { debug.FreeOSMemory() }
