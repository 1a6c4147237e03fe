package server

import (
	"bytes"
	"compress/gzip"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
)

// TestReadBodyKeepsEveryByte: a body read in chunks comes back byte for
// byte, at every size around the chunk boundaries, with its length declared
// or not and gzip-compressed; the server holds exactly the body's length in
// flight afterwards (what its chunks were admitted for beyond it is given
// back), and a body past the limit is refused with everything released.
func TestReadBodyKeepsEveryByte(t *testing.T) {
	s, err := New(Options{HTTPAddr: "127.0.0.1:0", MaxBodyBytes: 200 << 10, MaxInflightBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, bodyChunk - 1, bodyChunk, bodyChunk + 1, 3*bodyChunk + 17, 200 << 10} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32() % 16) // compressible: the gzip body stays under the limit
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(want)
		zw.Close()
		for _, c := range []struct {
			name     string
			body     []byte
			encoding string
			length   bool
		}{{"declared", want, "", true}, {"chunked", want, "", false}, {"gzip", gz.Bytes(), "gzip", true}} {
			r := httptest.NewRequest("POST", "/v1/traces", bytes.NewReader(c.body))
			if !c.length {
				r.ContentLength = -1
			}
			if c.encoding != "" {
				r.Header.Set("Content-Encoding", c.encoding)
			}
			got, held, ierr := s.readBody(r)
			if ierr != nil {
				t.Fatalf("%d bytes, %s: %v", size, c.name, ierr.msg)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes, %s: read %d bytes that differ from the body sent", size, c.name, len(got))
			}
			if held != int64(size) || s.inflight.Load() != int64(size) {
				t.Errorf("%d bytes, %s: held %d, in flight %d; want the body's length", size, c.name, held, s.inflight.Load())
			}
			s.release(held)
		}
	}
	r := httptest.NewRequest("POST", "/v1/traces", bytes.NewReader(make([]byte, 300<<10)))
	r.ContentLength = -1
	_, held, ierr := s.readBody(r)
	if ierr == nil || ierr.status != 413 {
		t.Fatalf("a body past the limit: %v, want 413", ierr)
	}
	s.release(held)
	if n := s.inflight.Load(); n != 0 {
		t.Errorf("%d bytes in flight after the refused body was released", n)
	}
}
