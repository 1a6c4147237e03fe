package segment

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// poisonSource is a RowReleaser that, like a seal's source, hands out a
// scratch Span whose arrays are its own copies, and ruins those copies as
// soon as the writer says it no longer holds them: a span written after
// its release would show the poison.
type poisonSource struct {
	t        *testing.T
	spans    []model.Span
	scratch  model.Span
	handed   [][]model.KeyValue // the attribute array of each call, in order
	released uint64
}

func (s *poisonSource) Key(row uint32) (model.TraceID, uint64, model.SpanID) {
	sp := &s.spans[row]
	return sp.TraceID, sp.StartTimeUnixNano, sp.SpanID
}

func (s *poisonSource) Span(row uint32) *model.Span {
	s.scratch = s.spans[row]
	s.scratch.Attributes = slices.Clone(s.spans[row].Attributes)
	s.handed = append(s.handed, s.scratch.Attributes)
	return &s.scratch
}

func (s *poisonSource) Released(n uint64) {
	if n <= s.released || n > uint64(len(s.handed)) {
		s.t.Fatalf("Released(%d) after Released(%d), with %d spans handed out: n must grow and stay within the calls",
			n, s.released, len(s.handed))
	}
	for _, kvs := range s.handed[s.released:n] {
		for i := range kvs {
			kvs[i] = model.KeyValue{Key: "poison", Value: model.StringValue("released too early")}
		}
	}
	s.released = n
}

// TestWriteRowsReleasesOnlyWrittenSpans: the writer tells a RowReleaser
// source which spans it no longer holds only once their block is written:
// with every released span's attributes overwritten at once, the segment
// still holds exactly the spans appended, over blocks of 8 spans, traces
// that cross block boundaries and traces larger than a block. And it does
// tell: nearly every span is released by the end.
func TestWriteRowsReleasesOnlyWrittenSpans(t *testing.T) {
	byProject := genCorpus(5, 3, 40, 30) // traces of up to 30 spans
	dir := t.TempDir()
	refs := map[string][]RowRef{}
	src := &poisonSource{t: t}
	for p, spans := range byProject {
		for i := range spans {
			refs[p] = append(refs[p], RowRef{Row: uint32(len(src.spans))})
			src.spans = append(src.spans, spans[i])
		}
	}
	// RowRef.TraceMin: each trace's minimum start.
	mins := map[model.TraceID]uint64{}
	for _, s := range src.spans {
		if m, ok := mins[s.TraceID]; !ok || s.StartTimeUnixNano < m {
			mins[s.TraceID] = s.StartTimeUnixNano
		}
	}
	for _, rs := range refs {
		for i := range rs {
			rs[i].TraceMin = mins[src.spans[rs[i].Row].TraceID]
		}
	}
	if _, err := WriteRows(dir, "rows.rseg", refs, src, WriterOptions{BlockSpans: 8}); err != nil {
		t.Fatal(err)
	}
	_, want := expected(byProject)
	requireSpansEqual(t, "written with releases", readAll(t, openT(t, filepath.Join(dir, "rows.rseg"))), want)
	if len(src.handed) != len(want) {
		t.Fatalf("Span called %d times for %d spans", len(src.handed), len(want))
	}
	if src.released+30 < uint64(len(want)) {
		t.Fatalf("only %d of %d spans released: the source cannot reuse their memory", src.released, len(want))
	}
}
