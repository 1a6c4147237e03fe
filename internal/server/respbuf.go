package server

import "sync"

// Answers are encoded into pooled buffers: an answer goes out in one Write,
// which copies it (into net/http's buffered writer, the gzip writer or the
// window recorder) before it returns, so the buffer is free again then.
// During heavy ingest every byte a query allocates brings the next
// collection closer, and a collection is what a query waits behind.
var respBufs sync.Pool // of *[]byte

// maxPooledResp bounds the buffers kept: a rare huge answer's buffer is left
// to the collector rather than pinned for every small one after it.
const maxPooledResp = 1 << 20

// getRespBuf returns an empty buffer with room for about n bytes.
func getRespBuf(n int) *[]byte {
	if b, ok := respBufs.Get().(*[]byte); ok {
		if cap(*b) < n {
			*b = make([]byte, 0, n)
		}
		return b
	}
	b := make([]byte, 0, max(n, 4096))
	return &b
}

// putRespBuf gives b back once the answer in it is written.
func putRespBuf(b *[]byte) {
	if cap(*b) > maxPooledResp {
		return
	}
	*b = (*b)[:0]
	respBufs.Put(b)
}
