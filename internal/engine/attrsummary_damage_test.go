package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// TestDamagedAttrSummaryServedWithout checks that a segment whose attribute
// value summary (section 19) is damaged is still served, searched through
// its block filters with the same answers, counted as corruption, and that
// fsck --repair rebuilds the summary.
func TestDamagedAttrSummaryServedWithout(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	base := uint64(time.Now().Add(-time.Hour).UnixNano())
	var spans []model.Span
	for i := range 3000 {
		s := model.Span{Name: "op", Service: "svc", StartTimeUnixNano: base + uint64(i)*1e6, EndTimeUnixNano: base + uint64(i)*1e6 + 1e5,
			Resource:   &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("svc")}}},
			Attributes: []model.KeyValue{{Key: "user.id", Value: model.StringValue(fmt.Sprintf("u-%03d", (i/10)%100))}}}
		s.TraceID[0], s.TraceID[1], s.TraceID[2] = 1, byte(i/10), byte(i/2560)
		s.SpanID[0], s.SpanID[1], s.SpanID[2] = 1, byte(i), byte(i>>8)
		spans = append(spans, s)
	}
	appendSpans(t, e, "default", spans)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	off, n := sectionRange(t, segs[0], 19)
	flipAt(t, segs[0], off+n/2)

	e = openTest(t, dir)
	if c := e.Counters(); c.Corruptions != 1 {
		t.Fatalf("%d corruptions counted at open, want 1", c.Corruptions)
	}
	for _, q := range []string{`{ span.user.id = "u-001" }`, `{ span.user.id = "u-absent" }`} {
		expr, err := query.ParseTraceQL(q)
		if err != nil {
			t.Fatal(err)
		}
		f := &query.Filter{Expr: expr}
		got := searchAll(t, e, "default", f, 50)
		if want := keys(bruteForce(spans, f)); !slices.Equal(keys(got), want) {
			t.Fatalf("%s: %d spans, brute force %d", q, len(got), len(want))
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := fsckT(t, dir, false); rep.Clean() {
		t.Fatal("fsck finds nothing wrong with a damaged attribute value summary")
	}
	if rep := fsckT(t, dir, true); !rep.Clean() {
		t.Fatalf("fsck --repair left problems: %+v", rep)
	}
	e = openTest(t, dir)
	defer e.Close()
	if c := e.Counters(); c.Corruptions != 0 {
		t.Fatalf("%d corruptions counted after repair", c.Corruptions)
	}
}
