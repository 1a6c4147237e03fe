package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// TestRowFilteredSearchEqualsBruteForce checks searches that filter a
// block's rows on its columns and decode only the candidates
// (readMatching, segment.Reader.FilterRows) against a brute-force
// evaluation: attribute equalities (present, absent, a value of another
// key), several conditions, ORs, negations, span against resource
// attributes, numbers against ints and doubles, values stored apart (a
// threshold of 3 bytes stores the users u10..u19 apart and keeps u0..u9 in
// the rows), and spans re-sent into later segments with another user, so
// that an older copy matches where the newest does not. Each query runs
// on an engine without a block cache (every block read in part) and on one
// with it (a block read in part twice is then read whole and cached).
func TestRowFilteredSearchEqualsBruteForce(t *testing.T) {
	queries := []string{
		`{ span.user = "u3" }`,
		`{ .user = "u13" }`,
		`{ span.user = "u99" }`,
		`{ span.user = "eu" }`,
		`{ resource.region = "eu" }`,
		`{ .region = "us" }`,
		`{ span.region = "eu" }`,
		`{ .user = "u4" && resource.region = "ap" }`,
		`{ .user = "u5" && .user = "u6" }`,
		`{ .user = "u7" || .user = "u17" }`,
		`{ (.user = "u8" || .user = "u18") && name = "query" }`,
		`{ .user = "u2" && !(name = "chat") }`,
		`{ !(.user = "u2") && resource.service.name = "db" }`,
		`{ .user != "u1" && .user = "u11" }`,
		`{ resource.service.name = "auth" && status = error }`,
		`{ resource.service.name = "llm" && kind = client }`,
		`{ name = "GET /b" && duration > 1s }`,
		`{ .user = "u9" && duration < 500ms }`,
		`{ span.size = 3 }`,
		`{ .size = 2.5 }`,
		`{ (.size = "4" || .size = 4) }`,
		`{ span.http.status_code = 404 && .user = "u0" }`,
		`{ span.ratio < 0.5 && .user = "u12" }`,
	}
	for _, cache := range []int64{-1, 0} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
			e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 64, BlockCacheBytes: cache, ValueThreshold: 3, NoCompaction: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			corpus := resentCorpus(t, e, newGen(9), rand.New(rand.NewPCG(9, 1)), 9, 20)
			r := rand.New(rand.NewPCG(9, 23))
			before := e.Counters()
			for pass := range 2 { // the second pass finds cached blocks (cache=0)
				for _, q := range queries {
					expr, err := query.ParseTraceQL(q)
					if err != nil {
						t.Fatalf("parse %s: %v", q, err)
					}
					f := query.Filter{Expr: expr}
					if pass == 1 {
						f.Start = newGen(9).base + uint64(r.Int64N(1_800_000_000_000))
						f.End = f.Start + uint64(r.Int64N(1_800_000_000_000))
					}
					want := bruteForce(corpus, &f)
					for _, page := range []int{3, 1000} {
						got := searchAll(t, e, "p", &f, page)
						if !slices.Equal(keys(got), keys(want)) {
							t.Fatalf("%s (window %d..%d, page %d): got %d spans %v, want %d %v", q, f.Start, f.End, page,
								len(got), keys(got), len(want), keys(want))
						}
						for j := range got {
							if !spanEqual(&got[j], &want[j]) {
								t.Fatalf("%s: span %s differs:\n got %+v\nwant %+v", q, key(&got[j]), got[j], want[j])
							}
						}
					}
				}
			}
			if n := e.Counters().BlocksRowFiltered - before.BlocksRowFiltered; n < 20 {
				t.Fatalf("%d blocks were read in part, want the searches to take that path (at least 20)", n)
			}
		})
	}
}

// resentCorpus writes rounds-1 segments of g's spans to project p, and the
// write buffer a last round, re-sending about one span in every of earlier
// rounds (drawn from r) with another user; it returns the newest copy of
// each span.
func resentCorpus(t *testing.T, e *Engine, g *gen, r *rand.Rand, rounds, every int) []model.Span {
	t.Helper()
	latest := map[string]model.Span{}
	var order []string
	for round := range rounds {
		spans := g.spans(40)
		for _, k := range order {
			if r.IntN(every) == 0 {
				s := latest[k]
				s.Attributes = slices.Clone(s.Attributes)
				for i := range s.Attributes {
					if s.Attributes[i].Key == "user" {
						s.Attributes[i].Value = model.StringValue(fmt.Sprintf("u%d", r.IntN(20)))
					}
				}
				spans = append(spans, s)
			}
		}
		for _, s := range spans {
			k := key(&s)
			if _, ok := latest[k]; !ok {
				order = append(order, k)
			}
			latest[k] = s
		}
		appendSpans(t, e, "p", spans)
		if round < rounds-1 { // the last round stays in the write buffer
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var corpus []model.Span
	for _, k := range order {
		corpus = append(corpus, latest[k])
	}
	return corpus
}

// TestBlockReadInPartTwiceIsCached: a selective search reads the blocks
// the cache does not hold in part and caches nothing; the same search
// again reads them whole and caches them, so a block searched often is
// served from the cache; a third search reads nothing in part.
func TestBlockReadInPartTwiceIsCached(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	g := newGen(4)
	corpus := g.spans(100)
	appendSpans(t, e, "p", corpus)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	expr, err := query.ParseTraceQL(`{ span.user = "u3" }`)
	if err != nil {
		t.Fatal(err)
	}
	f := query.Filter{Expr: expr}
	want := keys(bruteForce(corpus, &f))
	cached := func() int64 {
		e.cache.mu.Lock()
		defer e.cache.mu.Unlock()
		return int64(len(e.cache.items))
	}
	var inPart []int64
	for round := range 3 {
		before := e.Counters().BlocksRowFiltered
		if got := keys(searchAll(t, e, "p", &f, 1000)); !slices.Equal(got, want) {
			t.Fatalf("round %d: got %d spans, want %d", round, len(got), len(want))
		}
		inPart = append(inPart, e.Counters().BlocksRowFiltered-before)
		if round == 0 && cached() != 0 {
			t.Fatalf("the first search cached %d blocks read in part", cached())
		}
	}
	if inPart[0] == 0 || inPart[1] != 0 || inPart[2] != 0 || cached() == 0 {
		t.Fatalf("blocks read in part per search %v, %d cached; want some, then none (read whole and cached)", inPart, cached())
	}
}
