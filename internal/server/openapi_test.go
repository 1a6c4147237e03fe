package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// openAPIPath is the published API description, relative to this package.
const openAPIPath = "../../docs/openapi.json"

// registeredRoutes lists the documented routes of the server's route table
// (routes.go), the same table the mux is built from, with their paths in
// OpenAPI form. Routes marked undocumented (catch-alls, API families
// documented elsewhere) are left out; a catch-all must have no method.
func registeredRoutes(t *testing.T) []apiRoute {
	t.Helper()
	s, err := New(Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	var out []apiRoute
	for _, rt := range s.routeTable() {
		if rt.method == "" && rt.documented {
			t.Errorf("pattern %q has no method but is marked documented", rt.pattern)
		}
		if !rt.documented {
			continue
		}
		out = append(out, parsePattern(rt.method+" "+rt.pattern))
	}
	if len(out) == 0 {
		t.Fatal("the route table has no documented route")
	}
	return out
}

// apiRoute is one registered pattern, with its path in OpenAPI form.
type apiRoute struct {
	method string // upper case; "" when the pattern has no method
	path   string // OpenAPI form: {name...} -> {name}, trailing {$} dropped
}

func (r apiRoute) String() string { return strings.TrimSpace(r.method + " " + r.path) }

var wildcardRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}`)

// parsePattern splits a ServeMux pattern "[METHOD ][HOST]/path" and maps its
// wildcards to OpenAPI's: {trace_id} stays {trace_id}, {rest...} becomes
// {rest}, and the end anchor {$} is dropped.
func parsePattern(p string) apiRoute {
	var r apiRoute
	if method, rest, ok := strings.Cut(p, " "); ok {
		r.method, p = method, strings.TrimLeft(rest, " \t")
	}
	if i := strings.IndexByte(p, '/'); i > 0 { // a host part
		p = p[i:]
	}
	p = strings.TrimSuffix(p, "{$}")
	r.path = wildcardRE.ReplaceAllString(p, "{$1}")
	return r
}

// openAPIDoc is the part of the document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Info       map[string]any                        `json:"info"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components map[string]any                        `json:"components"`
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) (openAPIDoc, any) {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatalf("read %s: %v", openAPIPath, err)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not valid JSON", openAPIPath)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("decode %s: %v", openAPIPath, err)
	}
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("decode %s: %v", openAPIPath, err)
	}
	return doc, raw
}

// documentedRoutes lists the operations of the document as routes.
func documentedRoutes(doc openAPIDoc) []apiRoute {
	var out []apiRoute
	for p, item := range doc.Paths {
		for _, m := range httpMethods {
			if _, ok := item[m]; ok {
				out = append(out, apiRoute{strings.ToUpper(m), p})
			}
		}
	}
	return out
}

