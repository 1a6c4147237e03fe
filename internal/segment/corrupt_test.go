package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// part is a checksummed region of a segment file.
type part struct {
	name       string
	start, end int64
}

// fileLayout lists every checksummed part of a valid segment file.
func fileLayout(t *testing.T, data []byte, r *Reader) []part {
	t.Helper()
	size := int64(len(data))
	parts := []part{{"header", 0, headerLen}, {"footer", size - footerLen, size}}
	foot := data[size-footerLen:]
	tocOff, tocLen := int64(le.Uint64(foot[0:])), int64(le.Uint64(foot[8:]))
	parts = append(parts, part{"toc", tocOff, tocOff + tocLen})
	n := int(le.Uint32(data[tocOff:]))
	for i := 0; i < n; i++ {
		p := data[tocOff+4+int64(i)*tocEntryLen:]
		typ, off, length := le.Uint32(p), int64(le.Uint64(p[16:])), int64(le.Uint64(p[24:]))
		if typ == sectionTraceIndex {
			for pg := range r.tix.fences {
				o, cnt := r.tix.pageBounds(pg)
				parts = append(parts, part{fmt.Sprintf("trace page %d", pg), o, o + int64(cnt)*traceEntryLen})
			}
			continue
		}
		if typ == sectionLLMAggregates || typ == sectionOpsAggregates {
			x, prefix := &r.aggs, "aggregates of "
			if typ == sectionOpsAggregates {
				x, prefix = &r.ops, "service aggregates of "
			}
			for ri, refs := range [][]aggRef{x.blocks, x.projects} {
				for k, ref := range refs {
					if ref.Length > 0 {
						o := x.offset + int64(ref.Offset)
						name := fmt.Sprintf("%sblock %d ", prefix, k)
						if ri == 1 {
							name = fmt.Sprintf("%sproject %d", prefix, k)
						}
						parts = append(parts, part{name, o, o + int64(ref.Length)})
					}
				}
			}
			continue
		}
		if typ == sectionTokenFilters {
			for k := 0; k+1 < len(r.tok.offs); k++ {
				if lo, hi := r.tok.offs[k], r.tok.offs[k+1]; lo < hi {
					parts = append(parts, part{fmt.Sprintf("token filter of block %d ", k), off + int64(lo), off + int64(hi)})
				}
			}
			continue
		}
		if typ == sectionTokenGroups {
			for k := 0; k+1 < len(r.grp.offs); k++ {
				if lo, hi := r.grp.offs[k], r.grp.offs[k+1]; lo < hi {
					parts = append(parts, part{fmt.Sprintf("token filter of block %d groups", k), off + int64(lo), off + int64(hi)})
				}
			}
			continue
		}
		if typ == sectionTokenPages {
			for pg := 0; pg < r.grp.pages; pg++ {
				o := off + int64(pg)*diskPageStride
				parts = append(parts, part{fmt.Sprintf("disk token page %d", pg), o, o + diskPageStride})
			}
			continue
		}
		parts = append(parts, part{fmt.Sprintf("section %d", typ), off, off + length})
	}
	for i, b := range r.blocks {
		for _, c := range b.Cols {
			o := int64(b.Offset + c.Offset)
			parts = append(parts, part{fmt.Sprintf("block %d column %s", i, columnNames[c.ID]), o, o + int64(c.Length)})
		}
	}
	return parts
}

type traceRef struct {
	project string
	id      model.TraceID
}

