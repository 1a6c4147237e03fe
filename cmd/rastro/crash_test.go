package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rastro-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "rastro")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rastro: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// child is a `rastro serve` process.
type child struct {
	cmd  *exec.Cmd
	base string // http://HOST:PORT
	grpc string // HOST:PORT of the gRPC listener
	logs *bytes.Buffer
}

var listenRE = regexp.MustCompile(`msg=listening http=(\S+) grpc=(\S+)`)

func startChild(t *testing.T, dir string, extra ...string) *child {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: &bytes.Buffer{}}
	addr := make(chan []string, 1)
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			c.logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1:]
			}
		}
	}()
	select {
	case a := <-addr:
		c.base, c.grpc = "http://"+a[0], a[1]
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("server did not report its address; logs:\n%s", c.logs)
	}
	defer func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("server logs:\n%s", c.logs)
			mu.Unlock()
		}
	}()
	waitFor(t, 60*time.Second, "server ready", func() bool {
		resp, err := http.Get(c.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return c
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval of a condition, not a guess at timing
	}
}

// post sends spans over OTLP/HTTP to a project ("" = default): ok when
// acknowledged; err when the request failed (the server died).
func post(ctx context.Context, client *http.Client, c *child, project string, spans []model.Span) (ok bool, err error) {
	return postOTLP(ctx, client, c, "/v1/traces", project, otlp.EncodeProto(spans))
}

// postOTLP sends an OTLP/HTTP protobuf body to path (/v1/traces, /v1/logs,
// /v1/metrics) for a project ("" = default): ok when the server answers
// 200; err when the request failed (the server died).
func postOTLP(ctx context.Context, client *http.Client, c *child, path, project string, body []byte) (ok bool, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	if project != "" {
		req.Header.Set("X-Scope-OrgID", project)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// kill SIGKILLs the server, then stops its clients.
func (c *child) kill(cancel context.CancelFunc, wg *sync.WaitGroup) {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
	cancel()
	wg.Wait()
}

// checkTrace asserts that the server returns exactly want spans of the
// trace (0: the trace is absent), none twice.
func checkTrace(t *testing.T, c *child, id model.TraceID, want int) {
	t.Helper()
	checkTraceIn(t, c, "", id, want)
}

// checkTraceIn is checkTrace in a project ("" = the default project).
func checkTraceIn(t *testing.T, c *child, project string, id model.TraceID, want int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+"/api/v1/traces/"+id.String(), nil)
	if project != "" {
		req.Header.Set("X-Scope-OrgID", project)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Spans []struct {
			SpanID string `json:"span_id"`
		} `json:"spans"`
	}
	json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	seen := map[string]bool{}
	for _, s := range tr.Spans {
		if seen[s.SpanID] {
			t.Fatalf("trace %s: span %s returned twice", id, s.SpanID)
		}
		seen[s.SpanID] = true
	}
	if len(tr.Spans) != want {
		t.Fatalf("trace %s: %d spans after restart, want %d (0 = erased or expired); logs:\n%s", id, len(tr.Spans), want, c.logs)
	}
}

// crashRounds runs iterations rounds of: start the server on dir with args,
// verify what was acknowledged so far, let four writers send batches until
// a random number of them (3-42) is acknowledged, and SIGKILL the server.
// send sends writer w's n-th batch of round it and records it when the
// server acknowledges it; it reports false for a refusal and an error once
// the server is gone. The random kill points may all come before a seal,
// so the last round also goes on until sealed reports true: a crash with
// sealed data and a WAL beside it is always among them.
func crashRounds(t *testing.T, dir string, iterations int, seed uint64, args []string, verify func(*child),
	send func(ctx context.Context, client *http.Client, c *child, it, w, n int) (bool, error), sealedWhat string, sealed func(*child) bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), seed))
	for it := range iterations {
		c := startChild(t, dir, args...)
		verify(c)
		killAfter := int64(3 + r.IntN(40))
		var acks atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 10 * time.Second}
				for n := 0; ctx.Err() == nil && n < 5000; n++ {
					ok, err := send(ctx, client, c, it, w, n)
					if err != nil {
						return // the server died
					}
					if ok {
						acks.Add(1)
					}
				}
			}()
		}
		waitFor(t, 60*time.Second, "acknowledged batches", func() bool { return acks.Load() >= killAfter })
		if it == iterations-1 {
			waitFor(t, 60*time.Second, sealedWhat, func() bool { return sealed(c) })
		}
		c.kill(cancel, &wg)
	}
}

