package engine

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/text"
	"github.com/rastro-dev/rastro/internal/wal"
)

// fsckFixture is a closed store of three segments (small blocks, LLM spans
// with stored values of >= 1 KiB, content tokens on) and a WAL file of
// three intact records not yet sealed.
type fsckFixture struct {
	dir     string
	segs    []string            // segment names, manifest order
	bySeg   map[string][]string // span keys per segment
	walKeys [][]string          // span keys per WAL record
	all     map[string]bool
	walFile string
}

func buildFsckFixture(t *testing.T) *fsckFixture {
	t.Helper()
	fx := &fsckFixture{dir: t.TempDir(), bySeg: map[string][]string{}, all: map[string]bool{}}
	e, err := Open(Options{Dir: fx.dir, BlockSpans: 16, SealBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(66)
	llm := dedupCorpus(24)
	batches := [][]model.Span{append(g.spans(12), llm[:12]...), append(g.spans(12), llm[12:]...), g.spans(12)}
	for _, b := range batches {
		appendSpans(t, e, "default", b)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	man, err := readManifest(fx.dir)
	if err != nil || len(man.Segments) != 3 {
		t.Fatalf("manifest %+v, %v", man, err)
	}
	fx.segs = man.Segments
	for i, n := range fx.segs {
		fx.bySeg[n] = keys(batches[i])
		for _, k := range fx.bySeg[n] {
			fx.all[k] = true
		}
	}
	// Three records in the WAL, as a crash before the seal leaves them.
	w, err := wal.Open(wal.Options{Dir: filepath.Join(fx.dir, "wal"), MinSeq: man.WALStart})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		spans := g.spans(3)
		if err := w.Append(wal.Record{Type: uint8(otlp.RecordOTLPProto), Project: "default", Body: otlp.EncodeProto(spans)}, nil); err != nil {
			t.Fatal(err)
		}
		fx.walKeys = append(fx.walKeys, keys(spans))
		for _, k := range keys(spans) {
			fx.all[k] = true
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(fx.dir, "wal", "*.wal"))
	for _, f := range files {
		if st, _ := os.Stat(f); st.Size() > 100 {
			fx.walFile = f
		}
	}
	if fx.walFile == "" {
		t.Fatalf("no WAL file with records in %v", files)
	}
	return fx
}

// clone copies the fixture's directory to a new one.
func (fx *fsckFixture) clone(t *testing.T) *fsckFixture {
	t.Helper()
	c := *fx
	c.dir = t.TempDir()
	err := filepath.Walk(fx.dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fx.dir, p)
		dst := filepath.Join(c.dir, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(fx.dir, fx.walFile)
	c.walFile = filepath.Join(c.dir, rel)
	return &c
}

func (fx *fsckFixture) seg(i int) string { return filepath.Join(fx.dir, "segments", fx.segs[i]) }

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sectionRange reads a segment's footer and table of contents (see
// docs/format/segment.md) and returns where section typ lies.
func sectionRange(t *testing.T, path string, typ uint32) (off, n int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	foot := b[len(b)-40:]
	toc := b[le.Uint64(foot[0:]):]
	for i := range int(le.Uint32(toc)) {
		e := toc[4+40*i:]
		if le.Uint32(e) == typ {
			return int64(le.Uint64(e[16:])), int64(le.Uint64(e[24:]))
		}
	}
	t.Fatalf("segment %s has no section %d", path, typ)
	return 0, 0
}

func tocOffset(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(binary.LittleEndian.Uint64(b[len(b)-40:]))
}

func fsckT(t *testing.T, dir string, repair bool) *FsckReport {
	t.Helper()
	rep, err := Fsck(dir, FsckOptions{Repair: repair})
	if err != nil {
		t.Fatalf("fsck (repair %v): %v", repair, err)
	}
	return rep
}

// servedKeys opens the store and returns the keys of every span a query returns.
func servedKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	e, err := Open(Options{Dir: dir, BlockSpans: 16})
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	defer e.Close()
	spans, _, _, err := e.SearchSpans(context.Background(), "default", &query.Filter{}, 1_000_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, k := range keys(spans) {
		got[k] = true
	}
	return got
}

func TestFsckCorruptionTable(t *testing.T) {
	base := buildFsckFixture(t)
	if rep := fsckT(t, base.dir, false); !rep.Clean() || rep.Segments != 3 || rep.Values == 0 || rep.WALRecords != 3 {
		t.Fatalf("fixture not clean or incomplete: %+v", rep)
	}
	type expect struct {
		file string // path the problem must name
		lo   int64  // its offset must lie in [lo, hi); hi == 0: any offset
		hi   int64
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, fx *fsckFixture) expect
		// lost returns the span keys a repair may lose; maxLost bounds how many.
		lost    func(fx *fsckFixture) []string
		maxLost int
		// remains: problems a repair cannot fix (lost stored values).
		remains bool
	}{
		{name: "bit flip in a block", mutate: func(t *testing.T, fx *fsckFixture) expect {
			flipAt(t, fx.seg(1), 16+3)
			return expect{fx.seg(1), 16, 17}
		}, lost: func(fx *fsckFixture) []string { return fx.bySeg[fx.segs[1]] }, maxLost: 16},
		{name: "bit flip in the footer", mutate: func(t *testing.T, fx *fsckFixture) expect {
			flipAt(t, fx.seg(1), -20)
			st, _ := os.Stat(fx.seg(1))
			return expect{fx.seg(1), st.Size() - 40, st.Size()}
		}, lost: func(fx *fsckFixture) []string { return fx.bySeg[fx.segs[1]] }, maxLost: 1 << 20},
		{name: "bit flip in the table of contents", mutate: func(t *testing.T, fx *fsckFixture) expect {
			off := tocOffset(t, fx.seg(1))
			flipAt(t, fx.seg(1), off+4+40+20)
			return expect{fx.seg(1), off, off + 1}
		}, lost: func(fx *fsckFixture) []string { return fx.bySeg[fx.segs[1]] }, maxLost: 1 << 20},
		// The blocks name their stored values by position in section 18:
		// like the footer, it cannot be rebuilt from the rest.
		{name: "bit flip in the value reference table", mutate: func(t *testing.T, fx *fsckFixture) expect {
			off, n := sectionRange(t, fx.seg(1), 18)
			flipAt(t, fx.seg(1), off+n/2)
			return expect{fx.seg(1), off, off + n}
		}, lost: func(fx *fsckFixture) []string { return fx.bySeg[fx.segs[1]] }, maxLost: 1 << 20},
		{name: "truncated segment", mutate: func(t *testing.T, fx *fsckFixture) expect {
			st, _ := os.Stat(fx.seg(1))
			if err := os.Truncate(fx.seg(1), st.Size()/2); err != nil {
				t.Fatal(err)
			}
			return expect{file: fx.seg(1)}
		}, lost: func(fx *fsckFixture) []string { return fx.bySeg[fx.segs[1]] }, maxLost: 1 << 20},
		{name: "missing segment file named by the manifest", mutate: func(t *testing.T, fx *fsckFixture) expect {
			if err := os.Remove(fx.seg(2)); err != nil {
				t.Fatal(err)
			}
			return expect{file: fx.seg(2)}
		}, lost: func(fx *fsckFixture) []string { return fx.bySeg[fx.segs[2]] }, maxLost: 1 << 20},
		{name: "manifest checksum mismatch", mutate: func(t *testing.T, fx *fsckFixture) expect {
			flipAt(t, filepath.Join(fx.dir, manifestName), 5)
			return expect{filepath.Join(fx.dir, manifestName), 0, 1}
		}},
		{name: "manifest missing with segments present", mutate: func(t *testing.T, fx *fsckFixture) expect {
			if err := os.Remove(filepath.Join(fx.dir, manifestName)); err != nil {
				t.Fatal(err)
			}
			return expect{file: filepath.Join(fx.dir, manifestName)}
		}},
		{name: "value pack bit flip", mutate: func(t *testing.T, fx *fsckFixture) expect {
			pack := filepath.Join(fx.dir, "values", "0000000001.pack")
			flipAt(t, pack, 16+52+40)
			return expect{pack, 16, 17}
		}, remains: true},
		{name: "referenced value missing", mutate: func(t *testing.T, fx *fsckFixture) expect {
			for _, f := range []string{"0000000001.pack", "0000000001.idx"} {
				if err := os.Remove(filepath.Join(fx.dir, "values", f)); err != nil {
					t.Fatal(err)
				}
			}
			return expect{file: fx.seg(0)}
		}, remains: true},
		{name: "WAL record bit flip", mutate: func(t *testing.T, fx *fsckFixture) expect {
			flipAt(t, fx.walFile, 16+30)
			return expect{fx.walFile, 16, 17}
		}, lost: func(fx *fsckFixture) []string { return fx.walKeys[0] }, maxLost: 1 << 20},
	}
	for _, sec := range []struct {
		name string
		typ  uint32
	}{{"attribute filters", 3}, {"trace index", 4}, {"trace fences", 5}, {"LLM aggregates", 6}, {"token filters", 7},
		{"token summary", 8}, {"LLM aggregates directory", 10}, {"token disk summary", 11}, {"token group directory", 13}} {
		cases = append(cases, struct {
			name    string
			mutate  func(t *testing.T, fx *fsckFixture) expect
			lost    func(fx *fsckFixture) []string
			maxLost int
			remains bool
		}{name: "bit flip in " + sec.name, mutate: func(t *testing.T, fx *fsckFixture) expect {
			off, n := sectionRange(t, fx.seg(1), sec.typ)
			if n == 0 {
				t.Fatalf("section %d is empty", sec.typ)
			}
			flipAt(t, fx.seg(1), off+n/2)
			return expect{fx.seg(1), off, off + n}
		}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := base.clone(t)
			want := c.mutate(t, fx)
			rep := fsckT(t, fx.dir, false)
			found := false
			for _, p := range rep.Problems {
				if p.File == want.file && (want.hi == 0 || want.lo <= p.Offset && p.Offset < want.hi) {
					found = true
				}
			}
			if !found || rep.Clean() {
				t.Fatalf("no problem in %s at [%d, %d): %v", want.file, want.lo, want.hi, rep.Problems)
			}

			rep = fsckT(t, fx.dir, true)
			if c.remains {
				if rep.Clean() {
					t.Fatalf("lost stored values reported as repaired: %v", rep.Actions)
				}
				for _, p := range rep.Remaining {
					if !strings.Contains(p.Msg, "value") {
						t.Fatalf("after repair, a problem other than lost values remains: %v", p)
					}
				}
			} else if !rep.Clean() {
				t.Fatalf("after repair: remaining %v (actions %v)", rep.Remaining, rep.Actions)
			}
			got := servedKeys(t, fx.dir)
			var lostOK []string
			if c.lost != nil {
				lostOK = c.lost(fx)
			}
			lost := 0
			for k := range fx.all {
				if got[k] {
					continue
				}
				if !slices.Contains(lostOK, k) {
					t.Fatalf("undamaged span %s not served after repair", k)
				}
				lost++
			}
			if lost > c.maxLost {
				t.Fatalf("%d spans lost, at most %d expected", lost, c.maxLost)
			}
			for k := range got {
				if !fx.all[k] {
					t.Fatalf("unknown span %s served", k)
				}
			}
			if again := fsckT(t, fx.dir, false); !c.remains && !again.Clean() {
				t.Fatalf("second fsck: %v", again.Problems)
			}
		})
	}
}

func TestFsckRefusesWhileServing(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	defer e.Close()
	for _, repair := range []bool{false, true} {
		if _, err := Fsck(dir, FsckOptions{Repair: repair}); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("fsck (repair %v) of a store held by a running engine: %v", repair, err)
		}
	}
}

func TestFsckNotesAreNotProblems(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	appendSpans(t, e, "default", newGen(3).spans(5))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// An orphan segment file, an unknown file, and a torn WAL tail.
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	b, _ := os.ReadFile(segs[0])
	os.WriteFile(filepath.Join(dir, "segments", "0000000000000099.seg"), b, 0o644)
	os.WriteFile(filepath.Join(dir, "FUTURE-FILE"), []byte("{}\n0\n"), 0o644)
	wals, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	f, _ := os.OpenFile(wals[len(wals)-1], os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{9, 0, 0, 0, 1, 2})
	f.Close()
	rep := fsckT(t, dir, false)
	if !rep.Clean() {
		t.Fatalf("problems: %v", rep.Problems)
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"0000000000000099.seg", "torn tail"} {
		if !strings.Contains(notes, want) {
			t.Fatalf("notes lack %q: %v", want, rep.Notes)
		}
	}
	if !slices.Contains(rep.Unchecked, filepath.Join(dir, "FUTURE-FILE")) {
		t.Fatalf("unchecked: %v", rep.Unchecked)
	}
	// A check modifies nothing: the orphan is still there.
	if _, err := os.Stat(filepath.Join(dir, "segments", "0000000000000099.seg")); err != nil {
		t.Fatal(err)
	}
}

// TestFsckRebuildIndexesStoredValues: a segment rebuilt by --repair keeps
// its stored-value references, and its token index still holds the words
// of those values, so a content search finds their spans afterwards.
func TestFsckRebuildIndexesStoredValues(t *testing.T) {
	fx := buildFsckFixture(t).clone(t)
	off, n := sectionRange(t, fx.seg(1), 7) // a damaged block filter: the segment is rebuilt
	flipAt(t, fx.seg(1), off+n/2)
	if rep := fsckT(t, fx.dir, true); !rep.Clean() || !slices.ContainsFunc(rep.Actions, func(a string) bool { return strings.Contains(a, "rebuilt") }) {
		t.Fatalf("repair: actions %v, remaining %v", rep.Actions, rep.Remaining)
	}
	e, err := Open(Options{Dir: fx.dir, BlockSpans: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// The last word of each completion stored apart in the rebuilt segment
	// (a word and a number: nearly always in that span only).
	llm := dedupCorpus(24)[12:]
	for i := range llm {
		c, _ := llm[i].Attr(completionKey)
		words := strings.Fields(c.AsString())
		cq, err := text.ParseQuery(words[len(words)-1])
		if err != nil {
			t.Fatal(err)
		}
		f := query.Filter{Content: cq}
		got := keys(searchAll(t, e, "default", &f, 50))
		if !slices.Contains(got, key(&llm[i])) {
			t.Fatalf("content %q: span %s (its completion is a stored value) not found after the rebuild; got %v", words[len(words)-1], key(&llm[i]), got)
		}
	}
}
