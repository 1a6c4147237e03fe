package engine

// Regression tests for review findings on duplicate handling.

import (
	"context"
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
