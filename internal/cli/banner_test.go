package cli

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestServeBannerSaysWhereToSendAndWhatToOpen runs `rastro serve` and reads
// its banner: version, data directory, the OTLP/HTTP, OTLP/gRPC, API and
// UI addresses (each answering), and the spans recovered from the WAL. The
// logs carry fields, never a Go struct.
func TestServeBannerSaysWhereToSendAndWhatToOpen(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, &out, &errb)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errb.String())
		}
	}()
	waitUntil(t, "the ready line", func() bool { return strings.Contains(out.String(), "ready in ") })
	got := out.String()
	want := regexp.MustCompile(`^rastro (devel|v\S+)[^\n]* \(go1\.[^)]+\)
  data       ` + regexp.QuoteMeta(dir) + `
  OTLP/HTTP  (http://127\.0\.0\.1:\d+)/v1/traces
  OTLP/gRPC  127\.0\.0\.1:\d+
  API        http://127\.0\.0\.1:\d+/api/v1/
  web UI     http://127\.0\.0\.1:\d+/
opening the store \(replaying the WAL\)\.\.\.
ready in \S+: 0 spans recovered from the WAL
$`)
	m := want.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("banner:\n%s\nwant the form of:\n%s", got, want)
	}
	base := m[2]
	for _, path := range []string{"/api/v1/services", "/"} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s%s from the banner: %v %v", base, path, err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	logs := errb.String()
	if !strings.Contains(logs, `msg="wal replayed"`) || !strings.Contains(logs, "files=") || strings.Contains(logs, "{") {
		t.Errorf("start-up logs want fields, not a struct:\n%s", logs)
	}
}
