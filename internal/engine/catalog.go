package engine

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// Caps that bound a catalog's memory whatever the data's cardinality.
const (
	catalogMaxKeys   = 1000 // attribute keys per block
	catalogMaxValues = 200  // distinct values per key per block
	catalogMaxValLen = 256  // longer values are not cataloged
)

// catalog summarises one block (or a memtable) for discovery queries:
// operations per service and attribute keys with their value counts.
type catalog struct {
	ops   map[string]map[string]int // service -> span name -> count
	attrs map[string]map[string]int // "span.key" / "resource.key" -> value key (valueKey) -> count
}

func newCatalog() *catalog {
	return &catalog{ops: map[string]map[string]int{}, attrs: map[string]map[string]int{}}
}

func (c *catalog) add(s *model.Span) {
	ops := c.ops[s.Service]
	if ops == nil {
		ops = map[string]int{}
		c.ops[s.Service] = ops
	}
	ops[opKey(s.Name, s.Kind)]++
	c.addKVs("span.", s.Attributes)
	if s.Resource != nil {
		c.addKVs("resource.", s.Resource.Attributes)
	}
}

func (c *catalog) addKVs(prefix string, kvs []model.KeyValue) {
	for i := range kvs {
		key := prefix + kvs[i].Key
		vals := c.attrs[key]
		if vals == nil {
			if len(c.attrs) >= catalogMaxKeys {
				continue
			}
			vals = map[string]int{}
			c.attrs[key] = vals
		}
		v := kvs[i].Value
		// Stored-value references stand for strings far above catalogMaxValLen.
		if v.Type == model.ValueArray || v.Type == model.ValueKvList || v.Type == model.ValueBytes || v.IsRef() {
			continue
		}
		s := v.AsString()
		if len(s) > catalogMaxValLen {
			continue
		}
		k := valueKey(v.Type, s)
		if _, ok := vals[k]; !ok && len(vals) >= catalogMaxValues {
			continue
		}
		vals[k]++
	}
}

func (c *catalog) merge(o *catalog) {
	for svc, ops := range o.ops {
		dst := c.ops[svc]
		if dst == nil {
			dst = map[string]int{}
			c.ops[svc] = dst
		}
		for n, k := range ops {
			dst[n] += k
		}
	}
	for key, vals := range o.attrs {
		dst := c.attrs[key]
		if dst == nil {
			dst = map[string]int{}
			c.attrs[key] = dst
		}
		for v, k := range vals {
			dst[v] += k
		}
	}
}

// blockCatalog returns the catalog of block i, building and caching it on first use.
func (e *Engine) blockCatalog(s *segHandle, i int) (*catalog, error) {
	s.catMu.Lock()
	c := s.cats[i]
	s.catMu.Unlock()
	if c != nil {
		return c, nil
	}
	spans, err := e.readBlock(s, i)
	if err != nil {
		return nil, err
	}
	c = newCatalog()
	for j := range spans {
		c.add(&spans[j])
	}
	s.catMu.Lock()
	s.cats[i] = c
	s.catMu.Unlock()
	return c, nil
}

// discover merges the catalogs of everything in project overlapping [start, end)
// (0 = unbounded). Segment blocks are included whole when they overlap the
// window, so counts are exact for memtables and block-granular for segments.
func (e *Engine) discover(ctx context.Context, project string, start, end uint64, res *queryResult) (*catalog, error) {
	start = max(start, e.cutoff(project))
	v := e.view()
	defer v.release()
	out := newCatalog()
	for _, m := range v.mems {
		m.scan(func(r *row) bool {
			st := r.span.StartTimeUnixNano
			if r.project == project && (start == 0 || st >= start) && (end == 0 || st < end) {
				out.add(r.span)
			}
			return true
		})
	}
	for _, s := range v.segs {
		for i := range s.blocks {
			b := &s.blocks[i]
			if b.Project != project || (end != 0 && b.MinStart >= end) || (start != 0 && b.MaxStart < start) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			c, err := e.blockCatalog(s, i)
			if err != nil {
				e.readFailed(res, s.name, err)
				continue
			}
			out.merge(c)
		}
	}
	return out, nil
}

