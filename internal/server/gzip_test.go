package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// TestQueryAnswersAreGzipped: a client that accepts gzip gets JSON answers
// gzipped (smaller, same content); one that does not, or refuses it with
// q=0, gets them plain; errors are JSON either way.
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
		r, b := get("/api/v1/spans?limit=abc", "gzip")
		zr, err = gzip.NewReader(bytes.NewReader(b))
		var e struct{ Error string }
		if r.StatusCode != 400 || err != nil || json.NewDecoder(zr).Decode(&e) != nil || e.Error == "" {
			t.Fatalf("error answer with gzip: %d %v %q", r.StatusCode, err, e.Error)
		}
	})
}
