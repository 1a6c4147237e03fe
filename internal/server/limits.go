package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits against slow and hostile clients (docs/operations.md, "Slow and
// hostile clients"):
//
//   - the HTTP server's timeouts bound how long a client may take to send its
//     headers (ReadHeaderTimeout) and its whole request (ReadTimeout), how long
//     an answer may take (WriteTimeout) and how long a kept-alive connection
//     may wait (IdleTimeout); MaxHeaderBytes bounds what a connection holds
//     before a request is read. A slow client is cut off at these deadlines
//     whatever it sends, so each holds a connection for a bounded time and a
//     bounded amount of memory.
//   - ingest admits a body's bytes as they arrive (readBody), never what the
//     client declares: a slow body holds only what it has sent.
//   - query requests run at most MaxConcurrentQueries at once (429 and
//     Retry-After beyond), each within QueryTimeout (its context ends then).
//   - streams (live tail) are exempt from the query cap and budget and from
//     the server's read and write timeouts: they set a deadline per write.
//
// Defaults of the limits.
const (
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultReadTimeout          = time.Minute
	DefaultWriteTimeout         = 2 * time.Minute
	DefaultIdleTimeout          = 2 * time.Minute
	DefaultMaxHeaderBytes       = 64 << 10
	DefaultMaxConcurrentQueries = 16
	DefaultQueryTimeout         = 30 * time.Second
	DefaultGRPCMaxStreams       = 64
)

// validateLimits fills the limits' defaults and checks them.
func (o *Options) validateLimits() error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"read-header timeout", &o.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"read timeout", &o.ReadTimeout, DefaultReadTimeout},
		{"write timeout", &o.WriteTimeout, DefaultWriteTimeout},
		{"idle timeout", &o.IdleTimeout, DefaultIdleTimeout},
		{"query timeout", &o.QueryTimeout, DefaultQueryTimeout},
	} {
		if *d.v < 0 {
			return fmt.Errorf("server: %s %v is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MaxHeaderBytes < 0 || o.MaxConcurrentQueries < 0 {
		return fmt.Errorf("server: header limit %d and query cap %d must not be negative", o.MaxHeaderBytes, o.MaxConcurrentQueries)
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxConcurrentQueries == 0 {
		o.MaxConcurrentQueries = DefaultMaxConcurrentQueries
	}
	if o.GRPCMaxStreams == 0 {
		o.GRPCMaxStreams = DefaultGRPCMaxStreams
	}
	if o.ReadHeaderTimeout > o.ReadTimeout {
		return fmt.Errorf("server: read-header timeout %v is above the read timeout %v, which includes the headers", o.ReadHeaderTimeout, o.ReadTimeout)
	}
	if o.WriteTimeout <= o.QueryTimeout {
		return fmt.Errorf("server: write timeout %v must exceed the query timeout %v, or a query that uses its budget could not send its answer", o.WriteTimeout, o.QueryTimeout)
	}
	return nil
}

// limitQuery runs a query route's handler within the query cap and the
// time budget. A request beyond the cap is refused at once with 429 and
// Retry-After (a queue would only add latency to an overloaded server).
// The budget is the request context's deadline: the store stops reading
// then and the handler answers that the budget ran out (failure).
func (s *Server) limitQuery(route string, h http.HandlerFunc) http.HandlerFunc {
	timeouts := s.met.queryTimeouts.WithLabelValues(route)
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.querySlots <- struct{}{}:
		default:
			s.met.queriesRefused.Inc()
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many queries at once: this server runs %d at a time (--max-concurrent-queries); retry after the Retry-After delay", cap(s.querySlots)))
			return
		}
		s.met.queriesRunning.Inc()
		defer func() {
			s.met.queriesRunning.Dec()
			<-s.querySlots
		}()
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.QueryTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
			timeouts.Inc()
		}
	}
}

// overBudget is failure's message for a query stopped by its time budget.
func (s *Server) overBudget() string {
	return fmt.Sprintf("query stopped: it ran past its time budget of %v (--query-timeout); narrow the time window or add conditions", s.opts.QueryTimeout)
}

// structuralBudget is the budget of whole-trace queries (structural
// operators, pipelines): they stop and answer partially (with the reason)
// well before the request's time budget ends.
func (s *Server) structuralBudget() time.Duration {
	return max(time.Nanosecond, min(10*time.Second, s.opts.QueryTimeout/2))
}

// streamDeadlines frees a streaming response from the server's read and
// write timeouts; the stream then sets a deadline per write. The write
// timeout would otherwise cut the stream (HTTP/1 closes the connection,
// HTTP/2 resets the stream). net/http's HTTP/1 server already lifts the read
// deadline once a request without a body has been read; lifting it here
// keeps that so whatever the protocol.
func streamDeadlines(rc *http.ResponseController) {
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
}

// connStates counts the HTTP server's connections by state
// (rastro_http_connections) and those closed before any request reached a
// handler (rastro_http_connections_unused_total): clients cut off at the
// read-header timeout, malformed or oversized headers, probes. The HTTP
// server calls connContext, track and the handler (through served) from its
// connection goroutines.
type connStates struct {
	met *metrics
	mu  sync.Mutex
	// open is each open connection's entry; guarded by mu.
	open map[net.Conn]*connEntry
}

// connEntry is one connection's last state (guarded by connStates.mu) and
// whether a request of it reached a handler.
type connEntry struct {
	state  http.ConnState
	known  bool // state was set
	served atomic.Bool
}

type connKey struct{}

func newConnStates(m *metrics) *connStates {
	return &connStates{met: m, open: map[net.Conn]*connEntry{}}
}

// connContext is the HTTP server's ConnContext hook: it registers the
// connection (before its first state) and puts its entry in the context
// of its requests.
func (c *connStates) connContext(ctx context.Context, conn net.Conn) context.Context {
	e := &connEntry{}
	c.mu.Lock()
	c.open[conn] = e
	c.mu.Unlock()
	return context.WithValue(ctx, connKey{}, e)
}

// served marks the request's connection as having served a request.
func served(r *http.Request) {
	if e, ok := r.Context().Value(connKey{}).(*connEntry); ok {
		e.served.Store(true)
	}
}

// track is the HTTP server's ConnState hook.
func (c *connStates) track(conn net.Conn, to http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.open[conn]
	if e == nil { // not from connContext: count its states all the same
		e = &connEntry{}
		c.open[conn] = e
	}
	if e.known {
		c.met.connections.WithLabelValues(e.state.String()).Dec()
	}
	if to == http.StateClosed || to == http.StateHijacked {
		if !e.served.Load() {
			c.met.connsUnused.Inc()
		}
		delete(c.open, conn)
		return
	}
	e.state, e.known = to, true
	c.met.connections.WithLabelValues(to.String()).Inc()
}
