package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/valuestore"
)

var errCrash = errors.New("simulated crash")

// crashFS is the operating system's filesystem until armed; from the
// limit-th mutating operation after arming (write, sync, truncate, create,
// rename, remove, directory sync) on, every mutating operation fails, as if
// the process had died there. Reads keep working.
type crashFS struct {
	valuestore.OSFS
	armed atomic.Bool
	ops   atomic.Int64
	limit int64
	hit   atomic.Bool
}

func (c *crashFS) step() error {
	if !c.armed.Load() {
		return nil
	}
	if c.ops.Add(1) >= c.limit {
		c.hit.Store(true)
		return errCrash
	}
	return nil
}

func (c *crashFS) OpenFile(name string, flag int) (valuestore.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if err := c.step(); err != nil {
			return nil, err
		}
	}
	f, err := c.OSFS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, fs: c}, nil
}

func (c *crashFS) Rename(o, n string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.OSFS.Rename(o, n)
}

func (c *crashFS) Remove(n string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.OSFS.Remove(n)
}

func (c *crashFS) SyncDir(d string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.OSFS.SyncDir(d)
}

type crashFile struct {
	valuestore.File
	fs *crashFS
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *crashFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *crashFile) Truncate(n int64) error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Truncate(n)
}

// checkAllResolve asserts that every acknowledged span is found by trace
// lookup with its full values and without warnings.
func checkAllResolve(t *testing.T, what string, e *Engine, corpus []model.Span) {
	t.Helper()
	byKey := indexByKey(corpus)
	seen := map[model.TraceID]bool{}
	n := 0
	for i := range corpus {
		id := corpus[i].TraceID
		if seen[id] {
			continue
		}
		seen[id] = true
		got, res, err := e.Trace(context.Background(), "default", id)
		if err != nil || len(res.Warnings) > 0 {
			t.Fatalf("%s: trace %s: %v %v", what, id, res.Warnings, err)
		}
		requireFullValues(t, what, got, byKey)
		n += len(got)
	}
	if n != len(corpus) {
		t.Fatalf("%s: %d spans found, %d acknowledged", what, n, len(corpus))
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if info.Name() == "LOCK" {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashAtEverySealAndCollectStepKeepsReferencedValues: "a crash between
// writing a segment and collecting values never loses a referenced value".
// The data directory is left as a crash leaves it (stopForTest: no final
// seal, no clean close of the value store) after each step: segment written
// and values synced but no manifest; after the manifest; and at every file
// operation of a CollectValues. Every acknowledged span must then resolve.
func TestCrashAtEverySealAndCollectStepKeepsReferencedValues(t *testing.T) {
	corpus := dedupCorpus(48)
	first, second := corpus[:24], corpus[24:]
	tmpl := t.TempDir()

	// Batch 1 is published; batch 2's seal stops after its segment is
	// written and its values put and synced, before the manifest.
	e := openTest(t, tmpl)
	appendSpans(t, e, "default", first)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", second)
	e.testBeforeManifest = func(string) error { return errCrash }
	if err := e.Seal(); !errors.Is(err, errCrash) {
		t.Fatalf("seal with a crash before the manifest: %v", err)
	}
	e.stopForTest()

	t.Run("crash before manifest", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		e := openTest(t, dir)
		defer e.Close()
		checkAllResolve(t, "reopened", e, corpus)
		if segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg")); len(segs) != 1 {
			t.Fatalf("%d segment files: the unpublished one was not removed", len(segs))
		}
		// Batch 2's completions are referenced by no published segment
		// (its spans are back in the write buffer from the WAL): collected.
		st, err := e.CollectValues()
		if err != nil {
			t.Fatal(err)
		}
		pp := len(segment.Pieces(systemPrompt))
		if st.Deleted != len(second) || st.Live != pp+len(first) {
			t.Fatalf("collect: %+v, want %d deleted and %d live", st, len(second), pp+len(first))
		}
		checkAllResolve(t, "after collect", e, corpus)
		// Sealing batch 2 again stores its values again; a crash right
		// after the manifest keeps them.
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		e.stopForTest()
		e2 := openTest(t, dir)
		defer e2.Close()
		checkAllResolve(t, "crash after manifest", e2, corpus)
		if st, err := e2.CollectValues(); err != nil || st.Deleted != 0 || st.Missing != 0 {
			t.Fatalf("collect after everything is published: %+v, %v", st, err)
		}
		checkAllResolve(t, "collected again", e2, corpus)
	})

	// A crash at each file operation of CollectValues, in turn.
	for limit := int64(1); ; limit++ {
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		fs := &crashFS{limit: limit}
		e, err := Open(Options{Dir: dir, BlockSpans: 64, valueFS: fs})
		if err != nil {
			t.Fatal(err)
		}
		fs.armed.Store(true)
		_, cerr := e.CollectValues()
		if cerr != nil && !fs.hit.Load() {
			t.Fatalf("collect failed without a crash: %v", cerr)
		}
		e.stopForTest()
		e2 := openTest(t, dir)
		checkAllResolve(t, fmt.Sprintf("crash at collect step %d", limit), e2, corpus)
		if err := e2.Seal(); err != nil { // batch 2 (from the WAL) is published now
			t.Fatal(err)
		}
		checkAllResolve(t, fmt.Sprintf("crash at collect step %d, then sealed", limit), e2, corpus)
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
		if !fs.hit.Load() {
			t.Logf("CollectValues completes after %d file operations; a crash was injected at each", limit-1)
			if limit < 3 {
				t.Fatalf("collect did only %d file operations: the crash points exercise nothing", limit-1)
			}
			break
		}
	}
}

// TestCollectValuesRefusesWithQuarantinedSegment: a published segment that
// cannot be opened may reference values; nothing may be deleted.
func TestCollectValuesRefusesWithQuarantinedSegment(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	appendSpans(t, e, "default", dedupCorpus(8))
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if err := os.Truncate(segs[0], 100); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, dir)
	defer e.Close()
	before := e.ValueStats().Values
	if _, err := e.CollectValues(); err == nil {
		t.Fatal("collect with a quarantined segment succeeded")
	}
	if after := e.ValueStats().Values; after != before || before == 0 {
		t.Fatalf("values %d -> %d", before, after)
	}
}
