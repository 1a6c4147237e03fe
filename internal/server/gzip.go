package server

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipMinBytes is the smallest JSON answer that is gzipped. A smaller one
// fits in one TCP segment (1,460 bytes of payload on a 1,500-byte MTU), so
// gzip would save the client no round trip and cost both sides CPU: the
// gzip stream's own setup and, in Go's client, a decompressor of some 40 KB
// per answer. Most answers of a search that found nothing, an absent trace
// and most errors are that small.
const gzipMinBytes = 1400

// gzipJSON compresses the JSON answers of the query APIs for clients that
// accept gzip: a trace of 10,000 spans is about 4 MB of JSON and a tenth of
// that gzipped. Streams (the live tail), non-JSON answers and answers under
// gzipMinBytes pass as they are; whether the content may be gzipped is
// decided when the handler writes its header, whether it is, once its size
// passes gzipMinBytes or the handler returns.
func gzipJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/api/v1/tail" || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		gw := &gzipWriter{ResponseWriter: w}
		defer gw.close()
		next.ServeHTTP(gw, r)
	})
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (and
// does not refuse it with q=0).
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) != "gzip" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// gzipState is where a gzipWriter is in its answer.
type gzipState uint8

const (
	gzipUndecided gzipState = iota // no header yet
	gzipHolding                    // JSON, held while under gzipMinBytes
	gzipPlain                      // written as it is
	gzipOn                         // gzipped
)

type gzipWriter struct {
	http.ResponseWriter
	zw    *gzip.Writer
	state gzipState
	code  int
	held  []byte
}

func (g *gzipWriter) WriteHeader(code int) {
	if g.state != gzipUndecided {
		return // superfluous, as net/http treats a second call
	}
	h := g.Header()
	if strings.HasPrefix(h.Get("Content-Type"), "application/json") && h.Get("Content-Encoding") == "" &&
		code != http.StatusNoContent && code != http.StatusNotModified {
		g.state, g.code = gzipHolding, code
		h.Add("Vary", "Accept-Encoding")
		return
	}
	g.state = gzipPlain
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if g.state == gzipUndecided {
		g.WriteHeader(http.StatusOK)
	}
	switch g.state {
	case gzipOn:
		return g.zw.Write(b)
	case gzipHolding:
		if len(g.held)+len(b) < gzipMinBytes {
			g.held = append(g.held, b...)
			return len(b), nil
		}
		h := g.Header()
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		g.ResponseWriter.WriteHeader(g.code)
		g.zw = gzipPool.Get().(*gzip.Writer)
		g.zw.Reset(g.ResponseWriter)
		g.state = gzipOn
		if _, err := g.zw.Write(g.held); err != nil {
			return 0, err
		}
		g.held = nil
		return g.zw.Write(b)
	}
	return g.ResponseWriter.Write(b)
}

// close ends the answer: a held one is written plain, with its length.
func (g *gzipWriter) close() {
	switch g.state {
	case gzipHolding:
		g.Header().Set("Content-Length", strconv.Itoa(len(g.held)))
		g.ResponseWriter.WriteHeader(g.code)
		_, _ = g.ResponseWriter.Write(g.held) // an error: the client went away, there is no one to tell
	case gzipOn:
		g.zw.Close()
		gzipPool.Put(g.zw)
		g.zw = nil
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }
