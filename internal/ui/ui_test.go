package ui

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func do(t *testing.T, method, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec
}

func checkSecurityHeaders(t *testing.T, rec *httptest.ResponseRecorder, what string) {
	t.Helper()
	want := "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	if got := rec.Header().Get("Content-Security-Policy"); got != want {
		t.Errorf("%s: Content-Security-Policy = %q, want %q", what, got, want)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options = %q, want nosniff", what, got)
	}
	if got := rec.Header().Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("%s: Referrer-Policy = %q, want no-referrer", what, got)
	}
}

func TestIndexAndAssetHeaders(t *testing.T) {
	for _, tc := range []struct{ path, ctype string }{
		{"/", "text/html; charset=utf-8"},
		{"/ui/app.js", "text/javascript; charset=utf-8"},
		{"/ui/pages/trace.js", "text/javascript; charset=utf-8"},
		{"/ui/style.css", "text/css; charset=utf-8"},
		{"/ui/favicon.svg", "image/svg+xml"},
	} {
		rec := do(t, "GET", tc.path)
		if rec.Code != 200 {
			t.Fatalf("GET %s: status %d", tc.path, rec.Code)
		}
		checkSecurityHeaders(t, rec, "GET "+tc.path)
		if got := rec.Header().Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if got := rec.Header().Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", tc.path, got)
		}
		if rec.Header().Get("ETag") == "" {
			t.Errorf("GET %s: no ETag", tc.path)
		}
	}
}

func TestDeepLinksServeIndex(t *testing.T) {
	want := assets["index.html"].body
	for _, p := range []string{"/", "/search?q=%7B%7D", "/traces/4bf92f3577b34da6a3ce929d0e0e4736", "/sessions/a%2Fb", "/llm", "/services", "/journeys?key=user.id&value=u-42", "/tail", "/no/such/page"} {
		rec := do(t, "GET", p)
		if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("GET %s: status %d, body is index.html: %v", p, rec.Code, bytes.Equal(rec.Body.Bytes(), want))
		}
		checkSecurityHeaders(t, rec, "GET "+p)
	}
	rec := do(t, "HEAD", "/traces/x")
	if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Errorf("HEAD: status %d, body %d bytes, Content-Length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

func TestNotModified(t *testing.T) {
	for _, p := range []string{"/", "/ui/app.js"} {
		first := do(t, "GET", p)
		etag := first.Header().Get("ETag")
		rec := do(t, "GET", p, "If-None-Match", etag)
		if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("GET %s with If-None-Match %s: status %d, %d body bytes; want 304 and none", p, etag, rec.Code, rec.Body.Len())
		}
		checkSecurityHeaders(t, rec, "304 "+p)
		gz := do(t, "GET", p, "Accept-Encoding", "gzip")
		if rec := do(t, "GET", p, "If-None-Match", gz.Header().Get("ETag"), "Accept-Encoding", "gzip"); rec.Code != http.StatusNotModified {
			t.Errorf("GET %s with the gzip ETag: status %d, want 304", p, rec.Code)
		}
		if rec := do(t, "GET", p, "If-None-Match", `"other"`); rec.Code != 200 {
			t.Errorf("GET %s with a stale ETag: status %d, want 200", p, rec.Code)
		}
	}
}

func TestGzip(t *testing.T) {
	rec := do(t, "GET", "/ui/app.js", "Accept-Encoding", "br, gzip")
	if rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("Content-Encoding %q, Vary %q", rec.Header().Get("Content-Encoding"), rec.Header().Get("Vary"))
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(zr)
	if !bytes.Equal(got, assets["app.js"].body) {
		t.Error("gunzipped body differs from app.js")
	}
	if rec := do(t, "GET", "/ui/app.js", "Accept-Encoding", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 still got gzip")
	}
	if rec := do(t, "GET", "/ui/app.js"); rec.Header().Get("Content-Encoding") != "" {
		t.Error("no Accept-Encoding still got gzip")
	}
}

func TestUnknownAssetAndMethods(t *testing.T) {
	rec := do(t, "GET", "/ui/nope.js")
	if rec.Code != 404 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("unknown asset: status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	checkSecurityHeaders(t, rec, "404")
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		rec := do(t, m, "/traces/x")
		if rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: status %d, Allow %q", m, rec.Code, rec.Header().Get("Allow"))
		}
		checkSecurityHeaders(t, rec, m)
	}
}

