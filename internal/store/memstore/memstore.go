// Package memstore is a store.Backend that keeps every span in memory and
// answers every query by brute force. It is the reference implementation of
// the seam: small enough to be obviously right, so that the API's tests
// (routing, errors, JSON shapes, paging, project isolation) run against it,
// and any other backend can be checked against its answers. It keeps nothing
// on disk and has no limits beyond Options.MaxSpans: not for production.
//
// It implements store.Backend and store.StatsReporter; it does not compact
// on request (store.Compactor) nor export metrics.
package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Options configures a Store.
type Options struct {
	// MaxSpans, when positive, is how many spans the store holds at most:
	// an append beyond it fails with store.ErrOverloaded.
	MaxSpans int
	// Prices prices LLM calls at append; nil means llm.DefaultPrices().
	Prices *llm.Prices
	// Now replaces the clock of erasure times (tests); nil means time.Now.
	Now func() time.Time
}

// Store is the in-memory backend. It is safe for concurrent use.
type Store struct {
	opts Options

	mu       sync.RWMutex
	spans    map[string][]model.Span // project -> spans, in append order
	index    map[spanKey]int         // (project, trace, span) -> position in spans[project]
	total    int
	erasures []store.Erasure
	tails    *store.TailHub
	closed   bool
}

type spanKey struct {
	project string
	trace   model.TraceID
	span    model.SpanID
}

// New returns an empty store.
func New(opts Options) *Store {
	if opts.Prices == nil {
		opts.Prices = llm.DefaultPrices()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{opts: opts, spans: map[string][]model.Span{}, index: map[spanKey]int{}, tails: store.NewTailHub("memstore", maxTails, tailQueue)}
}

var _ interface {
	store.Backend
	store.StatsReporter
	store.DependencyReader
} = (*Store)(nil)

// usable reports why a call cannot proceed: ctx's end, or a closed store.
func (s *Store) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// Close ends every tail; every later call fails with store.ErrClosed.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.tails.Close()
}

// Append stores w's spans; a re-sent span (same trace and span id) replaces
// its older copy.
func (s *Store) Append(ctx context.Context, w *store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	llm.Enrich(w.Spans, s.opts.Prices)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if s.opts.MaxSpans > 0 && s.total+len(w.Spans) > s.opts.MaxSpans {
		return fmt.Errorf("memstore holds %d of at most %d spans: %w", s.total, s.opts.MaxSpans, store.ErrOverloaded)
	}
	list := s.spans[w.Project]
	for _, sp := range w.Spans {
		k := spanKey{w.Project, sp.TraceID, sp.SpanID}
		if i, ok := s.index[k]; ok {
			list[i] = sp
			continue
		}
		s.index[k] = len(list)
		list = append(list, sp)
		s.total++
	}
	s.spans[w.Project] = list
	s.tails.Offer(w.Project, w.Spans)
	return nil
}

// matching returns copies of the project's spans that f matches.
func (s *Store) matching(ctx context.Context, project string, f *query.Filter) ([]model.Span, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	f = query.WithTraces(f, func(id model.TraceID) (query.TraceInfo, bool) {
		spans := s.traceLocked(project, id)
		return query.TraceInfoOf(spans), len(spans) > 0
	})
	var out []model.Span
	for i := range s.spans[project] {
		if sp := &s.spans[project][i]; f.Match(sp) {
			out = append(out, *sp)
		}
	}
	return out, nil
}

func (s *Store) trace(project string, id model.TraceID) []model.Span {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.traceLocked(project, id)
}

// traceLocked is trace; callers hold s.mu.
func (s *Store) traceLocked(project string, id model.TraceID) []model.Span {
	var out []model.Span
	for _, sp := range s.spans[project] {
		if sp.TraceID == id {
			out = append(out, sp)
		}
	}
	slices.SortStableFunc(out, func(a, b model.Span) int {
		return cmp.Or(cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano), bytes.Compare(a.SpanID[:], b.SpanID[:]))
	})
	return out
}

// Trace returns the trace's spans by start time.
func (s *Store) Trace(ctx context.Context, project string, id model.TraceID) ([]model.Span, store.Result, error) {
	if err := s.usable(ctx); err != nil {
		return nil, store.Result{}, err
	}
	return s.trace(project, id), store.Result{}, nil
}

// newestFirst is the result order of span search.
func newestFirst(a, b *model.Span) int {
	return cmp.Or(cmp.Compare(b.StartTimeUnixNano, a.StartTimeUnixNano),
		bytes.Compare(a.TraceID[:], b.TraceID[:]), bytes.Compare(a.SpanID[:], b.SpanID[:]))
}

