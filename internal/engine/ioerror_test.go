package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

// faultyFile is a segment file whose reads fail with EIO while armed, as a
// failing disk's would; with failRead set, only that read (counting from 1)
// fails.
type faultyFile struct {
	*os.File
	armed    *atomic.Bool
	reads    *atomic.Int64
	failRead int64
}

func (f faultyFile) ReadAt(p []byte, off int64) (int, error) {
	n := int64(0)
	if f.reads != nil {
		n = f.reads.Add(1)
	}
	if f.armed.Load() || f.failRead != 0 && n == f.failRead {
		return 0, &fs.PathError{Op: "read", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.ReadAt(p, off)
}

// TestSegmentIOErrorIsNotCorruption: a segment read that fails with EIO
// fails the query with an error that says I/O (not a warning that skips the
// segment, as damage gets), is counted as an I/O error and not as
// corruption, and leaves nothing behind: once the disk answers, so do the
// queries. A segment that cannot be read at open is quarantined, counted
// the same way.
func TestSegmentIOErrorIsNotCorruption(t *testing.T) {
	var armed atomic.Bool
	dir := t.TempDir()
	opts := Options{Dir: dir, BlockCacheBytes: -1, openSegment: func(path string) (*segment.Reader, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		return segment.OpenFile(path, faultyFile{File: f, armed: &armed})
	}}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	spans := eraseCorpus() // traces with LLM spans
	appendSpans(t, e, "default", spans)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	llmSpans := func() (n int64) {
		st, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}})
		if err != nil {
			t.Fatalf("LLM statistics: %v", err)
		}
		for _, g := range st.Groups {
			n += g.M.Spans
		}
		return n
	}
	var want int64 // the LLM spans of the corpus; nothing read yet, so the armed queries read the disk
	enriched := slices.Clone(spans)
	llm.Enrich(enriched, llm.DefaultPrices())
	for i := range enriched {
		if enriched[i].LLM != nil {
			want++
		}
	}
	if want == 0 {
		t.Fatal("the corpus has no LLM span")
	}
	armed.Store(true)
	isIO := func(what string, res store.Result, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, syscall.EIO) || errors.Is(err, store.ErrCorruption) || !strings.Contains(err.Error(), "I/O error") {
			t.Errorf("%s: err %v, want an I/O error wrapping EIO, not corruption", what, err)
		}
		if len(res.Warnings) != 0 {
			t.Errorf("%s: warnings %v: an I/O error is not damage to skip", what, res.Warnings)
		}
	}
	_, res, err := e.Trace(ctx, "default", spans[0].TraceID)
	isIO("trace by id", res, err)
	_, _, res, err = e.SearchSpans(ctx, "default", &query.Filter{}, 10, nil)
	isIO("span search", res, err)
	_, res, err = e.SearchTraces(ctx, "default", &query.Filter{}, 10)
	isIO("trace search", res, err)
	_, res, err = e.Services(ctx, "default", 0, 0)
	isIO("services", res, err)
	stats, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}})
	isIO("LLM statistics", stats.Result, err)
	_, res, err = e.Sessions(ctx, "default", &query.Filter{})
	isIO("sessions", res, err)
	if c := e.Counters(); c.Corruptions != 0 || c.IOErrors < 6 {
		t.Fatalf("counters: %d corruptions, %d I/O errors; want 0 and at least 6", c.Corruptions, c.IOErrors)
	}

	armed.Store(false)
	// Nothing of the failed queries stays behind (no cached partial answer).
	if got := llmSpans(); got != want {
		t.Fatalf("LLM statistics once the disk answers: %d spans, want %d", got, want)
	}
	got, res, err := e.Trace(ctx, "default", spans[0].TraceID)
	if err != nil || len(res.Warnings) != 0 || len(got) == 0 {
		t.Fatalf("trace once the disk answers: %d spans, %v, %v", len(got), res.Warnings, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// At open: the segment is not served, and the store says why.
	armed.Store(true)
	e, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	armed.Store(false)
	st := testStats(e, "default")
	if c := e.Counters(); len(st.Quarantined) != 1 || c.Corruptions != 0 || c.IOErrors != 1 {
		t.Fatalf("after an unreadable open: quarantined %v, %d corruptions, %d I/O errors; want 1 segment, 0, 1", st.Quarantined, c.Corruptions, c.IOErrors)
	}
}

// TestLLMQueriesOverSegmentsWithoutAggregates: a store upgraded from before
// LLM aggregates holds segments without them; LLM statistics read their
// rows, with no warning and no error counted.
func TestLLMQueriesOverSegmentsWithoutAggregates(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile("../segment/testdata/v1.rseg")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%016d.seg", man.NextSegment)
	if err := os.WriteFile(filepath.Join(dir, "segments", name), old, 0o644); err != nil {
		t.Fatal(err)
	}
	man.Segments, man.NextSegment = append(man.Segments, name), man.NextSegment+1
	if _, err := writeManifest(dir, man); err != nil {
		t.Fatal(err)
	}
	e, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if st := testStats(e, "default"); st.Segments != 1 || len(st.Quarantined) != 0 {
		t.Fatalf("the old segment is not served: %+v", st)
	}
	ctx := context.Background()
	for _, p := range e.segs[0].info.Projects {
		st, err := e.LLMStats(ctx, p.Name, &store.LLMQuery{GroupBy: []string{"model"}})
		if err != nil || len(st.Warnings) != 0 {
			t.Fatalf("LLM statistics over a segment without aggregates: %v %v", err, st.Warnings)
		}
		if _, res, err := e.Sessions(ctx, p.Name, &query.Filter{}); err != nil || len(res.Warnings) != 0 {
			t.Fatalf("sessions over a segment without aggregates: %v %v", err, res.Warnings)
		}
	}
	if c := e.Counters(); c.IOErrors != 0 || c.Corruptions != 0 {
		t.Fatalf("counted %d I/O errors and %d corruptions reading a valid old segment", c.IOErrors, c.Corruptions)
	}
}

// TestSegmentOpenReadErrorQuarantines: whichever read of a segment's open
// fails with EIO (footer, index, or an optional section: LLM aggregates,
// token summary), the segment is either not served or fully served: never
// served with a section that fails every lookup until restart.
func TestSegmentOpenReadErrorQuarantines(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", eraseCorpus())
	if err := e.Close(); err != nil { // seals
		t.Fatal(err)
	}
	content, err := text.ParseQuery("private details")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for k := int64(1); k <= 16; k++ {
		var armed atomic.Bool
		var reads atomic.Int64
		e, err := Open(Options{Dir: dir, openSegment: func(path string) (*segment.Reader, error) {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			return segment.OpenFile(path, faultyFile{File: f, armed: &armed, reads: &reads, failRead: k})
		}})
		if err != nil {
			t.Fatal(err)
		}
		if reads.Load() < k {
			e.Close()
			break // every read of the open has been failed once
		}
		st := testStats(e, "default")
		if len(st.Quarantined) == 0 {
			// Served: the failed read was one it could do without (none
			// today), and every lookup must work.
			stats, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}})
			_, _, res, err2 := e.SearchSpans(ctx, "default", &query.Filter{Content: content}, 5, nil)
			if err != nil || err2 != nil || len(stats.Warnings)+len(res.Warnings) != 0 {
				t.Errorf("read %d failed: served segment answers %v / %v, warnings %v %v", k, err, err2, stats.Warnings, res.Warnings)
			}
		} else if c := e.Counters(); c.IOErrors != 1 || c.Corruptions != 0 {
			t.Errorf("read %d failed at open: %d I/O errors, %d corruptions; want 1 and 0", k, c.IOErrors, c.Corruptions)
		}
		e.Close()
	}
}
