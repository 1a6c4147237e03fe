package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// projectRates limits each project's ingest to a rate of spans per second
// with a burst (a token bucket per project). A request is let in while its
// project's bucket is not empty, before its body is read, and its spans are
// taken from the bucket once decoded, which may leave it in debt: a batch
// larger than what is left is never refused for that alone, and the debt
// delays the project's next requests. Buckets of projects idle long enough
// to be full again are forgotten.
type projectRates struct {
	rate, burst float64 // spans/s and bucket size; rate 0: no limit
	now         func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	sweep   time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newProjectRates(rate, burst float64, now func() time.Time) *projectRates {
	if burst <= 0 {
		burst = rate
	}
	if now == nil {
		now = time.Now
	}
	return &projectRates{rate: rate, burst: burst, now: now, buckets: map[string]*bucket{}}
}

// refill brings b up to t. Callers hold mu.
func (p *projectRates) refill(b *bucket, t time.Time) {
	if dt := t.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = min(p.burst, b.tokens+dt*p.rate)
		b.at = t
	}
}

// get returns project's bucket, created full. Callers hold mu.
func (p *projectRates) get(project string, t time.Time) *bucket {
	b, ok := p.buckets[project]
	if !ok {
		b = &bucket{tokens: p.burst, at: t}
		p.buckets[project] = b
	}
	p.refill(b, t)
	return b
}

// allow reports whether a request of project may be read now; when not,
// wait is how long until its bucket holds a token again.
func (p *projectRates) allow(project string) (ok bool, wait time.Duration) {
	if p == nil || p.rate <= 0 {
		return true, 0
	}
	t := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetIdle(t)
	b := p.get(project, t)
	if b.tokens > 0 {
		return true, 0
	}
	need := (1 - b.tokens) / p.rate
	return false, time.Duration(math.Ceil(need*1000)) * time.Millisecond
}

// take charges project for n spans it stored.
func (p *projectRates) take(project string, n int) {
	if p == nil || p.rate <= 0 || n <= 0 {
		return
	}
	t := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.get(project, t).tokens -= float64(n)
}

// forgetIdle drops, at most once a minute, the buckets that are full again:
// a forgotten project starts full, which is where it would be. Callers
// hold mu.
func (p *projectRates) forgetIdle(t time.Time) {
	if t.Sub(p.sweep) < time.Minute {
		return
	}
	p.sweep = t
	for name, b := range p.buckets {
		p.refill(b, t)
		if b.tokens >= p.burst {
			delete(p.buckets, name)
		}
	}
}

// DefaultProjectBufferShare is the default Options.ProjectBufferShare.
const DefaultProjectBufferShare = 0.5

// DefaultMaxConcurrentIngest is the default Options.MaxConcurrentIngest:
// enough requests at once for the WAL's group commit to batch them on a
// few cores, few enough that an accepted request does not wait long.
const DefaultMaxConcurrentIngest = 32

func (o *Options) validateProjectLimits() error {
	switch {
	case o.ProjectRate < 0 || o.ProjectBurst < 0 || math.IsNaN(o.ProjectRate) || math.IsNaN(o.ProjectBurst):
		return fmt.Errorf("server: project rate %v and burst %v must not be negative", o.ProjectRate, o.ProjectBurst)
	case o.ProjectBurst > 0 && o.ProjectRate == 0:
		return errors.New("server: a project burst (--project-burst) needs a project rate (--project-rate)")
	case o.ProjectBufferShare < 0 || o.ProjectBufferShare > 1 || math.IsNaN(o.ProjectBufferShare):
		return fmt.Errorf("server: project buffer share %v is outside (0, 1]", o.ProjectBufferShare)
	case o.ProjectBufferShare == 0:
		o.ProjectBufferShare = DefaultProjectBufferShare
	}
	if o.MaxConcurrentIngest < 0 {
		return fmt.Errorf("server: ingest cap %d must not be negative", o.MaxConcurrentIngest)
	}
	if o.MaxConcurrentIngest == 0 {
		o.MaxConcurrentIngest = DefaultMaxConcurrentIngest
	}
	return nil
}