// SearchSpans returns a page of matching spans, newest first.
func (s *Store) SearchSpans(ctx context.Context, project string, f *query.Filter, limit int, cursor *store.Cursor) ([]model.Span, *store.Cursor, store.Result, error) {
	spans, err := s.matching(ctx, project, f)
	if err != nil {
		return nil, nil, store.Result{}, err
	}
	if limit <= 0 {
		limit = 20
	}
	slices.SortFunc(spans, func(a, b model.Span) int { return newestFirst(&a, &b) })
	if cursor != nil {
		at := model.Span{StartTimeUnixNano: cursor.Start, TraceID: cursor.Trace, SpanID: cursor.Span}
		first, _ := slices.BinarySearchFunc(spans, at, func(a, b model.Span) int { return newestFirst(&a, &b) })
		for first < len(spans) && newestFirst(&spans[first], &at) <= 0 {
			first++
		}
		spans = spans[first:]
	}
	var next *store.Cursor
	if len(spans) > limit {
		spans = spans[:limit]
		last := &spans[limit-1]
		next = &store.Cursor{Start: last.StartTimeUnixNano, Trace: last.TraceID, Span: last.SpanID}
	}
	return spans, next, store.Result{}, nil
}

// SearchTraces returns the traces with the newest matching spans first.
func (s *Store) SearchTraces(ctx context.Context, project string, f *query.Filter, limit int) ([]store.TraceSummary, store.Result, error) {
	spans, err := s.matching(ctx, project, f)
	if err != nil {
		return nil, store.Result{}, err
	}
	if limit <= 0 {
		limit = 20
	}
	newest := map[model.TraceID]uint64{}
	matched := map[model.TraceID]int{}
	for _, sp := range spans {
		newest[sp.TraceID] = max(newest[sp.TraceID], sp.StartTimeUnixNano)
		matched[sp.TraceID]++
	}
	ids := make([]model.TraceID, 0, len(newest))
	for id := range newest {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b model.TraceID) int {
		return cmp.Or(cmp.Compare(newest[b], newest[a]), bytes.Compare(a[:], b[:]))
	})
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]store.TraceSummary, 0, len(ids))
	for _, id := range ids {
		sum := store.Summarize(id, s.trace(project, id))
		sum.Matched = matched[id]
		out = append(out, sum)
	}
	return out, store.Result{}, nil
}

// window is the filter of a discovery window.
func window(start, end uint64) *query.Filter { return &query.Filter{Start: start, End: end} }

// byName turns counts into a list ordered by name.
func byName(counts map[string]int) []store.NameCount {
	out := make([]store.NameCount, 0, len(counts))
	for k, v := range counts {
		out = append(out, store.NameCount{Name: k, Count: v})
	}
	slices.SortFunc(out, func(a, b store.NameCount) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Services counts spans per service in the window.
func (s *Store) Services(ctx context.Context, project string, start, end uint64) ([]store.NameCount, store.Result, error) {
	spans, err := s.matching(ctx, project, window(start, end))
	counts := map[string]int{}
	for _, sp := range spans {
		counts[sp.Service]++
	}
	return byName(counts), store.Result{}, err
}

// Operations counts spans per name of one service in the window.
func (s *Store) Operations(ctx context.Context, project, service string, start, end uint64) ([]store.NameCount, store.Result, error) {
	spans, err := s.matching(ctx, project, &query.Filter{Service: service, Start: start, End: end})
	type op struct{ name, kind string }
	counts := map[op]int{}
	for _, sp := range spans {
		counts[op{sp.Name, sp.Kind.String()}]++
	}
	out := make([]store.NameCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, store.NameCount{Name: k.name, Count: n, Type: k.kind})
	}
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	})
	return out, store.Result{}, err
}

// attributes calls visit with every scoped key ("span.k", "resource.k") of
// the span's attributes, and its value when it is a short scalar.
func attributes(sp *model.Span, visit func(key string, v *model.Value)) {
	for i := range sp.Attributes {
		visit("span."+sp.Attributes[i].Key, &sp.Attributes[i].Value)
	}
	if sp.Resource != nil {
		for i := range sp.Resource.Attributes {
			visit("resource."+sp.Resource.Attributes[i].Key, &sp.Resource.Attributes[i].Value)
		}
	}
}

