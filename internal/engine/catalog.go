package engine

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// Caps that bound a catalog's memory whatever the data's cardinality.
const (
	catalogMaxKeys   = 1000 // attribute keys per block
	catalogMaxValues = 200  // distinct values per key per block
	catalogMaxValLen = 256  // longer values are not cataloged
)

// catalog summarises one block (or a chunk of the write buffer) for
// discovery queries: operations per service and attribute keys, per scope,
// with their value counts. Keys are structs, not concatenated strings, so
// that counting a span allocates nothing unless it adds an entry (whose
// strings are then cloned: a decoded span's strings share its block's or
// buffer's memory, which a catalog must not keep alive).
type catalog struct {
	ops   map[string]map[catOp]int     // service -> operation -> count
	attrs [2]map[string]map[catVal]int // [span, resource]: key -> value -> count
}

const (
	scopeSpan = iota
	scopeResource
)

var scopePrefix = [2]string{"span.", "resource."}

// catOp is an operation: a span name and kind.
type catOp struct {
	name string
	kind model.SpanKind
}

// catVal is an attribute value: a string or bool in s, an int or the bits
// of a double in n; kept apart by type, so that the int 500 and the string
// "500" stay apart.
type catVal struct {
	t model.ValueType
	s string
	n uint64
}

func newCatalog() *catalog {
	return &catalog{ops: map[string]map[catOp]int{}, attrs: [2]map[string]map[catVal]int{{}, {}}}
}

func (c *catalog) add(s *model.Span) {
	c.addOp(s, 1)
	c.addKVs(scopeSpan, s.Attributes, 1)
	if s.Resource != nil {
		c.addKVs(scopeResource, s.Resource.Attributes, 1)
	}
}

// addSpans adds decoded spans, counting each distinct resource's
// attributes once with its spans as weight (a block's and a buffer's spans
// share their resources).
func (c *catalog) addSpans(spans []model.Span) {
	res := map[*model.Resource]int{}
	for i := range spans {
		c.addOp(&spans[i], 1)
		c.addKVs(scopeSpan, spans[i].Attributes, 1)
		if spans[i].Resource != nil {
			res[spans[i].Resource]++
		}
	}
	for r, n := range res {
		c.addKVs(scopeResource, r.Attributes, n)
	}
}

func (c *catalog) addOp(s *model.Span, n int) {
	ops := c.ops[s.Service]
	if ops == nil {
		ops = map[catOp]int{}
		c.ops[strings.Clone(s.Service)] = ops
	}
	k := catOp{s.Name, s.Kind}
	if _, ok := ops[k]; !ok {
		k.name = strings.Clone(k.name)
	}
	ops[k] += n
}

func (c *catalog) addKVs(scope int, kvs []model.KeyValue, weight int) {
	keys := c.attrs[scope]
	for i := range kvs {
		vals := keys[kvs[i].Key]
		if vals == nil {
			if len(c.attrs[scopeSpan])+len(c.attrs[scopeResource]) >= catalogMaxKeys {
				continue
			}
			vals = map[catVal]int{}
			keys[strings.Clone(kvs[i].Key)] = vals
		}
		v := &kvs[i].Value
		var k catVal
		switch v.Type {
		case model.ValueString:
			// Stored-value references stand for strings far above catalogMaxValLen.
			if len(v.Str) > catalogMaxValLen {
				continue
			}
			k = catVal{t: v.Type, s: v.Str}
		case model.ValueBool:
			k = catVal{t: v.Type}
			if v.Bool() {
				k.n = 1
			}
		case model.ValueInt:
			k = catVal{t: v.Type, n: uint64(v.Int)}
		case model.ValueDouble:
			d := v.Double
			if d != d {
				d = math.NaN() // one NaN, whatever its payload
			}
			k = catVal{t: v.Type, n: math.Float64bits(d)}
		default: // arrays, key/value lists, bytes, stored-value references
			continue
		}
		if _, ok := vals[k]; !ok {
			if len(vals) >= catalogMaxValues {
				continue
			}
			k.s = strings.Clone(k.s)
		}
		vals[k] += weight
	}
}

