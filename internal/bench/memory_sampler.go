package bench

import (
	"slices"
	"sync"
	"time"
)

// rssSampler reads a process's resident set every period, from start until
// stop, on one goroutine it owns.
type rssSampler struct {
	read   func() (int64, error)
	period time.Duration
	quit   chan struct{}
	done   chan struct{}

	mu       sync.Mutex // guards the fields below
	vals     []int64
	times    []time.Time
	errs     int
	firstErr error
}

// rssSeries summarises the samples of one sampling window, in bytes.
type rssSeries struct {
	Samples  int
	Errors   int   // reads that failed (the process had exited, for example)
	FirstErr error // the first of them
	Peak     int64
	Min      int64
	Mean     float64
	P50      int64
	P95      int64
	// MaxGap is the longest time between two successful samples: the
	// resolution actually achieved on a busy machine.
	MaxGap   time.Duration
	Duration time.Duration // first to last successful sample
}

// startRSSSampler takes one sample at once, then one every period until
// stop, which takes a last one: a window shorter than period still has two.
func startRSSSampler(read func() (int64, error), period time.Duration) *rssSampler {
	s := &rssSampler{read: read, period: period, quit: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() { // owned by s; ends when stop closes quit
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

// startProcessSampler samples VmRSS of process pid.
func startProcessSampler(pid int, period time.Duration) *rssSampler {
	return startRSSSampler(func() (int64, error) {
		m, err := readProcMemory(pid)
		return m.RSS, err
	}, period)
}

func (s *rssSampler) sample() {
	v, err := s.read()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.vals = append(s.vals, v)
	s.times = append(s.times, now)
}

// stop ends sampling, takes a last sample and summarises the window. It
// must be called exactly once.
func (s *rssSampler) stop() rssSeries {
	close(s.quit)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := rssSeries{Samples: len(s.vals), Errors: s.errs, FirstErr: s.firstErr}
	if len(s.vals) == 0 {
		return r
	}
	sorted := slices.Clone(s.vals)
	slices.Sort(sorted)
	r.Min, r.Peak = sorted[0], sorted[len(sorted)-1]
	fl := make([]float64, len(sorted))
	for i, v := range sorted {
		fl[i] = float64(v)
		r.Mean += float64(v)
	}
	r.Mean /= float64(len(sorted))
	r.P50, r.P95 = int64(percentileSorted(fl, 50)), int64(percentileSorted(fl, 95))
	for i := 1; i < len(s.times); i++ {
		r.MaxGap = max(r.MaxGap, s.times[i].Sub(s.times[i-1]))
	}
	r.Duration = s.times[len(s.times)-1].Sub(s.times[0])
	return r
}