// AttributeKeys counts the attribute values seen per key.
func (s *Store) AttributeKeys(ctx context.Context, project string, start, end uint64) ([]store.NameCount, store.Result, error) {
	spans, err := s.matching(ctx, project, window(start, end))
	counts := map[string]int{}
	for i := range spans {
		attributes(&spans[i], func(key string, v *model.Value) {
			n := counts[key] // a key with no listable value is listed with 0
			if scalar(v) {
				n++
			}
			counts[key] = n
		})
	}
	return byName(counts), store.Result{}, err
}

// AttributeValues counts the values of key ("span.k", "resource.k", or k
// in either scope).
func (s *Store) AttributeValues(ctx context.Context, project, key string, start, end uint64, limit int) ([]store.NameCount, store.Result, error) {
	spans, err := s.matching(ctx, project, window(start, end))
	type typed struct{ typ, text string }
	counts := map[typed]int{}
	for i := range spans {
		attributes(&spans[i], func(k string, v *model.Value) {
			if scalar(v) && (k == key || k == "span."+key || k == "resource."+key) {
				counts[typed{typeName(v.Type), v.AsString()}]++
			}
		})
	}
	out := make([]store.NameCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, store.NameCount{Name: k.text, Count: n, Type: k.typ})
	}
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, store.Result{}, err
}

// typeName is the store's name of a scalar value type.
func typeName(t model.ValueType) string {
	switch t {
	case model.ValueString:
		return store.TypeString
	case model.ValueInt:
		return store.TypeInt
	case model.ValueDouble:
		return store.TypeFloat
	case model.ValueBool:
		return store.TypeBool
	}
	return ""
}

// scalar reports whether discovery lists v: a value of at most 256 bytes
// that is not an array, a map or bytes (as the engine catalogs them).
func scalar(v *model.Value) bool {
	if v.Type == model.ValueArray || v.Type == model.ValueKvList || v.Type == model.ValueBytes {
		return false
	}
	return len(v.AsString()) <= 256
}

// Stats counts the project's spans and traces.
func (s *Store) Stats(ctx context.Context, project string) (store.Stats, error) {
	if err := s.usable(ctx); err != nil {
		return store.Stats{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	traces := map[model.TraceID]bool{}
	for _, sp := range s.spans[project] {
		traces[sp.TraceID] = true
	}
	return store.Stats{Spans: int64(len(s.spans[project])), Traces: int64(len(traces)), BufferSpans: int64(s.total)}, nil
}

// quantiles are exact nearest-rank percentiles of values (nanoseconds).
func quantiles(values []uint64) *store.Quantiles {
	if len(values) == 0 {
		return nil
	}
	slices.Sort(values)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(values)))) - 1
		return float64(values[max(i, 0)])
	}
	return &store.Quantiles{P50: at(0.5), P95: at(0.95), P99: at(0.99), Max: float64(values[len(values)-1])}
}

// Dependencies counts the calls between services among the spans started in
// the window (a span whose parent span, also in the window, belongs to
// another service).
func (s *Store) Dependencies(ctx context.Context, project string, start, end uint64) ([]store.Dependency, store.Result, error) {
	spans, err := s.matching(ctx, project, window(start, end))
	if err != nil {
		return nil, store.Result{}, err
	}
	service := map[[24]byte]string{}
	key := func(t model.TraceID, sp model.SpanID) (k [24]byte) {
		copy(k[:16], t[:])
		copy(k[16:], sp[:])
		return k
	}
	for i := range spans {
		service[key(spans[i].TraceID, spans[i].SpanID)] = spans[i].Service
	}
	calls := map[[2]string][2]int64{}
	for i := range spans {
		sp := &spans[i]
		if p, ok := service[key(sp.TraceID, sp.ParentSpanID)]; ok && !sp.ParentSpanID.IsZero() && p != sp.Service {
			c := calls[[2]string{p, sp.Service}]
			c[0]++
			if sp.StatusCode == model.StatusError {
				c[1]++
			}
			calls[[2]string{p, sp.Service}] = c
		}
	}
	out := make([]store.Dependency, 0, len(calls))
	for k, n := range calls {
		out = append(out, store.Dependency{Parent: k[0], Child: k[1], Calls: n[0], Errors: n[1]})
	}
	slices.SortFunc(out, func(a, b store.Dependency) int {
		return cmp.Or(strings.Compare(a.Parent, b.Parent), strings.Compare(a.Child, b.Child))
	})
	return out, store.Result{}, nil
}
