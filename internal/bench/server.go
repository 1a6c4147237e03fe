package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ServerOptions says how to start a `rastro serve` process.
type ServerOptions struct {
	Binary     string // the rastro binary
	DataDir    string
	Durability string   // "wal" or "buffered"; empty leaves the server default
	ExtraArgs  []string // appended to the serve command line
	// StartTimeout bounds the wait for the listening line and /readyz; default 60s.
	StartTimeout time.Duration
}

// Server is a running `rastro serve` child process on loopback ports.
type Server struct {
	HTTPAddr string // 127.0.0.1:PORT
	GRPCAddr string
	opts     ServerOptions
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has been waited for
	waitErr  error
	logMu    sync.Mutex
	logTail  []string // last lines of the server's stderr
	client   *http.Client
}

// StartServer starts the binary with `serve` on free loopback ports and
// returns once it has logged its addresses and answers /readyz with 200.
func StartServer(ctx context.Context, o ServerOptions) (*Server, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	args := []string{"serve", "--data-dir", o.DataDir, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}
	if o.Durability != "" {
		args = append(args, "--durability", o.Durability)
	}
	args = append(args, o.ExtraArgs...)
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout = io.Discard
	bindToParent(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server %s: %w", o.Binary, err)
	}
	s := &Server{
		opts: o, cmd: cmd, exited: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second},
	}
	addrs := make(chan [2]string, 1)
	go func() { // drains stderr until the process closes it; owned by s
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.logMu.Lock()
			s.logTail = append(s.logTail, line)
			if len(s.logTail) > 40 {
				s.logTail = s.logTail[len(s.logTail)-40:]
			}
			s.logMu.Unlock()
			if !sent && strings.Contains(line, "msg=listening") {
				h, g := logField(line, "http"), logField(line, "grpc")
				if h != "" {
					addrs <- [2]string{h, g}
					sent = true
				}
			}
		}
	}()
	go func() { // reaps the process; owned by s
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	deadline := time.NewTimer(o.StartTimeout)
	defer deadline.Stop()
	select {
	case a := <-addrs:
		s.HTTPAddr, s.GRPCAddr = a[0], a[1]
	case <-s.exited:
		return nil, fmt.Errorf("server exited before listening (%v): %s", s.waitErr, s.Logs())
	case <-deadline.C:
		s.Kill()
		return nil, fmt.Errorf("server did not log msg=listening within %s: %s", o.StartTimeout, s.Logs())
	case <-ctx.Done():
		s.Kill()
		return nil, ctx.Err()
	}
	for {
		code, _, err := s.Get(ctx, "/readyz")
		if err == nil && code == http.StatusOK {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("server exited before ready (%v): %s", s.waitErr, s.Logs())
		case <-deadline.C:
			s.Kill()
			return nil, fmt.Errorf("server not ready within %s (last: %d %v): %s", o.StartTimeout, code, err, s.Logs())
		case <-ctx.Done():
			s.Kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logField returns the value of key=value in a log/slog text line.
func logField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// Logs returns the last lines the server wrote to stderr.
func (s *Server) Logs() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return strings.Join(s.logTail, "\n")
}

// HTTPURL is the server's base URL.
func (s *Server) HTTPURL() string { return "http://" + s.HTTPAddr }

// Stop asks the server to shut down (SIGTERM) and waits up to timeout, then
// kills it. It returns an error when the server had to be killed or exited
// with a failure.
func (s *Server) Stop(timeout time.Duration) error {
	s.client.CloseIdleConnections()
	select {
	case <-s.exited:
		return fmt.Errorf("server had already exited: %v", s.waitErr)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal server: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.exited:
		if s.waitErr != nil {
			return fmt.Errorf("server exit after SIGTERM: %v: %s", s.waitErr, s.Logs())
		}
		return nil
	case <-t.C:
		s.Kill()
		return fmt.Errorf("server did not stop within %s of SIGTERM; killed", timeout)
	}
}

// ExitCPU is the CPU time (user + system) the server used over its whole
// life, from the kernel's accounting when it was waited for; it fails while
// the server runs. (Its rusage's peak RSS is not used: the child is forked
// from this process before it execs, and Linux counts this process's peak
// into the child's ru_maxrss.)
func (s *Server) ExitCPU() (time.Duration, error) {
	select {
	case <-s.exited:
	default:
		return 0, fmt.Errorf("the server is still running")
	}
	ps := s.cmd.ProcessState
	if ps == nil {
		return 0, fmt.Errorf("the server's exit status is unknown")
	}
	return ps.UserTime() + ps.SystemTime(), nil
}

// StopWatchingPeak is Stop that also reports the server's peak resident set
// (VmHWM) up to its exit: it reads VmHWM every few milliseconds while the
// server shuts down (a graceful stop seals the write buffer) and keeps the
// last value read. start is the VmHWM read before the stop.
func (s *Server) StopWatchingPeak(timeout time.Duration, start int64) (peak int64, err error) {
	pid := s.cmd.Process.Pid
	peak = start
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if m, err := readProcMemory(pid); err == nil && m.HWM > peak {
				peak = m.HWM
			}
			select {
			case <-done:
				return
			case <-s.exited:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	err = s.Stop(timeout)
	close(done)
	<-watched
	return peak, err
}

// Kill ends the server with SIGKILL (a crash) and waits for it.
func (s *Server) Kill() {
	s.client.CloseIdleConnections()
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Get fetches path from the server and returns status and body.
func (s *Server) Get(ctx context.Context, path string) (int, []byte, error) {
	code, b, _, err := s.GetTimed(ctx, path)
	return code, b, err
}

// PostJSON posts a JSON body to path (accepting JSON or an event stream,
// as an MCP client does) and returns status and body.
func (s *Server) PostJSON(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.HTTPURL()+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// GetTimed is Get that also returns the server's own time for the request
// in milliseconds, from its Server-Timing header (handler;dur=...), or NaN
// when the response has none.
func (s *Server) GetTimed(ctx context.Context, path string) (int, []byte, float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.HTTPURL()+path, nil)
	if err != nil {
		return 0, nil, math.NaN(), err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, math.NaN(), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ms, perr := strconv.ParseFloat(strings.TrimPrefix(resp.Header.Get("Server-Timing"), "handler;dur="), 64)
	if perr != nil {
		ms = math.NaN()
	}
	return resp.StatusCode, b, ms, err
}

// ServerStats is GET /api/v1/stats.
type ServerStats struct {
	Spans       int64 `json:"spans"`
	Traces      int64 `json:"traces"`
	Segments    int64 `json:"segments"`
	DiskBytes   int64 `json:"disk_bytes"`
	BufferSpans int64 `json:"buffer_spans"`
	BufferBytes int64 `json:"buffer_bytes"`
	WALBytes    int64 `json:"wal_bytes"`
	Values      int64 `json:"values"` // distinct values in the value store
	// SealError is the last seal's failure, empty when it succeeded.
	SealError string `json:"seal_error"`
}

// Stats reads /api/v1/stats.
func (s *Server) Stats(ctx context.Context) (ServerStats, error) {
	var st ServerStats
	code, b, err := s.Get(ctx, "/api/v1/stats")
	if err != nil {
		return st, fmt.Errorf("GET /api/v1/stats: %w", err)
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("GET /api/v1/stats: status %d: %s", code, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("GET /api/v1/stats: %w", err)
	}
	return st, nil
}

// Metrics scrapes /metrics.
func (s *Server) Metrics(ctx context.Context) (Metrics, error) {
	code, b, err := s.Get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", code)
	}
	return ParseMetrics(string(b)), nil
}

// storeBytes measures a data directory: every file, its segments and its
// value store (a part that does not exist counts 0).
func storeBytes(dir string) (all, segments, values int64, err error) {
	out := [3]int64{}
	for i, sub := range []string{"", "segments", "values"} {
		n, err := dirBytes(filepath.Join(dir, sub))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, 0, fmt.Errorf("measure %s: %w", filepath.Join(dir, sub), err)
		}
		out[i] = n
	}
	return out[0], out[1], out[2], nil
}

// dirBytes sums the sizes of regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := walkFiles(dir, func(size int64) { n += size })
	return n, err
}

// walkFiles calls f with the size of each regular file under dir. A file or
// directory removed while it walks (a merge's temporary part) is skipped.
func walkFiles(dir string, f func(int64)) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := dir + string(os.PathSeparator) + e.Name()
		if e.IsDir() {
			if err := walkFiles(p, f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f(info.Size())
		}
	}
	return nil
}
