package engine

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/valuestore"
)

// Large attribute values (issue 5). Seal hands string values of span, event
// and link attributes of at least Options.ValueThreshold bytes to the value
// store (DATA_DIR/values) and segments keep only their SHA-256: a system
// prompt repeated on every call is stored once. Spans read from segments
// carry model.ValueRef values; they are resolved (read from the store) only
// for the spans a result returns, and for the spans a filter that looks at
// attribute values or content must test. Memtable spans never hold refs.

// DefaultValueThreshold is the default Options.ValueThreshold (1 KiB).
const DefaultValueThreshold = segment.DefaultValueThreshold

// resolveCacheBytes bounds the values one query keeps after reading them, so
// that a block whose spans share one prompt reads it once, not per span.
const resolveCacheBytes = 8 << 20

// storeValue is the segment writer's StoreValue: it puts v into the value
// store without copying it (Put only reads its argument).
func (e *Engine) storeValue(v string) ([32]byte, error) {
	ref, _, err := e.values.Put(unsafe.Slice(unsafe.StringData(v), len(v)))
	return ref, err
}

// resolver replaces stored-value references by their strings for one query.
// It is not safe for concurrent use.
type resolver struct {
	get    func(valuestore.Ref) ([]byte, error)
	onFail func(valuestore.Ref, error) // called once per unreadable value
	res    *store.Result
	cache  map[[32]byte]string
	bytes  int
	failed map[[32]byte]bool
}

func (e *Engine) newResolver(res *store.Result) *resolver {
	// A query's reader decompresses a frame once for the pieces it holds
	// (the messages of one call are written together).
	return &resolver{get: e.values.NewReader().Get, res: res, onFail: func(ref valuestore.Ref, err error) {
		e.m.valueErrors.Add(1)
		e.log.Error("stored value unreadable; placeholder returned", "ref", ref.String(), "err", err)
	}}
}

// value returns the ValueString a ref stands for: its pieces, read and
// joined. When a piece cannot be read (missing, damaged, I/O error) the
// result is a placeholder string (the ref's AsString, "<stored value
// sha256:HEX, N bytes>"), a warning is added to the query's store.Result
// once per piece, and the failure is counted.
func (rv *resolver) value(v model.Value) model.Value {
	n := v.RefPieces()
	if n == 1 {
		s, ok := rv.piece(v.RefPiece(0))
		if !ok || int64(len(s)) != v.Int {
			if ok {
				rv.fail(v.RefPiece(0), fmt.Errorf("stored value has %d bytes, the segment expects %d", len(s), v.Int))
			}
			return model.StringValue(v.AsString())
		}
		return model.StringValue(s)
	}
	if n == 0 || v.Int < 0 {
		return model.StringValue(v.AsString())
	}
	b := make([]byte, 0, v.Int)
	for i := range n {
		s, ok := rv.piece(v.RefPiece(i))
		if !ok {
			return model.StringValue(v.AsString())
		}
		b = append(b, s...)
	}
	if int64(len(b)) != v.Int {
		rv.fail(v.RefPiece(0), fmt.Errorf("stored value of %d pieces has %d bytes, the segment expects %d", n, len(b), v.Int))
		return model.StringValue(v.AsString())
	}
	return model.StringValue(unsafe.String(unsafe.SliceData(b), len(b)))
}

// piece returns one stored piece, from the query's cache or the store.
func (rv *resolver) piece(h [32]byte) (string, bool) {
	if s, ok := rv.cache[h]; ok {
		return s, true
	}
	if rv.failed[h] {
		return "", false
	}
	b, err := rv.get(valuestore.Ref(h))
	if err != nil {
		rv.fail(h, err)
		return "", false
	}
	s := unsafe.String(unsafe.SliceData(b), len(b)) // Get results are never modified
	if rv.bytes+len(s) <= resolveCacheBytes {
		// A Reader's value may be a window on a whole decompressed frame:
		// the cache keeps a copy of the value alone, so that its bound is
		// what it holds (a scan that resolved every span's messages kept
		// up to 8 MiB of values and every frame around them alive).
		s = strings.Clone(s)
		if rv.cache == nil {
			rv.cache = map[[32]byte]string{}
		}
		rv.cache[h] = s
		rv.bytes += len(s)
	}
	return s, true
}

