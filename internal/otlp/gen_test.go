package otlp

import (
	"fmt"
	"math"
	"math/rand/v2"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/rastro-dev/rastro/internal/model"
)

// gen builds random ExportTraceServiceRequests with the official types,
// exercising every field and every AnyValue type.
type gen struct {
	r *rand.Rand
	// badIDs makes some spans carry invalid ids (wrong length, all zeros).
	badIDs bool
}

func newGen(seed uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

var genWords = []string{"", "a", "GET /users/{id}", "service.name", "héllo wörld", "日本語", "emoji 🚀", "quote\"back\\slash", "tab\tnl\n", "\u2028", "<&>", "x"}

func (g *gen) str() string {
	if g.r.IntN(4) == 0 {
		n := g.r.IntN(20)
		b := make([]rune, n)
		for i := range b {
			b[i] = rune(0x20 + g.r.IntN(0x7f-0x20))
			if g.r.IntN(10) == 0 {
				b[i] = rune(0xa0 + g.r.IntN(0x3000))
			}
		}
		return string(b)
	}
	return genWords[g.r.IntN(len(genWords))]
}

func (g *gen) id(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	b[0] |= 1 // never all zeros
	if g.badIDs && g.r.IntN(25) == 0 {
		switch g.r.IntN(3) {
		case 0:
			return b[:n-1]
		case 1:
			return make([]byte, n)
		default:
			return append(b, 7)
		}
	}
	return b
}

func (g *gen) u64() uint64 {
	switch g.r.IntN(4) {
	case 0:
		return 0
	case 1:
		return g.r.Uint64()
	}
	return 1_700_000_000_000_000_000 + g.r.Uint64N(1e15)
}

func (g *gen) u32() uint32 {
	if g.r.IntN(2) == 0 {
		return 0
	}
	if g.r.IntN(4) == 0 {
		return g.r.Uint32()
	}
	return uint32(g.r.IntN(300))
}

func (g *gen) anyValue(depth int) *commonpb.AnyValue {
	k := g.r.IntN(9)
	if depth > 2 && k >= 5 && k <= 6 {
		k = 0
	}
	switch k {
	case 0:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: g.str()}}
	case 1:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: g.r.IntN(2) == 0}}
	case 2:
		ints := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 53, -(1 << 53) - 1, 200}
		v := ints[g.r.IntN(len(ints))]
		if g.r.IntN(2) == 0 {
			v = int64(g.r.Uint64())
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}
	case 3:
		ds := []float64{0, math.Copysign(0, -1), 1, -2.5, 1e300, 5e-324, math.NaN(), math.Inf(1), math.Inf(-1), 1 << 60, 0.1}
		v := ds[g.r.IntN(len(ds))]
		if g.r.IntN(2) == 0 {
			v = g.r.NormFloat64() * 1e6
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}
	case 4:
		b := make([]byte, g.r.IntN(12))
		for i := range b {
			b[i] = byte(g.r.Uint32())
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: b}}
	case 5:
		n := g.r.IntN(4)
		a := &commonpb.ArrayValue{}
		for range n {
			a.Values = append(a.Values, g.anyValue(depth+1))
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: a}}
	case 6:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: g.kvs(3, depth+1)}}}
	case 7:
		return &commonpb.AnyValue{} // empty AnyValue
	}
	return nil // KeyValue without a value
}

func (g *gen) kvs(max, depth int) []*commonpb.KeyValue {
	n := g.r.IntN(max + 1)
	var out []*commonpb.KeyValue
	for range n {
		v := g.anyValue(depth)
		if v == nil && depth > 0 {
			v = &commonpb.AnyValue{} // inside arrays nil elements are not allowed by protojson
		}
		out = append(out, &commonpb.KeyValue{Key: g.str(), Value: v})
	}
	return out
}

func (g *gen) span() *tracepb.Span {
	s := &tracepb.Span{
		TraceId:                g.id(16),
		SpanId:                 g.id(8),
		TraceState:             g.str(),
		Flags:                  g.u32(),
		Name:                   g.str(),
		Kind:                   tracepb.Span_SpanKind(g.r.IntN(7)),
		StartTimeUnixNano:      g.u64(),
		EndTimeUnixNano:        g.u64(),
		Attributes:             g.kvs(8, 0),
		DroppedAttributesCount: g.u32(),
		DroppedEventsCount:     g.u32(),
		DroppedLinksCount:      g.u32(),
	}
	if g.r.IntN(3) > 0 {
		s.ParentSpanId = g.id(8)
	}
	for range g.r.IntN(3) {
		s.Events = append(s.Events, &tracepb.Span_Event{TimeUnixNano: g.u64(), Name: g.str(), Attributes: g.kvs(3, 0), DroppedAttributesCount: g.u32()})
	}
	for range g.r.IntN(3) {
		s.Links = append(s.Links, &tracepb.Span_Link{TraceId: g.id(16), SpanId: g.id(8), TraceState: g.str(), Attributes: g.kvs(3, 0), DroppedAttributesCount: g.u32(), Flags: g.u32()})
	}
	if g.r.IntN(3) > 0 {
		s.Status = &tracepb.Status{Message: g.str(), Code: tracepb.Status_StatusCode(g.r.IntN(4))}
	}
	return s
}