// TestStaticFilesAreSafe is a cheap guard against HTML injection sinks and
// inline code in the shipped files; the browser XSS test is the real check.
func TestStaticFilesAreSafe(t *testing.T) {
	banned := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "createContextualFragment", "DOMParser", "srcdoc"}
	stringTimer := regexp.MustCompile(`set(Timeout|Interval)\(\s*['"` + "`" + `]`)
	onAttr := regexp.MustCompile(`(?i)<[^>]*\son[a-z]+\s*=`)
	setOn := regexp.MustCompile(`setAttribute(NS)?\([^,]*['"]on`)
	n := 0
	fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := staticFS.ReadFile(p)
		text := string(b)
		n++
		for _, bad := range banned {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", p, bad)
			}
		}
		if stringTimer.MatchString(text) {
			t.Errorf("%s passes a string to setTimeout/setInterval", p)
		}
		if setOn.MatchString(text) {
			t.Errorf("%s sets an on* attribute", p)
		}
		switch path.Ext(p) {
		case ".html", ".svg":
			if onAttr.MatchString(text) {
				t.Errorf("%s has an on...= attribute", p)
			}
			if strings.Contains(strings.ToLower(text), "style=") || strings.Contains(strings.ToLower(text), "<style") {
				t.Errorf("%s has inline style", p)
			}
			for _, m := range regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`).FindAllStringSubmatch(text, -1) {
				if strings.TrimSpace(m[2]) != "" || !strings.Contains(m[1], "src=") {
					t.Errorf("%s has an inline script", p)
				}
			}
		}
		return nil
	})
	if n < 5 {
		t.Fatalf("scanned only %d static files", n)
	}
}

var staticImport = regexp.MustCompile(`(?m)^\s*import\s+(?:[^'"]*?\s+from\s+)?['"]([^'"]+)['"]`)

// closure returns the asset names a module loads statically, itself included.
func closure(t *testing.T, name string, seen map[string]bool) {
	if seen[name] {
		return
	}
	a := assets[name]
	if a == nil {
		t.Fatalf("module %s is imported but not shipped", name)
	}
	seen[name] = true
	for _, m := range staticImport.FindAllStringSubmatch(string(a.body), -1) {
		closure(t, path.Join(path.Dir(name), m[1]), seen)
	}
}

func gzSize(a *asset) int {
	if a.gzipped != nil {
		return len(a.gzipped)
	}
	return len(a.body)
}

// TestInitialScriptBudget keeps the JavaScript of the first page load (the
// scripts and module preloads index.html names, and their static imports) under 60 KB gzipped,
// and every shipped file together under 150 KB gzipped.
func TestInitialScriptBudget(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`<(?:script[^>]*\ssrc|link[^>]*rel="modulepreload"[^>]*\shref)="/ui/([^"]+)"`).FindAllStringSubmatch(string(assets["index.html"].body), -1) {
		closure(t, m[1], seen)
	}
	if len(seen) == 0 {
		t.Fatal("index.html loads no script")
	}
	var names []string
	initial := 0
	for n := range seen {
		names = append(names, n)
		initial += gzSize(assets[n])
	}
	sort.Strings(names)
	t.Logf("initial JavaScript: %d bytes gzipped (%s)", initial, strings.Join(names, ", "))
	if initial > 60*1024 {
		t.Errorf("initial JavaScript is %d bytes gzipped, over the 60 KB budget", initial)
	}
	// A first visit to each page: index.html, the stylesheet, the icon, the
	// initial scripts, the page module and what it imports (statically, or
	// dynamically from a literal path, as Search loads the chart module).
	dynamic := regexp.MustCompile(`import\('([^']+)'\)`)
	var pages []string
	for name := range assets {
		if strings.HasPrefix(name, "pages/") {
			pages = append(pages, name)
		}
	}
	sort.Strings(pages)
	for _, name := range pages {
		page := map[string]bool{"index.html": true, "style.css": true, "favicon.svg": true}
		for n := range seen {
			page[n] = true
		}
		closure(t, name, page)
		for n := range page {
			for _, m := range dynamic.FindAllStringSubmatch(string(assets[n].body), -1) {
				if !strings.Contains(m[1], "+") && strings.HasSuffix(m[1], ".js") {
					closure(t, path.Join(path.Dir(n), m[1]), page)
				}
			}
		}
		total := 0
		for n := range page {
			total += gzSize(assets[n])
		}
		t.Logf("first visit to %s: %d bytes gzipped in %d files", name, total, len(page))
		if total > 150*1024 {
			t.Errorf("a first visit to %s transfers %d bytes gzipped, over the 150 KB budget", name, total)
		}
	}
}
