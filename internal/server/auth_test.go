package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// testToken is an auth file entry with its secret in the clear.
type testToken struct {
	name, secret string
	roles        []Role
	projects     []string
	hashed       bool // write the secret's hash, not the secret
}

// The tokens of the auth tests. Projects "a" and "b" hold different data.
var (
	tokIngestA = testToken{name: "ingest-a", secret: "tok-ingest-a-0123456789", roles: []Role{RoleIngest}, projects: []string{"a"}}
	tokIngestB = testToken{name: "ingest-b", secret: "tok-ingest-b-0123456789", roles: []Role{RoleIngest}, projects: []string{"b"}}
	tokReadA   = testToken{name: "read-a", secret: "tok-read-a-0123456789", roles: []Role{RoleRead}, projects: []string{"a"}}
	tokReadB   = testToken{name: "read-b", secret: "tok-read-b-0123456789", roles: []Role{RoleRead}, projects: []string{"b"}, hashed: true}
	tokAdminA  = testToken{name: "admin-a", secret: "tok-admin-a-0123456789", roles: []Role{RoleAdmin}, projects: []string{"a"}}
	tokReadAll = testToken{name: "read-all", secret: "tok-read-all-0123456789", roles: []Role{RoleRead}, projects: []string{AnyProject}, hashed: true}
	tokMulti   = testToken{name: "multi", secret: "tok-multi-0123456789", roles: []Role{RoleRead, RoleIngest}, projects: []string{"a", "b"}}
	allTokens  = []testToken{tokIngestA, tokIngestB, tokReadA, tokReadB, tokAdminA, tokReadAll, tokMulti}
)

