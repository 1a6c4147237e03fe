// Package ui is rastro's embedded web UI: plain ES modules, one stylesheet
// and one index.html under static/, served as they are (no build step).
//
// Handler serves the assets under /ui/ and index.html for every other GET or
// HEAD path, so that deep links (/traces/{id}, /sessions/{id}, ...) load the
// app, which routes on the client with history.pushState. Every response
// carries a strict Content-Security-Policy: the app has no inline script or
// style, and it renders all stored text (span names, attributes, prompts)
// with textContent, never as HTML.
//
// Assets are read, hashed and gzipped once, when the package initialises;
// they are revalidated on every load (Cache-Control: no-cache) and answered
// 304 when the client's ETag still matches.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed static
var staticFS embed.FS

// CSP is the Content-Security-Policy sent with every response of Handler.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one static file, ready to serve.
type asset struct {
	name        string // path under static/, e.g. pages/trace.js
	contentType string
	body        []byte
	gzipped     []byte // nil when gzip does not make it smaller
	etag        string // quoted strong validator of body
}

var (
	assets = mustLoad()
	index  = assets["index.html"]
)

// contentTypes maps the extensions the UI ships to their media types.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
}

func mustLoad() map[string]*asset {
	out := map[string]*asset{}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("static file %s has an extension with no content type", name)
		}
		sum := sha256.Sum256(body)
		a := &asset{name: name, contentType: ct, body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		if buf.Len() < len(body) {
			a.gzipped = buf.Bytes()
		}
		out[name] = a
		return nil
	})
	if err != nil {
		panic("ui: embedded assets are broken (a build invariant): " + err.Error())
	}
	if out["index.html"] == nil {
		panic("ui: static/index.html is missing from the embedded assets (a build invariant)")
	}
	return out
}

// Handler serves the web UI. See the package documentation.
func Handler() http.Handler { return http.HandlerFunc(serve) }

func serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed: the web UI answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	a := index
	if name, ok := strings.CutPrefix(r.URL.Path, "/ui/"); ok {
		if a = assets[name]; a == nil {
			http.Error(w, "no such UI asset: "+r.URL.Path, http.StatusNotFound)
			return
		}
	}
	body, etag := a.body, a.etag
	h.Set("Vary", "Accept-Encoding")
	if a.gzipped != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body, etag = a.gzipped, a.etag[:len(a.etag)-1]+`-gz"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", etag)
	if etagMatches(r.Header.Get("If-None-Match"), a.etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

// etagMatches reports whether an If-None-Match header names the asset's
// validator, in its identity or gzip form (weak comparison, as RFC 9110
// asks for If-None-Match).
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	base := strings.TrimSuffix(etag, `"`)
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag || t == base+`-gz"` {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (listed
// without q=0, or covered by a "*" without q=0).
func acceptsGzip(header string) bool {
	ok := false
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		zero := false
		for _, p := range strings.Split(params, ";") {
			if k, v, found := strings.Cut(strings.TrimSpace(p), "="); found && strings.TrimSpace(k) == "q" {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q == 0 {
					zero = true
				}
			}
		}
		if coding == "gzip" {
			return !zero
		}
		ok = !zero
	}
	return ok
}