// ingestSlots counts the ingest requests being decoded and stored, in all
// and by project: at most max at once, and at most perProject of one
// project, so that a project flooding the server leaves slots for the
// others (max/4 of them, at least one when max is 2 or more) instead of
// getting them all refused at the door.
type ingestSlots struct {
	max, perProject, floodSlots int

	mu    sync.Mutex
	total int
	held  map[string]int
	// floods holds when each project was last refused for want of
	// capacity of its own (its part of the slots, or flooding, below), in
	// unix ns; entries older than floodFor go when more are noted.
	floods   map[string]int64
	floodFor time.Duration // floodMemory; tests lengthen it
}

// floodMemory is how long after a project's last refusal for capacity of
// its own (its part of the slots, or flooding while the buffer is behind)
// it counts as flooding.
const floodMemory = time.Second

func newIngestSlots(n int) *ingestSlots {
	reserve := 0
	if n >= 2 {
		reserve = max(1, n/4)
	}
	return &ingestSlots{max: n, perProject: n - reserve, floodSlots: max(1, n/4), held: map[string]int{},
		floods: map[string]int64{}, floodFor: floodMemory}
}

// noteFlood records that project was refused for capacity of its own now.
// Callers hold mu.
func (sl *ingestSlots) noteFlood(project string) {
	now := time.Now().UnixNano()
	if len(sl.floods) >= 64 {
		for p, t := range sl.floods {
			if now-t >= int64(sl.floodFor) {
				delete(sl.floods, p)
			}
		}
	}
	sl.floods[project] = now
}

// flooding reports whether project was refused for capacity of its own
// within floodFor: it sends more requests at once than the server lets one
// project store, so whatever it sends beyond is refused anyway.
func (sl *ingestSlots) flooding(project string) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.floodingLocked(project)
}

func (sl *ingestSlots) floodingLocked(project string) bool {
	t, ok := sl.floods[project]
	return ok && time.Now().UnixNano()-t < int64(sl.floodFor)
}

// refusal says why project may not take a slot now: "" when it may,
// "server" when every slot is taken, "project" when project holds
// perProject, "flood" when it is flooding and holds floodSlots (a quarter
// of max). Why
// fewer while flooding: the requests a project holds beyond a few add no
// throughput (they queue for the one decoding thread and the WAL's group
// commit) but each adds to every accepted request's wait; measured with
// rastro bench overload, 24 slots against 8 for a flooding project gave
// the same accepted spans/s and a noisy p50 of 51 ms against 15
// (docs/benchmarks/overload.md). Callers hold mu.
func (sl *ingestSlots) refusal(project string) string {
	switch {
	case sl.total >= sl.max:
		return "server"
	case sl.held[project] >= sl.perProject:
		return "project"
	case sl.held[project] >= sl.floodSlots && sl.floodingLocked(project):
		return "flood"
	}
	return ""
}

// ingestSlot takes one of the MaxConcurrentIngest slots for project without
// waiting; it returns the release function, or a 429 when every slot is
// taken or the project holds as many as one project may.
func (s *Server) ingestSlot(project string) (func(), *ingestError) {
	sl := s.ingestSlots
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if why := sl.refusal(project); why != "" {
		if why != "server" {
			sl.noteFlood(project)
		}
		return nil, s.busyError(project, why)
	}
	sl.total++
	sl.held[project]++
	return func() {
		sl.mu.Lock()
		defer sl.mu.Unlock()
		sl.total--
		if sl.held[project]--; sl.held[project] == 0 {
			delete(sl.held, project)
		}
	}, nil
}

