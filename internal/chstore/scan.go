package chstore

import (
	"context"
	"fmt"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/store/memstore"
)

// Aggregations this slice has no SQL for (the service pages, dependencies,
// sessions, LLM statistics under a TraceQL or content filter) read the
// window's spans and hand them to the reference implementation of the seam
// (memstore), which computes them span by span: exact, and the same answer
// the API's tests hold every backend to, at a cost proportional to the
// window. Options.MaxScanSpans bounds that cost: a larger window is refused
// (400) with a message asking for a narrower one. Materialized rollups are
// to replace this (docs/clickhouse.md).

// scan loads the project's visible spans started in [start, end) that f's
// hints admit (f may be nil) into a fresh memstore. With a trace-level
// condition in f, the whole traces of those spans are loaded, so that the
// reference sees each trace entire.
func (s *Store) scan(ctx context.Context, project string, start, end uint64, f *query.Filter) (*memstore.Store, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	w := s.base(project, start, end)
	if f != nil && !w.hints(f) {
		return memstore.New(memstore.Options{Prices: s.opts.Prices}), nil
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM spans WHERE "+w.String(), w.args...).Scan(&n); err != nil {
		return nil, fmt.Errorf("count spans in ClickHouse: %w", err)
	}
	if n > uint64(s.opts.MaxScanSpans) {
		return nil, fmt.Errorf("this query reads the window's spans one by one on ClickHouse, and the window holds %d of them, more than %d: narrow the window: %w",
			n, s.opts.MaxScanSpans, store.ErrBadRequest)
	}
	rows, err := s.conn.Query(ctx, "SELECT "+readColumns+" FROM spans WHERE "+w.String()+" ORDER BY ingested", w.args...)
	if err != nil {
		return nil, fmt.Errorf("read spans from ClickHouse: %w", err)
	}
	var spans []model.Span
	if err := scanSpans(rows, func(st *stored) bool { spans = append(spans, st.span); return true }); err != nil {
		return nil, err
	}
	if f != nil && f.NeedsTrace() {
		seen := map[model.TraceID]bool{}
		var ids []model.TraceID
		for i := range spans {
			if !seen[spans[i].TraceID] {
				seen[spans[i].TraceID] = true
				ids = append(ids, spans[i].TraceID)
			}
		}
		all, err := s.traces(ctx, project, ids)
		if err != nil {
			return nil, err
		}
		spans = spans[:0]
		for _, id := range ids {
			spans = append(spans, all[id]...)
		}
		if len(spans) > s.opts.MaxScanSpans {
			return nil, fmt.Errorf("this query reads whole traces one span at a time on ClickHouse, %d spans, more than %d: narrow the window: %w",
				len(spans), s.opts.MaxScanSpans, store.ErrBadRequest)
		}
	}
	m := memstore.New(memstore.Options{Prices: s.opts.Prices})
	if err := m.Append(ctx, &store.Write{Project: project, Spans: spans}); err != nil {
		return nil, err
	}
	return m, nil
}

// opsFilter is the filter an OpsQuery's spans meet.
func opsFilter(q *store.OpsQuery) *query.Filter {
	f := &query.Filter{Service: q.Service, Name: q.Name}
	if q.Filter != nil {
		c := *q.Filter
		f = &c
		if q.Service != "" {
			f.Service = q.Service
		}
		if q.Name != "" && f.Name == "" {
			f.Name = q.Name
		}
	}
	f.Start, f.End = q.Start, q.End
	return f
}

// RED computes rate, errors and duration percentiles: without a filter by
// SQL (redrollup.go), with one by scan (exact percentiles).
func (s *Store) RED(ctx context.Context, project string, q *store.OpsQuery) ([]store.REDSeries, store.Result, error) {
	if out, ok, err := s.redSQL(ctx, project, q); ok {
		return out, store.Result{}, err
	}
	m, err := s.scan(ctx, project, q.Start, q.End, opsFilter(q))
	if err != nil {
		return nil, store.Result{}, err
	}
	return m.RED(ctx, project, q)
}

// Heatmap counts spans by time and duration bucket: without a filter by
// SQL (redrollup.go), with one by scan.
func (s *Store) Heatmap(ctx context.Context, project string, q *store.OpsQuery) (store.Heatmap, store.Result, error) {
	if out, ok, err := s.heatmapSQL(ctx, project, q); ok {
		return out, store.Result{}, err
	}
	m, err := s.scan(ctx, project, q.Start, q.End, opsFilter(q))
	if err != nil {
		return store.Heatmap{}, store.Result{}, err
	}
	return m.Heatmap(ctx, project, q)
}

// ErrorGroups groups error spans (by scan).
func (s *Store) ErrorGroups(ctx context.Context, project string, q *store.OpsQuery, limit int) ([]store.ErrorGroup, store.Result, error) {
	m, err := s.scan(ctx, project, q.Start, q.End, opsFilter(q))
	if err != nil {
		return nil, store.Result{}, err
	}
	return m.ErrorGroups(ctx, project, q, limit)
}

// Dependencies counts calls between services in the window (by scan).
func (s *Store) Dependencies(ctx context.Context, project string, start, end uint64) ([]store.Dependency, store.Result, error) {
	m, err := s.scan(ctx, project, start, end, nil)
	if err != nil {
		return nil, store.Result{}, err
	}
	return m.Dependencies(ctx, project, start, end)
}