// fail records an unreadable piece once.
func (rv *resolver) fail(h [32]byte, err error) {
	if rv.failed[h] {
		return
	}
	if rv.failed == nil {
		rv.failed = map[[32]byte]bool{}
	}
	rv.failed[h] = true
	rv.onFail(valuestore.Ref(h), err)
	if rv.res != nil {
		rv.res.Warnings = append(rv.res.Warnings, fmt.Sprintf("stored value %s unreadable: %v", valuestore.Ref(h), err))
	}
}

// span returns s with every ref resolved. s is left untouched (block-cache
// spans are shared and immutable): the attribute, event and link slices
// holding refs are copied; the rest is shared. A span without refs is
// returned as it is.
func (rv *resolver) span(s *model.Span) model.Span {
	out := *s
	if kvsHaveRefs(s.Attributes) {
		out.Attributes = rv.kvs(s.Attributes)
	}
	for i := range s.Events {
		if kvsHaveRefs(s.Events[i].Attributes) {
			if &out.Events[0] == &s.Events[0] {
				out.Events = append([]model.Event(nil), s.Events...)
			}
			out.Events[i].Attributes = rv.kvs(s.Events[i].Attributes)
		}
	}
	for i := range s.Links {
		if kvsHaveRefs(s.Links[i].Attributes) {
			if &out.Links[0] == &s.Links[0] {
				out.Links = append([]model.Link(nil), s.Links...)
			}
			out.Links[i].Attributes = rv.kvs(s.Links[i].Attributes)
		}
	}
	return out
}

// spans resolves every span of a result in place (the slice is the
// caller's; the spans' attribute slices may be shared and are not modified).
func (rv *resolver) spans(spans []model.Span) {
	for i := range spans {
		if spanHasRefs(&spans[i]) {
			spans[i] = rv.span(&spans[i])
		}
	}
}

func (rv *resolver) kvs(kvs []model.KeyValue) []model.KeyValue {
	out := make([]model.KeyValue, len(kvs))
	for i := range kvs {
		out[i] = model.KeyValue{Key: kvs[i].Key, Value: rv.deep(kvs[i].Value)}
	}
	return out
}

// deep resolves refs at any depth, copying only the lists that hold one.
func (rv *resolver) deep(v model.Value) model.Value {
	switch v.Type {
	case model.ValueRef:
		return rv.value(v)
	case model.ValueArray:
		if !valueHasRefs(v) {
			return v
		}
		elems := v.Elems()
		out := make([]model.Value, len(elems))
		for i := range elems {
			out[i] = rv.deep(elems[i])
		}
		return model.ArrayValue(out)
	case model.ValueKvList:
		if !valueHasRefs(v) {
			return v
		}
		return model.KvListValue(rv.kvs(v.Fields()))
	}
	return v
}

// spanHasRefs reports whether a span holds a stored-value reference. It does
// not allocate.
func spanHasRefs(s *model.Span) bool {
	if kvsHaveRefs(s.Attributes) {
		return true
	}
	for i := range s.Events {
		if kvsHaveRefs(s.Events[i].Attributes) {
			return true
		}
	}
	for i := range s.Links {
		if kvsHaveRefs(s.Links[i].Attributes) {
			return true
		}
	}
	return false
}

func kvsHaveRefs(kvs []model.KeyValue) bool {
	for i := range kvs {
		if valueHasRefs(kvs[i].Value) {
			return true
		}
	}
	return false
}

func valueHasRefs(v model.Value) bool {
	switch v.Type {
	case model.ValueRef:
		return true
	case model.ValueArray:
		for _, e := range v.Elems() {
			if valueHasRefs(e) {
				return true
			}
		}
	case model.ValueKvList:
		return kvsHaveRefs(v.Fields())
	}
	return false
}