// opKey is how a catalog keeps an operation: its name and its spans' kind.
func opKey(name string, k model.SpanKind) string { return name + "\x00" + k.String() }

// splitOpKey splits an operation key into the name and the kind's name.
func splitOpKey(key string) (name, kind string) {
	name, kind, _ = strings.Cut(key, "\x00")
	return name, kind
}

// valueKey is how a catalog keeps a value: its type, then its text, so that
// the int 500 and the string "500" stay apart.
func valueKey(t model.ValueType, s string) string { return string(rune('0'+t)) + s }

// valueType splits a value key into the store's type name and the text.
func valueType(key string) (typ, text string) {
	switch model.ValueType(key[0] - '0') {
	case model.ValueString:
		typ = store.TypeString
	case model.ValueInt:
		typ = store.TypeInt
	case model.ValueDouble:
		typ = store.TypeFloat
	case model.ValueBool:
		typ = store.TypeBool
	}
	return typ, key[1:]
}

func sortedCounts(m map[string]int, limit int) []store.NameCount {
	out := make([]store.NameCount, 0, len(m))
	for k, v := range m {
		out = append(out, store.NameCount{Name: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Services lists the services seen in the window with their span counts.
func (e *Engine) Services(ctx context.Context, project string, start, end uint64) ([]store.NameCount, store.Result, error) {
	var res queryResult
	c, err := e.discover(ctx, project, start, end, &res)
	if err != nil {
		return nil, res.Result, err
	}
	counts := map[string]int{}
	for svc, ops := range c.ops {
		for _, n := range ops {
			counts[svc] += n
		}
	}
	out := sortedCounts(counts, 0)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return finish(out, &res)
}

// Operations lists the span names of one service (every service when
// service is empty) in the window with counts.
func (e *Engine) Operations(ctx context.Context, project, service string, start, end uint64) ([]store.NameCount, store.Result, error) {
	var res queryResult
	c, err := e.discover(ctx, project, start, end, &res)
	if err != nil {
		return nil, res.Result, err
	}
	ops := c.ops[service]
	if service == "" { // every service's span names
		ops = map[string]int{}
		for _, o := range c.ops {
			for n, k := range o {
				ops[n] += k
			}
		}
	}
	out := sortedCounts(ops, 0)
	for i := range out {
		out[i].Name, out[i].Type = splitOpKey(out[i].Name)
	}
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	})
	return finish(out, &res)
}

// AttributeKeys lists attribute keys ("span.x", "resource.y") seen in the window.
func (e *Engine) AttributeKeys(ctx context.Context, project string, start, end uint64) ([]store.NameCount, store.Result, error) {
	var res queryResult
	c, err := e.discover(ctx, project, start, end, &res)
	if err != nil {
		return nil, res.Result, err
	}
	counts := map[string]int{}
	for k, vals := range c.attrs {
		for _, n := range vals {
			counts[k] += n
		}
	}
	out := sortedCounts(counts, 0)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return finish(out, &res)
}

// AttributeValues lists the most frequent values of one attribute key. A key
// without a scope prefix matches both span and resource attributes.
func (e *Engine) AttributeValues(ctx context.Context, project, key string, start, end uint64, limit int) ([]store.NameCount, store.Result, error) {
	var res queryResult
	c, err := e.discover(ctx, project, start, end, &res)
	if err != nil {
		return nil, res.Result, err
	}
	counts := map[string]int{}
	for _, k := range []string{key, "span." + key, "resource." + key} {
		for v, n := range c.attrs[k] {
			counts[v] += n
		}
	}
	out := sortedCounts(counts, 0)
	for i := range out {
		out[i].Type, out[i].Name = valueType(out[i].Name)
	}
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return finish(out, &res)
}
