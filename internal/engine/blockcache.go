package engine

import (
	"container/list"
	"sync"

	"github.com/rastro-dev/rastro/internal/model"
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
}

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
	return &blockCache{max: maxBytes, ll: list.New(), items: map[blockRef]*list.Element{}}
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
