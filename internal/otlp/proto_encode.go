package otlp

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
)

// EncodeProto encodes spans as one ExportTraceServiceRequest in protobuf wire
// format. Spans sharing a *model.Resource pointer or an equal resource go into
// one ResourceSpans, and within it spans sharing a scope into one ScopeSpans;
// groups appear in order of first appearance and spans keep their order within
// a group. Zero-valued fields are omitted as proto3 does.
func EncodeProto(spans []model.Span) []byte {
	groups := groupSpans(spans)
	sizes := make([]int, len(spans))
	for i := range spans {
		sizes[i] = sizeSpan(&spans[i])
	}
	total := 0
	rsSizes := make([]int, len(groups))
	for gi := range groups {
		g := &groups[gi]
		n := 0
		if g.res != nil {
			if rn := sizeResource(g.res); rn > 0 {
				n += 1 + protowire.SizeBytes(rn)
			}
			n += sizeStringField(3, g.res.SchemaURL)
		}
		for _, sg := range g.scopes {
			n += 1 + protowire.SizeBytes(sizeScopeSpans(sg, sizes))
		}
		rsSizes[gi] = n
		total += 1 + protowire.SizeBytes(n)
	}
	b := make([]byte, 0, total)
	for gi := range groups {
		g := &groups[gi]
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(rsSizes[gi]))
		if g.res != nil {
			if rn := sizeResource(g.res); rn > 0 {
				b = protowire.AppendTag(b, 1, protowire.BytesType)
				b = protowire.AppendVarint(b, uint64(rn))
				b = appendResource(b, g.res)
			}
		}
		for _, sg := range g.scopes {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeScopeSpans(sg, sizes)))
			if sg.scope != nil {
				if sn := sizeScope(sg.scope); sn > 0 {
					b = protowire.AppendTag(b, 1, protowire.BytesType)
					b = protowire.AppendVarint(b, uint64(sn))
					b = appendScope(b, sg.scope)
				}
			}
			for _, i := range sg.spans {
				b = protowire.AppendTag(b, 2, protowire.BytesType)
				b = protowire.AppendVarint(b, uint64(sizes[i]))
				b = appendSpan(b, &spans[i])
			}
			if sg.scope != nil {
				b = appendStringField(b, 3, sg.scope.SchemaURL)
			}
		}
		if g.res != nil {
			b = appendStringField(b, 3, g.res.SchemaURL)
		}
	}
	return b
}

func sizeScopeSpans(sg scopeGroup, sizes []int) int {
	n := 0
	if sg.scope != nil {
		if sn := sizeScope(sg.scope); sn > 0 {
			n += 1 + protowire.SizeBytes(sn)
		}
		n += sizeStringField(3, sg.scope.SchemaURL)
	}
	for _, i := range sg.spans {
		n += 1 + protowire.SizeBytes(sizes[i])
	}
	return n
}

func sizeStringField(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func sizeVarintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func sizeFixed64Field(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + 8
}

func appendFixed64Field(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func sizeFixed32Field(num protowire.Number, v uint32) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + 4
}

func appendFixed32Field(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

func sizeKVs(num protowire.Number, kvs []model.KeyValue) int {
	n := 0
	for i := range kvs {
		n += protowire.SizeTag(num) + protowire.SizeBytes(sizeKV(&kvs[i]))
	}
	return n
}

func appendKVs(b []byte, num protowire.Number, kvs []model.KeyValue) []byte {
	for i := range kvs {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeKV(&kvs[i])))
		b = appendKV(b, &kvs[i])
	}
	return b
}

func sizeResource(r *model.Resource) int {
	return sizeKVs(1, r.Attributes) + sizeVarintField(2, uint64(r.DroppedAttributesCount))
}

func appendResource(b []byte, r *model.Resource) []byte {
	b = appendKVs(b, 1, r.Attributes)
	return appendVarintField(b, 2, uint64(r.DroppedAttributesCount))
}

func sizeScope(s *model.Scope) int {
	return sizeStringField(1, s.Name) + sizeStringField(2, s.Version) + sizeKVs(3, s.Attributes) +
		sizeVarintField(4, uint64(s.DroppedAttributesCount))
}

func appendScope(b []byte, s *model.Scope) []byte {
	b = appendStringField(b, 1, s.Name)
	b = appendStringField(b, 2, s.Version)
	b = appendKVs(b, 3, s.Attributes)
	return appendVarintField(b, 4, uint64(s.DroppedAttributesCount))
}

func sizeStatus(s *model.Span) int {
	return sizeStringField(2, s.StatusMessage) + sizeVarintField(3, uint64(int64(s.StatusCode)))
}

func sizeEvent(e *model.Event) int {
	return sizeFixed64Field(1, e.TimeUnixNano) + sizeStringField(2, e.Name) + sizeKVs(3, e.Attributes) +
		sizeVarintField(4, uint64(e.DroppedAttributesCount))
}

func sizeLink(l *model.Link) int {
	return 2 + 16 + 2 + 8 + sizeStringField(3, l.TraceState) + sizeKVs(4, l.Attributes) +
		sizeVarintField(5, uint64(l.DroppedAttributesCount)) + sizeFixed32Field(6, l.Flags)
}