// text is the value as discovery answers show it, with the store's type name.
func (k catVal) text() (typ, text string) {
	switch k.t {
	case model.ValueString:
		return store.TypeString, k.s
	case model.ValueInt:
		return store.TypeInt, strconv.FormatInt(int64(k.n), 10)
	case model.ValueDouble:
		return store.TypeFloat, strconv.FormatFloat(math.Float64frombits(k.n), 'g', -1, 64)
	case model.ValueBool:
		return store.TypeBool, strconv.FormatBool(k.n != 0)
	}
	return "", ""
}

func (c *catalog) merge(o *catalog) {
	for svc, ops := range o.ops {
		dst := c.ops[svc]
		if dst == nil {
			dst = make(map[catOp]int, len(ops))
			c.ops[svc] = dst
		}
		for n, k := range ops {
			dst[n] += k
		}
	}
	for scope := range o.attrs {
		for key, vals := range o.attrs[scope] {
			dst := c.attrs[scope][key]
			if dst == nil {
				dst = make(map[catVal]int, len(vals))
				c.attrs[scope][key] = dst
			}
			for v, k := range vals {
				dst[v] += k
			}
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
	c.addSpans(spans)
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
	// Erased traces are left out at once (the erasure hides them before
	// its pass removes them): a user id an erasure named must not stay in
	// the tag lists. Chunks and blocks holding them are read row by row.
	hs := e.hidden()
	var erased []model.TraceID
	for k := range hs.traces {
		if k.project == project {
			erased = append(erased, k.trace)
		}
	}
	hidden := func(id model.TraceID) bool { return hs.has(project, id) }
	for _, m := range v.mems {
		if err := m.discover(ctx, project, start, end, m.traceChunks(project, erased), hidden, out); err != nil {
			return nil, err
		}
	}
	for _, s := range v.segs {
		tainted, taintFailed := e.taintedBlocks(s, project)
		whole, any := len(tainted) == 0 && !taintFailed, false // the window holds all, some of the project's blocks
		for i := range s.blocks {
			if b := &s.blocks[i]; b.Project == project {
				any = true
				whole = whole && (start == 0 || b.MinStart >= start) && (end == 0 || b.MaxStart < end)
			}
		}
		if !any {
			continue
		}
		if whole {
			c, err := e.projectCatalog(ctx, s, project, res)
			if err != nil {
				return nil, err
			}
			out.merge(c)
			continue
		}
		for i := range s.blocks {
			b := &s.blocks[i]
			if b.Project != project || (end != 0 && b.MinStart >= end) || (start != 0 && b.MaxStart < start) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if tainted[i] || taintFailed {
				spans, err := e.readBlock(s, i)
				if err != nil {
					e.readFailed(res, s.name, err)
					continue
				}
				for j := range spans {
					if !hidden(spans[j].TraceID) {
						out.add(&spans[j])
					}
				}
				continue
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

// projectCatalog returns the merged catalog of a project's blocks in
// segment s, building and caching it on first use (a segment never
// changes). A block that cannot be read is reported in res and left out,
// and the merge is then not cached.
func (e *Engine) projectCatalog(ctx context.Context, s *segHandle, project string, res *queryResult) (*catalog, error) {
	s.catMu.Lock()
	c := s.projCats[project]
	s.catMu.Unlock()
	if c != nil {
		return c, nil
	}
	c = newCatalog()
	complete := true
	for i := range s.blocks {
		if s.blocks[i].Project != project {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bc, err := e.blockCatalog(s, i)
		if err != nil {
			e.readFailed(res, s.name, err)
			complete = false
			continue
		}
		c.merge(bc)
	}
	if complete {
		s.catMu.Lock()
		if s.projCats == nil {
			s.projCats = map[string]*catalog{}
		}
		s.projCats[project] = c
		s.catMu.Unlock()
	}
	return c, nil
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
		ops = map[catOp]int{}
		for _, o := range c.ops {
			for n, k := range o {
				ops[n] += k
			}
		}
	}
	out := make([]store.NameCount, 0, len(ops))
	for op, n := range ops {
		out = append(out, store.NameCount{Name: op.name, Type: op.kind.String(), Count: n})
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
	for scope := range c.attrs {
		for k, vals := range c.attrs[scope] {
			for _, n := range vals {
				counts[scopePrefix[scope]+k] += n
			}
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
	// The key names a scope ("span.x", "resource.x") or both, as a bare key.
	type scoped struct {
		scope int
		key   string
	}
	look := []scoped{{scopeSpan, key}, {scopeResource, key}}
	for scope, p := range scopePrefix {
		if k, ok := strings.CutPrefix(key, p); ok {
			look = append(look, scoped{scope, k})
		}
	}
	counts := map[catVal]int{}
	for _, l := range look {
		for v, n := range c.attrs[l.scope][l.key] {
			counts[v] += n
		}
	}
	out := make([]store.NameCount, 0, len(counts))
	for v, n := range counts {
		nc := store.NameCount{Count: n}
		nc.Type, nc.Name = v.text()
		out = append(out, nc)
	}
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return finish(out, &res)
}

// discover adds to out the catalog of the buffer's live rows of project
// that start in [start, end) (0 = unbounded) and whose trace is not hidden,
// exactly. A full chunk with no superseded row, inside the window and not
// among the chunks holding erased traces (tainted), contributes its cached
// catalog (chunkCatalogs: built on first use, one decoding of its rows for
// every project), so that repeated discovery over a full buffer (Grafana's
// tag lists, the Jaeger UI's services, on every page) does not decode
// every buffered span each time; other chunks are read row by row.
func (m *memtable) discover(ctx context.Context, project string, start, end uint64, tainted map[int]bool, hidden func(model.TraceID) bool, out *catalog) error {
	pid, ok := m.projectID(project)
	if !ok {
		return nil
	}
	a := m.arena()
	d := spanDecoder{reuse: true}
	for ci, cv := range m.chunkViews() {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := cv.c
		minStart, maxStart := c.minStart.Load(), c.maxStart.Load()
		if (end != 0 && minStart >= end) || (start != 0 && maxStart < start) {
			continue
		}
		if cv.rows == chunkRows && c.sum.dead.Load() == 0 && !tainted[ci] && (start == 0 || minStart >= start) && (end == 0 || maxStart < end) {
			if pc := m.chunkCatalogs(cv)[pid]; pc != nil {
				out.merge(pc)
			}
			continue
		}
		for i := range cv.rows {
			r := &c.rows[i]
			if r.project != pid || !r.liveFor(cv.n) || (start != 0 && r.start < start) || (end != 0 && r.start >= end) || hidden(r.traceID) {
				continue
			}
			a.materialise(r, &d.s, &d)
			out.add(&d.s)
		}
	}
	return nil
}

// chunkCatalogs returns the catalogs of a full chunk's rows by project,
// building and caching them on first use. The caller checks that no row of
// the chunk is superseded (chunkSummary.dead is raised before the newer
// copy is published), so every row counts.
func (m *memtable) chunkCatalogs(cv chunkView) map[uint32]*catalog {
	c := cv.c
	if cats := c.sum.cats.Load(); cats != nil {
		return *cats
	}
	cats := map[uint32]*catalog{}
	a := m.arena()
	d := spanDecoder{reuse: true}
	for i := range c.rows {
		r := &c.rows[i]
		pc := cats[r.project]
		if pc == nil {
			pc = newCatalog()
			cats[r.project] = pc
		}
		a.materialise(r, &d.s, &d)
		pc.add(&d.s)
	}
	if c.sum.cats.CompareAndSwap(nil, &cats) {
		var b int64
		for _, pc := range cats {
			b += pc.heapBytes()
		}
		m.bytes.Add(b) // the buffer's estimate holds what it keeps
	}
	return *c.sum.cats.Load()
}

// heapBytes estimates a catalog's heap: each map entry its string (header
// and bytes) and count over the swiss table's 7/8 load, and each inner
// map's header.
func (c *catalog) heapBytes() int64 {
	const entry, mapHeader = 16 + 8 + 1, 48
	opEntry, valEntry := int64(unsafe.Sizeof(catOp{}))+8+1, int64(unsafe.Sizeof(catVal{}))+8+1
	b := int64(0)
	for svc, ops := range c.ops {
		b += (entry+int64(len(svc)))*8/7 + mapHeader
		for k := range ops {
			b += (opEntry + int64(len(k.name))) * 8 / 7
		}
	}
	for scope := range c.attrs {
		for key, vals := range c.attrs[scope] {
			b += (entry+int64(len(key)))*8/7 + mapHeader
			for v := range vals {
				b += (valEntry + int64(len(v.s))) * 8 / 7
			}
		}
	}
	return b
}
