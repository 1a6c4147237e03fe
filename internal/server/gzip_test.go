package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// TestQueryAnswersAreGzipped: a client that accepts gzip gets JSON answers
// of gzipMinBytes or more gzipped (smaller, same content) and smaller ones
// plain with their length; one that does not, or refuses it with q=0, gets
// them plain; errors are JSON either way.
func TestQueryAnswersAreGzipped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer, _ store.Backend) {
		ts.ingest(recentSpans(200, 5), "")
		get := func(path, accept string) (*http.Response, []byte) {
			req, _ := http.NewRequest("GET", ts.base+path, nil)
			req.Header.Set("Accept-Encoding", accept) // set by hand: the client then does not decompress
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, b
		}
		path := "/api/v1/spans?limit=200&since=" + url.QueryEscape(time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339)) // one window for both
		plain, pb := get(path, "identity")
		zipped, zb := get(path, "br, gzip;q=0.8")
		if plain.Header.Get("Content-Encoding") != "" || zipped.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding %q without gzip, %q with it", plain.Header.Get("Content-Encoding"), zipped.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(zb))
		if err != nil {
			t.Fatal(err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(unzipped, pb) || len(zb)*3 > len(pb) {
			t.Fatalf("gzipped answer: %v; %d bytes for %d plain, equal after gunzip: %t", err, len(zb), len(pb), bytes.Equal(unzipped, pb))
		}
		if r, _ := get(path, "gzip;q=0"); r.Header.Get("Content-Encoding") != "" {
			t.Fatal("gzip;q=0 got gzip")
		}
		// Answers under gzipMinBytes go plain, with their length, even to
		// a client that accepts gzip: an error, a search that found nothing.
		r, b := get("/api/v1/spans?limit=abc", "gzip")
		var e struct{ Error string }
		if r.StatusCode != 400 || r.Header.Get("Content-Encoding") != "" || json.Unmarshal(b, &e) != nil || e.Error == "" ||
			r.Header.Get("Content-Length") != strconv.Itoa(len(b)) || len(b) >= gzipMinBytes {
			t.Fatalf("error answer to a gzip client: %d, Content-Encoding %q, Content-Length %q for %d bytes: %s",
				r.StatusCode, r.Header.Get("Content-Encoding"), r.Header.Get("Content-Length"), len(b), b)
		}
		r, b = get("/api/v1/spans?q="+url.QueryEscape(`{ span.user.id = "nobody" }`), "gzip")
		if r.StatusCode != 200 || r.Header.Get("Content-Encoding") != "" || !json.Valid(b) ||
			r.Header.Get("Content-Length") != strconv.Itoa(len(b)) || r.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("empty search to a gzip client: %d, Content-Encoding %q, Content-Length %q, Vary %q: %s",
				r.StatusCode, r.Header.Get("Content-Encoding"), r.Header.Get("Content-Length"), r.Header.Get("Vary"), b)
		}
		// One byte past the threshold is gzipped: the held bytes are not lost.
		for _, limit := range []int{1, 2, 3, 5, 200} {
			path := fmt.Sprintf("/api/v1/spans?limit=%d&since=%s", limit, url.QueryEscape(time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339)))
			plain, pb := get(path, "identity")
			zipped, zb := get(path, "gzip")
			enc := zipped.Header.Get("Content-Encoding")
			if (enc == "gzip") != (len(pb) >= gzipMinBytes) || plain.StatusCode != 200 {
				t.Fatalf("limit %d: %d plain bytes answered with Content-Encoding %q", limit, len(pb), enc)
			}
			if enc == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(zb))
				if err != nil {
					t.Fatal(err)
				}
				if zb, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(zb, pb) {
				t.Fatalf("limit %d: the answer to a gzip client differs from the plain one (%d and %d bytes)", limit, len(zb), len(pb))
			}
		}
	})
}
