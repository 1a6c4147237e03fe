package memstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Erase removes the traces req covers at once: the erasure is done when it
// returns. The checks are the engine's: exactly one of a trace id and a
// query; a query that matches every span, or (without All) every trace of
// the project, is refused.
func (s *Store) Erase(ctx context.Context, req store.EraseRequest) (store.Erasure, error) {
	if err := ctx.Err(); err != nil {
		return store.Erasure{}, err
	}
	bad := func(format string, a ...any) (store.Erasure, error) {
		return store.Erasure{}, fmt.Errorf("invalid erasure request: "+format+": %w", append(a, store.ErrBadRequest)...)
	}
	ids := map[model.TraceID]bool{}
	switch {
	case req.TraceID != nil && req.Query != "":
		return bad("give a trace id or a query, not both")
	case req.TraceID == nil && strings.TrimSpace(req.Query) == "":
		return bad("give a trace id or a query")
	case req.TraceID != nil:
		ids[*req.TraceID] = true
	default:
		expr, err := query.ParseTraceQL(req.Query)
		if err != nil {
			return bad("query: %v", err)
		}
		if expr == nil || expr.String() == "{ }" {
			return bad("query %q matches every span; give a condition", req.Query)
		}
		spans, err := s.matching(ctx, req.Project, &query.Filter{Expr: expr})
		if err != nil {
			return store.Erasure{}, err
		}
		for _, sp := range spans {
			ids[sp.TraceID] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Erasure{}, store.ErrClosed
	}
	kept := s.spans[req.Project][:0:0]
	spared := false
	for _, sp := range s.spans[req.Project] {
		if !ids[sp.TraceID] {
			kept = append(kept, sp)
			spared = true
		}
	}
	if req.Query != "" && !req.All && !spared && len(ids) > 0 {
		return bad("query %q matches every one of the %d traces of project %q; to erase them all, say so", req.Query, len(ids), req.Project)
	}
	erased := len(s.spans[req.Project]) - len(kept)
	s.spans[req.Project] = kept
	for k := range s.index {
		if k.project == req.Project {
			delete(s.index, k)
		}
	}
	for i, sp := range kept {
		s.index[spanKey{req.Project, sp.TraceID, sp.SpanID}] = i
	}
	s.total -= erased
	now := s.opts.Now().UTC()
	st := store.Erasure{ID: uint64(len(s.erasures) + 1), Project: req.Project, Query: req.Query, State: store.EraseDone,
		RequestedAt: now, HiddenAt: &now, DoneAt: &now, Traces: len(ids), SpansErased: int64(erased)}
	if req.TraceID != nil {
		st.TraceID = req.TraceID.String()
	}
	s.erasures = append(s.erasures, st)
	return st, nil
}

// Erasures returns the project's erasures, oldest first.
func (s *Store) Erasures(ctx context.Context, project string) ([]store.Erasure, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []store.Erasure{}
	for _, e := range s.erasures {
		if e.Project == project {
			out = append(out, e)
		}
	}
	return out, nil
}