// writeAuthFile writes tokens as an auth file in dir and returns its path.
func writeAuthFile(t *testing.T, path string, tokens ...testToken) string {
	t.Helper()
	var f authFileJSON
	for _, tk := range tokens {
		secret := tk.secret
		if tk.hashed {
			secret = HashToken(tk.secret)
		}
		f.Tokens = append(f.Tokens, authTokenJSON{Name: tk.name, Secret: secret, Roles: tk.roles, Projects: tk.projects})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func bearerHdr(tk testToken) string { return "Bearer " + tk.secret }

// startAuthServer is startServer with an auth file holding allTokens.
func startAuthServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	opts.AuthFile = writeAuthFile(t, filepath.Join(t.TempDir(), "auth.json"), allTokens...)
	return startServer(t, opts)
}

// examplePath fills a route pattern's wildcards with plausible values.
func examplePath(pattern string) string {
	r := strings.NewReplacer("{trace_id}", "0af7651916cd43dd8448eb211c80319c", "{service}", "svc", "{key}", "service.name",
		"{tag}", "service.name", "{id}", "1", "{session_id}", "s1")
	return r.Replace(pattern)
}

// matrixRequest sends one request of the auth matrix and returns its status
// and body. Streams (tail) answer their status before any data: the body
// is not read.
func matrixRequest(t *testing.T, ts *testServer, rt route, hdr map[string]string) (int, string) {
	t.Helper()
	method := rt.method
	if method == "" {
		// A catch-all answers every method; one no other route has
		// reaches it rather than a more specific route of its path.
		method = "PATCH"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.base+examplePath(rt.pattern), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rt.pattern, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("%s %s: 401 without WWW-Authenticate", method, rt.pattern)
	}
	return resp.StatusCode, string(b)
}

// TestAuthMatrix sends, to every route of the route table, a request with
// no token, an unknown token, a token lacking the route's role, a token of
// another project, and the right token. The cases come from the table, so a
// route added later is covered, and one without an access rule fails here
// (and panics when the mux is built: TestRouteWithoutAccessRulePanics).
func TestAuthMatrix(t *testing.T) {
	ts := startAuthServer(t, Options{})
	wrongRole := map[access]testToken{accessIngest: tokReadA, accessRead: tokIngestA, accessReadServer: tokIngestA, accessAdmin: tokReadA}
	rightRole := map[access]testToken{accessIngest: tokIngestA, accessRead: tokReadA, accessReadServer: tokReadA, accessAdmin: tokAdminA}
	seen := map[access]int{}
	for _, rt := range ts.srv.routeTable() {
		name := strings.TrimSpace(rt.method + " " + rt.pattern)
		seen[rt.access]++
		t.Run(name, func(t *testing.T) {
			refusedAs := func(what string, code int, body string, want int) {
				t.Helper()
				if code != want {
					t.Errorf("%s: %d %s, want %d", what, code, body, want)
				}
			}
			allowed := func(what string, code int, body string) {
				t.Helper()
				if code == http.StatusUnauthorized || code == http.StatusForbidden {
					t.Errorf("%s: refused with %d %s", what, code, body)
				}
			}
			switch rt.access {
			case accessUnset:
				t.Fatalf("route declares no access rule")
			case accessPublic:
				code, body := matrixRequest(t, ts, rt, nil)
				allowed("public route without a token", code, body)
				return
			}
			code, body := matrixRequest(t, ts, rt, nil)
			refusedAs("no token", code, body, http.StatusUnauthorized)
			code, body = matrixRequest(t, ts, rt, map[string]string{"Authorization": "Bearer not-a-token-of-this-server"})
			refusedAs("unknown token", code, body, http.StatusUnauthorized)
			code, body = matrixRequest(t, ts, rt, map[string]string{"Authorization": "Basic " + tokReadA.secret})
			refusedAs("not a bearer token", code, body, http.StatusUnauthorized)
			code, body = matrixRequest(t, ts, rt, map[string]string{"Authorization": bearerHdr(wrongRole[rt.access])})
			refusedAs("token without the role", code, body, http.StatusForbidden)
			right := rightRole[rt.access]
			code, body = matrixRequest(t, ts, rt, map[string]string{"Authorization": bearerHdr(right), "X-Scope-OrgID": "b"})
			if rt.access == accessReadServer {
				allowed("server-wide route, another project's header", code, body)
			} else {
				refusedAs("token of another project", code, body, http.StatusForbidden)
			}
			code, body = matrixRequest(t, ts, rt, map[string]string{"Authorization": bearerHdr(right), "X-Scope-OrgID": "a"})
			allowed("right token and project", code, body)
			code, body = matrixRequest(t, ts, rt, map[string]string{"Authorization": bearerHdr(right)})
			allowed("right token, its only project implied", code, body)
		})
	}
	for _, a := range []access{accessPublic, accessIngest, accessRead, accessAdmin, accessReadServer} {
		if seen[a] == 0 {
			t.Errorf("no route has the rule %s: the matrix covers nothing for it", a)
		}
	}
}

// TestRouteWithoutAccessRulePanics: the mux refuses a route that declares
// no access rule.
func TestRouteWithoutAccessRulePanics(t *testing.T) {
	s, err := New(Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "/forgotten") {
			t.Fatalf("mux built a route without an access rule (recovered %v)", r)
		}
	}()
	s.mux([]route{{method: "GET", pattern: "/forgotten", handler: func(http.ResponseWriter, *http.Request) {}}})
}

// TestAuthProjects: the header decides the project within the token's set;
// a token of one project needs no header; a token of several (or "*")
// without a header means the default project, which it may lack.
func TestAuthProjects(t *testing.T) {
	ts := startAuthServer(t, Options{})
	id := model.TraceID{0xa1, 1}
	spans := []model.Span{{TraceID: id, SpanID: model.SpanID{1}, Name: "op", Service: "svc-alpha",
		StartTimeUnixNano: uint64(time.Now().Add(-time.Minute).UnixNano()), EndTimeUnixNano: uint64(time.Now().Add(-time.Minute).UnixNano()) + 1000}}
	body := otlp.EncodeProto(spans)
	if code, b := ts.post("/v1/traces", "application/x-protobuf", body, "Authorization", bearerHdr(tokIngestA)); code != 200 {
		t.Fatalf("ingest with a one-project token and no header: %d %s", code, b)
	}
	for _, c := range []struct {
		tok  testToken
		hdr  []string
		want int
	}{
		{tokReadA, nil, 200},
		{tokReadA, []string{"X-Scope-OrgID", "a"}, 200},
		{tokReadA, []string{"X-Scope-OrgID", "default"}, 403},
		{tokReadAll, []string{"X-Scope-OrgID", "a"}, 200},
		{tokReadAll, nil, 404}, // the default project, allowed, without the trace
		{tokMulti, []string{"X-Scope-OrgID", "a"}, 200},
		{tokMulti, nil, 403}, // the default project is not among a, b
		{tokReadA, []string{"X-Scope-OrgID", "../etc"}, 400},
	} {
		code, hdr, b := ts.request("GET", "/api/v1/traces/"+id.String(), nil, append([]string{"Authorization", bearerHdr(c.tok)}, c.hdr...)...)
		if code != c.want {
			t.Errorf("%s %v: %d %s, want %d", c.tok.name, c.hdr, code, b, c.want)
		}
		if code == 403 {
			wantError(t, c.tok.name, code, hdr, b, 403, "may not use project")
		}
	}
}

