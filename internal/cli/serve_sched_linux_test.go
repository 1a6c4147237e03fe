package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// idleThreads counts this process's threads in SCHED_IDLE (policy field
// 41 of /proc/self/task/*/stat is 5) at nice 10 (field 19).
func idleThreads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread ended since the listing
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if f[41-3] == "5" && f[19-3] == "10" {
			n++
		}
	}
	return n
}

// TestServeSchedIdleDefault: by default serve decodes requests and commits
// the WAL on threads in SCHED_IDLE at nice 10 (queries take the CPU from
// them at once, docs/operations.md "Queries first"), and stores what it
// acknowledged; --sched-idle none leaves every thread out of SCHED_IDLE.
func TestServeSchedIdleDefault(t *testing.T) {
	corpus, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 3, Spans: 50, Start: time.Now().Add(-time.Minute), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	body := otlp.EncodeJSON(corpus)
	for _, c := range []struct {
		flags []string
		idle  bool
	}{{nil, true}, {[]string{"--sched-idle", "none"}, false}} {
		before := idleThreads(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel) // a failure below must not leave serve running
		var out, errb lockedBuffer
		done := make(chan int)
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", ""}, c.flags...)
		go func() { done <- Main(ctx, args, &out, &errb) }()
		waitUntil(t, "the ready line", func() bool { return strings.Contains(out.String(), "ready in ") })
		m := regexp.MustCompile(`OTLP/HTTP  (http://\S+)/v1/traces`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("%v: no OTLP/HTTP address in the banner:\n%s", c.flags, out.String())
		}
		resp, err := http.Post(m[1]+"/v1/traces", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%v: ingest answered %d", c.flags, resp.StatusCode)
		}
		// The ingest lane's and the commit lane's threads live until
		// serve stops.
		if c.idle {
			waitUntil(t, "threads in SCHED_IDLE", func() bool { return idleThreads(t) >= before+2 })
		} else if n := idleThreads(t); n > before {
			t.Errorf("--sched-idle none: %d threads in SCHED_IDLE at nice 10, %d before serve started", n, before)
		}
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("%v: serve exited %d: %s", c.flags, code, errb.String())
		}
	}
}
