package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Erasure on ClickHouse: the request is checked as memstore and the engine
// check it, and recorded (state pending); the traces it covers are written
// to erased_traces, which every query leaves out from then on (hidden at
// once, in every rastro process); its status becomes hidden, and one ALTER
// TABLE spans DELETE (a mutation, run by ClickHouse in the background)
// removes their rows. The erasure is done when no row of its traces is
// left: Erasures reports it so, and the erasure pass (erasepass.go)
// records it, and starts the removal again should rows be left with none
// under way; reading the erasures writes nothing. The acknowledgement is
// ClickHouse's acknowledgement of the erasures and erased_traces inserts,
// which run under the URL's insert_quorum as span inserts do (withQuorum).
// An Erase that fails after recording its request leaves it pending (its
// traces perhaps hidden on some shards): the same request sent again
// carries out that erasure, under its id, rather than start another.
// A trace id stays in erased_traces: spans of it sent again later stay hidden.

// Erase records req, hides its traces and starts their removal.
func (s *Store) Erase(ctx context.Context, req store.EraseRequest) (store.Erasure, error) {
	if err := s.usable(ctx); err != nil {
		return store.Erasure{}, err
	}
	bad := func(format string, a ...any) (store.Erasure, error) {
		return store.Erasure{}, fmt.Errorf("invalid erasure request: "+format+": %w", append(a, store.ErrBadRequest)...)
	}
	var ids []model.TraceID
	switch {
	case req.TraceID != nil && req.Query != "":
		return bad("give a trace id or a query, not both")
	case req.TraceID == nil && strings.TrimSpace(req.Query) == "":
		return bad("give a trace id or a query")
	case req.TraceID != nil:
		ids = []model.TraceID{*req.TraceID}
	default:
		expr, err := query.ParseTraceQL(req.Query)
		if err != nil {
			return bad("query: %v", err)
		}
		if expr == nil || expr.String() == "{ }" {
			return bad("query %q matches every span; give a condition", req.Query)
		}
		// The spans acknowledged before the request are matched too: those
		// still in the WAL in front of ClickHouse are inserted first. (A
		// trace erased by id is hidden whenever its spans arrive.)
		if s.wf != nil {
			if err := s.wf.flush(ctx); err != nil {
				return store.Erasure{}, fmt.Errorf("erasure: %w", err)
			}
		}
		seen := map[model.TraceID]bool{}
		if err := s.matching(ctx, req.Project, &query.Filter{Expr: expr}, nil, 0, func(sp *model.Span) bool {
			if !seen[sp.TraceID] {
				seen[sp.TraceID] = true
				ids = append(ids, sp.TraceID)
			}
			return true
		}); err != nil {
			return store.Erasure{}, err
		}
		if !req.All && len(ids) > 0 {
			w := s.base(req.Project, 0, 0)
			var all uint64
			if err := s.conn.QueryRow(ctx, "SELECT uniqExact(trace_id) FROM spans WHERE "+w.String(), w.args...).Scan(&all); err != nil {
				return store.Erasure{}, fmt.Errorf("count traces in ClickHouse: %w", err)
			}
			if all <= uint64(len(ids)) {
				return bad("query %q matches every one of the %d traces of project %q; to erase them all, say so", req.Query, len(ids), req.Project)
			}
		}
	}
	s.eraseMu.Lock()
	defer s.eraseMu.Unlock()
	st, resumed, err := s.pendingErasure(ctx, req)
	if err != nil {
		return store.Erasure{}, err
	}
	if !resumed {
		now := time.Now().UTC()
		st = store.Erasure{ID: uint64(now.UnixMicro()), Project: req.Project, Query: req.Query, State: store.ErasePending, RequestedAt: now}
		if req.TraceID != nil {
			st.TraceID = req.TraceID.String()
		}
		// Recorded before anything is hidden: should a later step fail,
		// the same request sent again finds it and carries it out.
		if err := s.saveErasure(ctx, st); err != nil {
			return store.Erasure{}, err
		}
	}
	if len(ids) > 0 {
		if err := insertBlock(ctx, s.conn, s.quorum, "INSERT INTO erased_traces (project, trace_id, erasure)", func(b driver.Batch) error {
			for _, id := range ids {
				if err := b.Append(req.Project, string(id[:]), st.ID); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return store.Erasure{}, fmt.Errorf("hide the traces of erasure %d in ClickHouse (send the same request again to carry it out): %w", st.ID, err)
		}
	}
	if resumed {
		// The traces an earlier attempt hid are no longer found by the
		// query: they are the erasure's too.
		if ids, err = s.erasedBy(ctx, req.Project, st.ID); err != nil {
			return store.Erasure{}, err
		}
	}
	now := time.Now().UTC()
	st.State, st.HiddenAt, st.Traces = store.EraseHidden, &now, len(ids)
	if len(ids) > 0 {
		// The rows of its traces, less those an earlier erasure covers.
		var n uint64
		g := s.target.global()
		if err := s.conn.QueryRow(ctx, `SELECT count() FROM spans WHERE project = ?
			AND trace_id `+g+`IN (SELECT trace_id FROM erased_traces WHERE project = ? AND erasure = ?)
			AND trace_id `+g+`NOT IN (SELECT trace_id FROM erased_traces WHERE project = ? AND erasure != ?)`,
			req.Project, req.Project, st.ID, req.Project, st.ID).Scan(&n); err != nil {
			return store.Erasure{}, fmt.Errorf("count spans to erase in ClickHouse: %w", err)
		}
		st.SpansErased = int64(n)
	}
	if err := s.saveErasure(ctx, st); err != nil {
		return store.Erasure{}, fmt.Errorf("%w (the traces of erasure %d are hidden; send the same request again to start their removal)", err, st.ID)
	}
	if len(ids) > 0 {
		if err := s.startRemoval(ctx, req.Project, st.ID); err != nil {
			// Hidden already (the erasure pass starts the removal again).
			// Say so in the status rather than fail a request whose effect
			// on queries has taken place.
			st.Error = "removal not started: " + err.Error()
			if err := s.saveErasure(ctx, st); err != nil {
				return store.Erasure{}, err
			}
		}
	}
	st.TraceIDs = ids // the server erases their log records too
	return st, nil
}

// pendingErasure finds the oldest erasure of the same request (query, or
// trace id) recorded and never carried out: one whose Erase failed after
// recording it.
func (s *Store) pendingErasure(ctx context.Context, req store.EraseRequest) (store.Erasure, bool, error) {
	trace := ""
	if req.TraceID != nil {
		trace = req.TraceID.String()
	}
	rows, err := s.conn.Query(ctx, `SELECT id, argMax(requested_at, version) FROM erasures WHERE project = ? GROUP BY id
		HAVING argMax(state, version) = ? AND argMax(query, version) = ? AND argMax(trace_id, version) = ? ORDER BY id LIMIT 1`,
		req.Project, store.ErasePending, req.Query, trace)
	if err != nil {
		return store.Erasure{}, false, fmt.Errorf("read erasures from ClickHouse: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return store.Erasure{}, false, rows.Err()
	}
	e := store.Erasure{Project: req.Project, Query: req.Query, TraceID: trace, State: store.ErasePending}
	var at uint64
	if err := rows.Scan(&e.ID, &at); err != nil {
		return store.Erasure{}, false, fmt.Errorf("read erasures from ClickHouse: %w", err)
	}
	e.RequestedAt = time.Unix(0, int64(at)).UTC()
	return e, true, nil
}

// erasedBy is the traces erasure id hides.
func (s *Store) erasedBy(ctx context.Context, project string, id uint64) ([]model.TraceID, error) {
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT trace_id FROM erased_traces WHERE project = ? AND erasure = ? ORDER BY trace_id", project, id)
	if err != nil {
		return nil, fmt.Errorf("read the traces of erasure %d from ClickHouse: %w", id, err)
	}
	defer rows.Close()
	var out []model.TraceID
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("read the traces of erasure %d from ClickHouse: %w", id, err)
		}
		var t model.TraceID
		copy(t[:], raw)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the traces of erasure %d from ClickHouse: %w", id, err)
	}
	return out, nil
}

// erasedTables hold whole spans; an erasure removes its traces' rows from
// each, and is done when none is left in any.
var erasedTables = []string{"spans", "spans_by_trace"}

// saveErasure writes a status row (the newest version wins).
func (s *Store) saveErasure(ctx context.Context, e store.Erasure) error {
	ns := func(t *time.Time) uint64 {
		if t == nil {
			return 0
		}
		return uint64(t.UnixNano())
	}
	err := insertRow(ctx, s.conn, s.quorum, "INSERT INTO erasures (project, id, query, trace_id, state, requested_at, hidden_at, done_at, traces, spans_erased, error, version)",
		e.Project, e.ID, e.Query, e.TraceID, e.State, uint64(e.RequestedAt.UnixNano()), ns(e.HiddenAt), ns(e.DoneAt),
		uint64(e.Traces), e.SpansErased, e.Error, uint64(time.Now().UnixNano()))
	if err != nil {
		return fmt.Errorf("record erasure in ClickHouse: %w", err)
	}
	return nil
}

// Erasures returns the project's erasures, oldest first. One recorded as
// hidden whose traces have no row left is reported done (and the erasure
// pass told to record it); one with rows left is reported hidden. It writes
// nothing: restarting a removal is the erasure pass's.
func (s *Store) Erasures(ctx context.Context, project string) ([]store.Erasure, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	out, err := s.readErasures(ctx, "WHERE project = ?", "", project)
	if err != nil {
		return nil, err
	}
	for i := range out {
		e := &out[i]
		if e.State != store.EraseHidden {
			continue // done, or pending: nothing hidden yet to wait for
		}
		left, err := s.rowsLeft(ctx, e.Project, e.ID)
		if err != nil {
			return nil, err
		}
		if left == 0 {
			at := s.doneTime(e.Project, e.ID)
			e.State, e.DoneAt = store.EraseDone, &at
			s.wakePass()
		}
	}
	return out, nil
}

// readErasures reads the newest status of each erasure, by project and
// id, where the WHERE clause where holds and the HAVING clause having
// (either may be "") of the same aggregates, with args bound in order.
func (s *Store) readErasures(ctx context.Context, where, having string, args ...any) ([]store.Erasure, error) {
	rows, err := s.conn.Query(ctx, `SELECT project, id, argMax(query, version), argMax(trace_id, version), argMax(state, version),
		argMax(requested_at, version), argMax(hidden_at, version), argMax(done_at, version), argMax(traces, version),
		argMax(spans_erased, version), argMax(error, version)
		FROM erasures `+where+` GROUP BY project, id `+having+` ORDER BY project, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read erasures from ClickHouse: %w", err)
	}
	defer rows.Close()
	out := []store.Erasure{}
	for rows.Next() {
		var e store.Erasure
		var req, hidden, done, traces uint64
		if err := rows.Scan(&e.Project, &e.ID, &e.Query, &e.TraceID, &e.State, &req, &hidden, &done, &traces, &e.SpansErased, &e.Error); err != nil {
			return nil, fmt.Errorf("read erasures from ClickHouse: %w", err)
		}
		e.Traces = int(traces)
		e.RequestedAt = time.Unix(0, int64(req)).UTC()
		if hidden != 0 {
			t := time.Unix(0, int64(hidden)).UTC()
			e.HiddenAt = &t
		}
		if done != 0 {
			t := time.Unix(0, int64(done)).UTC()
			e.DoneAt = &t
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read erasures from ClickHouse: %w", err)
	}
	return out, nil
}

// rowsLeft counts the rows of erasure id's traces left in the tables that
// hold whole spans.
func (s *Store) rowsLeft(ctx context.Context, project string, id uint64) (uint64, error) {
	var left uint64
	for _, table := range erasedTables {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+table+" WHERE project = ? AND trace_id "+s.target.global()+"IN (SELECT trace_id FROM erased_traces WHERE project = ? AND erasure = ?)",
			project, project, id).Scan(&n); err != nil {
			return 0, fmt.Errorf("check erasure %d in ClickHouse: %w", id, err)
		}
		left += n
	}
	return left, nil
}

// startRemoval starts the removal of an erasure's traces from the tables
// that hold whole spans: one ALTER TABLE ... DELETE (a mutation) each.
func (s *Store) startRemoval(ctx context.Context, project string, id uint64) error {
	for _, table := range erasedTables {
		if err := s.conn.Exec(ctx, s.target.onLocals("ALTER TABLE "+table+" DELETE WHERE project = ? AND trace_id IN (SELECT trace_id FROM erased_traces WHERE project = ? AND erasure = ?)"),
			project, project, id); err != nil {
			return err
		}
	}
	return nil
}
