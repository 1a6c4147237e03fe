package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// spanDiff returns "" if a and b are equal field by field (nil and empty
// slices are equal; doubles compare bit for bit), else a description.
func spanDiff(a, b *model.Span) string {
	switch {
	case a.TraceID != b.TraceID || a.SpanID != b.SpanID || a.ParentSpanID != b.ParentSpanID:
		return "ids"
	case a.TraceState != b.TraceState || a.Flags != b.Flags:
		return "trace state / flags"
	case a.Name != b.Name || a.Kind != b.Kind || a.Service != b.Service:
		return "name / kind / service"
	case a.StartTimeUnixNano != b.StartTimeUnixNano || a.EndTimeUnixNano != b.EndTimeUnixNano:
		return fmt.Sprintf("times %d-%d vs %d-%d", a.StartTimeUnixNano, a.EndTimeUnixNano, b.StartTimeUnixNano, b.EndTimeUnixNano)
	case !model.EqualKeyValues(a.Attributes, b.Attributes):
		return "attributes"
	case a.DroppedAttributesCount != b.DroppedAttributesCount || a.DroppedEventsCount != b.DroppedEventsCount ||
		a.DroppedLinksCount != b.DroppedLinksCount:
		return "dropped counts"
	case a.StatusCode != b.StatusCode || a.StatusMessage != b.StatusMessage:
		return "status"
	case len(a.Events) != len(b.Events) || len(a.Links) != len(b.Links):
		return "event / link count"
	case (a.Resource == nil) != (b.Resource == nil) || (a.Scope == nil) != (b.Scope == nil):
		return "nil resource / scope"
	case (a.LLM == nil) != (b.LLM == nil) || (a.LLM != nil && *a.LLM != *b.LLM):
		return fmt.Sprintf("llm %+v vs %+v", a.LLM, b.LLM)
	}
	for i := range a.Events {
		x, y := a.Events[i], b.Events[i]
		if x.TimeUnixNano != y.TimeUnixNano || x.Name != y.Name || x.DroppedAttributesCount != y.DroppedAttributesCount ||
			!model.EqualKeyValues(x.Attributes, y.Attributes) {
			return fmt.Sprintf("event %d", i)
		}
	}
	for i := range a.Links {
		x, y := a.Links[i], b.Links[i]
		if x.TraceID != y.TraceID || x.SpanID != y.SpanID || x.TraceState != y.TraceState || x.Flags != y.Flags ||
			x.DroppedAttributesCount != y.DroppedAttributesCount || !model.EqualKeyValues(x.Attributes, y.Attributes) {
			return fmt.Sprintf("link %d", i)
		}
	}
	if a.Resource != nil {
		x, y := a.Resource, b.Resource
		if !model.EqualKeyValues(x.Attributes, y.Attributes) || x.DroppedAttributesCount != y.DroppedAttributesCount ||
			x.SchemaURL != y.SchemaURL {
			return "resource"
		}
	}
	if a.Scope != nil {
		x, y := a.Scope, b.Scope
		if x.Name != y.Name || x.Version != y.Version || !model.EqualKeyValues(x.Attributes, y.Attributes) ||
			x.DroppedAttributesCount != y.DroppedAttributesCount || x.SchemaURL != y.SchemaURL {
			return "scope"
		}
	}
	return ""
}

func requireSpansEqual(t *testing.T, what string, got, want []model.Span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d spans, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := spanDiff(&got[i], &want[i]); d != "" {
			t.Fatalf("%s: span %d differs in %s", what, i, d)
		}
	}
}

// expected returns the corpus in segment order, project by project.
func expected(byProject map[string][]model.Span) (names []string, all []model.Span) {
	for p := range byProject {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		s := slices.Clone(byProject[p])
		SortSpans(s)
		all = append(all, s...)
	}
	return names, all
}

func writeCorpus(t testing.TB, byProject map[string][]model.Span, opts WriterOptions) (string, Info) {
	t.Helper()
	dir := t.TempDir()
	in := map[string][]model.Span{}
	for p, s := range byProject {
		in[p] = slices.Clone(s)
	}
	info, err := Write(dir, "seg-1.rseg", in, opts)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return filepath.Join(dir, "seg-1.rseg"), info
}