// exercise opens the file and reads everything it holds; it returns every
// error seen. It must never panic.
func exercise(path string, traces []traceRef) []error {
	r, err := Open(path)
	if err != nil {
		return []error{err}
	}
	defer r.Close()
	var errs []error
	for i := range r.Blocks() {
		if _, err := r.ReadBlock(i); err != nil {
			errs = append(errs, err)
		}
	}
	for _, tr := range traces {
		if _, err := r.FindTrace(tr.project, tr.id); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range r.Blocks() {
		if _, err := r.BlockAggregates(i); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range r.Info().Projects {
		if _, err := r.SegmentAggregates(p.Name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range r.Info().Projects {
		if _, err := r.CoarseAggregates(p.Name); err != nil {
			errs = append(errs, err)
		}
		if _, err := r.SessionTable(p.Name, true); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range r.Blocks() {
		if _, err := r.BlockOps(i); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range r.Info().Projects {
		if _, err := r.SegmentOps(p.Name); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range r.Blocks() {
		if _, err := r.BlockMayContainTokens(i, []uint64{1}); err != nil {
			errs = append(errs, err)
		}
	}
	if r.SegmentMayContainTokens([]uint64{1}) {
		if _, err := r.BlocksMayContainTokens([]uint64{1}); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range r.Blocks() {
		if _, err := r.BlockRowsMayContainTokens(i, []uint64{1}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.verifyDiskPages(); err != nil {
		errs = append(errs, err)
	}
	if err := r.ValueRefs(func([32]byte) bool { return true }); err != nil {
		errs = append(errs, err)
	}
	if err := r.AttrSummaryErr(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func TestCorruption(t *testing.T) {
	corpus := genCorpus(11, 2, 100, 40)
	addLargeValues(corpus, 11)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100, ContentTokens: StandInTokens, RowGroupTokenFilters: true,
		StoreValue: newMemValues().put, ValueThreshold: testThreshold})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := openT(t, path)
	// One trace per trace-index page reads every page; ReadBlock reads every block.
	var traces []traceRef
	for _, f := range r.tix.fences {
		traces = append(traces, traceRef{r.Info().Projects[f.Project].Name, f.First})
	}
	parts := fileLayout(t, orig, r)
	if len(r.tix.fences) < 2 {
		t.Fatalf("corpus too small: %d trace-index pages", len(r.tix.fences))
	}
	filters := 0
	for _, p := range parts {
		if strings.HasPrefix(p.name, "token filter of block ") && !strings.HasSuffix(p.name, "groups") || p.name == fmt.Sprintf("section %d", sectionTokenSummary) {
			filters++
		}
	}
	if filters != 1+len(r.blocks) {
		t.Fatalf("layout lists %d token filter parts for %d blocks", filters, len(r.blocks))
	}
	if !r.HasValueRefs() {
		t.Fatalf("corpus has no stored-value references: section 9 is not exercised")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.rseg")

	// expectCorruption checks that the damage [lo, hi) is reported as a
	// CorruptionError naming the file and a part that overlaps the damage.
	expectCorruption := func(t *testing.T, what string, data []byte, lo, hi int64) {
		t.Helper()
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		errs := exercise(bad, traces)
		if len(errs) == 0 {
			t.Fatalf("%s: damage at [%d, %d) went unnoticed", what, lo, hi)
		}
		for _, err := range errs {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("%s: error is not a CorruptionError: %v", what, err)
			}
			if ce.File != bad {
				t.Fatalf("%s: error names file %q", what, ce.File)
			}
			ok := false
			for _, p := range parts {
				if p.start <= ce.Offset && ce.Offset < p.end && p.start < hi && lo < p.end {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("%s: damage at [%d, %d) reported at offset %d (%v)", what, lo, hi, ce.Offset, err)
			}
		}
	}

	t.Run("bit flip in every part", func(t *testing.T) {
		nb := len(r.blocks)
		sampled := map[string]bool{"block 0 ": true, fmt.Sprintf("block %d ", nb/2): true, fmt.Sprintf("block %d ", nb-1): true}
		for _, p := range parts {
			if strings.HasPrefix(p.name, "block ") && !sampled[p.name[:strings.Index(p.name, "column")]] ||
				strings.HasPrefix(p.name, "aggregates of block ") && !sampled[strings.TrimPrefix(p.name, "aggregates of ")] ||
				strings.HasPrefix(p.name, "service aggregates of block ") && !sampled[strings.TrimPrefix(p.name, "service aggregates of ")] ||
				strings.HasPrefix(p.name, "token filter of block ") && !sampled[strings.TrimSuffix(strings.TrimPrefix(p.name, "token filter of "), "groups")] ||
				strings.HasPrefix(p.name, "disk token page ") && p.name != "disk token page 0" {
				continue
			}
			for _, at := range []int64{p.start, (p.start + p.end) / 2, p.end - 1} {
				data := append([]byte(nil), orig...)
				data[at] ^= 0x10
				expectCorruption(t, fmt.Sprintf("flip in %s at %d", p.name, at), data, at, at+1)
			}
		}
	})
	t.Run("zeroed ranges", func(t *testing.T) {
		for at := int64(0); at < int64(len(orig)); at += int64(len(orig)) / 97 {
			end := min(at+48, int64(len(orig)))
			data := append([]byte(nil), orig...)
			changed := false
			for i := at; i < end; i++ {
				changed = changed || data[i] != 0
				data[i] = 0
			}
			if changed {
				expectCorruption(t, fmt.Sprintf("zero [%d, %d)", at, end), data, at, end)
			}
		}
	})
	t.Run("truncation", func(t *testing.T) {
		cuts := []int64{0, 1, headerLen, int64(len(orig)) - 1, int64(len(orig)) - footerLen, int64(len(orig)) - footerLen - 1}
		for at := int64(0); at < int64(len(orig)); at += int64(len(orig)) / 61 {
			cuts = append(cuts, at)
		}
		for _, at := range cuts {
			if err := os.WriteFile(bad, orig[:at], 0o644); err != nil {
				t.Fatal(err)
			}
			errs := exercise(bad, traces)
			if len(errs) == 0 || !IsCorruption(errs[0]) {
				t.Fatalf("truncated at %d: errors %v", at, errs)
			}
		}
	})
	t.Run("appended garbage", func(t *testing.T) {
		for _, n := range []int{1, 7, footerLen, 4096} {
			data := append(append([]byte(nil), orig...), make([]byte, n)...)
			for i := len(orig); i < len(data); i++ {
				data[i] = byte(i * 31)
			}
			if err := os.WriteFile(bad, data, 0o644); err != nil {
				t.Fatal(err)
			}
			errs := exercise(bad, traces)
			if len(errs) != 1 || !IsCorruption(errs[0]) {
				t.Fatalf("%d bytes of garbage: errors %v", n, errs)
			}
		}
	})
	t.Run("file shrinks after open", func(t *testing.T) {
		if err := os.WriteFile(bad, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		r2, err := Open(bad)
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		if err := os.Truncate(bad, headerLen+10); err != nil {
			t.Fatal(err)
		}
		if _, err := r2.ReadBlock(len(r2.Blocks()) - 1); !IsCorruption(err) {
			t.Fatalf("ReadBlock of a shrunk file: %v", err)
		}
	})
}

func TestUnsupportedVersionIsNotCorruption(t *testing.T) {
	path, _ := writeCorpus(t, genCorpus(12, 1, 3, 3), WriterOptions{})
	data, _ := os.ReadFile(path)
	foot := data[len(data)-footerLen:]
	le.PutUint32(foot[20:], FormatVersion+1)
	le.PutUint32(foot[28:], crc(foot[:28]))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if !errors.Is(err, ErrUnsupported) || IsCorruption(err) {
		t.Fatalf("Open of a future version: %v", err)
	}
}