// TestOpenAPIDocument checks that docs/openapi.json is an OpenAPI 3.1
// document whose local references resolve and whose path parameters are
// declared.
func TestOpenAPIDocument(t *testing.T) {
	doc, raw := loadOpenAPI(t)
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(doc.OpenAPI) {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	if doc.Info["title"] == nil || doc.Info["version"] == nil {
		t.Errorf("info must have title and version, got %v", doc.Info)
	}
	if len(doc.Paths) == 0 {
		t.Fatal("document has no paths")
	}

	// Every "$ref": "#/..." must point at something in the document.
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "$ref" {
					refs = append(refs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(raw)
	for _, ref := range refs {
		if _, ok := resolvePointer(raw, ref); !ok {
			t.Errorf("$ref %q does not resolve", ref)
		}
	}

	// Every operation has responses, and every {param} in its path is
	// declared as a required path parameter (on the operation or the path).
	paramRE := regexp.MustCompile(`\{([^}]+)\}`)
	opIDs := map[string]bool{}
	for p, item := range doc.Paths {
		var shared []any
		if b, ok := item["parameters"]; ok {
			if err := json.Unmarshal(b, &shared); err != nil {
				t.Errorf("%s: parameters: %v", p, err)
			}
		}
		for _, m := range httpMethods {
			b, ok := item[m]
			if !ok {
				continue
			}
			var op struct {
				OperationID string         `json:"operationId"`
				Parameters  []any          `json:"parameters"`
				Responses   map[string]any `json:"responses"`
			}
			if err := json.Unmarshal(b, &op); err != nil {
				t.Errorf("%s %s: %v", m, p, err)
				continue
			}
			if len(op.Responses) == 0 {
				t.Errorf("%s %s: no responses", m, p)
			}
			if op.OperationID == "" || opIDs[op.OperationID] {
				t.Errorf("%s %s: operationId %q is empty or not unique", m, p, op.OperationID)
			}
			opIDs[op.OperationID] = true
			declared := map[string]bool{}
			for _, prm := range append(slices.Clone(shared), op.Parameters...) {
				pm, ok := prm.(map[string]any)
				if !ok {
					continue
				}
				if ref, ok := pm["$ref"].(string); ok {
					r, ok := resolvePointer(raw, ref)
					if !ok {
						continue
					}
					pm, _ = r.(map[string]any)
				}
				if pm["in"] == "path" {
					name, _ := pm["name"].(string)
					if pm["required"] != true {
						t.Errorf("%s %s: path parameter %q must be required", m, p, name)
					}
					declared[name] = true
				}
			}
			for _, sm := range paramRE.FindAllStringSubmatch(p, -1) {
				if !declared[sm[1]] {
					t.Errorf("%s %s: path parameter %q is not declared", m, p, sm[1])
				}
			}
		}
	}
}

// resolvePointer follows a local JSON pointer reference ("#/a/b").
func resolvePointer(doc any, ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := doc
	if rest == "" {
		return cur, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// TestOpenAPIMatchesRoutes checks that the documented routes of the route
// table and the operations of docs/openapi.json are the same set, so neither
// can change without the other.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	registered := map[string]bool{}
	for _, r := range registeredRoutes(t) {
		registered[r.String()] = true
	}
	documented := map[string]bool{}
	for _, r := range documentedRoutes(doc) {
		documented[r.String()] = true
	}
	for r := range registered {
		if !documented[r] {
			t.Errorf("route %s is in the route table but missing from %s", r, openAPIPath)
		}
	}
	for r := range documented {
		if !registered[r] {
			t.Errorf("operation %s is in %s but no such documented route is in the route table", r, openAPIPath)
		}
	}
	if len(registered) < 10 {
		t.Errorf("only %d documented routes in the table", len(registered))
	}
}

// TestOpenAPIPathsRoute sends a request for every documented operation to
// the server's real handler (no backend attached) and checks that it reaches
// a route rather than the catch-all 404: a documented path that the mux
// would not route (a pattern typo in the table) fails here.
func TestOpenAPIPathsRoute(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	s, err := New(Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	h := s.http.Handler
	samples := map[string]string{
		"trace_id": "0af7651916cd43dd8448eb211c80319c",
		"service":  "checkout",
		"key":      "http.route",
	}
	fill := regexp.MustCompile(`\{([^}]+)\}`)
	for _, r := range documentedRoutes(doc) {
		path := fill.ReplaceAllStringFunc(r.path, func(m string) string {
			if v, ok := samples[m[1:len(m)-1]]; ok {
				return v
			}
			return "x"
		})
		req := httptest.NewRequest(r.method, path, strings.NewReader("[]"))
		if r.method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code == http.StatusNotFound && strings.Contains(string(body), "no route for") {
			t.Errorf("%s %s (as %s): not routed: %s", r.method, r.path, path, body)
		}
	}
	// And the catch-all really answers the documented 404 shape.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/nope", nil))
	var e struct {
		Error string `json:"error"`
	}
	if rec.Code != http.StatusNotFound || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
		t.Errorf("GET /api/v1/nope = %d %s, want 404 {\"error\": ...}", rec.Code, rec.Body)
	}
}
