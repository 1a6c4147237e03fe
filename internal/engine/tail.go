package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Live tail: a Tail receives the spans of one project that match a filter
// as they are acknowledged, without reading segments. Append hands each
// durable batch to every tail of its project before it returns, so a span
// whose write was acknowledged after the tail opened is seen by it (unless
// the tail fell behind; then it is counted as dropped). Tails never slow
// ingest: a full tail loses batches rather than blocking the WAL's commit.
// What a tail holds is bounded (TailBuffer batches, TailBufferBytes of
// request bytes), and so is the number of tails (MaxTails): a reader that
// stops reading pins at most that much memory beyond the write buffer.

const (
	// TailBuffer is how many batches a tail holds before it drops new ones.
	TailBuffer = 256
	// TailBufferBytes bounds the request bytes of the batches a tail holds
	// (decoded spans take a small multiple of that).
	TailBufferBytes = 16 << 20
	// MaxTails is how many tails the engine keeps open at once.
	MaxTails = 32
	// tailMaxSpans is about the most spans one Next returns: a reader
	// catching up gets its backlog in parts.
	tailMaxSpans = 2000
)

// ErrTooManyTails is returned by Tail when MaxTails are open.
var ErrTooManyTails = kindError{"engine: too many live tails open", store.ErrTooManyTails}

// tailBatch is one durable request's spans, with its size in bytes.
type tailBatch struct {
	spans []model.Span
	bytes int64
}

// Tail is one live subscription. Next and Close may be called from
// different goroutines; Next from one goroutine at a time.
type Tail struct {
	e       *Engine
	project string
	f       *query.Filter
	ch      chan tailBatch
	queued  atomic.Int64 // bytes of the batches in ch
	dropped atomic.Int64 // spans dropped because the tail was full, not yet reported
	done    chan struct{}
	once    sync.Once
}

// tails is the engine's set of open tails, copied on write: Append reads it
// with one atomic load, and pays nothing when it is empty.
type tails struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Tail]
}

// Tail opens a live tail of project: Next returns the spans acknowledged
// from now on that f matches (f's Limit is ignored; its window, if any,
// still applies to span start times). Spans hidden from queries (expired
// by retention, or of an erased trace) are left out here too. The caller
// must Close it. With MaxTails open it returns ErrTooManyTails. ctx only
// bounds the opening: the tail lives until Close.
func (e *Engine) Tail(ctx context.Context, project string, f *query.Filter) (store.TailStream, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.NeedsTrace() {
		return nil, fmt.Errorf("a live tail sees spans as they arrive, before their trace is complete: trace-level conditions (traceDuration, rootName, rootServiceName) are not supported: %w", store.ErrBadRequest)
	}
	t := &Tail{e: e, project: project, f: f, ch: make(chan tailBatch, TailBuffer), done: make(chan struct{})}
	e.tails.mu.Lock()
	defer e.tails.mu.Unlock()
	var next []*Tail
	if cur := e.tails.list.Load(); cur != nil {
		if len(*cur) >= MaxTails {
			return nil, fmt.Errorf("%w (%d)", ErrTooManyTails, MaxTails)
		}
		next = append(next, *cur...)
	}
	next = append(next, t)
	e.tails.list.Store(&next)
	e.m.tailsOpened.Add(1)
	return t, nil
}

// Close ends the tail; a blocked Next returns.
func (t *Tail) Close() {
	t.once.Do(func() {
		close(t.done)
		e := t.e
		e.tails.mu.Lock()
		defer e.tails.mu.Unlock()
		cur := *e.tails.list.Load()
		next := make([]*Tail, 0, len(cur))
		for _, o := range cur {
			if o != t {
				next = append(next, o)
			}
		}
		e.tails.list.Store(&next)
		e.m.tailsClosed.Add(1)
	})
}

// publish hands a durable batch to the tails of its project and reports
// whether any tail took it (and so holds spans after Append). It runs in the
// WAL's commit goroutine and never blocks. The tails only read spans.
func (e *Engine) publish(project string, spans []model.Span, bytes int64) (taken bool) {
	list := e.tails.list.Load()
	if list == nil {
		return false
	}
	for _, t := range *list {
		if t.project != project {
			continue
		}
		if q := t.queued.Load(); q > 0 && q+bytes > TailBufferBytes {
			t.drop(len(spans))
			continue
		}
		select {
		case t.ch <- tailBatch{spans, bytes}:
			t.queued.Add(bytes)
			taken = true
		default:
			t.drop(len(spans))
		}
	}
	return taken
}

func (t *Tail) drop(n int) {
	t.dropped.Add(int64(n))
	t.e.m.tailDropped.Add(int64(n))
}

// Next waits for matching spans and returns them, with the number of spans
// of the project the tail dropped since the last call because its reader
// was too slow (they may or may not have matched). It returns when it has
// spans or a drop to report, or with ctx's error, or with ErrClosed once
// the tail or the engine is closed.
func (t *Tail) Next(ctx context.Context) (spans []model.Span, dropped int64, err error) {
	for {
		select {
		case b := <-t.ch:
			spans = t.keep(spans, b)
			// Take what else is already there, without waiting, up to
			// about tailMaxSpans.
			for more := len(spans) < tailMaxSpans; more; {
				select {
				case b := <-t.ch:
					spans = t.keep(spans, b)
					more = len(spans) < tailMaxSpans
				default:
					more = false
				}
			}
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-t.done:
			return nil, 0, ErrClosed
		case <-t.e.stop:
			return nil, 0, ErrClosed
		}
		if dropped = t.dropped.Swap(0); len(spans) > 0 || dropped > 0 {
			return spans, dropped, nil
		}
	}
}

// keep appends to dst the spans of batch that the filter matches and queries
// may show.
func (t *Tail) keep(dst []model.Span, b tailBatch) []model.Span {
	t.queued.Add(-b.bytes)
	e := t.e
	cutoff := e.cutoff(t.project)
	hs := e.hidden()
	for i := range b.spans {
		s := &b.spans[i]
		if cutoff != 0 && s.StartTimeUnixNano < cutoff || hs.has(t.project, s.TraceID) || !t.f.Match(s) {
			continue
		}
		dst = append(dst, *s)
	}
	return dst
}