// crashIterations is the number of crash rounds: def, or
// RASTRO_CRASH_ITERATIONS.
func crashIterations(def int) int {
	if v, err := strconv.Atoi(os.Getenv("RASTRO_CRASH_ITERATIONS")); err == nil {
		return v
	}
	return def
}

// batch builds traces of 5 spans with ids unique to (iteration, worker, n).
func batch(it, worker, n int) []model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("crash")}}}
	var out []model.Span
	for tr := range 20 {
		id := model.TraceID{1, byte(it), byte(worker), byte(n >> 8), byte(n), byte(tr), 9}
		for s := range 5 {
			out = append(out, model.Span{TraceID: id, SpanID: model.SpanID{byte(s + 1), byte(tr), byte(n), 3},
				Name: "op", Resource: res, Service: "crash", StartTimeUnixNano: uint64(time.Now().UnixNano()),
				EndTimeUnixNano: uint64(time.Now().UnixNano()) + 1000,
				Attributes:      []model.KeyValue{{Key: "pad", Value: model.StringValue(string(bytes.Repeat([]byte{'x'}, 200)))}}})
		}
	}
	return out
}

// TestCrashKeepsEveryAcknowledgedSpan kills `rastro serve` with SIGKILL at
// random moments during concurrent ingest, restarts it on the same data
// directory, and checks that every acknowledged span is there exactly once.
// Small seal thresholds make seals and WAL reclamation happen during the run.
func TestCrashKeepsEveryAcknowledgedSpan(t *testing.T) {
	iterations := crashIterations(6)
	dir := t.TempDir()
	var ackedMu sync.Mutex
	acked := map[model.TraceID]int{}
	verify := func(c *child) {
		t.Helper()
		ackedMu.Lock()
		defer ackedMu.Unlock()
		for id, want := range acked {
			checkTrace(t, c, id, want)
		}
	}
	crashRounds(t, dir, iterations, 1, []string{"--seal-bytes", "256KiB"}, verify,
		func(ctx context.Context, client *http.Client, c *child, it, w, n int) (bool, error) {
			spans := batch(it, w, n)
			ok, err := post(ctx, client, c, "", spans)
			if ok {
				ackedMu.Lock()
				for i := range spans {
					acked[spans[i].TraceID]++
				}
				ackedMu.Unlock()
			}
			return ok, err
		}, "a sealed segment", func(c *child) bool { return servedSegments(c) > 0 })
	c := startChild(t, dir)
	verify(c)
	ackedMu.Lock()
	n := len(acked)
	ackedMu.Unlock()
	if n == 0 {
		t.Fatal("no batch was ever acknowledged")
	}
	// The run must have crossed seals, so crashes hit WAL reclamation too.
	if segments := servedSegments(c); segments <= 0 {
		t.Fatalf("no segment was sealed during the crash runs (segments served: %d)", segments)
	}
	// Graceful stop: SIGTERM finishes and exits 0.
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("graceful shutdown: %v; logs:\n%s", err, c.logs)
	}
	t.Logf("%d iterations, %d acknowledged traces verified", iterations, n)
}

