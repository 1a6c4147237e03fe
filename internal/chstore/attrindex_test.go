package chstore

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestAttrIndexSearchEqualsScan: searches whose filter requires an
// attribute pair take their candidates from the attribute index and find
// exactly what a search over spans alone finds, page by page, in the same
// order: span, resource and either scope, pairs present and absent, pairs
// with further conditions and two pairs, windows and expired or erased
// spans. Spans spread from two hours ago to a few minutes in the future
// make the index's pages cross its time slices (indexKeys), and the same
// walk reading each page in one query (NoIndexSlices) agrees too.
func TestAttrIndexSearchEqualsScan(t *testing.T) {
	dsn := chtestURL(t)
	ix := open(t, Options{URL: dsn, Retention: 30 * 24 * time.Hour})
	scan := open(t, Options{URL: dsn, Retention: 30 * 24 * time.Hour, NoAttrIndex: true})
	whole := open(t, Options{URL: dsn, Retention: 30 * 24 * time.Hour, NoIndexSlices: true})
	if !ix.rollups["attr_index"] {
		t.Fatal("the attribute index of a fresh database is not complete")
	}
	ctx := t.Context()
	now := time.Now()
	spans := spansAt(t, 5, 3000, now.Add(-2*time.Hour))
	spans = append(spans, spansAt(t, 7, 600, now.Add(-30*time.Minute))...)
	spans = append(spans, spansAt(t, 8, 300, now.Add(-3*time.Minute))...)
	spans = append(spans, spansAt(t, 9, 100, now.Add(5*time.Minute))...)    // stamped in the future
	spans = append(spans, spansAt(t, 6, 300, now.Add(-40*24*time.Hour))...) // expired
	appendAll(t, ix, "p", slices.Clone(spans))
	appendAll(t, ix, "other", slices.Clone(spans[:500]))
	if _, err := ix.Erase(ctx, store.EraseRequest{Project: "p", TraceID: &spans[10].TraceID}); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(3, 4))
	pair := func(scope string) (string, string) {
		for {
			sp := &spans[rng.IntN(len(spans))]
			kvs := sp.Attributes
			if scope == "resource" || scope == "" && rng.IntN(2) == 0 {
				if sp.Resource == nil {
					continue
				}
				kvs = sp.Resource.Attributes
			}
			var str []model.KeyValue
			for _, kv := range kvs {
				if kv.Value.Type == model.ValueString && kv.Key != "service.name" {
					str = append(str, kv)
				}
			}
			if len(str) > 0 {
				kv := str[rng.IntN(len(str))]
				return kv.Key, kv.Value.Str
			}
		}
	}
	var queries []string
	for _, scope := range []string{"span", "resource", ""} {
		for range 4 {
			k, v := pair(scope)
			queries = append(queries, fmt.Sprintf(`{ %s.%s = %s }`, scope, k, strconv.Quote(v)))
		}
		k, _ := pair(scope)
		queries = append(queries, fmt.Sprintf(`{ %s.%s = "no such value" }`, scope, k))
	}
	k1, v1 := pair("span")
	k2, v2 := pair("resource")
	queries = append(queries,
		fmt.Sprintf(`{ span.%s = %s && duration > 1ms }`, k1, strconv.Quote(v1)),
		fmt.Sprintf(`{ span.%s = %s && resource.%s = %s }`, k1, strconv.Quote(v1), k2, strconv.Quote(v2)),
		fmt.Sprintf(`{ span.%s = %s && status = error }`, k1, strconv.Quote(v1)))

	walk := func(s *Store, f *query.Filter) []string {
		var out []string
		var cur *store.Cursor
		for {
			page, next, _, err := s.SearchSpans(ctx, "p", f, 100, cur)
			if err != nil {
				t.Fatal(err)
			}
			for i := range page {
				out = append(out, page[i].TraceID.String()+"/"+page[i].SpanID.String())
			}
			if next == nil {
				return out
			}
			cur = next
		}
	}
	found := 0
	for i, q := range queries {
		for _, window := range []string{"", "90m"} {
			v := url.Values{"q": {q}}
			if window != "" {
				v.Set("since", window)
			}
			f, err := query.FromValues(v, now)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			before := ix.indexReads.Load()
			got := walk(ix, &f)
			if ix.indexReads.Load() == before {
				t.Fatalf("%s: the attribute index was not used", q)
			}
			want := walk(scan, &f)
			if !slices.Equal(got, want) {
				t.Fatalf("query %d %s (since %q): with the index %d spans, from spans %d\n%v\n%v", i, q, window, len(got), len(want), got, want)
			}
			if one := walk(whole, &f); !slices.Equal(one, want) {
				t.Fatalf("query %d %s (since %q): with the index in one query %d spans, from spans %d\n%v\n%v", i, q, window, len(one), len(want), one, want)
			}
			found += len(got)
		}
	}
	if found == 0 {
		t.Fatal("no query found anything: the test tests nothing")
	}
	t.Logf("%d time slices read for %d searches", ix.indexSlices.Load(), ix.indexReads.Load())
	if n := ix.indexSlices.Load(); n <= ix.indexReads.Load() {
		t.Fatalf("%d time slices read for %d searches: pages did not cross slices", n, ix.indexReads.Load())
	}
}
