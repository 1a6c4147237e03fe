package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// randomValue makes a value of any type, nested lists included (depth
// bounds the nesting). Empty lists are nil, as the decoders make them.
func randomValue(r *rand.Rand, depth int) model.Value {
	switch t := r.IntN(9); {
	case t == 0:
		return model.Value{}
	case t == 1:
		return model.StringValue(randomString(r))
	case t == 2:
		return model.BoolValue(r.IntN(2) == 0)
	case t == 3:
		return model.IntValue(r.Int64() - math.MaxInt64/2)
	case t == 4:
		return model.DoubleValue([]float64{r.NormFloat64(), math.Inf(-1), 0, math.MaxFloat64}[r.IntN(4)])
	case t == 5:
		return model.BytesValue([]byte(randomString(r)))
	case t == 6 && depth > 0:
		var elems []model.Value
		for range r.IntN(4) {
			elems = append(elems, randomValue(r, depth-1))
		}
		return model.ArrayValue(elems)
	case t == 7 && depth > 0:
		return model.KvListValue(randomKVs(r, depth-1))
	default:
		return model.Value{Type: model.ValueRef, Str: randomString(r), Int: r.Int64N(1 << 40)}
	}
}

func randomString(r *rand.Rand) string {
	alphabet := []string{"", "a", "GET /api", "é日本", "\x00\xff", "service.name", string(make([]byte, 300))}
	return alphabet[r.IntN(len(alphabet))]
}

func randomKVs(r *rand.Rand, depth int) []model.KeyValue {
	var kvs []model.KeyValue
	for range r.IntN(6) {
		kvs = append(kvs, model.KeyValue{Key: randomString(r), Value: randomValue(r, depth)})
	}
	return kvs
}

// randomSpan fills every field of a span with random contents.
func randomSpan(r *rand.Rand, resources []*model.Resource, scopes []*model.Scope) model.Span {
	s := model.Span{
		TraceState: randomString(r), Flags: r.Uint32(), Name: randomString(r),
		Kind: model.SpanKind(r.Int32N(8) - 1), StartTimeUnixNano: r.Uint64(), EndTimeUnixNano: r.Uint64(),
		Attributes: randomKVs(r, 2), DroppedAttributesCount: r.Uint32(), DroppedEventsCount: r.Uint32(),
		DroppedLinksCount: r.Uint32(), StatusCode: model.StatusCode(r.Int32N(4) - 1), StatusMessage: randomString(r),
		Service: randomString(r),
	}
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
	}
	fill(s.TraceID[:])
	fill(s.SpanID[:])
	if r.IntN(3) > 0 {
		fill(s.ParentSpanID[:])
	}
	for range r.IntN(3) {
		s.Events = append(s.Events, model.Event{TimeUnixNano: r.Uint64(), Name: randomString(r),
			Attributes: randomKVs(r, 1), DroppedAttributesCount: r.Uint32()})
	}
	for range r.IntN(3) {
		l := model.Link{TraceState: randomString(r), Attributes: randomKVs(r, 1), DroppedAttributesCount: r.Uint32(), Flags: r.Uint32()}
		fill(l.TraceID[:])
		fill(l.SpanID[:])
		s.Links = append(s.Links, l)
	}
	if i := r.IntN(len(resources) + 1); i < len(resources) {
		s.Resource = resources[i]
	}
	if i := r.IntN(len(scopes) + 1); i < len(scopes) {
		s.Scope = scopes[i]
	}
	if r.IntN(2) == 0 {
		s.LLM = &model.LLM{Provider: randomString(r), RequestModel: randomString(r), ResponseModel: randomString(r),
			Operation: randomString(r), InputTokens: r.Int64(), OutputTokens: -r.Int64(), CacheReadTokens: r.Int64N(9),
			CacheCreationTokens: r.Int64N(9), ReasoningTokens: r.Int64N(9), CostNanoUSD: r.Int64(),
			CostSource: model.CostSource(r.IntN(3)), SessionID: randomString(r), UserID: randomString(r),
			AgentName: randomString(r), ToolName: randomString(r), TimeToFirstTokenNanos: r.Uint64(), Counted: r.IntN(2) == 0}
	}
	return s
}

