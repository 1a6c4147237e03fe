package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
)

// faultyFile is a segment file whose reads fail with EIO while armed, as a
// failing disk's would.
type faultyFile struct {
	*os.File
	armed *atomic.Bool
}

func (f faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if f.armed.Load() {
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
		return segment.OpenFile(path, faultyFile{f, &armed})
	}}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	spans := newGen(5).spans(300)
	appendSpans(t, e, "default", spans)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
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
	if c := e.Counters(); c.Corruptions != 0 || c.IOErrors < 4 {
		t.Fatalf("counters: %d corruptions, %d I/O errors; want 0 and at least 4", c.Corruptions, c.IOErrors)
	}

	armed.Store(false)
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
