package chstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// The erasure pass finishes erasures in the background, so that reading
// them (Erasures, GET /api/v1/erasures) writes nothing. Every
// Options.ErasureEvery it reads the erasures recorded as hidden, in every
// project, and for each counts the rows of its traces left:
//
//   - none: it records the erasure as done (done_at: when a read of this
//     process first found none left, else now);
//   - some, with no erasure's removal under way (system.mutations of the
//     node it is connected to), hidden for longer than one interval (its
//     Erase has started the removal by then): it starts that erasure's
//     removal again. On a replicated cluster of 18.16 the mutations of an
//     erasure were seen to finish with rows of its traces left (about one
//     test run in seven, cause not found), and an Erase whose removal
//     failed to start leaves them too. At most one removal is started per
//     pass, and none while another is under way: a mutation rewrites
//     every part of the table.
//
// A read that finds an erasure done which is not recorded so wakes the
// pass, which then records it at once (and starts no removal). Every rastro
// process on the database runs a pass; two may start the same removal at
// once, which deletes nothing twice.
//
// The pass is one goroutine, started by Open and stopped by Close (which
// cancels the statement it runs and waits for it).

// erasurePass runs finishErasures every ErasureEvery, and records the
// erasures reads found done when one wakes it, until Close.
func (s *Store) erasurePass() {
	defer s.bg.Done()
	t := time.NewTicker(s.opts.ErasureEvery)
	defer t.Stop()
	for {
		restart := false
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
			restart = true
		case <-s.eraseWake:
		}
		ctx, cancel := context.WithTimeout(s.bgCtx, time.Minute)
		if err := s.finishErasures(ctx, restart); err != nil && !errors.Is(err, context.Canceled) {
			s.opts.Logger.Error("clickhouse erasure pass failed; retrying later", "err", err)
		}
		cancel()
	}
}

// finishErasures records the hidden erasures whose rows are gone as done
// and, if restart, starts the removal of one with rows left again (see
// above).
func (s *Store) finishErasures(ctx context.Context, restart bool) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	hidden, err := s.readErasures(ctx, "", "HAVING argMax(state, version) = ?", store.EraseHidden)
	if err != nil {
		return err
	}
	s.forgetSeen(hidden)
	if len(hidden) == 0 {
		return nil
	}
	var running uint64 // erasures' removals under way
	if restart {
		// Read before the rows are counted: the rows a removal finishing
		// after this read leaves are none, not rows to remove again.
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0 AND position(command, 'erased_traces') > 0").Scan(&running); err != nil {
			return fmt.Errorf("read the erasures' removals under way in ClickHouse: %w", err)
		}
	}
	for _, e := range hidden {
		left, err := s.rowsLeft(ctx, e.Project, e.ID)
		if err != nil {
			return err
		}
		if left == 0 {
			at := s.doneTime(e.Project, e.ID)
			e.State, e.DoneAt = store.EraseDone, &at
			if err := s.saveErasure(ctx, e); err != nil {
				return err
			}
			continue
		}
		if !restart || running > 0 || (e.HiddenAt != nil && time.Since(*e.HiddenAt) < s.opts.ErasureEvery) {
			continue
		}
		if err := s.startRemoval(ctx, e.Project, e.ID); err != nil {
			return fmt.Errorf("start the removal of erasure %d of project %q again: %w", e.ID, e.Project, err)
		}
		running = 1
		s.reRemovals.Add(1)
		s.opts.Logger.Info("clickhouse erasure: rows left and no removal under way; removal started again", "project", e.Project, "erasure", e.ID, "rows", left)
	}
	return nil
}

// erasureKey names an erasure in doneSeen.
type erasureKey struct {
	project string
	id      uint64
}

// doneTime returns when a read or pass of this process first found none of
// the erasure's rows left: now, the first time.
func (s *Store) doneTime(project string, id uint64) time.Time {
	s.doneMu.Lock()
	defer s.doneMu.Unlock()
	k := erasureKey{project, id}
	at, ok := s.doneSeen[k]
	if !ok {
		at = time.Now().UTC()
		s.doneSeen[k] = at
	}
	return at
}

// wakePass asks the pass to record the erasures found done.
func (s *Store) wakePass() {
	select {
	case s.eraseWake <- struct{}{}:
	default: // woken already
	}
}

// forgetSeen drops the times of erasures no longer hidden (recorded done,
// by this process or another).
func (s *Store) forgetSeen(hidden []store.Erasure) {
	keep := make(map[erasureKey]bool, len(hidden))
	for _, e := range hidden {
		keep[erasureKey{e.Project, e.ID}] = true
	}
	s.doneMu.Lock()
	defer s.doneMu.Unlock()
	for k := range s.doneSeen {
		if !keep[k] {
			delete(s.doneSeen, k)
		}
	}
}
