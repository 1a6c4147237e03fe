package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkListingWindow measures what the window rule adds to a listing
// answer: a page of 20 spans (about 8 KB, held whole and looked at for
// items) and 1000 spans (about 400 KB, streamed), the handler alone and
// wrapped by withWindow.
func BenchmarkListingWindow(b *testing.B) {
	for _, n := range []int{20, 1000} {
		var sb strings.Builder
		sb.WriteString(`{"spans":[`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b1%02x","name":"POST /checkout","service":"checkout","start_time_unix_nano":%d,"attributes":{"http.route":"/checkout","padding":"%s"}}`, i%256, 1764460800000000000+i, strings.Repeat("x", 200))
		}
		sb.WriteString("]}\n")
		body := []byte(sb.String())
		h := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}
		for _, c := range []struct {
			name string
			h    http.HandlerFunc
		}{{"handler", h}, {"withWindow", withWindow(listing{"spans", "spans"}, h)}} {
			b.Run(fmt.Sprintf("spans=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				r := httptest.NewRequest("GET", fmt.Sprintf("/api/v1/spans?limit=%d", n), nil)
				for b.Loop() {
					w := httptest.NewRecorder()
					c.h(w, r)
				}
			})
		}
	}
}
