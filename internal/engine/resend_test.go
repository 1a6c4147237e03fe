package engine

// Regression tests for review findings on duplicate handling.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

func rspan(trace byte, span byte, start uint64, name string) model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("api")}}}
	return model.Span{TraceID: model.TraceID{trace}, SpanID: model.SpanID{span}, Name: name,
		StartTimeUnixNano: start, EndTimeUnixNano: start + 10, Resource: res, Service: "api", Scope: &model.Scope{}}
}

const rbase = 1_700_000_000_000_000_000

// A re-sent span (same ids, same start) must come back as its newest copy.
func TestResentSpanNewestCopyWinsInSearch(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	appendSpans(t, e, "p", []model.Span{rspan(1, 1, rbase+50, "old"), rspan(2, 1, rbase+100, "other")})
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "p", []model.Span{rspan(1, 1, rbase+50, "new")}) // re-send, newer content

	tr, _, _ := e.Trace(context.Background(), "p", model.TraceID{1})
	if tr[0].Name != "new" {
		t.Fatalf("Trace() returned the stale copy %q", tr[0].Name)
	}

	got, _, _, err := e.SearchSpans(context.Background(), "p", &query.Filter{}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if s.TraceID == (model.TraceID{1}) && s.Name != "new" {
			t.Errorf("SearchSpans returned the stale copy %q of a re-sent span; Trace() says %q", s.Name, tr[0].Name)
		}
	}
	old, _, _, _ := e.SearchSpans(context.Background(), "p", &query.Filter{Name: "old"}, 10, nil)
	if len(old) != 0 {
		t.Errorf("filter name=old matched %d spans, but the only copy that counts is named \"new\"", len(old))
	}
	sums, _, _ := e.SearchTraces(context.Background(), "p", &query.Filter{Name: "old"}, 10)
	if len(sums) != 0 {
		t.Errorf("SearchTraces(name=old) returned %d traces; the trace's span is now named \"new\"", len(sums))
	}
}

// A re-sent span whose start time changed shows up twice across pages.
func TestResentSpanNoDuplicatesAcrossPages(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	appendSpans(t, e, "p", []model.Span{rspan(1, 1, rbase+50, "x")})
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "p", []model.Span{rspan(1, 1, rbase+70, "x"), rspan(3, 1, rbase+60, "z")})
	all := searchAll(t, e, "p", &query.Filter{}, 1)
	seen := map[string]int{}
	for i := range all {
		seen[key(&all[i])]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("span %s returned %d times across pages (results: %d spans)", k, n, len(all))
		}
	}
}

// A reader scanning the memtable while the same span is re-sent must always
// see exactly one copy of it.
func TestMemtableResendNeverVanishes(t *testing.T) {
	m := newMemtable(time.Now(), nil)
	x := rspan(9, 9, rbase, "x")
	m.insert("p", []model.Span{x}, 0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 400 && !stop.Load(); i++ {
			batch := []model.Span{x}
			for j := 0; j < 300; j++ {
				batch = append(batch, rspan(byte(j), byte(i), rbase+uint64(j), "f"))
				batch[len(batch)-1].SpanID = model.SpanID{byte(i), byte(i >> 8), byte(j), byte(j >> 8), 1}
			}
			m.insert("p", batch, 0)
		}
		stop.Store(true)
	}()
	misses, scans := 0, 0
	for !stop.Load() {
		n := 0
		m.scan(func(r *row) bool {
			if r.span.TraceID == x.TraceID && r.span.SpanID == x.SpanID {
				n++
			}
			return true
		})
		scans++
		if n == 0 {
			misses++
		}
	}
	wg.Wait()
	if misses > 0 {
		t.Errorf("acknowledged span invisible in %d of %d concurrent scans", misses, scans)
	}
}