// TestCrashDuringMergesAndErasures kills the server at random moments while
// background compaction merges continuously (fan-out 2, small seals) and
// erasures are requested and carried out. After each restart every
// acknowledged span of a trace not erased is there exactly once, and no span
// of an acknowledged erasure comes back.
func TestCrashDuringMergesAndErasures(t *testing.T) {
	iterations := crashIterations(4)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var mu sync.Mutex
	acked := map[model.TraceID]int{}   // trace -> spans; 0 once its erasure was acknowledged
	unsure := map[model.TraceID]bool{} // erasure sent, answer lost in the crash: either outcome is right
	verify := func(c *child) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for id, want := range acked {
			if unsure[id] {
				continue
			}
			checkTrace(t, c, id, want)
		}
	}
	merged, passes := false, false
	args := []string{"--seal-bytes", "128KiB", "--compaction-fanout", "2", "--lifecycle-interval", "20ms", "--erase-delay", "50ms"}
	for it := range iterations {
		c := startChild(t, dir, args...)
		verify(c)
		killAfter := int64(20 + r.IntN(60))
		var acks atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 10 * time.Second}
				for n := 0; ctx.Err() == nil && n < 5000; n++ {
					spans := batch(100+it, w, n)
					ok, err := post(ctx, client, c, "", spans)
					if err != nil {
						return
					}
					if !ok {
						continue
					}
					mu.Lock()
					for i := range spans {
						acked[spans[i].TraceID]++
					}
					mu.Unlock()
					acks.Add(1)
				}
			}()
		}
		wg.Add(1)
		go func() { // erase acknowledged traces now and then
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			er := rand.New(rand.NewPCG(uint64(it), 3))
			for ctx.Err() == nil {
				mu.Lock()
				var id model.TraceID
				found := false
				for k, v := range acked {
					if v > 0 && !unsure[k] && er.IntN(4) == 0 {
						id, found = k, true
						break
					}
				}
				if found {
					unsure[id] = true
				}
				mu.Unlock()
				if !found {
					continue
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, c.base+"/api/v1/traces/"+id.String(), nil)
				resp, err := client.Do(req)
				if err != nil {
					return // the answer is lost: the trace stays unsure
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					acked[id], unsure[id] = 0, false
					mu.Unlock()
				}
			}
		}()
		waitFor(t, 60*time.Second, "acknowledged batches", func() bool { return acks.Load() >= killAfter })
		c.kill(cancel, &wg)
		logs := c.logs.String()
		merged = merged || strings.Contains(logs, "segments rewritten")
		passes = passes || strings.Contains(logs, "erasure pass done")
	}
	c := startChild(t, dir, args...)
	verify(c)
	// The runs must have merged and erased, so the kills hit those too.
	if !merged || !passes {
		t.Fatalf("merges seen: %t, erasure passes seen: %t; want both during the crash runs", merged, passes)
	}
	mu.Lock()
	erased := 0
	for _, v := range acked {
		if v == 0 {
			erased++
		}
	}
	mu.Unlock()
	if erased == 0 {
		t.Fatal("no erasure was acknowledged during the crash runs")
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("graceful shutdown: %v; logs:\n%s", err, c.logs)
	}
	t.Logf("%d iterations, %d traces acknowledged, %d erased", iterations, len(acked), erased)
}

// oldBatch builds 20 traces of 5 spans, ids unique to (iteration, n),
// starting within half a minute of each other, 7n mod 60 minutes before
// now: a small segment may expire whole, merged ones straddle a cutoff, and
// the first batches already spread over the hour. Batch 0 (the first a
// worker posts) is under a minute old, so every cutoff has acknowledged
// traces on both sides. (Uniformly random bands left none newer than the
// 5-minute cutoff about once in 150 runs.)
func oldBatch(it, n int, r *rand.Rand, now time.Time) ([]model.Span, map[model.TraceID]time.Time) {
	band := now.Add(-time.Duration(7*n%60)*time.Minute - 30*time.Second)
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("old")}}}
	var out []model.Span
	starts := map[model.TraceID]time.Time{}
	for tr := range 20 {
		id := model.TraceID{2, byte(it), byte(n >> 8), byte(n), byte(tr), 7}
		at := band.Add(time.Duration(r.Int64N(int64(30 * time.Second))))
		starts[id] = at
		for s := range 5 {
			out = append(out, model.Span{TraceID: id, SpanID: model.SpanID{byte(s + 1), byte(tr), byte(n), 4},
				Name: "op", Resource: res, Service: "old", StartTimeUnixNano: uint64(at.UnixNano()),
				EndTimeUnixNano: uint64(at.UnixNano()) + 1000,
				Attributes:      []model.KeyValue{{Key: "pad", Value: model.StringValue(string(bytes.Repeat([]byte{'y'}, 200)))}}})
		}
	}
	return out, starts
}

