package chstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// The attribute index stands in for data-skipping indexes, which Debian's
// 18.16 lacks altogether (INDEX is a syntax error there and the
// experimental setting is unknown; checked). Two materialized views write a
// row per string attribute of every inserted span (span and resource scope,
// values up to maxHotValue) into attr_index, ordered by (project, key,
// hash of the value, start): the spans holding one key = value pair are one
// contiguous key range, newest last. A search whose filter requires such a
// pair reads its candidates' keys there (the rarest pair's, when it requires
// several) instead of testing the attribute arrays of every span of the
// window, then reads those spans as before; query.Filter.Match still
// decides, so a hash collision costs a candidate, never a wrong answer. A
// value no span holds is answered from one empty key range.

// attrIndexTable: the index. Partitioned like spans (retention drops the
// same partition ids).
const attrIndexTable = `CREATE TABLE IF NOT EXISTS attr_index (
	project String,
	scope UInt8,
	key String,
	vhash UInt64,
	start UInt64,
	trace_id FixedString(16),
	span_id FixedString(8)
) ENGINE = MergeTree
PARTITION BY toDate(toDateTime(intDiv(start, 1000000000)))
ORDER BY (project, key, vhash, start)`

// attrIndexView writes one scope's string attributes (type 1,
// model.ValueString; longer values are typeLong and stay out).
func attrIndexView(name string, scope int, prefix string) string {
	return fmt.Sprintf(`CREATE MATERIALIZED VIEW IF NOT EXISTS %s TO attr_index AS
	SELECT project, toUInt8(%d) AS scope, k AS key, cityHash64(v) AS vhash, start, trace_id, span_id
	FROM spans ARRAY JOIN %[3]s_keys AS k, %[3]s_str AS v, %[3]s_types AS t WHERE t = %d`, name, scope, prefix, model.ValueString)
}

// indexScope is the condition on the scope column of an attribute
// condition's scope (constant text).
func indexScope(s query.Scope) string {
	switch s {
	case query.ScopeSpan:
		return "scope = 0"
	case query.ScopeResource:
		return "scope = 1"
	}
	return "scope IN (0, 1)"
}

// attrCandidate picks the attribute pair of f's hints with the fewest
// index rows in [start, end), or nil when the index cannot serve f.
func (s *Store) attrCandidate(ctx context.Context, project string, f *query.Filter, start, end uint64) (*query.AttrEq, error) {
	if s.opts.NoAttrIndex || !s.rollups["attr_index"] {
		return nil, nil
	}
	h := f.Hints()
	var best *query.AttrEq
	bestN := uint64(math.MaxUint64)
	for i := range h.AttrEquals {
		a := &h.AttrEquals[i]
		if len(a.Value) > maxHotValue {
			continue
		}
		if len(h.AttrEquals) == 1 {
			return a, nil
		}
		w := indexWhere(project, a, start, end)
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM attr_index WHERE "+w.String(), w.args...).Scan(&n); err != nil {
			return nil, fmt.Errorf("search the attribute index in ClickHouse: %w", err)
		}
		if n < bestN {
			best, bestN = a, n
		}
	}
	return best, nil
}

func indexWhere(project string, a *query.AttrEq, start, end uint64) *where {
	w := &where{}
	w.add("project = ?", project)
	w.add("key = ?", a.Key)
	w.add("vhash = cityHash64(?)", a.Value)
	w.add(indexScope(a.Scope))
	if start != 0 {
		w.add("start >= ?", start)
	}
	if end != 0 {
		w.add("start < ?", end)
	}
	return w
}

// The time slices a page of the attribute index is read in (indexKeys):
// the first is firstSlice long, each next one sliceGrowth times longer,
// and the last of maxSlices holds the rest of the window.
const (
	firstSlice  = uint64(5 * time.Minute)
	sliceGrowth = 4
	maxSlices   = 5
)

// indexKeys returns the keys of up to page spans holding a, newest first,
// after c, each once.
//
// ClickHouse 18.16 cannot read a key range of attr_index in its order and
// stop at a limit: one query over the window reads every row holding the
// pair (about 1% of the spans for a selective filter: 90,000 rows at 10M
// spans) and sorts them for the newest 64. So the page is read newest time
// slice first, as Tempo and Jaeger's ClickHouse plugin do, and stops once
// it is full: first the last firstSlice before the window's end (or now, or
// the cursor; nothing bounds it above but the window and the cursor, so
// spans stamped in the future are in it), then slices sliceGrowth times
// longer each, then the rest. A slice whose rows are few reads a granule
// or so per part. Slices never split one start time, so keys stay in
// order and each once.
func (s *Store) indexKeys(ctx context.Context, project string, a *query.AttrEq, start, end uint64, c *store.Cursor, page int) ([]store.Cursor, error) {
	if s.opts.NoIndexSlices {
		w := indexWhere(project, a, start, end)
		w.after(c)
		return s.keys(ctx, "attr_index", w, page)
	}
	top := uint64(s.opts.Now().UnixNano())
	if end != 0 {
		top = min(top, end)
	}
	if c != nil {
		top = min(top, c.Start+1)
	}
	var out []store.Cursor
	length := firstSlice
	lo, hi := saturatingSub(top, length), uint64(0) // the slice [lo, hi); 0: unbounded
	for i := 1; ; i++ {
		if lo <= start || i == maxSlices {
			lo = 0 // the last slice: the rest of the window
		}
		w := indexWhere(project, a, start, end)
		w.after(c)
		if lo != 0 {
			w.add("start >= ?", lo)
		}
		if hi != 0 {
			w.add("start < ?", hi)
		}
		s.indexSlices.Add(1)
		keys, err := s.keys(ctx, "attr_index", w, page-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
		if len(out) >= page || lo == 0 {
			return out, nil
		}
		length *= sliceGrowth
		lo, hi = saturatingSub(lo, length), lo
	}
}

func saturatingSub(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}
