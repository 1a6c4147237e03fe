package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

const (
	// tailKeepalive is how often an idle tail stream sends a comment, so
	// that proxies keep the connection and the client notices a dead server.
	tailKeepalive = 15 * time.Second
	// tailWriteTimeout is how long one write to a tail client may block: a
	// client that reads nothing for that long is disconnected.
	tailWriteTimeout = 30 * time.Second
)

// handleTail streams the spans of the project that match the filter
// parameters as they are acknowledged, as server-sent events:
//
//	: tail open                        once the subscription is registered
//	event: spans   data: {"spans":[...]}
//	event: dropped data: {"dropped":N}  spans skipped because the client read too slowly
//	: keepalive                        every 15 s
//
// The stream ends when the client goes away or the server shuts down.
func (s *Server) handleTail(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	f, ok := parseFilter(w, r)
	if !ok {
		return
	}
	for _, p := range []string{"limit", "cursor"} {
		if r.URL.Query().Has(p) {
			writeError(w, http.StatusBadRequest, p+": a tail takes no "+p+"; it streams every matching span until the client disconnects")
			return
		}
	}
	// max_rate caps the spans sent to this client per second (a browser
	// that cannot render more need not receive more); 0 = no cap.
	maxRate, ok := intParam(w, r, "max_rate", 0, 1, 1_000_000)
	if !ok {
		return
	}
	t, err := b.Tail(r.Context(), project, &f)
	if errors.Is(err, store.ErrBadRequest) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer t.Close()
	bucket := tokenBucket{rate: float64(maxRate), tokens: float64(maxRate), last: time.Now()}
	s.streamEvents(w, r, func(ctx context.Context) (event, error) {
		spans, dropped, err := t.Next(ctx)
		var limited int64
		if maxRate > 0 && len(spans) > 0 {
			n := bucket.take(len(spans), time.Now())
			limited = int64(len(spans) - n)
			spans = spans[:n]
		}
		var buf []byte
		if len(spans) > 0 {
			buf = append(buf, "event: spans\ndata: {\"spans\":"...)
			buf = appendSpans(buf, spans)
			buf = append(buf, "}\n\n"...)
		}
		return event{buf, dropped, limited}, err
	})
}

// event is what a stream's producer has for the client: encoded events
// (possibly none), and counts of items dropped (the client read too
// slowly) and limited (max_rate).
type event struct {
	buf              []byte
	dropped, limited int64
}

// streamEvents answers a server-sent event stream: ": tail open" once it
// starts, what next produces (next encodes, so that the writer only
// writes), "dropped" and "limited" events, a keepalive comment every 15 s.
// It ends when the client goes away, when next fails, or when the server
// shuts down. The caller has answered nothing yet.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, next func(ctx context.Context) (event, error)) {
	// Server shutdown ends the stream: Shutdown waits for handlers. A write
	// blocked on a client that reads nothing fails at its deadline, or at
	// once when the stream ends.
	ctx, cancel := contextUntil(r.Context(), s.stopping)
	defer cancel()
	rc := http.NewResponseController(w)
	// The server's write timeout would cut the stream: each write sets its
	// own deadline instead (write, below), and the read timeout is lifted.
	streamDeadlines(rc)
	stopDeadline := context.AfterFunc(ctx, func() { rc.SetWriteDeadline(time.Now()) })
	defer func() {
		// The connection may serve another request after the stream ends
		// (the backend closed): it must not keep a deadline.
		if stopDeadline() {
			rc.SetWriteDeadline(time.Time{})
		}
	}()
	write := func(b []byte) error {
		rc.SetWriteDeadline(time.Now().Add(tailWriteTimeout))
		_, err := w.Write(b)
		return err
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if write([]byte(": tail open\n\n")) != nil {
		return
	}
	// The ResponseController finds the connection's Flusher through
	// wrappers (the gzip writer passes an event stream through untouched).
	if err := rc.Flush(); err != nil {
		return
	}

	type result struct {
		event
		err error
	}
	results := make(chan result)
	go func() {
		for {
			ev, err := next(ctx)
			select {
			case results <- result{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	keep := time.NewTicker(tailKeepalive)
	defer keep.Stop()
	for {
		var err error
		select {
		case n := <-results:
			if n.err != nil {
				if !errors.Is(n.err, store.ErrClosed) && ctx.Err() == nil {
					s.log.Warn("tail ended", "err", n.err)
				}
				return
			}
			// The spans came before the batches that were dropped.
			if len(n.buf) > 0 {
				err = write(n.buf)
			}
			if err == nil && n.limited > 0 {
				err = write([]byte("event: limited\ndata: {\"limited\":" + strconv.FormatInt(n.limited, 10) + "}\n\n"))
			}
			if err == nil && n.dropped > 0 {
				err = write([]byte("event: dropped\ndata: {\"dropped\":" + strconv.FormatInt(n.dropped, 10) + "}\n\n"))
			}
		case <-keep.C:
			err = write([]byte(": keepalive\n\n"))
		case <-ctx.Done():
			return
		}
		if err != nil || rc.Flush() != nil {
			return // the client went away
		}
	}
}

// tokenBucket admits up to rate items per second, with bursts of up to one
// second's worth.
type tokenBucket struct {
	rate, tokens float64
	last         time.Time
}

// take returns how many of n items may pass now, and spends them.
func (b *tokenBucket) take(n int, now time.Time) int {
	b.tokens = min(b.rate, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
	k := min(n, int(b.tokens))
	b.tokens -= float64(k)
	return k
}