// TestAuthOffLetsEveryoneIn: without an auth file the server behaves as it
// always did on loopback (no token, any project).
func TestAuthOffLetsEveryoneIn(t *testing.T) {
	ts := startServer(t, Options{})
	for _, path := range []string{"/api/v1/services", "/api/v1/erasures", "/metrics"} {
		if code, _, b := ts.request("GET", path, nil, "X-Scope-OrgID", "anyone"); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, b)
		}
	}
}

// exportGRPC sends one Export call with metadata md.
func exportGRPC(t *testing.T, addr string, opts []grpc.DialOption, md ...string) error {
	t.Helper()
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	spans := []model.Span{{TraceID: model.TraceID{0xc3, 1}, SpanID: model.SpanID{1}, Name: "op", Service: "svc",
		StartTimeUnixNano: 1, EndTimeUnixNano: 2}}
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(otlp.EncodeProto(spans), req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	_, err = coltracepb.NewTraceServiceClient(cc).Export(ctx, req)
	return err
}

// TestAuthGRPC is the auth matrix of the gRPC service, and checks that
// every method the gRPC server registers has an access rule.
func TestAuthGRPC(t *testing.T) {
	ts := startAuthServer(t, Options{})
	for svc, info := range ts.srv.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			if _, ok := grpcAccess["/"+svc+"/"+m.Name]; !ok {
				t.Errorf("gRPC method /%s/%s has no access rule in grpcAccess", svc, m.Name)
			}
		}
	}
	addr := ts.srv.GRPCAddr()
	for _, c := range []struct {
		what string
		md   []string
		want codes.Code
	}{
		{"no token", nil, codes.Unauthenticated},
		{"unknown token", []string{"authorization", "Bearer nope-nope-nope-nope"}, codes.Unauthenticated},
		{"read token", []string{"authorization", bearerHdr(tokReadA)}, codes.PermissionDenied},
		{"another project", []string{"authorization", bearerHdr(tokIngestA), "x-scope-orgid", "b"}, codes.PermissionDenied},
		{"bad project", []string{"authorization", bearerHdr(tokIngestA), "x-scope-orgid", "../x"}, codes.InvalidArgument},
		{"right token", []string{"authorization", bearerHdr(tokIngestA)}, codes.OK},
		{"right token and project", []string{"authorization", bearerHdr(tokIngestA), "x-scope-orgid", "a"}, codes.OK},
	} {
		if got := status.Code(exportGRPC(t, addr, nil, c.md...)); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// The accepted call went to project a, the token's only project.
	if code := ts.get("/api/v1/traces/"+model.TraceID{0xc3, 1}.String(), nil, "Authorization", bearerHdr(tokReadA)); code != 200 {
		t.Fatalf("the span sent over gRPC is not in project a: %d", code)
	}
}

