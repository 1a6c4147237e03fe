package chstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// walWrite is a request as the server hands it over: the spans and the
// protobuf body they were decoded from (what the WAL logs).
func walWrite(project string, spans []model.Span) *store.Write {
	spans = slices.Clone(spans)
	return &store.Write{Project: project, Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(spans), Spans: spans}
}

// storedSpans pages through every span of project and fails on a span
// returned twice.
func storedSpans(t *testing.T, s *Store, project string) map[model.SpanID]bool {
	t.Helper()
	seen := map[model.SpanID]bool{}
	var cur *store.Cursor
	for {
		page, next, _, err := s.SearchSpans(t.Context(), project, &query.Filter{}, 500, cur)
		if err != nil {
			t.Fatal(err)
		}
		for i := range page {
			if seen[page[i].SpanID] {
				t.Fatalf("span %s stored twice", page[i].SpanID)
			}
			seen[page[i].SpanID] = true
		}
		if next == nil {
			return seen
		}
		cur = next
	}
}

// waitRows waits until the database's spans table holds want rows.
func waitRows(t *testing.T, srv interface {
	QueryUint(context.Context, string) (uint64, error)
}, db string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := srv.QueryUint(t.Context(), "SELECT count() FROM "+db+".spans")
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans holds %d rows (err %v), want %d", n, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWALFrontAbsorbsAnOutage: with --durability wal, requests are
// acknowledged while ClickHouse is down; a store closed before ClickHouse
// came back leaves them in its WAL, and the next Open on the same
// directory replays and inserts them: every acknowledged span is stored,
// once. An erasure by query waits for what the WAL holds, so it covers the
// spans acknowledged before it. Past MaxWALBytes a request is refused as
// overloaded, naming why.
func TestWALFrontAbsorbsAnOutage(t *testing.T) {
	srv, err := chtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	const db = "walfront"
	if err := srv.CreateDatabase(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := Options{URL: srv.URL(db) + "?dial_timeout=500ms", BatchWindow: time.Millisecond, WALDir: dir,
		WALWindow: 10 * time.Millisecond, WALCloseWait: 300 * time.Millisecond}
	s1, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	spans := benchSpans(t, 2000)
	before, during := spans[:1000], spans[1000:]
	for i := 0; i < len(before); i += 100 {
		if err := s1.Append(t.Context(), walWrite("p", before[i:i+100])); err != nil {
			t.Fatal(err)
		}
	}
	waitRows(t, srv, db, 1000)

	if err := srv.Down(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(during); i += 100 {
		if err := s1.Append(t.Context(), walWrite("p", during[i:i+100])); err != nil {
			t.Fatalf("a request with ClickHouse down was refused, not logged: %v", err)
		}
	}
	// Past the bound, once an insert has failed: refused, saying why.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		s1.wf.mu.Lock()
		failed := s1.wf.failure != nil
		s1.wf.mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no insert failed with ClickHouse down")
		}
	}
	s1.opts.MaxWALBytes = s1.wf.backlog.Load()
	err = s1.Append(t.Context(), walWrite("p", during[:10]))
	if !errors.Is(err, store.ErrOverloaded) || !strings.Contains(err.Error(), "ClickHouse refuses inserts") {
		t.Fatalf("a request past MaxWALBytes with ClickHouse down: %v, want overloaded naming the refused inserts", err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}

	// A long window: only the erasure's wait makes the shipper insert the
	// replayed spans before the erasure matches.
	opts.WALWindow = time.Hour
	s2, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.WALRecovered(); got != len(during) {
		t.Fatalf("%d spans recovered from the WAL, want the %d acknowledged during the outage", got, len(during))
	}
	service := during[len(during)-1].Service
	if _, err := s2.Erase(t.Context(), store.EraseRequest{Project: "p", Query: fmt.Sprintf(`{ resource.service.name = %q }`, service)}); err != nil {
		t.Fatal(err)
	}
	erased := map[model.TraceID]bool{}
	for _, sp := range spans {
		if sp.Service == service {
			erased[sp.TraceID] = true
		}
	}
	seen := storedSpans(t, s2, "p")
	want := 0
	for _, sp := range spans {
		switch {
		case erased[sp.TraceID] && seen[sp.SpanID]:
			t.Fatalf("span %s of a trace erased by query is still visible", sp.SpanID)
		case !erased[sp.TraceID] && !seen[sp.SpanID]:
			t.Fatalf("acknowledged span %s lost (%d of %d spans found)", sp.SpanID, len(seen), len(spans))
		case !erased[sp.TraceID]:
			want++
		}
	}
	if len(seen) != want || want == 0 || want == len(spans) {
		t.Fatalf("%d spans visible, want %d (of %d, %d traces erased)", len(seen), want, len(spans), len(erased))
	}
	// A write without its request (Import's copies) is inserted before
	// Append returns, not logged (its spans could not be replayed).
	extra := benchSpans(t, 2100)[2000:]
	for i := range extra {
		extra[i].TraceID[0] ^= 0xff // traces of their own
	}
	if err := s2.Append(t.Context(), &store.Write{Project: "q", Spans: slices.Clone(extra)}); err != nil {
		t.Fatal(err)
	}
	if got := len(storedSpans(t, s2, "q")); got != len(extra) {
		t.Fatalf("a write without a body: %d of its %d spans stored when Append returned", got, len(extra))
	}
}