// match reports whether s matches f, resolving the span's refs first when
// the filter may look at attribute values or content. It returns the span to
// use from then on: s itself, or its resolved copy. The common case (no
// refs, or a filter on fields only) does not allocate.
func (rv *resolver) match(f *query.Filter, s *model.Span) (*model.Span, bool) {
	if (f.Expr == nil && f.Content == nil) || !spanHasRefs(s) {
		return s, f.Match(s)
	}
	cheap := *f // the fields' conditions first: no read for a span they reject
	cheap.Expr, cheap.Content = nil, nil
	if !cheap.Match(s) {
		return s, false
	}
	r := rv.span(s)
	return &r, f.Match(&r)
}

// CollectValues deletes the stored values that no published segment
// references. It holds pubMu, so no seal publishes a segment meanwhile (a
// seal's values are put and synced under the same lock). The live set is
// read from every published segment's section 9 (or, if that section is
// damaged, from its blocks); if a published segment cannot be read at all —
// quarantined at Open, or both unreadable — nothing is deleted and an error
// is returned: a value it may reference must not be lost.
//
// Compaction, retention and erasure call it after they remove segments.
func (e *Engine) CollectValues() (valuestore.CollectStats, error) {
	return e.collectValues(false)
}

// collectValues is CollectValues; purge also rewrites every value pack that
// held a deleted value, so its bytes leave the disk (erasure).
func (e *Engine) collectValues(purge bool) (valuestore.CollectStats, error) {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	if e.closed.Load() {
		return valuestore.CollectStats{}, ErrClosed
	}
	e.mu.RLock()
	quarantined := append([]string(nil), e.quarantined...)
	e.mu.RUnlock()
	segs, release := e.segments()
	defer release()
	if len(quarantined) > 0 {
		return valuestore.CollectStats{}, fmt.Errorf("collect values: %d published segments are quarantined (%s): their references are unknown, nothing deleted",
			len(quarantined), quarantined[0])
	}
	live := map[[32]byte]struct{}{}
	for _, s := range segs {
		if err := e.segmentRefs(s, live); err != nil {
			return valuestore.CollectStats{}, fmt.Errorf("collect values: references of segment %s: %w; nothing deleted", s.name, err)
		}
	}
	collect := e.values.Collect
	if purge {
		collect = e.values.Purge
	}
	st, err := collect(func(yield func(valuestore.Ref) bool) {
		for h := range live {
			if !yield(valuestore.Ref(h)) {
				return
			}
		}
	})
	if err != nil {
		return st, fmt.Errorf("collect values: %w", err)
	}
	return st, nil
}

// segmentRefs adds the refs of one segment to live: from section 9, or, when
// it is damaged, by reading every block.
func (e *Engine) segmentRefs(s *segHandle, live map[[32]byte]struct{}) error {
	if !s.r.HasValueRefs() {
		return nil
	}
	err := s.r.ValueRefs(func(h [32]byte) bool {
		live[h] = struct{}{}
		return true
	})
	if err == nil {
		return nil
	}
	e.m.corruptions.Add(1)
	e.log.Error("value references section unreadable; reading the blocks instead", "segment", s.name, "err", err)
	for i := range s.blocks {
		spans, berr := s.r.ReadBlock(i)
		if berr != nil {
			return fmt.Errorf("section 9: %v; block %d: %w", err, i, berr)
		}
		for j := range spans {
			addRefs(&spans[j], live)
		}
	}
	return nil
}

func addRefs(s *model.Span, live map[[32]byte]struct{}) {
	var val func(v model.Value)
	kvs := func(l []model.KeyValue) {
		for i := range l {
			val(l[i].Value)
		}
	}
	val = func(v model.Value) {
		switch v.Type {
		case model.ValueRef:
			for i := range v.RefPieces() {
				live[v.RefPiece(i)] = struct{}{}
			}
		case model.ValueArray:
			for _, x := range v.Elems() {
				val(x)
			}
		case model.ValueKvList:
			kvs(v.Fields())
		}
	}
	kvs(s.Attributes)
	for i := range s.Events {
		kvs(s.Events[i].Attributes)
	}
	for i := range s.Links {
		kvs(s.Links[i].Attributes)
	}
}

// ValueStats returns the value store's size (distinct values, disk bytes,
// deduplicated puts).
func (e *Engine) ValueStats() valuestore.Stats { return e.values.Stats() }
