package bench

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Machine describes where a record was taken.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUModel  string `json:"cpu_model,omitempty"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	Commit    string `json:"commit"`
	Binary    string `json:"binary,omitempty"`
}

// DescribeMachine records the host, the Go version and the commit (from the
// binary's build information, else `git rev-parse` in the working directory).
func DescribeMachine(binary string) Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Binary: binary}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	m.Commit = "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			m.Commit = rev[:min(12, len(rev))]
			if dirty {
				m.Commit += "-dirty"
			}
			return m
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.Commit += "-dirty"
		}
	}
	return m
}

// LoadAvgSummary is the 1-minute load average sampled through a run.
type LoadAvgSummary struct {
	Samples int     `json:"samples"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Mean    float64 `json:"mean"`
}

// ReadLoadAvg returns the 1-minute load average (Linux /proc/loadavg).
func ReadLoadAvg() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// LoadSampler samples the 1-minute load average through a run; see
// StartLoadSampler.
type LoadSampler struct {
	mu   sync.Mutex
	vals []float64
	quit chan struct{}
	done chan struct{}
}

// StartLoadSampler samples the load average every period until Stop.
func StartLoadSampler(period time.Duration) *LoadSampler {
	s := &LoadSampler{quit: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() { // owned by the sampler; ends on stop
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

func (s *LoadSampler) sample() {
	if v, ok := ReadLoadAvg(); ok {
		s.mu.Lock()
		s.vals = append(s.vals, v)
		s.mu.Unlock()
	}
}

// Stop ends the sampling, takes a last sample and summarises them.
func (s *LoadSampler) Stop() LoadAvgSummary {
	close(s.quit)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	var l LoadAvgSummary
	for i, v := range s.vals {
		if i == 0 || v < l.Min {
			l.Min = v
		}
		l.Max = max(l.Max, v)
		l.Mean += v
	}
	l.Samples = len(s.vals)
	if l.Samples > 0 {
		l.Mean /= float64(l.Samples)
	}
	return l
}
