package engine

import (
	"context"
	"testing"
)

// TestStatusAgreesWithStats: the status report's per-project counts are
// Stats' for each project, its tiers hold every segment, and the oldest
// unsealed buffer is known exactly while spans wait to be sealed.
func TestStatusAgreesWithStats(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	ctx := context.Background()
	appendSpans(t, e, "a", newGen(1).spans(40))
	appendSpans(t, e, "b", newGen(2).spans(10))
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.OldestUnsealed.IsZero() || st.BufferSpans != 0 {
		t.Errorf("after a seal: oldest unsealed %v, %d buffered spans", st.OldestUnsealed, st.BufferSpans)
	}
	appendSpans(t, e, "b", newGen(3).spans(5))
	if st, err = e.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if st.OldestUnsealed.IsZero() || st.BufferSpans == 0 {
		t.Errorf("with spans buffered: oldest unsealed %v, %d buffered spans", st.OldestUnsealed, st.BufferSpans)
	}
	if len(st.Projects) != 2 || st.Projects[0].Name != "a" || st.Projects[1].Name != "b" {
		t.Fatalf("projects %+v, want a and b", st.Projects)
	}
	for _, p := range st.Projects {
		want, err := e.Stats(ctx, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Spans != want.Spans || p.Traces != want.Traces {
			t.Errorf("project %s: status %d spans %d traces, stats %d and %d", p.Name, p.Spans, p.Traces, want.Spans, want.Traces)
		}
		if st.DiskBytes != want.DiskBytes || st.WALBytes != want.WALBytes || st.SegmentBytes != want.SegmentBytes {
			t.Errorf("sizes: status %d/%d/%d, stats %d/%d/%d", st.DiskBytes, st.WALBytes, st.SegmentBytes, want.DiskBytes, want.WALBytes, want.SegmentBytes)
		}
	}
	segs, bytes := 0, int64(0)
	for _, tc := range st.Tiers {
		segs += tc.Segments
		bytes += tc.Bytes
	}
	if want, _ := e.Stats(ctx, "a"); segs != want.Segments || bytes != st.SegmentBytes || segs == 0 {
		t.Errorf("tiers hold %d segments of %d bytes; the store has %d of %d", segs, bytes, want.Segments, st.SegmentBytes)
	}
	if st.MaxBufferBytes <= 0 || st.ErasuresPending != 0 || st.ErasuresHidden != 0 {
		t.Errorf("buffer limit %d, erasures %d/%d", st.MaxBufferBytes, st.ErasuresPending, st.ErasuresHidden)
	}
}
