package engine

import (
	"container/list"
	"slices"
	"sync"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
)

// blockCache keeps recently decoded segment blocks, bounded by an estimate
// of their resident bytes, so that repeated searches over the newest blocks
// do not decode them again. Segments are immutable, so entries never go
// stale; they are dropped by LRU order only (or when their segment closes).
type blockCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	ll    *list.List // front = most recently used
	items map[blockRef]*list.Element
	// seen holds blocks read in part (readMatching) and not cached since:
	// a block read in part again is read whole and cached, so that blocks
	// searched often are served from the cache and blocks searched once
	// cost a partial read. seenRing lists the latest maxSeen entries
	// (seenNext is the oldest once it is full); an entry leaving it is
	// forgotten (or one added since, for the same block: it is then
	// forgotten early, which costs a partial read more).
	seen     map[blockRef]struct{}
	seenRing []blockRef
	seenNext int
}

// maxSeen bounds blockCache.seen: the blocks of about 8M spans at the
// default 2,048 spans a block, in about 250 KB of map and ring.
const maxSeen = 4096

type blockRef struct {
	seg   *segHandle
	block int
}

type cachedBlock struct {
	ref   blockRef
	spans []model.Span
	bytes int64
}

func newBlockCache(maxBytes int64) *blockCache {
	return &blockCache{max: maxBytes, ll: list.New(), items: map[blockRef]*list.Element{}, seen: map[blockRef]struct{}{}}
}

// again records that block ref is read in part and reports whether it was
// read in part before (since it was last forgotten): the caller then reads
// it whole, to cache it. Without a cache it is always false.
func (c *blockCache) again(ref blockRef) bool {
	if c.max <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[ref]; ok {
		delete(c.seen, ref)
		return true
	}
	c.seen[ref] = struct{}{}
	if len(c.seenRing) < maxSeen {
		c.seenRing = append(c.seenRing, ref)
		return false
	}
	delete(c.seen, c.seenRing[c.seenNext])
	c.seenRing[c.seenNext] = ref
	c.seenNext = (c.seenNext + 1) % maxSeen
	return false
}

func (c *blockCache) get(ref blockRef) ([]model.Span, bool) {
	if c.max <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[ref]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cachedBlock).spans, true
}

func (c *blockCache) put(ref blockRef, spans []model.Span) {
	if c.max <= 0 {
		return
	}
	var b int64
	for i := range spans {
		b += spanBytes(&spans[i])
	}
	if b > c.max/4 {
		return // one block must not flush the whole cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[ref]; ok {
		return
	}
	c.items[ref] = c.ll.PushFront(&cachedBlock{ref: ref, spans: spans, bytes: b})
	c.used += b
	for c.used > c.max {
		el := c.ll.Back()
		cb := el.Value.(*cachedBlock)
		c.ll.Remove(el)
		delete(c.items, cb.ref)
		c.used -= cb.bytes
	}
}

// dropSegment forgets every block of a segment (called when it is closed).
func (c *blockCache) dropSegment(s *segHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ref, el := range c.items {
		if ref.seg == s {
			c.ll.Remove(el)
			delete(c.items, ref)
			c.used -= el.Value.(*cachedBlock).bytes
		}
	}
	for k, ref := range c.seenRing {
		if ref.seg == s {
			delete(c.seen, ref)
			c.seenRing[k] = blockRef{} // holds no closed segment
		}
	}
}

// readBlock returns block i of s, from the cache when possible.
func (e *Engine) readBlock(s *segHandle, i int) ([]model.Span, error) {
	ref := blockRef{s, i}
	if spans, ok := e.cache.get(ref); ok {
		return spans, nil
	}
	spans, err := s.r.ReadBlock(i)
	if err != nil {
		return nil, err
	}
	e.cache.put(ref, spans)
	return spans, nil
}

