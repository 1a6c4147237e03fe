package chstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Columns a whole span is read from: the body, plus the LLM fields derived
// at ingest (kept as they were priced then).
const readColumns = `trace_id, span_id, start, ingested, body,
	llm, llm_provider, llm_request_model, llm_response_model, llm_operation, llm_session, llm_user, llm_agent, llm_tool,
	llm_input_tokens, llm_output_tokens, llm_cache_read_tokens, llm_cache_creation_tokens, llm_reasoning_tokens,
	llm_cost_nano_usd, llm_cost_source, llm_ttft, llm_counted`

// stored is one span row as read.
type stored struct {
	span     model.Span
	start    uint64
	ingested uint64
}

type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// scanSpans reads rows of readColumns, calling visit for each until it
// returns false.
func scanSpans(rows rowScanner, visit func(st *stored) bool) error {
	defer rows.Close()
	for rows.Next() {
		var (
			trace, span, body string
			st                stored
			has, src, counted uint8
			l                 model.LLM
		)
		if err := rows.Scan(&trace, &span, &st.start, &st.ingested, &body,
			&has, &l.Provider, &l.RequestModel, &l.ResponseModel, &l.Operation, &l.SessionID, &l.UserID, &l.AgentName, &l.ToolName,
			&l.InputTokens, &l.OutputTokens, &l.CacheReadTokens, &l.CacheCreationTokens, &l.ReasoningTokens,
			&l.CostNanoUSD, &src, &l.TimeToFirstTokenNanos, &counted); err != nil {
			return fmt.Errorf("read spans from ClickHouse: %w", err)
		}
		b, err := otlp.DecodeProto([]byte(body))
		if err != nil || len(b.Spans) != 1 {
			return fmt.Errorf("span %x/%x: stored body does not decode (%v): %w", trace, span, err, store.ErrCorruption)
		}
		st.span = b.Spans[0]
		if has == 1 {
			l.CostSource, l.Counted = model.CostSource(src), counted == 1
			st.span.LLM = &l
		}
		if !visit(&st) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read spans from ClickHouse: %w", err)
	}
	return nil
}

// maxBoundIDs is the most trace ids one query binds (35 bytes each as SQL).
const maxBoundIDs = 2000

// traces returns the spans of each trace in ids, each span once (the
// newest copy), ordered by start time then span id.
func (s *Store) traces(ctx context.Context, project string, ids []model.TraceID) (map[model.TraceID][]model.Span, error) {
	out := map[model.TraceID][]model.Span{}
	if len(ids) == 0 {
		return out, nil
	}
	if len(ids) > maxBoundIDs { // bound ids stay well under max_query_size
		for len(ids) > 0 {
			part, err := s.traces(ctx, project, ids[:min(len(ids), maxBoundIDs)])
			if err != nil {
				return nil, err
			}
			maps.Copy(out, part)
			ids = ids[min(len(ids), maxBoundIDs):]
		}
		return out, nil
	}
	hexIDs := traceIDs(ids)
	if s.bodyTable() == "spans_by_trace" {
		// One round trip: the trace index's time range, as scalar
		// subqueries (evaluated first, so that the range prunes the day
		// partitions), and the traces' rows, the sorting key's prefix.
		// A trace the index lacks has the range [0, 0]: no row.
		w := s.base(project, 0, 0)
		const ix = " FROM trace_index WHERE project = ? AND trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16)))"
		w.add("start >= (SELECT min(start_min)"+ix, project, hexIDs)
		w.add("start <= (SELECT max(start_max)"+ix, project, hexIDs)
		w.add("trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16))", hexIDs)
		rows, err := s.conn.Query(ctx, "SELECT "+readColumns+" FROM spans_by_trace WHERE "+w.String(), w.args...)
		if err != nil {
			return nil, fmt.Errorf("read traces from ClickHouse: %w", err)
		}
		return newestByTrace(rows)
	}
	var lo, hi uint64
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT min(start_min), max(start_max), count() FROM trace_index WHERE project = ? AND trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16))",
		project, hexIDs).Scan(&lo, &hi, &n); err != nil {
		return nil, fmt.Errorf("look up traces in ClickHouse: %w", err)
	}
	if n == 0 {
		return out, nil
	}
	// Without spans_by_trace: the time range prunes partitions and minutes.
	w := s.base(project, lo, hi+1)
	w.add("intDiv(start, 60000000000) >= ?", lo/60e9)
	w.add("intDiv(start, 60000000000) <= ?", hi/60e9)
	w.add("trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16))", hexIDs)
	rows, err := s.conn.Query(ctx, "SELECT "+readColumns+" FROM spans WHERE "+w.String(), w.args...)
	if err != nil {
		return nil, fmt.Errorf("read traces from ClickHouse: %w", err)
	}
	return newestByTrace(rows)
}

