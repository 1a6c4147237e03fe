package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// TestSearchManySegmentsEqualsBruteForce checks newest-first pages over
// many segments whose times overlap (every round spans the same hour), each
// of several blocks, with spans re-sent into later segments with another
// user: every page equals a brute-force evaluation over the newest copy of
// each span, for small limits that stop the scan early.
func TestSearchManySegmentsEqualsBruteForce(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	r := rand.New(rand.NewPCG(5, 23))
	// Re-send some spans of earlier rounds with another user.
	corpus := resentCorpus(t, e, newGen(5), r, 12, 25)
	if got := testStats(e, "p").Segments; got < 11 {
		t.Fatalf("want >= 11 segments, got %d", got)
	}
	for i := range 60 {
		q := randomFilter(r)
		if i%2 == 0 {
			q = fmt.Sprintf(`{ .user = "u%d" }`, r.IntN(20))
		}
		expr, err := query.ParseTraceQL(q)
		if err != nil {
			t.Fatalf("parse %s: %v", q, err)
		}
		f := query.Filter{Expr: expr}
		want := bruteForce(corpus, &f)
		page := 1 + r.IntN(20)
		got := searchAll(t, e, "p", &f, page)
		if !slices.Equal(keys(got), keys(want)) {
			t.Fatalf("filter %s, page %d: got %d spans, want %d", q, page, len(got), len(want))
		}
		for j := range got {
			g, _ := got[j].Attr("user")
			w, _ := want[j].Attr("user")
			if g.Str != w.Str {
				t.Fatalf("filter %s: span %s has user %q, want the newest copy's %q", q, key(&got[j]), g.Str, w.Str)
			}
		}
	}
}

// TestNewestFirstSearchStopsInNewestSegment checks that a search whose
// first page lies in the newest segment reaches no block of the older
// ones: it neither reads them nor tests their filters, so its cost does not
// grow with the number of segments (issue 23).
func TestNewestFirstSearchStopsInNewestSegment(t *testing.T) {
	e := openTest(t, t.TempDir()) // 64 spans per block
	defer e.Close()
	const segs, perSeg = 10, 320 // five blocks per segment
	base := uint64(1_700_000_000_000_000_000)
	var all []model.Span
	for k := range segs {
		spans := make([]model.Span, perSeg)
		for i := range spans {
			s := &spans[i]
			n := k*perSeg + i
			s.TraceID = model.TraceID{1, byte(n >> 8), byte(n)}
			s.SpanID = model.SpanID{1, byte(n >> 8), byte(n)}
			s.Resource = &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("api")}}}
			s.Service = "api"
			s.Scope = &model.Scope{Name: "test"}
			s.Name = "op"
			s.StartTimeUnixNano = base + uint64(n)*1_000_000
			s.EndTimeUnixNano = s.StartTimeUnixNano + 1000
			// Errors only in even blocks (rows ordered by time): the
			// odd blocks' metadata rules them out.
			if (i/64)%2 == 0 {
				s.StatusCode = model.StatusError
			}
		}
		all = append(all, spans...)
		appendSpans(t, e, "p", spans)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	expr, err := query.ParseTraceQL(`{ status = error }`)
	if err != nil {
		t.Fatal(err)
	}
	f := query.Filter{Expr: expr}
	before := e.Counters()
	got, next, _, err := e.SearchSpans(t.Context(), "p", &f, 20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := bruteForce(all, &f)[:20]; !slices.Equal(keys(got), keys(want)) || next == nil {
		t.Fatalf("got %v (next %v), want %v", keys(got), next, keys(want))
	}
	after := e.Counters()
	reached := after.BlocksExamined - before.BlocksExamined + after.BlocksPruned - before.BlocksPruned
	if reached < 1 || reached > perSeg/64 {
		t.Fatalf("the search reached %d blocks, want 1 to %d (the newest segment's)", reached, perSeg/64)
	}
}
