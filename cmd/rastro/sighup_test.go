package main

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPReloadsTheAuthFile: `rastro serve --auth-file` reads the file
// again on SIGHUP (and keeps running): the new token is let in, the old one
// no longer.
func TestSIGHUPReloadsTheAuthFile(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "auth.json")
	write := func(name, secret string) {
		t.Helper()
		b := `{"tokens": [{"name": "` + name + `", "secret": "` + secret + `", "roles": ["read"], "projects": ["*"]}]}`
		if err := os.WriteFile(auth, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const old, fresh = "old-token-0123456789abcdef", "new-token-0123456789abcdef"
	write("old", old)
	c := startChild(t, t.TempDir(), "--auth-file", auth)
	defer func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.cmd.Wait()
	}()
	get := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, c.base+"/api/v1/services", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("the server is gone: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get(old) != 200 || get(fresh) != 401 {
		t.Fatalf("before SIGHUP: old %d, new %d", get(old), get(fresh))
	}
	write("new", fresh)
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the new token to be let in after SIGHUP", func() bool { return get(fresh) == 200 })
	if code := get(old); code != 401 {
		t.Fatalf("the old token after SIGHUP: %d, want 401", code)
	}
}
