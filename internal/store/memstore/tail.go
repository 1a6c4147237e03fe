package memstore

import (
	"context"
	"fmt"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// maxTails is how many tails the store keeps open at once.
const maxTails = 8

// tailQueue is how many appends a tail holds for its reader; beyond it the
// appends' spans are dropped and counted.
const tailQueue = 64

// tail is one live tail of a Store.
type tail struct {
	s       *Store
	project string
	f       *query.Filter
	ch      chan []model.Span
	dropped int64 // guarded by s.mu
	done    chan struct{}
	closed  bool // guarded by s.mu
}

// Tail opens a live tail of the project's spans that f matches.
func (s *Store) Tail(ctx context.Context, project string, f *query.Filter) (store.TailStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.NeedsTrace() {
		return nil, fmt.Errorf("trace-level conditions are not supported in a live tail: %w", store.ErrBadRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if len(s.tails) >= maxTails {
		return nil, fmt.Errorf("memstore: %d tails open: %w", maxTails, store.ErrTooManyTails)
	}
	t := &tail{s: s, project: project, f: f, ch: make(chan []model.Span, tailQueue), done: make(chan struct{})}
	s.tails[t] = struct{}{}
	return t, nil
}

// offerLocked queues an append's matching spans; callers hold s.mu.
func (t *tail) offerLocked(spans []model.Span) {
	var keep []model.Span
	for i := range spans {
		if t.f.Match(&spans[i]) {
			keep = append(keep, spans[i])
		}
	}
	if len(keep) == 0 {
		return
	}
	select {
	case t.ch <- keep:
	default:
		t.dropped += int64(len(keep))
	}
}

func (t *tail) Next(ctx context.Context) ([]model.Span, int64, error) {
	select {
	case spans := <-t.ch:
		t.s.mu.Lock()
		dropped := t.dropped
		t.dropped = 0
		t.s.mu.Unlock()
		return spans, dropped, nil
	case <-t.done:
		return nil, 0, store.ErrClosed
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (t *tail) Close() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.closeLocked()
}

func (t *tail) closeLocked() {
	if !t.closed {
		t.closed = true
		close(t.done)
		delete(t.s.tails, t)
	}
}
