package segment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// verifyFixture writes a segment with every optional section (LLM columns and
// aggregates, token filters with row groups, stored values) and returns its
// path, bytes and an open Reader.
func verifyFixture(t *testing.T) (string, []byte, *Reader) {
	t.Helper()
	corpus := genCorpus(41, 2, 60, 30)
	addLargeValues(corpus, 41)
	for p := range corpus {
		addLLM(corpus[p], 41)
	}
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 64, ContentTokens: StandInTokens, RowGroupTokenFilters: true,
		StoreValue: newMemValues().put, ValueThreshold: testThreshold})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data, openT(t, path)
}

func verifyT(t *testing.T, path string) *Verification {
	t.Helper()
	v, err := Verify(path)
	if err != nil {
		t.Fatalf("Verify %s: %v", path, err)
	}
	return v
}

func TestVerifyCleanSegment(t *testing.T) {
	path, _, r := verifyFixture(t)
	v := verifyT(t, path)
	if !v.Clean() {
		t.Fatalf("clean segment reported problems: %v", v.Problems)
	}
	if !v.BlocksIntact || v.SpansRead != r.Info().Spans {
		t.Fatalf("intact %v, spans read %d of %d", v.BlocksIntact, v.SpansRead, r.Info().Spans)
	}
	var want [][32]byte
	if err := r.ValueRefs(func(h [32]byte) bool { want = append(want, h); return true }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	if len(want) == 0 || !slices.Equal(v.ValueRefs, want) {
		t.Fatalf("value refs: got %d, section 9 lists %d", len(v.ValueRefs), len(want))
	}
	if !r.HasAggregates() || !r.HasTokenFilters() || !r.HasRowGroupFilters() {
		t.Fatalf("fixture lacks an optional section")
	}
}

// TestVerifyFindsEveryBitFlip flips bits in every checksummed part (blocks
// sampled) and requires a problem naming the file at an offset inside a part
// the flip touched, and the right verdict on whether a rewrite from the
// blocks repairs it.
func TestVerifyFindsEveryBitFlip(t *testing.T) {
	_, orig, r := verifyFixture(t)
	parts := fileLayout(t, orig, r)
	bad := filepath.Join(t.TempDir(), "bad.rseg")
	nb := len(r.blocks)
	sampled := map[string]bool{"block 0 ": true, fmt.Sprintf("block %d ", nb/2): true, fmt.Sprintf("block %d ", nb-1): true}
	checked := 0
	for _, p := range parts {
		isBlock := strings.HasPrefix(p.name, "block ")
		if isBlock && !sampled[p.name[:strings.Index(p.name, "column")]] ||
			strings.HasPrefix(p.name, "disk token page ") && p.name != "disk token page 0" {
			continue
		}
		// Parts a rewrite cannot rebuild: the frame, the summary, the block
		// index, the blocks themselves and the table of stored-value hashes
		// the blocks index.
		fatal := isBlock || p.name == "footer" || p.name == "toc" ||
			p.name == fmt.Sprintf("section %d", sectionInfo) || p.name == fmt.Sprintf("section %d", sectionBlockIndex) ||
			p.name == fmt.Sprintf("section %d", sectionValueRefTable)
		for _, at := range []int64{p.start, (p.start + p.end) / 2, p.end - 1} {
			data := slices.Clone(orig)
			data[at] ^= 0x04
			if err := os.WriteFile(bad, data, 0o644); err != nil {
				t.Fatal(err)
			}
			v := verifyT(t, bad)
			what := fmt.Sprintf("flip in %s at %d", p.name, at)
			if v.Clean() {
				t.Fatalf("%s: not found", what)
			}
			located := false
			for _, pr := range v.Problems {
				if pr.File != bad {
					t.Fatalf("%s: problem names %q", what, pr.File)
				}
				for _, q := range parts {
					if q.start <= pr.Offset && pr.Offset < q.end && q.start <= at && at < q.end {
						located = true
					}
				}
			}
			if !located {
				t.Fatalf("%s: no problem located in the damaged part: %v", what, v.Problems)
			}
			if v.Repairable() == fatal {
				t.Fatalf("%s: repairable = %v, want %v (%v)", what, v.Repairable(), !fatal, v.Problems)
			}
			checked++
		}
	}
	if checked < 60 {
		t.Fatalf("only %d flips checked", checked)
	}
}

func TestVerifyTruncation(t *testing.T) {
	_, orig, _ := verifyFixture(t)
	bad := filepath.Join(t.TempDir(), "bad.rseg")
	for _, at := range []int{0, 10, headerLen + footerLen, len(orig) / 3, len(orig) / 2, len(orig) - footerLen, len(orig) - 1} {
		if err := os.WriteFile(bad, orig[:at], 0o644); err != nil {
			t.Fatal(err)
		}
		v := verifyT(t, bad)
		if v.Clean() || v.Repairable() {
			t.Fatalf("truncated at %d: problems %v, repairable %v", at, v.Problems, v.Repairable())
		}
	}
}

// TestSalvageRewritesDamagedIndexes damages the trace index and the
// attribute filters, and checks that a rewrite of the salvaged blocks is
// clean and holds the same spans.
func TestSalvageRewritesDamagedIndexes(t *testing.T) {
	_, orig, r := verifyFixture(t)
	want := readAll(t, r)
	data := slices.Clone(orig)
	for _, typ := range []uint32{sectionTraceIndex, sectionAttrBlooms, sectionLLMAggDir} {
		e := tocEntryOf(t, orig, typ)
		data[e.Offset+e.Length/2] ^= 0xff
	}
	bad := filepath.Join(t.TempDir(), "bad.rseg")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v := verifyT(t, bad)
	if len(v.Problems) < 3 || !v.Repairable() {
		t.Fatalf("problems %v, repairable %v", v.Problems, v.Repairable())
	}
	dir := t.TempDir()
	w, err := NewWriter(dir, "rebuilt.rseg", WriterOptions{BlockSpans: 64, ContentTokens: StandInTokens})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Salvage(bad, func(project string, spans []model.Span) error { return w.Append(project, spans) })
	if err != nil || st.LostBlocks != 0 || st.Spans != len(want) {
		w.Abort()
		t.Fatalf("salvage: %+v, %v", st, err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rebuilt.rseg")
	if v := verifyT(t, out); !v.Clean() {
		t.Fatalf("rebuilt segment: %v", v.Problems)
	}
	got := readAll(t, openT(t, out))
	requireSpansEqual(t, "rebuilt", got, want)
	// A damaged block is skipped, the others are kept.
	data = slices.Clone(orig)
	data[r.blocks[1].Offset+r.blocks[1].Length/2] ^= 1
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	kept := 0
	st, err = Salvage(bad, func(_ string, spans []model.Span) error { kept += len(spans); return nil })
	if err != nil || st.LostBlocks != 1 || st.LostSpans != r.Blocks()[1].Spans || kept != len(want)-st.LostSpans || st.Spans != kept {
		t.Fatalf("salvage with a damaged block: %+v, kept %d, %v", st, kept, err)
	}
	// A damaged footer leaves nothing to salvage.
	data = slices.Clone(orig)
	data[len(data)-12] ^= 1
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Salvage(bad, func(string, []model.Span) error { return nil }); !IsCorruption(err) {
		t.Fatalf("salvage with a damaged footer: %v", err)
	}
}

// FuzzVerify: Verify reads arbitrary bytes without panicking, and reports
// damage as problems, never as an error (an error means I/O failure).
func FuzzVerify(f *testing.F) {
	small := segmentBytes(f, genCorpus(21, 2, 4, 12), WriterOptions{BlockSpans: 8})
	f.Add(small)
	refs := genCorpus(24, 1, 3, 6)
	addLargeValues(refs, 24)
	addLLM(refs["project-0"], 24)
	f.Add(segmentBytes(f, refs, WriterOptions{BlockSpans: 4, ContentTokens: StandInTokens, RowGroupTokenFilters: true,
		StoreValue: newMemValues().put, ValueThreshold: testThreshold}))
	f.Add(small[:len(small)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.rseg")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := Verify(path)
		if err != nil {
			t.Fatalf("Verify returned an error for file content: %v", err)
		}
		if v.Clean() {
			// A clean verdict must mean the file really reads.
			if errs := exercise(path, nil); len(errs) > 0 {
				t.Fatalf("Verify found nothing but reading fails: %v", errs)
			}
		}
		_, _ = Salvage(path, func(string, []model.Span) error { return nil })
	})
}
