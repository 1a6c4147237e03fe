package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// access is a route's access rule. Every route declares one; the zero
// value is no rule, and the mux refuses to build with it (routes.go), so a
// route cannot be registered without deciding who may call it.
//
// Every rule but accessPublic resolves the request's project in one place
// (authorize): from X-Scope-OrgID, or the token's only project when the
// header is absent, checked against the token's project set. Handlers read
// it with projectFrom and never look at the header themselves.
type access int

const (
	accessUnset  access = iota
	accessPublic        // no token: health, readiness, the UI's static files, 404s
	accessIngest        // the ingest role, for the request's project
	accessRead          // the read role, for the request's project
	accessAdmin         // the admin role, for the request's project
	// accessReadServer is the read role with no project check: for routes
	// that carry no project's spans (/metrics), or that call the API again
	// with the same token, where each call is checked (/mcp).
	accessReadServer
)

func (a access) String() string {
	switch a {
	case accessPublic:
		return "public"
	case accessIngest:
		return "ingest"
	case accessRead:
		return "read"
	case accessAdmin:
		return "admin"
	case accessReadServer:
		return "read (server-wide)"
	}
	return "unset"
}

// role is the role a rule needs ("" for public).
func (a access) role() Role {
	switch a {
	case accessIngest:
		return RoleIngest
	case accessRead, accessReadServer:
		return RoleRead
	case accessAdmin:
		return RoleAdmin
	}
	return ""
}

// authError is a refused request: its HTTP status, gRPC code and message.
type authError struct {
	status int
	code   codes.Code
	reason string // rastro_auth_refused_total's label
	msg    string
}

func unauthenticated(reason, msg string) *authError {
	return &authError{http.StatusUnauthorized, codes.Unauthenticated, reason, msg}
}

func forbidden(reason, msg string) *authError {
	return &authError{http.StatusForbidden, codes.PermissionDenied, reason, msg}
}

// authorize decides a request needing rule, given its Authorization and
// X-Scope-OrgID values, and returns the project it may act on. Without an
// auth file every request is let in (the project still comes from the
// header). This is the only place a request's project is decided.
func (s *Server) authorize(rule access, authz, orgID string) (string, *authError) {
	if rule == accessPublic {
		return "", nil
	}
	var tok *authToken
	if set := s.auth.Load(); set != nil {
		secret, ok := bearer(authz)
		if !ok {
			return "", unauthenticated("missing_token", "this server requires a token: send the header \"Authorization: Bearer TOKEN\" (docs/security.md)")
		}
		if tok = set.lookup(secret); tok == nil {
			return "", unauthenticated("unknown_token", "the bearer token is not valid (unknown, revoked or mistyped)")
		}
		if need := rule.role(); !tok.has(need) {
			return "", forbidden("wrong_role", fmt.Sprintf("token %q lacks the %s role this route needs", tok.name, need))
		}
	}
	if rule == accessReadServer {
		return "", nil
	}
	if orgID == "" && tok != nil {
		if p := tok.soleProject(); p != "" {
			return p, nil
		}
	}
	project, err := projectOf(orgID)
	if err != nil {
		return "", &authError{http.StatusBadRequest, codes.InvalidArgument, "bad_project", err.Error()}
	}
	if tok != nil && !tok.allows(project) {
		return "", forbidden("wrong_project", fmt.Sprintf("token %q may not use project %q (its projects: %s); set X-Scope-OrgID to one of them",
			tok.name, project, strings.Join(tok.projects, ", ")))
	}
	return project, nil
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" value.
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// projectKey is the context key of the request's authorised project.
type projectKey struct{}

// projectFrom is the project authorize decided for the request. Every
// route reaches its handler through guard, so a missing project is a bug.
func projectFrom(ctx context.Context) string {
	p, ok := ctx.Value(projectKey{}).(string)
	if !ok {
		panic("server: no authorised project in the request context (a handler was reached without guard: broken invariant)")
	}
	return p
}

// guard wraps a route's handler with its access rule. Refusals are JSON
// errors on every route family: 401 with WWW-Authenticate, 403, or 400 for
// a malformed X-Scope-OrgID.
func (s *Server) guard(rule access, h http.HandlerFunc) http.HandlerFunc {
	if rule == accessPublic {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		project, aerr := s.authorize(rule, r.Header.Get("Authorization"), r.Header.Get("X-Scope-OrgID"))
		if aerr != nil {
			s.refused(aerr)
			if aerr.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="rastro"`)
			}
			writeError(w, aerr.status, aerr.msg)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), projectKey{}, project)))
	}
}

// refused counts a refusal (by its reason only: never a token or its name).
func (s *Server) refused(e *authError) {
	s.met.authRefused.WithLabelValues(e.reason).Inc()
}

// grpcAccess is the access rule of each gRPC method; a method missing here
// is refused (the interceptors fail closed).
var grpcAccess = map[string]access{
	exportMethod:        accessIngest,
	logsExportMethod:    accessIngest,
	metricsExportMethod: accessIngest,
}

// grpcAuthorize is authorize for a gRPC call: the same rules, reading the
// authorization and x-scope-orgid metadata, with the project put in the
// returned context.
func (s *Server) grpcAuthorize(ctx context.Context, method string) (context.Context, error) {
	rule, ok := grpcAccess[method]
	if !ok {
		return nil, status.Errorf(codes.PermissionDenied, "method %s has no access rule", method)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	project, aerr := s.authorize(rule, first("authorization"), first("x-scope-orgid"))
	if aerr != nil {
		s.refused(aerr)
		return nil, status.Error(aerr.code, aerr.msg)
	}
	return context.WithValue(ctx, projectKey{}, project), nil
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.grpcAuthorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.grpcAuthorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

// authedStream is a server stream carrying the authorised project.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a *authedStream) Context() context.Context { return a.ctx }

// ReloadAuth reads Options.AuthFile again and uses its tokens from the next
// request on. On error the tokens in use stay. Without an auth file it does
// nothing.
func (s *Server) ReloadAuth() error {
	if s.opts.AuthFile == "" {
		return nil
	}
	set, err := loadAuthFile(s.opts.AuthFile)
	if err != nil {
		return err
	}
	s.auth.Store(set)
	s.log.Info("auth file loaded", "path", s.opts.AuthFile, "tokens", len(set.tokens))
	return nil
}