// TestBufferKeepsEverySpanField: a span read back from the write buffer (a
// trace lookup, a scan, a seal's source) equals the span inserted, field
// for field, for random spans using every field and every value type, with
// resources and scopes shared between requests and repeated by value.
func TestBufferKeepsEverySpanField(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var resources []*model.Resource
	var scopes []*model.Scope
	for range 4 {
		resources = append(resources, &model.Resource{Attributes: randomKVs(r, 2), DroppedAttributesCount: r.Uint32(), SchemaURL: randomString(r)})
		scopes = append(scopes, &model.Scope{Name: randomString(r), Version: randomString(r), Attributes: randomKVs(r, 1),
			DroppedAttributesCount: r.Uint32(), SchemaURL: randomString(r)})
	}
	// The same resource again, as another request would carry it.
	clone := *resources[0]
	resources = append(resources, &clone)
	m := newMemtable(time.Now(), nil)
	want := map[spanKey]model.Span{}
	for range 50 {
		var batch []model.Span
		for range 1 + r.IntN(40) {
			s := randomSpan(r, resources, scopes)
			batch = append(batch, s)
			want[spanKey{"p", s.TraceID, s.SpanID}] = s
		}
		m.insert("p", batch, 0)
	}
	check := func(how string, got *model.Span) {
		t.Helper()
		w, ok := want[spanKey{"p", got.TraceID, got.SpanID}]
		if !ok {
			t.Fatalf("%s: span %s was never inserted", how, got.SpanID)
		}
		if !reflect.DeepEqual(*got, w) {
			t.Fatalf("%s: span %s reads back as\n%+v\nwant\n%+v", how, got.SpanID, *got, w)
		}
	}
	n := 0
	m.scan(func(r *row) bool {
		check("scan", r.span)
		for _, tr := range m.traceRows("p", r.span.TraceID) {
			check("traceRows", tr.span)
		}
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("scan saw %d spans, want %d", n, len(want))
	}
	byProject, src := m.sealRows(func(string, *model.Span) bool { return false })
	for _, ref := range byProject["p"] {
		check("seal", src.Span(ref.Row))
	}
	if got := len(*m.resources.Load()); got != 4 {
		t.Errorf("the buffer holds %d resources; want the 4 distinct ones", got)
	}
}

// TestSealReusesSlabs: a seal decodes every span of its buffer; as the
// segment writer releases each written block's spans, their attribute
// slabs take later spans' attributes (a few slabs for the whole buffer
// instead of one per thousand attributes), and the segment still holds
// every span's attributes exactly as appended: over blocks of 8 spans, many
// to a slab, and over blocks of 64 spans of 130 attributes, 8 to a slab,
// where most traces straddle two slabs and one held across a block's end
// would be overwritten if its older slab were freed with the block.
func TestSealReusesSlabs(t *testing.T) {
	for _, tc := range []struct{ traces, extraAttrs, block, maxSlabs int }{{2000, 0, 8, 3}, {300, 126, 64, 12}} {
		t.Run(fmt.Sprintf("block=%d,attrs=+%d", tc.block, tc.extraAttrs), func(t *testing.T) {
			testSealReusesSlabs(t, tc.traces, tc.extraAttrs, tc.block, tc.maxSlabs)
		})
	}
}

func testSealReusesSlabs(t *testing.T, traces, extraAttrs, block, maxSlabs int) {
	g := newGen(21)
	spans := g.spans(traces)
	for i := range spans {
		for j := range extraAttrs {
			spans[i].Attributes = append(spans[i].Attributes, model.KeyValue{Key: fmt.Sprintf("x%d", j), Value: model.IntValue(int64(i*1000 + j))})
		}
	}
	m := newMemtable(time.Now(), nil)
	m.insert("p", spans, 0)
	byProject, src := m.sealRows(func(string, *model.Span) bool { return false })
	dir := t.TempDir()
	if _, err := segment.WriteRows(dir, "s.rseg", byProject, src, segment.WriterOptions{BlockSpans: block}); err != nil {
		t.Fatal(err)
	}
	attrs := 0
	want := map[[24]byte]*model.Span{}
	for i := range spans {
		s := &spans[i]
		attrs += len(s.Attributes)
		var k [24]byte
		copy(k[:16], s.TraceID[:])
		copy(k[16:], s.SpanID[:])
		want[k] = s
	}
	if slabs := len(src.d.ring.inUse) + len(src.d.ring.free); attrs < 10*slabKVs || slabs > maxSlabs {
		t.Fatalf("%d attributes took %d slabs of %d: the seal's slabs are not reused", attrs, slabs, slabKVs)
	}
	r, err := segment.Open(filepath.Join(dir, "s.rseg"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for b := range r.Blocks() {
		got, err := r.ReadBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			var k [24]byte
			copy(k[:16], got[i].TraceID[:])
			copy(k[16:], got[i].SpanID[:])
			w := want[k]
			if w == nil {
				t.Fatalf("block %d: span %s of trace %s was never appended", b, got[i].SpanID, got[i].TraceID)
			}
			if !reflect.DeepEqual(got[i].Attributes, w.Attributes) {
				t.Fatalf("block %d: span %s of trace %s was written with other attributes than appended (first %v, want %v)",
					b, got[i].SpanID, got[i].TraceID, got[i].Attributes[0], w.Attributes[0])
			}
			n++
		}
	}
	if n != len(spans) {
		t.Fatalf("segment holds %d spans, appended %d", n, len(spans))
	}
}
