package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bannerServer runs `rastro serve` and reads its banner from stdout.
type bannerServer struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out strings.Builder
}

func startBannerServer(t *testing.T, dir string) *bannerServer {
	t.Helper()
	s := &bannerServer{cmd: exec.Command(binary, "serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0")}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	waitFor(t, 60*time.Second, "the ready line", func() bool { return strings.Contains(s.banner(), "ready in ") })
	return s
}

func (s *bannerServer) banner() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

var bannerHTTPRE = regexp.MustCompile(`OTLP/HTTP  (http://\S+)/v1/traces`)

// TestBannerCountsRecoveredSpans: after a kill -9, the restarted server's
// banner says how many spans it recovered from the WAL: every span that
// was acknowledged and not yet sealed.
func TestBannerCountsRecoveredSpans(t *testing.T) {
	dir := t.TempDir()
	s := startBannerServer(t, dir)
	m := bannerHTTPRE.FindStringSubmatch(s.banner())
	if m == nil || !strings.Contains(s.banner(), "0 spans recovered from the WAL") {
		t.Fatalf("first banner:\n%s", s.banner())
	}
	now := time.Now().UnixNano()
	var spans []string
	for i := range 7 {
		spans = append(spans, fmt.Sprintf(`{"trace_id":"5b8efff798038103d269b633813fc6%02x","span_id":"eee19b7ec3c1b1%02x","name":"GET /","service":"web","start_time":%d,"duration_ns":1000}`, i, i, now+int64(i)))
	}
	resp, err := http.Post(m[1]+"/v1/spans", "application/json", strings.NewReader("["+strings.Join(spans, ",")+"]"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("ingest through the banner's address: %v %v", err, resp)
	}
	resp.Body.Close()
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()

	s = startBannerServer(t, dir)
	defer func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
	}()
	if !strings.Contains(s.banner(), ": 7 spans recovered from the WAL\n") {
		t.Fatalf("banner after kill -9:\n%s", s.banner())
	}
}