func sizeSpan(s *model.Span) int {
	n := 2 + 16 + 2 + 8 // trace_id, span_id
	n += sizeStringField(3, s.TraceState)
	if !s.ParentSpanID.IsZero() {
		n += 2 + 8
	}
	n += sizeStringField(5, s.Name)
	n += sizeVarintField(6, uint64(int64(s.Kind)))
	n += sizeFixed64Field(7, s.StartTimeUnixNano) + sizeFixed64Field(8, s.EndTimeUnixNano)
	n += sizeKVs(9, s.Attributes) + sizeVarintField(10, uint64(s.DroppedAttributesCount))
	for i := range s.Events {
		n += 1 + protowire.SizeBytes(sizeEvent(&s.Events[i]))
	}
	n += sizeVarintField(12, uint64(s.DroppedEventsCount))
	for i := range s.Links {
		n += 1 + protowire.SizeBytes(sizeLink(&s.Links[i]))
	}
	n += sizeVarintField(14, uint64(s.DroppedLinksCount))
	if sn := sizeStatus(s); sn > 0 {
		n += 1 + protowire.SizeBytes(sn)
	}
	n += sizeFixed32Field(16, s.Flags)
	return n
}

func appendSpan(b []byte, s *model.Span) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, s.TraceID[:])
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, s.SpanID[:])
	b = appendStringField(b, 3, s.TraceState)
	if !s.ParentSpanID.IsZero() {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, s.ParentSpanID[:])
	}
	b = appendStringField(b, 5, s.Name)
	b = appendVarintField(b, 6, uint64(int64(s.Kind)))
	b = appendFixed64Field(b, 7, s.StartTimeUnixNano)
	b = appendFixed64Field(b, 8, s.EndTimeUnixNano)
	b = appendKVs(b, 9, s.Attributes)
	b = appendVarintField(b, 10, uint64(s.DroppedAttributesCount))
	for i := range s.Events {
		e := &s.Events[i]
		b = protowire.AppendTag(b, 11, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeEvent(e)))
		b = appendFixed64Field(b, 1, e.TimeUnixNano)
		b = appendStringField(b, 2, e.Name)
		b = appendKVs(b, 3, e.Attributes)
		b = appendVarintField(b, 4, uint64(e.DroppedAttributesCount))
	}
	b = appendVarintField(b, 12, uint64(s.DroppedEventsCount))
	for i := range s.Links {
		l := &s.Links[i]
		b = protowire.AppendTag(b, 13, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeLink(l)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, l.TraceID[:])
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, l.SpanID[:])
		b = appendStringField(b, 3, l.TraceState)
		b = appendKVs(b, 4, l.Attributes)
		b = appendVarintField(b, 5, uint64(l.DroppedAttributesCount))
		b = appendFixed32Field(b, 6, l.Flags)
	}
	b = appendVarintField(b, 14, uint64(s.DroppedLinksCount))
	if sn := sizeStatus(s); sn > 0 {
		b = protowire.AppendTag(b, 15, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sn))
		b = appendStringField(b, 2, s.StatusMessage)
		b = appendVarintField(b, 3, uint64(int64(s.StatusCode)))
	}
	return appendFixed32Field(b, 16, s.Flags)
}

func sizeKV(kv *model.KeyValue) int {
	n := sizeStringField(1, kv.Key)
	if kv.Value.Type != model.ValueEmpty {
		n += 1 + protowire.SizeBytes(sizeValue(&kv.Value))
	}
	return n
}

func appendKV(b []byte, kv *model.KeyValue) []byte {
	b = appendStringField(b, 1, kv.Key)
	if kv.Value.Type != model.ValueEmpty {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeValue(&kv.Value)))
		b = appendValue(b, &kv.Value)
	}
	return b
}

// sizeValue is the size of an AnyValue message body. oneof members are
// written even when they hold their zero value, so the type survives.
func sizeValue(v *model.Value) int {
	switch v.Type {
	case model.ValueString:
		return 1 + protowire.SizeBytes(len(v.Str))
	case model.ValueBool:
		return 2
	case model.ValueInt:
		return 1 + protowire.SizeVarint(uint64(v.Int))
	case model.ValueDouble:
		return 1 + 8
	case model.ValueBytes:
		return 1 + protowire.SizeBytes(len(v.Str))
	case model.ValueArray:
		n := 0
		elems := v.Elems()
		for i := range elems {
			n += 1 + protowire.SizeBytes(sizeValue(&elems[i]))
		}
		return 1 + protowire.SizeBytes(n)
	case model.ValueKvList:
		n := 0
		fields := v.Fields()
		for i := range fields {
			n += 1 + protowire.SizeBytes(sizeKV(&fields[i]))
		}
		return 1 + protowire.SizeBytes(n)
	}
	return 0
}

func appendValue(b []byte, v *model.Value) []byte {
	switch v.Type {
	case model.ValueString:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		return protowire.AppendString(b, v.Str)
	case model.ValueBool:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool()))
	case model.ValueInt:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.Int))
	case model.ValueDouble:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.Double))
	case model.ValueBytes:
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		return protowire.AppendString(b, v.Str)
	case model.ValueArray:
		elems := v.Elems()
		n := 0
		for i := range elems {
			n += 1 + protowire.SizeBytes(sizeValue(&elems[i]))
		}
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		for i := range elems {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeValue(&elems[i])))
			b = appendValue(b, &elems[i])
		}
		return b
	case model.ValueKvList:
		fields := v.Fields()
		n := 0
		for i := range fields {
			n += 1 + protowire.SizeBytes(sizeKV(&fields[i]))
		}
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		for i := range fields {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeKV(&fields[i])))
			b = appendKV(b, &fields[i])
		}
		return b
	}
	return b
}