// busyError is the answer to an ingest request of project beyond
// MaxConcurrentIngest (why "server") or beyond one project's part of it
// (why "project", or "flood" for a flooding project's quarter).
func (s *Server) busyError(project, why string) *ingestError {
	sl := s.ingestSlots
	switch why {
	case "project":
		s.met.projectLimited.WithLabelValues(s.met.projectLabel(project), "concurrency").Inc()
		return &ingestError{status: http.StatusTooManyRequests, reason: "project_ingest_busy",
			msg: fmt.Sprintf("project %q has %d requests being stored at once, the most one project may have of the server's %d (--max-concurrent-ingest; the rest is kept for other projects); retry after the Retry-After delay",
				project, sl.perProject, sl.max)}
	case "flood":
		s.met.projectLimited.WithLabelValues(s.met.projectLabel(project), "concurrency").Inc()
		return &ingestError{status: http.StatusTooManyRequests, reason: "project_ingest_busy",
			msg: fmt.Sprintf("project %q has %d requests being stored at once, the most a project may have (a quarter of --max-concurrent-ingest %d) for a second after it was refused for sending more than %d at once; retry after the Retry-After delay",
				project, sl.floodSlots, sl.max, sl.perProject)}
	}
	return &ingestError{status: http.StatusTooManyRequests, reason: "ingest_busy",
		msg: fmt.Sprintf("this server is storing %d requests at once (--max-concurrent-ingest) and refuses more rather than make them wait; retry after the Retry-After delay", sl.max)}
}

// ingestBusy is the answer ingestSlot would give project now, without
// taking a slot (for gRPC's tap, before a call's message is received).
func (s *Server) ingestBusy(project string) *ingestError {
	sl := s.ingestSlots
	sl.mu.Lock()
	why := sl.refusal(project)
	if why != "" && why != "server" {
		sl.noteFlood(project)
	}
	sl.mu.Unlock()
	if why == "" {
		return nil
	}
	return s.busyError(project, why)
}

// admitProject refuses a request of project before its body is read when
// the project is over its rate, when the backend's write buffer is full
// (the append would be refused anyway), when the buffer is more than half
// full, other projects hold part of it, and the project holds more than its
// share: a flooding project is held back while the others keep writing (a
// project alone in the buffer is refused only when it is full); and when
// the project is flooding (ingestSlots.flooding) while the buffer is deep
// enough that the backend would hold the request back (PaceBytes): the
// sender has been refused already and will retry, and a refusal now costs
// it less than a hold of up to a second (docs/operations.md, "A flood is
// refused, not held").
func (s *Server) admitProject(b store.Backend, project string) *ingestError {
	if ok, wait := s.rates.allow(project); !ok {
		s.met.projectLimited.WithLabelValues(s.met.projectLabel(project), "rate").Inc()
		return &ingestError{status: http.StatusTooManyRequests, reason: "project_rate", retryAfter: int(math.Ceil(wait.Seconds())),
			msg: fmt.Sprintf("project %q is over its ingest rate of %g spans/s (--project-rate); retry after the Retry-After delay", project, s.rates.rate)}
	}
	br, ok := b.(store.BufferReporter)
	if !ok {
		return nil
	}
	mine, total, limit := br.BufferUsage(project)
	switch {
	case limit <= 0:
	case total >= limit:
		return &ingestError{status: http.StatusTooManyRequests, reason: "buffer_full",
			msg: "the write buffer is full while sealing catches up; retry after the Retry-After delay"}
	case s.opts.ProjectBufferShare < 1 && total >= limit/2 && total > mine && float64(mine) > s.opts.ProjectBufferShare*float64(limit):
		s.met.projectLimited.WithLabelValues(s.met.projectLabel(project), "buffer_share").Inc()
		return &ingestError{status: http.StatusTooManyRequests, reason: "project_buffer_share",
			msg: fmt.Sprintf("project %q holds %d%% of the write buffer, more than its share of %g%% (--project-buffer-share), while sealing catches up; retry after the Retry-After delay",
				project, mine*100/limit, s.opts.ProjectBufferShare*100)}
	}
	if pace := br.PaceBytes(); pace > 0 && total >= pace && s.ingestSlots.flooding(project) {
		sl := s.ingestSlots
		sl.mu.Lock()
		sl.noteFlood(project)
		sl.mu.Unlock()
		s.met.projectLimited.WithLabelValues(s.met.projectLabel(project), "flood").Inc()
		return &ingestError{status: http.StatusTooManyRequests, reason: "project_flood",
			msg: fmt.Sprintf("project %q sends more requests at once than one project may have stored (%d of --max-concurrent-ingest %d) while the write buffer waits for sealing; retry after the Retry-After delay",
				project, sl.perProject, sl.max)}
	}
	return nil
}
