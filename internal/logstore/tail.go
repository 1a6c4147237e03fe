package logstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// maxTails bounds the live tails open at once, as the span tail's.
const maxTails = 32

// tailQueue bounds the records a subscriber has not read yet; past it,
// new records are dropped and counted.
const tailQueue = 10_000

// subscriber is one live tail: add (under the store's lock) appends the
// matching records of each acknowledged request.
type subscriber struct {
	s       *Store
	q       compiled
	mu      sync.Mutex
	pending []model.LogRecord
	dropped int64
	closed  bool
	wake    chan struct{} // 1-buffered
}

var _ store.LogTail = (*subscriber)(nil)

// TailLogs follows q.Project's newly acknowledged records that match q's
// filters (service, severity, ids, words, Match); its window, limit and
// cursor are ignored.
func (s *Store) TailLogs(q Query) (store.LogTail, error) {
	q.Since, q.Until, q.Before = 0, 0, nil
	sub := &subscriber{s: s, q: compile(q), wake: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if len(s.subs) >= maxTails {
		return nil, fmt.Errorf("%d live log tails are open, the most at once: close one or retry later", maxTails)
	}
	s.subs = append(s.subs, sub)
	return sub, nil
}

// offer hands the subscriber the records of one request that match; the
// store's lock is held.
func (sub *subscriber) offer(project string, es []entry) {
	if project != sub.q.Project {
		return
	}
	sub.mu.Lock()
	n := 0
	for i := range es {
		e := &es[i]
		h := header{time: e.rec.Time(), seq: e.seq, severity: e.rec.SeverityNumber, traceID: e.rec.TraceID, spanID: e.rec.SpanID, service: e.rec.Service}
		if !sub.q.headerMatch(&h) || !sub.q.entryMatch(e) {
			continue
		}
		if len(sub.pending) >= tailQueue {
			sub.dropped++
			continue
		}
		sub.pending = append(sub.pending, e.rec)
		n++
	}
	sub.mu.Unlock()
	if n > 0 {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// Next implements store.LogTail.
func (sub *subscriber) Next(ctx context.Context) ([]model.LogRecord, int64, error) {
	for {
		sub.mu.Lock()
		recs, dropped, closed := sub.pending, sub.dropped, sub.closed
		sub.pending, sub.dropped = nil, 0
		sub.mu.Unlock()
		if len(recs) > 0 || dropped > 0 {
			return recs, dropped, nil
		}
		if closed {
			return nil, 0, ErrClosed
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-sub.wake:
		}
	}
}

// Close implements store.LogTail.
func (sub *subscriber) Close() {
	s := sub.s
	s.mu.Lock()
	for i, x := range s.subs {
		if x == sub {
			s.subs = append(s.subs[:i:i], s.subs[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	sub.end()
}

func (sub *subscriber) end() {
	sub.mu.Lock()
	sub.closed = true
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}