// readMatching returns spans of block i of s that include every span
// satisfying rf (nil: the whole block, as readBlock). A block the cache holds
// is returned whole. Otherwise, when rf may rule rows of the block out, the
// block's filter columns are read and evaluated first (FilterRows) and only
// the candidate rows are decoded. Such a partial read is not cached (the
// cache holds whole blocks, which any query may use), but the second one of
// a block in a while reads it whole and caches it (blockCache.again), as
// does a read where most rows are candidates.
func (e *Engine) readMatching(s *segHandle, i int, rf *segment.RowFilter) ([]model.Span, error) {
	b := &s.blocks[i]
	if rf == nil || !rowFilterDecides(rf, b) {
		return e.readBlock(s, i)
	}
	ref := blockRef{s, i}
	if spans, ok := e.cache.get(ref); ok {
		return spans, nil
	}
	if e.cache.again(ref) {
		return e.readBlock(s, i)
	}
	m, err := s.r.FilterRows(i, rf)
	if err != nil {
		return nil, err
	}
	if 2*m.Rows > b.Spans {
		return e.readBlock(s, i)
	}
	e.m.blocksRowFiltered.Add(1)
	return m.Decode()
}

// blockRowFilter returns the conditions of h that a segment block's rows
// are checked against before they are decoded (readMatching), or nil when h
// has none that rows commonly fail: an attribute value, a service or a span
// name. Times, durations, kinds and status are checked too when there is
// one of those (they rarely rule out enough rows alone: a time window holds
// whole blocks, errors are spread through them).
func blockRowFilter(h *query.Hints) *segment.RowFilter {
	rf := &segment.RowFilter{
		Start: h.Start, End: h.End, MinDuration: h.MinDuration, MaxDuration: h.MaxDuration,
		Services: h.Services, Names: h.Names, HasStatus: h.HasStatus, Status: h.Status, Kinds: h.Kinds,
	}
	scope := func(sc query.Scope) (span, res, ok bool) {
		switch sc {
		case query.ScopeSpan:
			return true, false, true
		case query.ScopeResource:
			return false, true, true
		case query.ScopeAny:
			return true, true, true
		}
		return false, false, false // events, links, scopes: not in these columns
	}
	for _, a := range h.AttrEquals {
		if span, res, ok := scope(a.Scope); ok {
			rf.Attrs = append(rf.Attrs, segment.AttrCond{Span: span, Resource: res, Key: a.Key, Strs: []string{a.Value}})
		}
	}
	for _, a := range h.AttrAnyOf {
		if span, res, ok := scope(a.Scope); ok {
			rf.Attrs = append(rf.Attrs, segment.AttrCond{Span: span, Resource: res, Key: a.Key, Strs: a.Strs, Ints: a.Ints})
		}
	}
	if len(rf.Attrs) == 0 && rf.Services == nil && rf.Names == nil {
		return nil
	}
	return rf
}

// rowFilterDecides reports whether rf may rule out rows of block b: it has
// an attribute condition, or the block holds a service or span name rf
// excludes.
func rowFilterDecides(rf *segment.RowFilter, b *segment.BlockMeta) bool {
	return len(rf.Attrs) > 0 || rf.Services != nil && !subset(b.Services, rf.Services) ||
		rf.Names != nil && !subset(b.Names, rf.Names)
}

// subset reports whether every element of set is in want.
func subset(set, want []string) bool {
	for _, s := range set {
		if !slices.Contains(want, s) {
			return false
		}
	}
	return true
}

// spanBytes estimates the resident size of a decoded span (its strings
// are its own, unlike a write buffer's), for the block cache's budget.
func spanBytes(s *model.Span) int64 {
	b := int64(200 + len(s.Name) + len(s.StatusMessage) + len(s.TraceState))
	b += kvBytes(s.Attributes)
	for i := range s.Events {
		b += 48 + int64(len(s.Events[i].Name)) + kvBytes(s.Events[i].Attributes)
	}
	for i := range s.Links {
		b += 64 + kvBytes(s.Links[i].Attributes)
	}
	return b
}

func kvBytes(kvs []model.KeyValue) int64 {
	var b int64
	for i := range kvs {
		b += 48 + int64(len(kvs[i].Key)) + valueBytes(kvs[i].Value)
	}
	return b
}

func valueBytes(v model.Value) int64 {
	b := int64(len(v.Str)) // strings and bytes values both live in Str
	for _, e := range v.Elems() {
		b += 48 + valueBytes(e)
	}
	return b + kvBytes(v.Fields())
}
