package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// Discovery counts rows: a re-sent span not yet merged by ClickHouse
// (ReplacingMergeTree) is counted once per copy.

// names runs a query of (name, count) rows.
func (s *Store) names(ctx context.Context, sql string, args ...any) ([]store.NameCount, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("discovery query on ClickHouse: %w", err)
	}
	defer rows.Close()
	out := []store.NameCount{}
	for rows.Next() {
		var nc store.NameCount
		var n uint64
		if err := rows.Scan(&nc.Name, &n); err != nil {
			return nil, fmt.Errorf("discovery query on ClickHouse: %w", err)
		}
		nc.Count = int(n)
		out = append(out, nc)
	}
	return out, rows.Err()
}

// Services counts spans per service in the window.
func (s *Store) Services(ctx context.Context, project string, start, end uint64) ([]store.NameCount, store.Result, error) {
	w := s.base(project, start, end)
	out, err := s.names(ctx, "SELECT service, count() FROM spans WHERE "+w.String()+" GROUP BY service ORDER BY service", w.args...)
	return out, store.Result{}, err
}

// Operations counts spans per (name, kind), of one service or all.
func (s *Store) Operations(ctx context.Context, project, service string, start, end uint64) ([]store.NameCount, store.Result, error) {
	if err := s.usable(ctx); err != nil {
		return nil, store.Result{}, err
	}
	w := s.base(project, start, end)
	if service != "" {
		w.add("service = ?", service)
	}
	rows, err := s.conn.Query(ctx, "SELECT name, kind, count() FROM spans WHERE "+w.String()+" GROUP BY name, kind", w.args...)
	if err != nil {
		return nil, store.Result{}, fmt.Errorf("operations query on ClickHouse: %w", err)
	}
	defer rows.Close()
	counts := map[[2]string]int{}
	for rows.Next() {
		var name string
		var kind int32
		var n uint64
		if err := rows.Scan(&name, &kind, &n); err != nil {
			return nil, store.Result{}, fmt.Errorf("operations query on ClickHouse: %w", err)
		}
		counts[[2]string{name, model.SpanKind(kind).String()}] += int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, store.Result{}, fmt.Errorf("operations query on ClickHouse: %w", err)
	}
	out := make([]store.NameCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, store.NameCount{Name: k[0], Type: k[1], Count: n})
	}
	sortOps(out)
	return out, store.Result{}, nil
}

func sortOps(out []store.NameCount) {
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	})
}

// scopedAttrs is an ARRAY JOIN of both scopes' attributes as (key scoped
// "span."/"resource.", type, text); listable is memstore's and the engine's
// rule: a scalar (not an array, map or bytes) of at most 256 bytes.
const scopedAttrs = ` ARRAY JOIN
	arrayConcat(arrayMap(k -> concat('span.', k), span_attr_keys), arrayMap(k -> concat('resource.', k), res_attr_keys)) AS akey,
	arrayConcat(span_attr_types, res_attr_types) AS atype,
	arrayConcat(span_attr_str, res_attr_str) AS astr`

// listable is the SQL of "discovery lists this value" over atype and astr.
var listable = fmt.Sprintf("(atype NOT IN (%d, %d, %d, %d) AND length(astr) <= 256)",
	model.ValueArray, model.ValueKvList, model.ValueBytes, typeLong)

// AttributeKeys counts the listable values per scoped key; a key whose
// values are never listable is listed with 0.
func (s *Store) AttributeKeys(ctx context.Context, project string, start, end uint64) ([]store.NameCount, store.Result, error) {
	w := s.base(project, start, end)
	out, err := s.names(ctx, "SELECT akey, toUInt64(sum("+listable+")) FROM spans"+scopedAttrs+" WHERE "+w.String()+
		" GROUP BY akey ORDER BY akey", w.args...)
	return out, store.Result{}, err
}

// typeName is the SQL naming a listable value's type (atype) as the store
// does; constants only.
var typeName = fmt.Sprintf("transform(atype, [%d, %d, %d, %d], ['%s', '%s', '%s', '%s'], '')",
	model.ValueString, model.ValueBool, model.ValueInt, model.ValueDouble, store.TypeString, store.TypeBool, store.TypeInt, store.TypeFloat)

// AttributeValues counts the listable values of key (scoped, or unscoped
// for both scopes), by count descending, then value, then type.
func (s *Store) AttributeValues(ctx context.Context, project, key string, start, end uint64, limit int) ([]store.NameCount, store.Result, error) {
	if err := s.usable(ctx); err != nil {
		return nil, store.Result{}, err
	}
	w := s.base(project, start, end)
	keys := []string{key}
	if !strings.HasPrefix(key, "span.") && !strings.HasPrefix(key, "resource.") {
		keys = []string{"span." + key, "resource." + key}
	} else {
		keys = append(keys, "span."+key, "resource."+key) // memstore's rule: k == key or a scope + key
	}
	w.add("has(?, akey)", keys)
	w.add(listable)
	sql := "SELECT astr, " + typeName + " AS tname, count() AS n FROM spans" + scopedAttrs + " WHERE " + w.String() +
		" GROUP BY astr, tname ORDER BY n DESC, astr, tname"
	args := w.args
	if limit > 0 {
		sql += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, store.Result{}, fmt.Errorf("attribute values query on ClickHouse: %w", err)
	}
	defer rows.Close()
	out := []store.NameCount{}
	for rows.Next() {
		var nc store.NameCount
		var n uint64
		if err := rows.Scan(&nc.Name, &nc.Type, &n); err != nil {
			return nil, store.Result{}, fmt.Errorf("attribute values query on ClickHouse: %w", err)
		}
		nc.Count = int(n)
		out = append(out, nc)
	}
	return out, store.Result{}, rows.Err()
}
