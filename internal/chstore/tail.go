package chstore

import (
	"context"
	"fmt"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// A live tail sees the spans this process acknowledged (its own ingest
// path), not those other rastro processes wrote to the same database.

// maxTails is how many tails the store keeps open at once.
const maxTails = 64

// tailQueue is how many batches a tail holds for its reader; beyond it a
// batch's spans are dropped and counted.
const tailQueue = 64

type tail struct {
	s       *Store
	project string
	f       *query.Filter
	ch      chan []model.Span
	dropped int64 // guarded by s.tailMu
	done    chan struct{}
	closed  bool // guarded by s.tailMu
}

// Tail opens a live tail of the project's spans that f matches.
func (s *Store) Tail(ctx context.Context, project string, f *query.Filter) (store.TailStream, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	if f.NeedsTrace() {
		return nil, fmt.Errorf("trace-level conditions are not supported in a live tail: %w", store.ErrBadRequest)
	}
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	if len(s.tails) >= maxTails {
		return nil, fmt.Errorf("chstore: %d tails open: %w", maxTails, store.ErrTooManyTails)
	}
	t := &tail{s: s, project: project, f: f, ch: make(chan []model.Span, tailQueue), done: make(chan struct{})}
	s.tails[t] = struct{}{}
	return t, nil
}

// offerTails hands an acknowledged write's spans to the project's tails
// (non-blocking).
func (s *Store) offerTails(project string, spans []model.Span) {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	for t := range s.tails {
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

func (s *Store) closeTails() {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	for t := range s.tails {
		t.closeLocked()
	}
}

func (t *tail) Next(ctx context.Context) ([]model.Span, int64, error) {
	select {
	case spans := <-t.ch:
		t.s.tailMu.Lock()
		dropped := t.dropped
		t.dropped = 0
		t.s.tailMu.Unlock()
		return spans, dropped, nil
	case <-t.done:
		return nil, 0, store.ErrClosed
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (t *tail) Close() {
	t.s.tailMu.Lock()
	defer t.s.tailMu.Unlock()
	t.closeLocked()
}

// closeLocked ends the tail; callers hold s.tailMu.
func (t *tail) closeLocked() {
	if !t.closed {
		t.closed = true
		close(t.done)
		delete(t.s.tails, t)
	}
}