// newestByTrace groups rows of readColumns by trace, keeping the newest
// copy of each span, ordered by start time then span id.
func newestByTrace(rows rowScanner) (map[model.TraceID][]model.Span, error) {
	out := map[model.TraceID][]model.Span{}
	type key struct {
		trace model.TraceID
		span  model.SpanID
	}
	newest := map[key]*stored{}
	err := scanSpans(rows, func(st *stored) bool {
		k := key{st.span.TraceID, st.span.SpanID}
		if old, ok := newest[k]; !ok || st.ingested > old.ingested {
			c := *st
			newest[k] = &c
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	for k, st := range newest {
		out[k.trace] = append(out[k.trace], st.span)
	}
	for _, spans := range out {
		slices.SortFunc(spans, func(a, b model.Span) int {
			return cmp.Or(cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano), bytes.Compare(a.SpanID[:], b.SpanID[:]))
		})
	}
	return out, nil
}

// Trace returns every span of a trace, by start time.
func (s *Store) Trace(ctx context.Context, project string, id model.TraceID) ([]model.Span, store.Result, error) {
	if err := s.usable(ctx); err != nil {
		return nil, store.Result{}, err
	}
	m, err := s.traces(ctx, project, []model.TraceID{id})
	return m[id], store.Result{}, err
}

// withTraces resolves f's trace-level conditions by reading the traces of
// candidate spans (cached for the query).
func (s *Store) withTraces(ctx context.Context, project string, f *query.Filter, failed *error) *query.Filter {
	if !f.NeedsTrace() {
		return f
	}
	cache := map[model.TraceID]query.TraceInfo{}
	return query.WithTraces(f, func(id model.TraceID) (query.TraceInfo, bool) {
		if ti, ok := cache[id]; ok {
			return ti, true
		}
		spans, _, err := s.Trace(ctx, project, id)
		if err != nil && *failed == nil {
			*failed = err
		}
		if len(spans) == 0 {
			return query.TraceInfo{}, false
		}
		ti := query.TraceInfoOf(spans)
		cache[id] = ti
		return ti, true
	})
}

// Candidate pages: a search reads its first page of candidates sized after
// the answer it wants, and each further page four times larger, up to
// maxCandidatePage.
const (
	minCandidatePage = 64
	maxCandidatePage = 1024 // keeps the ids a page binds well under max_query_size (256 KiB)
	minBodies        = 8    // the fewest bodies read at once once matches are wanted
)

// matching calls visit with the spans f matches, newest first (start
// descending, trace id, span id), after cursor, each span once, until visit
// returns false; want (0: unknown) sizes the first page. Candidates come from
// SQL (the window and f's hints) a page at a time in two steps: the page's
// keys, ordered and limited, from the light columns only (or from the
// attribute index, attrindex.go); then the bodies of those rows, as many at
// a time as matches are still wanted (at least minBodies). f.Match decides.
func (s *Store) matching(ctx context.Context, project string, f *query.Filter, cursor *store.Cursor, want int, visit func(sp *model.Span) bool) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	var traceErr error
	mf := s.withTraces(ctx, project, f, &traceErr)
	var last *store.Cursor
	if cursor != nil {
		c := *cursor
		last = &c
	}
	// A required attribute pair: candidates from the attribute index.
	start, end := s.window(project, f.Start, f.End)
	ix, err := s.attrCandidate(ctx, project, f, start, end)
	if err != nil {
		return err
	}
	if ix != nil {
		s.indexReads.Add(1)
	}
	matched := 0
	page := maxCandidatePage
	if want > 0 {
		page = min(max(2*want, minCandidatePage), maxCandidatePage)
	}
	for ; ; page = min(4*page, maxCandidatePage) {
		bw := s.base(project, f.Start, f.End)
		w := &where{conds: slices.Clone(bw.conds), args: slices.Clone(bw.args)}
		if !w.hints(f) {
			return nil
		}
		w.after(last)
		var keys []store.Cursor
		var err error
		if ix != nil {
			keys, err = s.indexKeys(ctx, project, ix, start, end, last, page)
		} else {
			keys, err = s.keys(ctx, "spans", w, page)
		}
		if err != nil {
			return err
		}
		// The bodies of as many keys as matches are still wanted (a body
		// costs a granule of spans_by_trace), then of the next ones.
		for from := 0; from < len(keys); {
			n := len(keys) - from
			if want > 0 {
				n = min(n, max(want-matched, minBodies))
			}
			spans, err := s.bodies(ctx, bw, keys[from:from+n])
			if err != nil {
				return err
			}
			for i := from; i < from+n; i++ {
				last = &keys[i]
				sp, ok := spans[keys[i]]
				if !ok {
					continue // erased or deleted between the two steps
				}
				if mf.Match(sp) {
					matched++
					if !visit(sp) {
						return traceErr
					}
				}
			}
			from += n
		}
		if traceErr != nil {
			return traceErr
		}
		if len(keys) < page {
			return nil
		}
	}
}

// keys returns the keys of up to page rows of table (spans, attr_index)
// that w selects, newest first, each key once (copies of a re-sent span
// share it).
func (s *Store) keys(ctx context.Context, table string, w *where, page int) ([]store.Cursor, error) {
	rows, err := s.conn.Query(ctx, "SELECT start, trace_id, span_id FROM "+table+" WHERE "+w.String()+
		" GROUP BY start, trace_id, span_id ORDER BY start DESC, trace_id, span_id LIMIT ?", append(w.args, page)...)
	if err != nil {
		return nil, fmt.Errorf("search spans in ClickHouse: %w", err)
	}
	defer rows.Close()
	var out []store.Cursor
	for rows.Next() {
		var c store.Cursor
		var trace, span string
		if err := rows.Scan(&c.Start, &trace, &span); err != nil {
			return nil, fmt.Errorf("search spans in ClickHouse: %w", err)
		}
		copy(c.Trace[:], trace)
		copy(c.Span[:], span)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search spans in ClickHouse: %w", err)
	}
	return out, nil
}

// bodies reads the spans of keys (among the visible spans w selects), the
// newest copy of each: from spans_by_trace, where the keys' trace ids are
// the sorting key's prefix, once it is complete (bytrace.go).
func (s *Store) bodies(ctx context.Context, w *where, keys []store.Cursor) (map[store.Cursor]*model.Span, error) {
	out := make(map[store.Cursor]*model.Span, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	want := make(map[store.Cursor]bool, len(keys))
	var traces []model.TraceID
	spanIDs := make([]string, 0, len(keys))
	for _, k := range keys {
		want[k] = true
		traces = append(traces, k.Trace)
		spanIDs = append(spanIDs, hex.EncodeToString(k.Span[:]))
	}
	b := &where{conds: slices.Clone(w.conds), args: slices.Clone(w.args)}
	b.add("start >= ?", keys[len(keys)-1].Start)
	b.add("start <= ?", keys[0].Start)
	b.add("trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16))", traceIDs(traces))
	b.add("span_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 8))", spanIDs)
	rows, err := s.conn.Query(ctx, "SELECT "+readColumns+" FROM "+s.bodyTable()+" WHERE "+b.String(), b.args...)
	if err != nil {
		return nil, fmt.Errorf("read spans from ClickHouse: %w", err)
	}
	ingested := make(map[store.Cursor]uint64, len(keys))
	err = scanSpans(rows, func(st *stored) bool {
		k := store.Cursor{Start: st.start, Trace: st.span.TraceID, Span: st.span.SpanID}
		if want[k] && (out[k] == nil || st.ingested > ingested[k]) {
			sp := st.span
			out[k], ingested[k] = &sp, st.ingested
		}
		return true
	})
	return out, err
}

// SearchSpans returns a page of matching spans, newest first.
func (s *Store) SearchSpans(ctx context.Context, project string, f *query.Filter, limit int, cursor *store.Cursor) ([]model.Span, *store.Cursor, store.Result, error) {
	if limit <= 0 {
		limit = 20
	}
	var out []model.Span
	err := s.matching(ctx, project, f, cursor, limit+1, func(sp *model.Span) bool {
		out = append(out, *sp)
		return len(out) <= limit
	})
	if err != nil {
		return nil, nil, store.Result{}, err
	}
	var next *store.Cursor
	if len(out) > limit {
		out = out[:limit]
		last := &out[limit-1]
		next = &store.Cursor{Start: last.StartTimeUnixNano, Trace: last.TraceID, Span: last.SpanID}
	}
	return out, next, store.Result{}, nil
}

// SearchTraces returns the traces with the newest matching spans first.
func (s *Store) SearchTraces(ctx context.Context, project string, f *query.Filter, limit int) ([]store.TraceSummary, store.Result, error) {
	if limit <= 0 {
		limit = 20
	}
	var ids []model.TraceID
	seen := map[model.TraceID]bool{}
	err := s.matching(ctx, project, f, nil, limit, func(sp *model.Span) bool {
		if !seen[sp.TraceID] {
			seen[sp.TraceID] = true
			ids = append(ids, sp.TraceID)
		}
		return len(ids) < limit
	})
	if err != nil {
		return nil, store.Result{}, err
	}
	all, err := s.traces(ctx, project, ids)
	if err != nil {
		return nil, store.Result{}, err
	}
	var traceErr error
	mf := s.withTraces(ctx, project, f, &traceErr)
	out := make([]store.TraceSummary, 0, len(ids))
	for _, id := range ids {
		spans := all[id]
		sum := store.Summarize(id, spans)
		for i := range spans {
			if mf.Match(&spans[i]) {
				sum.Matched++
			}
		}
		out = append(out, sum)
	}
	return out, store.Result{}, traceErr
}

// hexID is a trace id as the API writes it.
func hexID(id model.TraceID) string { return hex.EncodeToString(id[:]) }