// TestCrashDuringRetentionSweeps kills the server at random moments while
// retention sweeps drop and rewrite segments. Project "old" holds traces
// spread over the last hour; each restart shortens its retention (40, 25,
// 12, then 5 minutes), so segments written before straddle the new cutoff and the sweep
// (every 20 ms) rewrites or drops them, while ingest goes on into both
// projects and merges run. Kills land from right after the restart (during
// the first sweep) to well after it. After each restart, every acknowledged trace
// newer than the cutoff is there exactly once and every older one is gone;
// traces within two minutes of the cutoff (it moves by whole minutes) may be
// either.
func TestCrashDuringRetentionSweeps(t *testing.T) {
	retentions := []time.Duration{40 * time.Minute, 25 * time.Minute, 12 * time.Minute, 5 * time.Minute}
	iterations := min(crashIterations(len(retentions)), len(retentions))
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	var mu sync.Mutex
	acked := map[model.TraceID]time.Time{} // trace of "old" -> its start
	retention := time.Duration(0)
	verify := func(c *child) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		cutoff := time.Now().Add(-retention)
		kept, gone := 0, 0
		for id, at := range acked {
			switch {
			case retention == 0 || at.After(cutoff.Add(2*time.Minute)):
				checkTraceIn(t, c, "old", id, 5)
				kept++
			case at.Before(cutoff.Add(-2 * time.Minute)):
				checkTraceIn(t, c, "old", id, 0)
				gone++
			}
		}
		if retention > 0 && (kept == 0 || gone == 0) {
			t.Fatalf("retention %v: %d traces checked as kept, %d as gone; want both", retention, kept, gone)
		}
	}
	base := []string{"--seal-bytes", "48KiB", "--compaction-fanout", "2", "--lifecycle-interval", "20ms"}
	sweeps := 0
	for it := 0; it <= iterations; it++ {
		// Iteration 0 fills "old" with no retention; each later one
		// starts with a shorter retention.
		if it > 0 {
			retention = retentions[it-1]
		}
		args := base
		if retention > 0 {
			args = append(slices.Clone(base), "--retention-project", fmt.Sprintf("old=%dm", int(retention/time.Minute)))
		}
		c := startChild(t, dir, args...)
		verify(c)
		killAfter := int64(r.IntN(40)) // 0: at once, during the first sweep
		if it == 0 {
			killAfter = 60 // enough old traces for every later cutoff
		}
		var acks atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 10 * time.Second}
				wr := rand.New(rand.NewPCG(uint64(it), uint64(w)))
				for n := 0; ctx.Err() == nil && n < 5000; n++ {
					if w == 1 && n%4 == 0 { // some of the default project too: segments hold both
						if _, err := post(ctx, client, c, "", batch(200+it, w, n)); err != nil {
							return
						}
						continue
					}
					spans, starts := oldBatch(it, 2*n+w, wr, time.Now())
					ok, err := post(ctx, client, c, "old", spans)
					if err != nil {
						return
					}
					if !ok {
						continue
					}
					mu.Lock()
					for id, at := range starts {
						acked[id] = at
					}
					mu.Unlock()
					acks.Add(1)
				}
			}()
		}
		waitFor(t, 60*time.Second, "acknowledged batches", func() bool { return acks.Load() >= killAfter })
		c.kill(cancel, &wg)
		logs := c.logs.String()
		sweeps += strings.Count(logs, "retention dropped a segment") + strings.Count(logs, "retention rewrote a segment")
	}
	c := startChild(t, dir, append(slices.Clone(base), "--retention-project", fmt.Sprintf("old=%dm", int(retention/time.Minute)))...)
	verify(c)
	if sweeps == 0 {
		t.Fatal("no retention sweep dropped or rewrote a segment during the crash runs")
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("graceful shutdown: %v; logs:\n%s", err, c.logs)
	}
	t.Logf("%d iterations, %d traces of project old acknowledged, %d sweeps logged", iterations, len(acked), sweeps)
}

// publishedFiles counts the files of dir that its MANIFEST.json lists
// under field ("segments" of the log store, "blocks" of the metric
// store) and that exist. A file that exists but is not listed yet is a
// seal the manifest has not published: a crash then removes it at the
// next start (its records are replayed from the WAL), so waiting for the
// file alone races with that step.
func publishedFiles(dir, field string) int {
	b, err := os.ReadFile(dir + "/MANIFEST.json")
	if err != nil {
		return 0
	}
	var m map[string]json.RawMessage
	var names []string
	if json.Unmarshal(b, &m) != nil || json.Unmarshal(m[field], &names) != nil {
		return 0
	}
	n := 0
	for _, name := range names {
		if _, err := os.Stat(dir + "/" + name); err == nil {
			n++
		}
	}
	return n
}

// servedSegments is the segment count a running child reports (its
// manifest's), -1 when it does not answer.
func servedSegments(c *child) int {
	resp, err := http.Get(c.base + "/api/v1/stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Segments int `json:"segments"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return -1
	}
	return st.Segments
}