// TestMemtableCountsAndTraceRows: the buffer's per-project counts (which
// statistics read without a scan) and its trace lookups equal a scan of
// its rows, over random batches with re-sent spans, several projects and
// traces spread over batches.
func TestMemtableCountsAndTraceRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	m := newMemtable(time.Now(), nil)
	projects := []string{"a", "b", "c"}
	for range 60 {
		p := projects[rng.IntN(len(projects))]
		var batch []model.Span
		for range 1 + rng.IntN(200) {
			s := rspan(byte(rng.IntN(40)), byte(rng.IntN(30)), rbase+uint64(rng.IntN(1000)), "n")
			batch = append(batch, s)
		}
		m.insert(p, batch, 0)
	}
	for _, p := range projects {
		spans := int64(0)
		traces := map[model.TraceID][]model.SpanID{}
		m.scan(func(r *row) bool {
			if r.project == p {
				spans++
				traces[r.span.TraceID] = append(traces[r.span.TraceID], r.span.SpanID)
			}
			return true
		})
		gotSpans, gotTraces := m.counts(p)
		if gotSpans != spans || gotTraces != int64(len(traces)) {
			t.Errorf("project %s: counts %d spans, %d traces; a scan finds %d, %d", p, gotSpans, gotTraces, spans, len(traces))
		}
		for id, want := range traces {
			var got []model.SpanID
			for _, r := range m.traceRows(p, id) {
				got = append(got, r.span.SpanID)
			}
			slices.SortFunc(got, func(a, b model.SpanID) int { return bytes.Compare(a[:], b[:]) })
			slices.SortFunc(want, func(a, b model.SpanID) int { return bytes.Compare(a[:], b[:]) })
			if !slices.Equal(got, want) {
				t.Fatalf("project %s trace %s: traceRows %v, a scan finds %v", p, id, got, want)
			}
		}
	}
	if s, tr := m.counts("nope"); s != 0 || tr != 0 {
		t.Errorf("an unknown project counts %d spans, %d traces", s, tr)
	}
}

// TestCompactionOfWholeTracesResent: a sender that re-sends whole traces
// (an at-least-once exporter replaying its queue, a load generator looping
// over its corpus) leaves each trace in several segments, starting at the
// same place in each, so the merge takes those parts from its input cursors;
// where a copy lacks the trace's first span, its part starts later and is
// looked up by id. Either way every trace comes back whole, once per span,
// with the newest copy of each span, across block boundaries.
func TestCompactionOfWholeTracesResent(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 16, NoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	base := newGen(7).spans(60)
	want := map[string]model.Span{}
	for c := range 4 {
		var batch []model.Span
		for i, s := range base {
			if c == 3 && i%4 == 0 {
				continue // the last copy misses some spans, among them some traces' first
			}
			s.Name = fmt.Sprintf("copy %d", c)
			batch = append(batch, s)
			want[key(&s)] = s
		}
		appendSpans(t, e, "p", batch)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.SegmentsBefore != 4 || res.SegmentsAfter != 1 {
		t.Fatalf("compact: %+v, want 4 segments merged into 1", res)
	}
	if st := testStats(e, "p"); st.Spans != int64(len(want)) {
		t.Fatalf("%d spans stored after the merge, want %d (one per span id)", st.Spans, len(want))
	}
	perTrace := map[model.TraceID]int{}
	for _, s := range want {
		perTrace[s.TraceID]++
	}
	for id, n := range perTrace {
		got, _, err := e.Trace(context.Background(), "p", id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("trace %s: %d spans, want %d", id, len(got), n)
		}
		for i := range got {
			if w := want[key(&got[i])]; got[i].Name != w.Name {
				t.Fatalf("trace %s span %s: %q, want the newest copy %q", id, got[i].SpanID, got[i].Name, w.Name)
			}
			if i > 0 && got[i].StartTimeUnixNano < got[i-1].StartTimeUnixNano {
				t.Fatalf("trace %s: spans out of start order", id)
			}
		}
	}
}
