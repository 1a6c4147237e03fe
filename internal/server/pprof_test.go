package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPprofEndpoint: --pprof-addr serves the runtime's profiles on its own
// listener, which the API port does not; a non-loopback address is refused
// (even with tokens: the endpoint has none) unless Insecure.
func TestPprofEndpoint(t *testing.T) {
	ts := startServer(t, Options{PprofAddr: "127.0.0.1:0"})
	addr := ts.srv.PprofAddr()
	if addr == "" {
		t.Fatal("no pprof address after Start")
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("goroutine profile: %d %.200s", code, body)
	}
	if code, body := get("http://" + addr + "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile:") {
		t.Fatalf("heap profile: %d %.200s", code, body)
	}
	if code, _ := get(ts.base + "/debug/pprof/goroutine?debug=1"); code == 200 {
		t.Fatal("the API port serves profiles")
	}

	for _, o := range []Options{
		{HTTPAddr: "127.0.0.1:0", PprofAddr: "0.0.0.0:1777"},
		{HTTPAddr: "127.0.0.1:0", PprofAddr: ":1777", AuthFile: "tokens.json"},
	} {
		_, err := New(o)
		if err == nil || !strings.Contains(err.Error(), "refusing to serve profiles on") || !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("%+v: %v, want a refusal naming --insecure", o, err)
		}
	}
}