func (g *gen) request() *coltrace.ExportTraceServiceRequest {
	req := &coltrace.ExportTraceServiceRequest{}
	for range 1 + g.r.IntN(3) {
		rs := &tracepb.ResourceSpans{SchemaUrl: g.str()}
		if g.r.IntN(5) > 0 {
			rs.Resource = &resourcepb.Resource{Attributes: g.kvs(4, 0), DroppedAttributesCount: g.u32()}
			if g.r.IntN(3) > 0 {
				rs.Resource.Attributes = append(rs.Resource.Attributes, &commonpb.KeyValue{Key: "service.name",
					Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "svc-" + g.str()}}})
			}
		}
		for range 1 + g.r.IntN(3) {
			ss := &tracepb.ScopeSpans{SchemaUrl: g.str()}
			if g.r.IntN(4) > 0 {
				ss.Scope = &commonpb.InstrumentationScope{Name: g.str(), Version: g.str(), Attributes: g.kvs(2, 0), DroppedAttributesCount: g.u32()}
			}
			for range g.r.IntN(5) {
				ss.Spans = append(ss.Spans, g.span())
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	return req
}

// expected converts an official request to the spans the decoders must
// return (normalised, invalid spans dropped), plus the rejected count.
func expected(req *coltrace.ExportTraceServiceRequest) ([]model.Span, int) {
	var out []model.Span
	rejected := 0
	var p model.Problems
	for _, rs := range req.ResourceSpans {
		res := &model.Resource{SchemaURL: rs.SchemaUrl}
		if rs.Resource != nil {
			res.Attributes = convKVs(rs.Resource.Attributes)
			res.DroppedAttributesCount = rs.Resource.DroppedAttributesCount
		}
		model.NormalizeResource(res, &p)
		for _, ss := range rs.ScopeSpans {
			sc := &model.Scope{SchemaURL: ss.SchemaUrl}
			if ss.Scope != nil {
				sc.Name, sc.Version = ss.Scope.Name, ss.Scope.Version
				sc.Attributes = convKVs(ss.Scope.Attributes)
				sc.DroppedAttributesCount = ss.Scope.DroppedAttributesCount
			}
			model.NormalizeScope(sc, &p)
			for _, ps := range ss.Spans {
				s, ok := convSpan(ps)
				if !ok {
					rejected++
					continue
				}
				s.Resource, s.Scope = res, sc
				model.Normalize(&s, &p)
				out = append(out, s)
			}
		}
	}
	return out, rejected
}

func convSpan(ps *tracepb.Span) (model.Span, bool) {
	s := model.Span{
		TraceState: ps.TraceState, Flags: ps.Flags, Name: ps.Name, Kind: model.SpanKind(ps.Kind),
		StartTimeUnixNano: ps.StartTimeUnixNano, EndTimeUnixNano: ps.EndTimeUnixNano,
		Attributes: convKVs(ps.Attributes), DroppedAttributesCount: ps.DroppedAttributesCount,
		DroppedEventsCount: ps.DroppedEventsCount, DroppedLinksCount: ps.DroppedLinksCount,
	}
	if len(ps.TraceId) != 16 || len(ps.SpanId) != 8 || (len(ps.ParentSpanId) != 0 && len(ps.ParentSpanId) != 8) {
		return s, false
	}
	copy(s.TraceID[:], ps.TraceId)
	copy(s.SpanID[:], ps.SpanId)
	copy(s.ParentSpanID[:], ps.ParentSpanId)
	if s.TraceID.IsZero() || s.SpanID.IsZero() {
		return s, false
	}
	if ps.Status != nil {
		s.StatusMessage, s.StatusCode = ps.Status.Message, model.StatusCode(ps.Status.Code)
	}
	for _, e := range ps.Events {
		s.Events = append(s.Events, model.Event{TimeUnixNano: e.TimeUnixNano, Name: e.Name, Attributes: convKVs(e.Attributes), DroppedAttributesCount: e.DroppedAttributesCount})
	}
	for _, l := range ps.Links {
		ml := model.Link{TraceState: l.TraceState, Attributes: convKVs(l.Attributes), DroppedAttributesCount: l.DroppedAttributesCount, Flags: l.Flags}
		if len(l.TraceId) != 16 || len(l.SpanId) != 8 {
			return s, false
		}
		copy(ml.TraceID[:], l.TraceId)
		copy(ml.SpanID[:], l.SpanId)
		if ml.TraceID.IsZero() || ml.SpanID.IsZero() {
			return s, false
		}
		s.Links = append(s.Links, ml)
	}
	return s, true
}

func convKVs(kvs []*commonpb.KeyValue) []model.KeyValue {
	var out []model.KeyValue
	for _, kv := range kvs {
		out = append(out, model.KeyValue{Key: kv.Key, Value: convValue(kv.Value)})
	}
	return out
}

func convValue(v *commonpb.AnyValue) model.Value {
	if v == nil {
		return model.Value{}
	}
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return model.StringValue(x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		return model.BoolValue(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return model.IntValue(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return model.DoubleValue(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return model.BytesValue(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var elems []model.Value
		if x.ArrayValue != nil {
			for _, e := range x.ArrayValue.Values {
				elems = append(elems, convValue(e))
			}
		}
		return model.ArrayValue(elems)
	case *commonpb.AnyValue_KvlistValue:
		if x.KvlistValue != nil {
			return model.KvListValue(convKVs(x.KvlistValue.Values))
		}
		return model.KvListValue(nil)
	}
	return model.Value{} // unset oneof, or string_value_strindex (profiles only)
}

// diffSpans returns a description of the first difference, or "".
func diffSpans(got, want []model.Span) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d spans, want %d", len(got), len(want))
	}
	for i := range got {
		if d := diffSpan(&got[i], &want[i]); d != "" {
			return fmt.Sprintf("span %d: %s", i, d)
		}
	}
	return ""
}

func diffSpan(g, w *model.Span) string {
	type f struct {
		name      string
		got, want any
	}
	fields := []f{
		{"TraceID", g.TraceID, w.TraceID}, {"SpanID", g.SpanID, w.SpanID}, {"ParentSpanID", g.ParentSpanID, w.ParentSpanID},
		{"TraceState", g.TraceState, w.TraceState}, {"Flags", g.Flags, w.Flags}, {"Name", g.Name, w.Name}, {"Kind", g.Kind, w.Kind},
		{"Start", g.StartTimeUnixNano, w.StartTimeUnixNano}, {"End", g.EndTimeUnixNano, w.EndTimeUnixNano},
		{"DroppedAttributes", g.DroppedAttributesCount, w.DroppedAttributesCount}, {"DroppedEvents", g.DroppedEventsCount, w.DroppedEventsCount},
		{"DroppedLinks", g.DroppedLinksCount, w.DroppedLinksCount}, {"StatusCode", g.StatusCode, w.StatusCode},
		{"StatusMessage", g.StatusMessage, w.StatusMessage}, {"Service", g.Service, w.Service},
		{"len(Events)", len(g.Events), len(w.Events)}, {"len(Links)", len(g.Links), len(w.Links)},
	}
	for _, x := range fields {
		if x.got != x.want {
			return fmt.Sprintf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
	if !model.EqualKeyValues(g.Attributes, w.Attributes) {
		return fmt.Sprintf("Attributes = %v, want %v", g.Attributes, w.Attributes)
	}
	for i := range g.Events {
		a, b := g.Events[i], w.Events[i]
		if a.TimeUnixNano != b.TimeUnixNano || a.Name != b.Name || a.DroppedAttributesCount != b.DroppedAttributesCount || !model.EqualKeyValues(a.Attributes, b.Attributes) {
			return fmt.Sprintf("event %d = %+v, want %+v", i, a, b)
		}
	}
	for i := range g.Links {
		a, b := g.Links[i], w.Links[i]
		if a.TraceID != b.TraceID || a.SpanID != b.SpanID || a.TraceState != b.TraceState || a.Flags != b.Flags ||
			a.DroppedAttributesCount != b.DroppedAttributesCount || !model.EqualKeyValues(a.Attributes, b.Attributes) {
			return fmt.Sprintf("link %d = %+v, want %+v", i, a, b)
		}
	}
	if (g.Resource == nil) != (w.Resource == nil) {
		return fmt.Sprintf("Resource nil = %v, want %v", g.Resource == nil, w.Resource == nil)
	}
	if g.Resource != nil {
		a, b := g.Resource, w.Resource
		if a.SchemaURL != b.SchemaURL || a.DroppedAttributesCount != b.DroppedAttributesCount || !model.EqualKeyValues(a.Attributes, b.Attributes) {
			return fmt.Sprintf("Resource = %+v, want %+v", *a, *b)
		}
	}
	if (g.Scope == nil) != (w.Scope == nil) {
		return fmt.Sprintf("Scope nil = %v, want %v", g.Scope == nil, w.Scope == nil)
	}
	if g.Scope != nil {
		a, b := g.Scope, w.Scope
		if a.Name != b.Name || a.Version != b.Version || a.SchemaURL != b.SchemaURL || a.DroppedAttributesCount != b.DroppedAttributesCount || !model.EqualKeyValues(a.Attributes, b.Attributes) {
			return fmt.Sprintf("Scope = %+v, want %+v", *a, *b)
		}
	}
	return ""
}
