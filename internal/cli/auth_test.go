package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/server"
)

// TestServeRefusesNonLoopbackWithoutTokens: rastro serve on 0.0.0.0 with no
// auth file exits 2 before listening, saying why and what to do.
func TestServeRefusesNonLoopbackWithoutTokens(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--http-addr", "0.0.0.0:0", "--grpc-addr", ""}, &out, &errb)
	msg := errb.String()
	if code != 2 || !strings.Contains(msg, "not a loopback address") || !strings.Contains(msg, "--auth-file") ||
		!strings.Contains(msg, "--insecure") || strings.Contains(msg, "listening") {
		t.Fatalf("exit %d, stderr %q", code, msg)
	}
	// An auth file that does not load is refused the same way.
	bad := filepath.Join(t.TempDir(), "auth.json")
	os.WriteFile(bad, []byte(`{"tokens": []}`), 0o600)
	errb.Reset()
	code = Main(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", "", "--auth-file", bad}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "no tokens") {
		t.Fatalf("empty auth file: exit %d, stderr %q", code, errb.String())
	}
}

// TestTokenCommand: rastro token prints a token and an auth file entry
// holding its hash, which the server accepts.
func TestTokenCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"token", "--name", "ci", "--roles", "ingest,read", "--projects", "a, b"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	token, ok := strings.CutPrefix(lines[0], "token: ")
	if !ok || !strings.HasPrefix(token, "rst_") || len(token) < 40 {
		t.Fatalf("no token in %q", out.String())
	}
	var entry struct {
		Name, Secret    string
		Roles, Projects []string
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &entry); err != nil {
		t.Fatal(err)
	}
	if entry.Secret != server.HashToken(token) || strings.Contains(out.String()[len(lines[0]):], token) ||
		strings.Join(entry.Roles, ",") != "ingest,read" || strings.Join(entry.Projects, ",") != "a,b" {
		t.Fatalf("entry %+v for token %s", entry, token)
	}
	if code := Main(t.Context(), []string{"token", "--name", "x", "--roles", "root"}, &out, &errb); code != 2 {
		t.Fatalf("a bad role: exit %d", code)
	}
}

// TestClientCommandsSendTheToken: the client commands send RASTRO_TOKEN (or
// --token) to a server with an auth file, and a missing token is an error
// that says how to give one.
func TestClientCommandsSendTheToken(t *testing.T) {
	srv, eng, token := startTokenServer(t, "cli", "read", "ingest")
	base := "http://" + srv.HTTPAddr()
	at := time.Now().Add(-time.Minute).UnixNano()
	req, _ := http.NewRequest("POST", base+"/v1/spans", strings.NewReader(fmt.Sprintf(`[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","name":"op","service":"shop","start_time_unix_nano":%d,"end_time_unix_nano":%d}]`, at, at+1000)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %s", resp.Status)
	}

	run := func(envToken string, args ...string) (int, string, string) {
		var out, errb lockedBuffer
		env := &Env{Stdout: &out, Stderr: &errb, LookupEnv: func(k string) (string, bool) {
			if k == "RASTRO_TOKEN" && envToken != "" {
				return envToken, true
			}
			return "", false
		}}
		err := commands[args[0]].Run(t.Context(), env, args[1:])
		code := 0
		if err != nil {
			code = 1
			errb.Write([]byte(err.Error()))
		}
		return code, out.String(), errb.String()
	}
	if code, _, errs := run("", "services", "--server", base, "--since", "1h"); code == 0 || !strings.Contains(errs, "RASTRO_TOKEN") {
		t.Fatalf("no token: exit %d, %s", code, errs)
	}
	if code, out, errs := run(token, "services", "--server", base, "--since", "1h"); code != 0 || !strings.Contains(out, "shop") {
		t.Fatalf("RASTRO_TOKEN: exit %d, %s %s", code, out, errs)
	}
	if code, out, errs := run("", "trace", "--server", base, "--token", token, "0af7651916cd43dd8448eb211c80319c"); code != 0 || !strings.Contains(out, "op") {
		t.Fatalf("--token: exit %d, %s %s", code, out, errs)
	}
	// rastro tail: the stream opens with the token (and ends on cancel).
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb lockedBuffer
	env := &Env{Stdout: &out, Stderr: &errb, LookupEnv: func(k string) (string, bool) {
		if k == "RASTRO_TOKEN" {
			return token, true
		}
		return "", false
	}}
	done := make(chan error, 1)
	go func() { done <- runTail(ctx, env, []string{"--server", base}) }()
	waitUntil(t, "the tail to open", func() bool { return eng.Counters().Tails == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tail with RASTRO_TOKEN: %v; stderr %s", err, errb.String())
	}
}

// TestLoadSendsTheToken: rastro load sends the token as gRPC metadata and
// as an Authorization header over HTTP; without it every batch is refused.
func TestLoadSendsTheToken(t *testing.T) {
	srv, _, token := startTokenServer(t, "load", "ingest")
	load := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(t.Context(), append([]string{"load", "--spans", "200", "--batch", "100", "--concurrency", "1", "--progress", "0", "--json"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := load("--protocol", "otlp-grpc", "--endpoint", srv.GRPCAddr(), "--token", token)
	var res struct {
		Accepted int64 `json:"accepted_spans"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Accepted != 200 {
		t.Fatalf("load over gRPC with a token: exit %d, %s %s", code, out, errs)
	}
	// Without the token every batch is refused (UNAUTHENTICATED).
	res.Accepted = -1
	if _, out, _ := load("--protocol", "otlp-grpc", "--endpoint", srv.GRPCAddr()); json.Unmarshal([]byte(out), &res) != nil || res.Accepted != 0 ||
		!strings.Contains(out, "Unauthenticated") {
		t.Fatalf("load without a token: %s", out)
	}
	res.Accepted = -1
	if code, out, errs := load("--protocol", "otlp-proto", "--endpoint", "http://"+srv.HTTPAddr(), "--token", token); code != 0 ||
		json.Unmarshal([]byte(out), &res) != nil || res.Accepted != 200 {
		t.Fatalf("load over HTTP with a token: exit %d, %s %s", code, out, errs)
	}
	res.Accepted = -1
	if _, out, _ := load("--protocol", "otlp-proto", "--endpoint", "http://"+srv.HTTPAddr()); json.Unmarshal([]byte(out), &res) != nil ||
		res.Accepted != 0 || !strings.Contains(out, "401") {
		t.Fatalf("load over HTTP without a token: %s", out)
	}
}

// startTokenServer starts a server over an engine whose auth file holds one
// token (name, roles, project "p"), and returns both with the token.
func startTokenServer(t *testing.T, name string, roles ...string) (*server.Server, *engine.Engine, string) {
	t.Helper()
	token, hash, err := server.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(roles)
	auth := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(auth, []byte(`{"tokens": [{"name": "`+name+`", "secret": "`+hash+`", "roles": `+string(quoted)+`, "projects": ["p"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, eng := startEngineServer(t, server.Options{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", AuthFile: auth})
	return srv, eng, token
}

// startEngineServer starts a server with opts over an engine in a temporary
// directory, both stopped when the test ends.
func startEngineServer(t *testing.T, opts server.Options) (*server.Server, *engine.Engine) {
	t.Helper()
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(eng)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
	})
	return srv, eng
}
