package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// TailHub fans a backend's acknowledged writes out to its live tails: each
// tail receives the spans of its project that its filter matches, in
// batches, without ever blocking the writer; batches a slow reader has no
// room for are dropped and counted. Backends without a tail of their own
// (memstore, chstore) embed one. The zero value is not usable: use
// NewTailHub.
type TailHub struct {
	name       string // the backend, for errors
	max, queue int
	mu         sync.Mutex
	tails      map[*hubTail]struct{}
	closed     bool
}

// NewTailHub returns a hub for at most max tails at once, each holding up to
// queue batches for its reader; name names the backend in errors.
func NewTailHub(name string, max, queue int) *TailHub {
	return &TailHub{name: name, max: max, queue: queue, tails: map[*hubTail]struct{}{}}
}

type hubTail struct {
	h       *TailHub
	project string
	f       *query.Filter
	ch      chan []model.Span
	dropped int64 // guarded by h.mu
	done    chan struct{}
	closed  bool // guarded by h.mu
}

// Open opens a live tail of the project's spans that f matches. Filters
// with trace-level conditions are refused (ErrBadRequest): a tail sees spans
// one write at a time.
func (h *TailHub) Open(ctx context.Context, project string, f *query.Filter) (TailStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.NeedsTrace() {
		return nil, fmt.Errorf("trace-level conditions are not supported in a live tail: %w", ErrBadRequest)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if len(h.tails) >= h.max {
		return nil, fmt.Errorf("%s: %d tails open: %w", h.name, h.max, ErrTooManyTails)
	}
	t := &hubTail{h: h, project: project, f: f, ch: make(chan []model.Span, h.queue), done: make(chan struct{})}
	h.tails[t] = struct{}{}
	return t, nil
}

// Offer hands an acknowledged write's spans to the project's tails.
func (h *TailHub) Offer(project string, spans []model.Span) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t := range h.tails {
		if t.project != project {
			continue
		}
		var keep []model.Span
		for i := range spans {
			if t.f.Match(&spans[i]) {
				keep = append(keep, spans[i])
			}
		}
		if len(keep) == 0 {
			continue
		}
		select {
		case t.ch <- keep:
		default:
			t.dropped += int64(len(keep))
		}
	}
}

// Close ends every tail (their Next returns ErrClosed) and refuses new ones.
func (h *TailHub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for t := range h.tails {
		t.closeLocked()
	}
}

func (t *hubTail) Next(ctx context.Context) ([]model.Span, int64, error) {
	select {
	case spans := <-t.ch:
		t.h.mu.Lock()
		dropped := t.dropped
		t.dropped = 0
		t.h.mu.Unlock()
		return spans, dropped, nil
	case <-t.done:
		return nil, 0, ErrClosed
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (t *hubTail) Close() {
	t.h.mu.Lock()
	defer t.h.mu.Unlock()
	t.closeLocked()
}

// closeLocked ends the tail; callers hold h.mu.
func (t *hubTail) closeLocked() {
	if !t.closed {
		t.closed = true
		close(t.done)
		delete(t.h.tails, t)
	}
}