// TestAuthReload: ReloadAuth (SIGHUP in rastro serve) swaps the tokens; a
// file that does not load keeps the tokens in use.
func TestAuthReload(t *testing.T) {
	path := writeAuthFile(t, filepath.Join(t.TempDir(), "auth.json"), tokReadA)
	ts := startServer(t, Options{AuthFile: path})
	code := func(tk testToken) int {
		c, _, _ := ts.request("GET", "/api/v1/services", nil, "Authorization", bearerHdr(tk))
		return c
	}
	if code(tokReadA) != 200 || code(tokReadB) != 401 {
		t.Fatalf("before reload: read-a %d, read-b %d", code(tokReadA), code(tokReadB))
	}
	writeAuthFile(t, path, tokReadB)
	if err := ts.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if code(tokReadA) != 401 || code(tokReadB) != 200 {
		t.Fatalf("after reload: read-a %d (want 401), read-b %d (want 200)", code(tokReadA), code(tokReadB))
	}
	os.WriteFile(path, []byte(`{"tokens": [{"name": "x", "secret": "short"}]}`), 0o600)
	if err := ts.srv.Reload(); err == nil || !strings.Contains(err.Error(), "token 1 (x)") {
		t.Fatalf("a bad auth file reloaded: %v", err)
	}
	if code(tokReadB) != 200 {
		t.Fatal("a failed reload dropped the tokens in use")
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
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

// TestSecretsStayOutOfLogsAndMetrics: after accepted and refused requests
// on both protocols, a reload and a failed reload, no secret and no hash
// is in the debug log or in /metrics.
func TestSecretsStayOutOfLogsAndMetrics(t *testing.T) {
	var logs lockedBuffer
	path := writeAuthFile(t, filepath.Join(t.TempDir(), "auth.json"), allTokens...)
	ts := startServer(t, Options{AuthFile: path, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for _, tk := range allTokens {
		ts.request("GET", "/api/v1/services", nil, "Authorization", bearerHdr(tk))
		ts.request("POST", "/v1/traces", []byte("junk"), "Authorization", bearerHdr(tk), "Content-Type", "application/x-protobuf")
		exportGRPC(t, ts.srv.GRPCAddr(), nil, "authorization", bearerHdr(tk))
	}
	ts.request("GET", "/api/v1/services", nil, "Authorization", "Bearer wrong-secret-0123456789")
	if err := ts.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	// A file whose JSON breaks inside a secret: the error must not echo it.
	os.WriteFile(path, []byte(`{"tokens": [{"name": "x", "secret": "tok-secret-in-a-broken-file`), 0o600)
	err := ts.srv.Reload()
	if err == nil {
		t.Fatal("a broken auth file reloaded")
	}
	_, _, metrics := ts.request("GET", "/metrics", nil, "Authorization", bearerHdr(tokReadA))
	if !bytes.Contains(metrics, []byte(`rastro_access_refused_total{reason="wrong_role"}`)) {
		t.Fatalf("/metrics lacks the refusal counter:\n%s", metrics)
	}
	for _, tk := range append(allTokens, testToken{secret: "wrong-secret-0123456789"}, testToken{secret: "tok-secret-in-a-broken-file"}) {
		for what, text := range map[string]string{"the log": logs.String(), "/metrics": string(metrics), "the reload error": err.Error()} {
			for _, s := range []string{tk.secret, HashToken(tk.secret)[len(hashPrefix):]} {
				if strings.Contains(text, s) {
					t.Errorf("%s holds the secret (or hash) of %q", what, tk.name)
				}
			}
		}
	}
}

// TestOpenAPIDocumentsAccess: in docs/openapi.json every documented route
// that needs a token lists 401 and 403, and every public one says it needs
// no token (security: []), as the route table's access rules decide.
func TestOpenAPIDocumentsAccess(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	s, err := New(Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range s.routeTable() {
		if !rt.documented {
			continue
		}
		r := parsePattern(rt.method + " " + rt.pattern)
		raw, ok := doc.Paths[r.path][strings.ToLower(r.method)]
		if !ok {
			continue // TestOpenAPIMatchesRoutes reports it
		}
		var op struct {
			Responses map[string]any `json:"responses"`
			Security  *[]any         `json:"security"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		public := rt.access == accessPublic
		_, has401 := op.Responses["401"]
		_, has403 := op.Responses["403"]
		switch {
		case public && (op.Security == nil || len(*op.Security) != 0 || has401 || has403):
			t.Errorf("%s is public: want security [] and no 401/403", r)
		case !public && (!has401 || !has403):
			t.Errorf("%s needs a token (%s): want 401 and 403 documented", r, rt.access)
		}
	}
}