func openT(t testing.TB, path string) *Reader {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func readAll(t testing.TB, r *Reader) []model.Span {
	t.Helper()
	var all []model.Span
	for i := range r.Blocks() {
		s, err := r.ReadBlock(i)
		if err != nil {
			t.Fatalf("ReadBlock(%d): %v", i, err)
		}
		all = append(all, s...)
	}
	return all
}

type traceKey struct {
	project string
	id      model.TraceID
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts WriterOptions
	}{
		{"small-blocks", WriterOptions{BlockSpans: 64}},
		{"default", WriterOptions{}},
		{"fastest", WriterOptions{BlockSpans: 200, ZstdLevel: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			corpus := genCorpus(1, 3, 60, 300)
			names, want := expected(corpus)
			path, info := writeCorpus(t, corpus, tc.opts)
			r := openT(t, path)
			got := readAll(t, r)
			requireSpansEqual(t, "ReadBlock of all blocks", got, want)

			// Info agrees with the data.
			st, _ := os.Stat(path)
			if info.Bytes != st.Size() || r.Info().Bytes != st.Size() || r.Info().Spans != len(want) ||
				info.Spans != len(want) || r.Info().Blocks != len(r.Blocks()) || info.Blocks != len(r.Blocks()) {
				t.Fatalf("info mismatch: writer %+v reader %+v, file %d bytes, %d spans", info, r.Info(), st.Size(), len(want))
			}
			if r.Info().Name != "seg-1.rseg" {
				t.Fatalf("Info().Name = %q", r.Info().Name)
			}

			// Brute-force traces and project summaries.
			traces := map[traceKey][]model.Span{}
			var order []traceKey
			pos := 0
			for _, p := range names {
				pi := ProjectInfo{Name: p, MinStart: math.MaxUint64}
				seen := map[model.TraceID]bool{}
				for _, s := range corpus[p] {
					pi.Spans++
					pi.MinStart = min(pi.MinStart, s.StartTimeUnixNano)
					pi.MaxStart = max(pi.MaxStart, s.StartTimeUnixNano)
					if !seen[s.TraceID] {
						seen[s.TraceID] = true
						pi.Traces++
					}
				}
				for _, s := range want[pos : pos+pi.Spans] {
					k := traceKey{p, s.TraceID}
					if _, ok := traces[k]; !ok {
						order = append(order, k)
					}
					traces[k] = append(traces[k], s)
				}
				pos += pi.Spans
				gotP := r.Info().Projects[slices.IndexFunc(r.Info().Projects, func(x ProjectInfo) bool { return x.Name == p })]
				if gotP != pi {
					t.Fatalf("project info %+v, want %+v", gotP, pi)
				}
			}
			if r.Info().Traces != len(traces) {
				t.Fatalf("Info().Traces = %d, want %d", r.Info().Traces, len(traces))
			}
			bigSplit := false
			for _, k := range order {
				got, err := r.FindTrace(k.project, k.id)
				if err != nil {
					t.Fatalf("FindTrace: %v", err)
				}
				requireSpansEqual(t, "FindTrace "+k.id.String(), got, traces[k])
				if len(traces[k]) > r.Blocks()[0].Spans {
					bigSplit = true
				}
			}
			if tc.opts.BlockSpans == 64 && !bigSplit {
				t.Fatalf("corpus has no trace larger than a block")
			}

			// Block layout: one project per block, a trace is split only when larger than a block.
			blockOf := map[traceKey][]int{}
			for i, m := range r.Blocks() {
				spans, _ := r.ReadBlock(i)
				for _, s := range spans {
					k := traceKey{m.Project, s.TraceID}
					if b := blockOf[k]; len(b) == 0 || b[len(b)-1] != i {
						blockOf[k] = append(b, i)
					}
				}
			}
			target := tc.opts.withDefaults().BlockSpans
			for k, b := range blockOf {
				if len(b) > 1 && len(traces[k]) <= target {
					t.Fatalf("trace of %d spans split over blocks %v (target %d)", len(traces[k]), b, target)
				}
			}

			// Absent ids: same project, other project, between, before and after existing ids.
			var ids []model.TraceID
			for _, k := range order {
				if k.project == names[1] {
					ids = append(ids, k.id)
				}
			}
			sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
			absent := []model.TraceID{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
			for _, id := range ids {
				for _, d := range []int{-1, 1} {
					x := id
					x[15] += byte(d)
					if _, ok := traces[traceKey{names[1], x}]; !ok {
						absent = append(absent, x)
					}
				}
			}
			for _, id := range absent {
				if got, err := r.FindTrace(names[1], id); err != nil || got != nil {
					t.Fatalf("FindTrace(absent %s) = %d spans, %v", id, len(got), err)
				}
			}
			if got, err := r.FindTrace("no-such-project", ids[0]); err != nil || got != nil {
				t.Fatalf("FindTrace(other project) = %d spans, %v", len(got), err)
			}
			if got, err := r.FindTrace(names[2], ids[0]); err != nil || got != nil {
				t.Fatalf("FindTrace(id of another project) = %d spans, %v", len(got), err)
			}
			if r.ResidentBytes() <= 0 {
				t.Fatalf("ResidentBytes = %d", r.ResidentBytes())
			}
		})
	}
}

func TestSharedPointers(t *testing.T) {
	corpus := genCorpus(2, 1, 30, 40)
	path, _ := writeCorpus(t, corpus, WriterOptions{})
	r := openT(t, path)
	spans, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	res := map[*model.Resource]bool{}
	scopes := map[*model.Scope]bool{}
	for _, s := range spans {
		if s.Resource != nil {
			res[s.Resource] = true
		}
		if s.Scope != nil {
			scopes[s.Scope] = true
		}
	}
	// 6 resource pointers in the corpus, two of them equal; 2 non-nil scopes.
	if len(res) > 5 || len(scopes) > 2 {
		t.Fatalf("resources %d, scopes %d: equal values are not shared", len(res), len(scopes))
	}
}

func TestBlockMetaAndFilters(t *testing.T) {
	corpus := genCorpus(3, 3, 80, 120)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	for i, m := range r.Blocks() {
		spans, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		want := BlockMeta{Project: m.Project, Spans: len(spans), MinStart: math.MaxUint64, MinDuration: math.MaxUint64}
		svc, names := map[string]bool{}, map[string]bool{}
		for _, s := range spans {
			want.MinStart = min(want.MinStart, s.StartTimeUnixNano)
			want.MaxStart = max(want.MaxStart, s.StartTimeUnixNano)
			want.MinDuration = min(want.MinDuration, s.Duration())
			want.MaxDuration = max(want.MaxDuration, s.Duration())
			if s.StatusCode == model.StatusError {
				want.Errors++
			}
			if s.Kind >= 0 && s.Kind < 8 {
				want.Kinds |= 1 << s.Kind
			}
			svc[s.Service], names[s.Name] = true, true
			// No false negatives in the attribute filters.
			for _, kv := range s.Attributes {
				checkFilter(t, r, i, false, kv)
			}
			if s.Resource != nil {
				for _, kv := range s.Resource.Attributes {
					checkFilter(t, r, i, true, kv)
				}
			}
		}
		for k := range svc {
			want.Services = append(want.Services, k)
		}
		for k := range names {
			want.Names = append(want.Names, k)
		}
		slices.Sort(want.Services)
		slices.Sort(want.Names)
		got := m
		if got.Project != want.Project || got.Spans != want.Spans || got.Errors != want.Errors ||
			got.MinStart != want.MinStart || got.MaxStart != want.MaxStart || got.MinDuration != want.MinDuration ||
			got.MaxDuration != want.MaxDuration || got.Kinds != want.Kinds ||
			!slices.Equal(got.Services, want.Services) || !slices.Equal(got.Names, want.Names) {
			t.Fatalf("block %d meta\n got %+v\nwant %+v", i, got, want)
		}
	}
	// The filter does reject: most absent values must test negative.
	fp := 0
	for v := 0; v < 1000; v++ {
		if r.MayContainAttr(0, false, "k1", fmt.Sprintf("absent-%d", v)) {
			fp++
		}
	}
	if fp > 50 {
		t.Fatalf("%d/1000 false positives", fp)
	}
	if r.MayContainAttr(-1, false, "k", "v") || r.MayContainAttr(len(r.Blocks()), true, "k", "v") {
		t.Fatalf("MayContainAttr true for a block that does not exist")
	}
}

func checkFilter(t *testing.T, r *Reader, block int, resource bool, kv model.KeyValue) {
	t.Helper()
	switch kv.Value.Type {
	case model.ValueString:
		if !r.MayContainAttr(block, resource, kv.Key, kv.Value.Str) {
			t.Fatalf("block %d: false negative for %s=%q (resource %v)", block, kv.Key, kv.Value.Str, resource)
		}
	case model.ValueInt:
		if !r.MayContainIntAttr(block, resource, kv.Key, kv.Value.Int) {
			t.Fatalf("block %d: false negative for %s=%d (resource %v)", block, kv.Key, kv.Value.Int, resource)
		}
	}
}

func TestEmptySegment(t *testing.T) {
	dir := t.TempDir()
	info, err := Write(dir, "empty", nil, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := openT(t, filepath.Join(dir, "empty"))
	if info.Spans != 0 || len(r.Blocks()) != 0 || r.Info().Spans != 0 {
		t.Fatalf("info %+v / %+v", info, r.Info())
	}
	if got, err := r.FindTrace("", model.TraceID{1}); got != nil || err != nil {
		t.Fatalf("FindTrace on empty segment: %v %v", got, err)
	}
	if _, err := r.ReadBlock(0); err == nil {
		t.Fatalf("ReadBlock(0) of an empty segment succeeded")
	}
}

func TestStreamingAppendMatchesWrite(t *testing.T) {
	corpus := genCorpus(4, 2, 40, 150)
	names, want := expected(corpus)
	dir := t.TempDir()
	w, err := NewWriter(dir, "s", WriterOptions{BlockSpans: 50})
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for _, p := range names {
		spans := want[pos : pos+len(corpus[p])]
		pos += len(corpus[p])
		for len(spans) > 0 { // uneven chunks that cut traces
			n := min(len(spans), 1+len(spans)%37)
			if err := w.Append(p, spans[:n]); err != nil {
				t.Fatal(err)
			}
			spans = spans[n:]
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openT(t, filepath.Join(dir, "s"))
	requireSpansEqual(t, "streamed", readAll(t, r), want)
}

func TestAppendOrderViolations(t *testing.T) {
	mk := func(trace byte, span byte, start uint64) model.Span {
		return model.Span{TraceID: model.TraceID{trace}, SpanID: model.SpanID{span}, StartTimeUnixNano: start, Service: "s"}
	}
	for _, tc := range []struct {
		name   string
		append func(w *Writer) error
	}{
		{"project order", func(w *Writer) error {
			if err := w.Append("b", []model.Span{mk(1, 1, 10)}); err != nil {
				return nil
			}
			return w.Append("a", []model.Span{mk(1, 1, 10)})
		}},
		{"span start order", func(w *Writer) error { return w.Append("a", []model.Span{mk(1, 1, 10), mk(1, 2, 5)}) }},
		{"span id order", func(w *Writer) error { return w.Append("a", []model.Span{mk(1, 2, 10), mk(1, 1, 10)}) }},
		{"trace start order", func(w *Writer) error { return w.Append("a", []model.Span{mk(1, 1, 10), mk(2, 1, 5)}) }},
		{"trace id order", func(w *Writer) error { return w.Append("a", []model.Span{mk(2, 1, 10), mk(1, 1, 10)}) }},
		{"trace comes back", func(w *Writer) error {
			if err := w.Append("a", []model.Span{mk(1, 1, 10), mk(2, 1, 11), mk(1, 2, 12)}); err != nil {
				return err
			}
			_, err := w.Close()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := NewWriter(dir, "x", WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.append(w); err == nil {
				t.Fatalf("order violation accepted")
			}
			if _, err := w.Close(); err == nil {
				t.Fatalf("Close after a failed Append succeeded")
			}
			assertNoFiles(t, dir)
		})
	}
}

func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("file %s left behind", e.Name())
	}
}

func TestAtomicPublish(t *testing.T) {
	corpus := genCorpus(5, 1, 20, 50)
	_, want := expected(corpus)
	t.Run("abort", func(t *testing.T) {
		dir := t.TempDir()
		w, err := NewWriter(dir, "seg", WriterOptions{BlockSpans: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append("p", want); err != nil { // blocks hit the disk
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "seg")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("final name visible before Close: %v", err)
		}
		w.Abort()
		assertNoFiles(t, dir)
		if _, err := w.Close(); err == nil {
			t.Fatalf("Close after Abort succeeded")
		}
		assertNoFiles(t, dir)
	})
	t.Run("bad value fails mid-way", func(t *testing.T) {
		dir := t.TempDir()
		bad := slices.Clone(want)
		deep := model.Value{}
		for i := 0; i < maxValueDepth+5; i++ {
			deep = model.ArrayValue([]model.Value{deep})
		}
		bad[len(bad)-1].Attributes = []model.KeyValue{{Key: "deep", Value: deep}}
		_, err := Write(dir, "seg", map[string][]model.Span{"p": bad}, WriterOptions{BlockSpans: 10})
		if err == nil {
			t.Fatalf("Write accepted a value nested deeper than the limit")
		}
		assertNoFiles(t, dir)
	})
	t.Run("directory gone", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := NewWriter(dir, "seg", WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append("p", want); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Close(); err == nil {
			t.Fatalf("Close succeeded into a removed directory")
		}
		if _, err := os.Stat(filepath.Join(dir, "seg")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("final file exists: %v", err)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		for _, o := range []WriterOptions{{BlockSpans: -1}, {BlockSpans: maxBlockSpans + 1}, {ZstdLevel: 9}} {
			if _, err := NewWriter(t.TempDir(), "x", o); err == nil {
				t.Fatalf("options %+v accepted", o)
			}
		}
		if _, err := NewWriter(t.TempDir(), "../x", WriterOptions{}); err == nil {
			t.Fatalf("name with a path accepted")
		}
	})
}

func TestSortSpans(t *testing.T) {
	corpus := genCorpus(6, 1, 50, 20)
	spans := corpus[""]
	SortSpans(spans)
	minStart := map[model.TraceID]uint64{}
	for _, s := range spans {
		if m, ok := minStart[s.TraceID]; !ok || s.StartTimeUnixNano < m {
			minStart[s.TraceID] = s.StartTimeUnixNano
		}
	}
	for i := 1; i < len(spans); i++ {
		a, b := &spans[i-1], &spans[i]
		if compareOrder(minStart[a.TraceID], a, minStart[b.TraceID], b) > 0 {
			t.Fatalf("spans %d and %d out of order", i-1, i)
		}
	}
}

// TestConcurrentReads runs lookups and block reads from several goroutines
// on one Reader (run with -race).
func TestConcurrentReads(t *testing.T) {
	corpus := genCorpus(7, 2, 40, 30)
	_, want := expected(corpus)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := g; i < len(want); i += 25 {
				got, err := r.FindTrace(r.Blocks()[0].Project, want[i].TraceID)
				if err == nil && len(got) == 0 && i < r.Blocks()[0].Spans {
					err = fmt.Errorf("trace %s not found", want[i].TraceID)
				}
				if err == nil {
					_, err = r.ReadBlock(i % len(r.Blocks()))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriterKeepsNoPointerIntoSpans: what a Writer holds until Close (the
// block index's service and span names, the LLM rollup keys) is its own
// copy, not a pointer into the spans' memory. A merge appends spans decoded
// from its inputs' blocks; a pointer into one would keep that whole decoded
// block alive until the output is closed, so merge memory would grow with the
// output instead of staying one block per input.
func TestWriterKeepsNoPointerIntoSpans(t *testing.T) {
	spans := realisticCorpus(7, 400)
	addLLM(spans, 7)
	SortSpans(spans)
	// Every string field the writer could keep, moved into one arena.
	var arena []byte
	type field struct {
		p   *string
		off int
	}
	var fields []field
	for i := range spans {
		s := &spans[i]
		ps := []*string{&s.Name, &s.Service}
		for j := range s.Attributes {
			if s.Attributes[j].Value.Type == model.ValueString {
				ps = append(ps, &s.Attributes[j].Value.Str)
			}
		}
		for _, p := range ps {
			fields = append(fields, field{p, len(arena)})
			arena = append(arena, *p...)
		}
	}
	whole := string(arena)
	for _, f := range fields {
		*f.p = whole[f.off : f.off+len(*f.p)]
	}
	lo := uintptr(unsafe.Pointer(unsafe.StringData(whole)))
	hi := lo + uintptr(len(whole))
	inArena := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return len(s) > 0 && p >= lo && p < hi
	}

	w, err := NewWriter(t.TempDir(), "s", WriterOptions{BlockSpans: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Append("p", spans); err != nil {
		t.Fatal(err)
	}
	if err := w.flushBlock(); err != nil { // the last, partial block too
		t.Fatal(err)
	}
	if len(w.blocks) < 5 {
		t.Fatalf("%d blocks, want several", len(w.blocks))
	}
	for i, b := range w.blocks {
		for _, s := range append(slices.Clone(b.Meta.Names), b.Meta.Services...) {
			if inArena(s) {
				t.Fatalf("block %d: index string %q points into the appended spans", i, s)
			}
		}
	}
	if len(w.aggs.entries) == 0 {
		t.Fatal("no LLM rollup entries: the corpus has no LLM spans")
	}
	for _, e := range w.aggs.entries {
		k := e.Key
		for _, s := range []string{k.Model, k.Provider, k.Service, k.Operation, k.Session, k.User, k.Agent} {
			if inArena(s) {
				t.Fatalf("rollup key %+v: %q points into the appended spans", k, s)
			}
		}
	}
}
