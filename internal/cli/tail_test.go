package cli

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/server"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startTestServer runs a real server over a real store for the test.
func startTestServer(t *testing.T) (base string, eng *engine.Engine) {
	t.Helper()
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := logstore.Open(logstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(eng)
	srv.SetLogs(logs)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		logs.Close()
		eng.Close()
	})
	return "http://" + srv.HTTPAddr(), eng
}

// TestTailCommandFollowsMatchingSpans runs `rastro tail` against a real
// server: it prints the matching spans posted after it started, one line
// each, and exits 0 when interrupted.
func TestTailCommandFollowsMatchingSpans(t *testing.T) {
	base, eng := startTestServer(t)
	post := func(name, status string) {
		t.Helper()
		body := `[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b716920333` + name[:1] + `","name":"` + name +
			`","service":"shop","start_time_unix_nano":1764460800000000000,"end_time_unix_nano":1764460800250000000,"status":"` + status + `"}]`
		resp, err := http.Post(base+"/v1/spans", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("post %s: %s", name, resp.Status)
		}
	}

	for _, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb lockedBuffer
		args := []string{"tail", "--server", base, "{ status = error }"}
		if asJSON {
			args = append(args, "--json")
		}
		code := make(chan int, 1)
		go func() { code <- Main(ctx, args, &out, &errb) }()
		waitUntil(t, "the tail to open", func() bool { return eng.Counters().Tails == 1 })
		// Idle, it says what it waits for (stderr: the rows alone go to stdout).
		if want := "rastro tail: waiting for new spans matching { status = error } at " + base + "; Ctrl-C to stop\n"; !strings.Contains(errb.String(), want) {
			waitUntil(t, "the waiting line", func() bool { return strings.Contains(errb.String(), want) })
		}
		post("aquiet", "ok")
		post("boom", "error")
		want := "boom  " // table: name column
		if asJSON {
			want = `"name":"boom"`
		}
		waitUntil(t, "the error span in the output", func() bool { return strings.Contains(out.String(), want) })
		cancel()
		if c := <-code; c != 0 {
			t.Fatalf("exit %d after interrupt; stderr: %s", c, errb.String())
		}
		if got := out.String(); strings.Contains(got, "aquiet") {
			t.Fatalf("a span the filter does not match was printed:\n%s", got)
		}
		if asJSON && strings.Count(out.String(), "\n") != 1 {
			t.Fatalf("--json: want one line per span:\n%s", out.String())
		}
		waitUntil(t, "the tail to close", func() bool { return eng.Counters().Tails == 0 })
	}

	// A filter the server refuses is an error naming it, exit 1.
	var out, errb lockedBuffer
	if c := Main(context.Background(), []string{"tail", "--server", base, "--min-duration", "abc"}, &out, &errb); c != 1 || !strings.Contains(errb.String(), "min_duration: invalid duration") {
		t.Fatalf("bad filter: exit %d, stderr %q", c, errb.String())
	}
}
