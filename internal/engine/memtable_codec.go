package engine

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// The write buffer keeps each span as bytes in its arena (memtable.pages),
// not as the decoded request's model.Span: the ids and times live in the
// row (slot), everything else is encoded once here. The arena holds no
// pointers, so the collector neither scans it nor keeps the request alive,
// and a buffered span costs about its wire size instead of the decoder's
// arrays. A span is materialised (decoded) again when a query, a trace
// lookup or a seal reads it; its strings point into the arena, which is
// append-only and never reused, so they stay valid for as long as anything
// holds them.
//
// Layout of one span, in order (uv = unsigned varint, sv = zigzag varint,
// str = uv length then bytes, kvs = uv count then (str key, value) pairs):
//
//	uv resource+1 (0: none)   uv scope+1 (0: none)
//	byte 0 | 1 then 8 bytes parent span id
//	str trace state   uv flags   str name   uv kind
//	kvs attributes    uv dropped attributes
//	uv events, each: uv time, str name, kvs, uv dropped
//	uv dropped events
//	uv links, each: 16 bytes trace id, 8 bytes span id, str trace state, kvs, uv dropped, uv flags
//	uv dropped links
//	uv status code    str status message   str service
//	byte 0 | 1 then the LLM fields (strings, sv token counts and cost, byte cost source,
//	  strings, uv time to first token, byte counted)
//
// A value is a type byte, then: string and bytes a str; bool and int an sv;
// double 8 bytes; array uv count then values; kvlist a kvs; anything else
// (a stored-value reference) a str and an sv. Resources and scopes are
// encoded the same way, once per distinct one (memtable.resources).

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendKVs(b []byte, kvs []model.KeyValue) []byte {
	b = binary.AppendUvarint(b, uint64(len(kvs)))
	for i := range kvs {
		b = appendStr(b, kvs[i].Key)
		b = appendValue(b, &kvs[i].Value)
	}
	return b
}

func appendValue(b []byte, v *model.Value) []byte {
	b = append(b, byte(v.Type))
	switch v.Type {
	case model.ValueEmpty:
	case model.ValueString, model.ValueBytes:
		b = appendStr(b, v.Str)
	case model.ValueBool, model.ValueInt:
		b = binary.AppendVarint(b, v.Int)
	case model.ValueDouble:
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Double))
	case model.ValueArray:
		if v.List == nil {
			return binary.AppendUvarint(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(v.List.Array)))
		for i := range v.List.Array {
			b = appendValue(b, &v.List.Array[i])
		}
	case model.ValueKvList:
		if v.List == nil {
			return binary.AppendUvarint(b, 0)
		}
		b = appendKVs(b, v.List.KvList)
	default:
		b = appendStr(b, v.Str)
		b = binary.AppendVarint(b, v.Int)
	}
	return b
}

// appendSpan encodes what the row does not hold of s (see the layout
// above), given its resource's and scope's numbers in the buffer (-1: none).
func appendSpan(b []byte, s *model.Span, res, scope int) []byte {
	b = binary.AppendUvarint(b, uint64(res+1))
	b = binary.AppendUvarint(b, uint64(scope+1))
	if s.ParentSpanID.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = append(b, s.ParentSpanID[:]...)
	}
	b = appendStr(b, s.TraceState)
	b = binary.AppendUvarint(b, uint64(s.Flags))
	b = appendStr(b, s.Name)
	b = binary.AppendUvarint(b, uint64(uint32(s.Kind)))
	b = appendKVs(b, s.Attributes)
	b = binary.AppendUvarint(b, uint64(s.DroppedAttributesCount))
	b = binary.AppendUvarint(b, uint64(len(s.Events)))
	for i := range s.Events {
		ev := &s.Events[i]
		b = binary.AppendUvarint(b, ev.TimeUnixNano)
		b = appendStr(b, ev.Name)
		b = appendKVs(b, ev.Attributes)
		b = binary.AppendUvarint(b, uint64(ev.DroppedAttributesCount))
	}
	b = binary.AppendUvarint(b, uint64(s.DroppedEventsCount))
	b = binary.AppendUvarint(b, uint64(len(s.Links)))
	for i := range s.Links {
		l := &s.Links[i]
		b = append(b, l.TraceID[:]...)
		b = append(b, l.SpanID[:]...)
		b = appendStr(b, l.TraceState)
		b = appendKVs(b, l.Attributes)
		b = binary.AppendUvarint(b, uint64(l.DroppedAttributesCount))
		b = binary.AppendUvarint(b, uint64(l.Flags))
	}
	b = binary.AppendUvarint(b, uint64(s.DroppedLinksCount))
	b = binary.AppendUvarint(b, uint64(uint32(s.StatusCode)))
	b = appendStr(b, s.StatusMessage)
	b = appendStr(b, s.Service)
	if s.LLM == nil {
		return append(b, 0)
	}
	l := s.LLM
	b = append(b, 1)
	for _, str := range [...]string{l.Provider, l.RequestModel, l.ResponseModel, l.Operation} {
		b = appendStr(b, str)
	}
	for _, n := range [...]int64{l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheCreationTokens, l.ReasoningTokens, l.CostNanoUSD} {
		b = binary.AppendVarint(b, n)
	}
	b = append(b, byte(l.CostSource))
	for _, str := range [...]string{l.SessionID, l.UserID, l.AgentName, l.ToolName} {
		b = appendStr(b, str)
	}
	b = binary.AppendUvarint(b, l.TimeToFirstTokenNanos)
	if l.Counted {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendResource encodes a resource (also the key that finds a resource
// already in the buffer).
func appendResource(b []byte, r *model.Resource) []byte {
	b = appendKVs(b, r.Attributes)
	b = binary.AppendUvarint(b, uint64(r.DroppedAttributesCount))
	return appendStr(b, r.SchemaURL)
}

func appendScope(b []byte, s *model.Scope) []byte {
	b = appendStr(b, s.Name)
	b = appendStr(b, s.Version)
	b = appendKVs(b, s.Attributes)
	b = binary.AppendUvarint(b, uint64(s.DroppedAttributesCount))
	return appendStr(b, s.SchemaURL)
}

// slabKVs is the number of attributes a decoder allocates at a time.
const slabKVs = 1024

// spanDecoder reads encoded spans back. By default each attribute array is
// allocated on its own; with ring set they come from slabs of slabKVs
// attributes, reused once their spans are released (a seal: slabRing);
// with reuse set, every span starts again at the slab's beginning, so the
// span it returns is valid only until the next call (a scan's scratch
// span).
type spanDecoder struct {
	slab  []model.KeyValue
	reuse bool
	s     model.Span // the scratch span, when reuse is set
	ring  *slabRing
}

// slabRing recycles a decoder's attribute slabs: each slab handed out is
// tagged with the last span (by count) that took attributes from it, and
// once the spans up to that one are released (segment.RowReleaser: the
// writer has encoded their block) the slab is free for later spans. A
// seal's decoded spans thus take a handful of slabs in turn instead of
// about 600 bytes of fresh memory per span.
type slabRing struct {
	spans uint64     // spans decoded so far; the one being decoded is number spans
	inUse []ringSlab // oldest first; the last is the decoder's current slab
	free  [][]model.KeyValue
}

type ringSlab struct {
	kvs  []model.KeyValue // the whole slab
	last uint64           // the last span that took from it
}

// take returns an empty slab with room for n attributes and records it as
// the current slab.
func (r *slabRing) take(n int) []model.KeyValue {
	var kvs []model.KeyValue
	if k := len(r.free); k > 0 && cap(r.free[k-1]) >= n {
		kvs = r.free[k-1][:0]
		r.free = r.free[:k-1]
	} else {
		kvs = make([]model.KeyValue, 0, max(n, slabKVs))
	}
	r.inUse = append(r.inUse, ringSlab{kvs: kvs, last: r.spans})
	return kvs
}

// released frees the slabs that only spans 1..n took from, except the
// current one.
func (r *slabRing) released(n uint64) {
	i := 0
	for i < len(r.inUse)-1 && r.inUse[i].last <= n {
		r.free = append(r.free, r.inUse[i].kvs)
		i++
	}
	if i > 0 {
		r.inUse = append(r.inUse[:0], r.inUse[i:]...)
	}
}

func (d *spanDecoder) kvs(n int) []model.KeyValue {
	if n == 0 {
		return nil
	}
	if d.ring == nil && !d.reuse {
		return make([]model.KeyValue, n)
	}
	if cap(d.slab)-len(d.slab) < n {
		if d.ring != nil {
			d.slab = d.ring.take(n)
		} else {
			// A scratch decoder holds one span's attributes at a time: its
			// slab grows to the largest span, not to slabKVs (64 KiB, which
			// a query that decodes a few rows allocated for nothing).
			d.slab = make([]model.KeyValue, 0, max(n, 2*cap(d.slab), 32))
		}
	}
	if d.ring != nil {
		d.ring.inUse[len(d.ring.inUse)-1].last = d.ring.spans
	}
	l := len(d.slab)
	d.slab = d.slab[:l+n]
	return d.slab[l : l+n : l+n]
}

// reader walks one encoding. The encodings are the buffer's own, written
// just before: a malformed one is a bug, and the slice bounds checks turn it
// into a panic rather than a wrong answer.
type reader struct {
	b []byte
	i int
}

func (r *reader) uv() uint64 {
	if c := r.b[r.i]; c < 0x80 { // most lengths and counts
		r.i++
		return uint64(c)
	}
	v, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 {
		panic("engine: write buffer encoding is corrupt (invariant broken)")
	}
	r.i += n
	return v
}

func (r *reader) sv() int64 {
	v, n := binary.Varint(r.b[r.i:])
	if n <= 0 {
		panic("engine: write buffer encoding is corrupt (invariant broken)")
	}
	r.i += n
	return v
}

func (r *reader) byte1() byte {
	c := r.b[r.i]
	r.i++
	return c
}

// str returns the next string without copying it: it points into the
// arena, which never changes once written.
func (r *reader) str() string {
	n := int(r.uv())
	if n == 0 {
		return ""
	}
	s := unsafe.String(&r.b[r.i : r.i+n][0], n)
	r.i += n
	return s
}

func (d *spanDecoder) readKVs(r *reader) []model.KeyValue {
	kvs := d.kvs(int(r.uv()))
	for i := range kvs {
		kvs[i] = model.KeyValue{Key: r.str()}
		d.readValue(r, &kvs[i].Value)
	}
	return kvs
}

func (d *spanDecoder) readValue(r *reader, v *model.Value) {
	v.Type = model.ValueType(r.byte1())
	switch v.Type {
	case model.ValueEmpty:
	case model.ValueString, model.ValueBytes:
		v.Str = r.str()
	case model.ValueBool, model.ValueInt:
		v.Int = r.sv()
	case model.ValueDouble:
		v.Double = math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.i : r.i+8]))
		r.i += 8
	case model.ValueArray:
		if n := int(r.uv()); n > 0 {
			arr := make([]model.Value, n)
			for i := range arr {
				d.readValue(r, &arr[i])
			}
			v.List = &model.List{Array: arr}
		}
	case model.ValueKvList:
		// A nested list is allocated on its own: it must outlive a
		// reused slab only as long as its span, and is rare.
		if n := int(r.uv()); n > 0 {
			kvs := make([]model.KeyValue, n)
			for i := range kvs {
				kvs[i] = model.KeyValue{Key: r.str()}
				d.readValue(r, &kvs[i].Value)
			}
			v.List = &model.List{KvList: kvs}
		}
	default:
		v.Str = r.str()
		v.Int = r.sv()
	}
}

// decode fills s from an encoding (s's ids and times are the caller's),
// with the buffer's resources and scopes.
func (d *spanDecoder) decode(b []byte, s *model.Span, resources []*model.Resource, scopes []*model.Scope) {
	r := reader{b: b}
	if i := r.uv(); i > 0 {
		s.Resource = resources[i-1]
	}
	if i := r.uv(); i > 0 {
		s.Scope = scopes[i-1]
	}
	if r.byte1() == 1 {
		copy(s.ParentSpanID[:], r.b[r.i:r.i+8])
		r.i += 8
	}
	s.TraceState = r.str()
	s.Flags = uint32(r.uv())
	s.Name = r.str()
	s.Kind = model.SpanKind(int32(uint32(r.uv())))
	s.Attributes = d.readKVs(&r)
	s.DroppedAttributesCount = uint32(r.uv())
	if n := int(r.uv()); n > 0 {
		s.Events = make([]model.Event, n)
		for i := range s.Events {
			ev := &s.Events[i]
			ev.TimeUnixNano = r.uv()
			ev.Name = r.str()
			ev.Attributes = d.readKVs(&r)
			ev.DroppedAttributesCount = uint32(r.uv())
		}
	}
	s.DroppedEventsCount = uint32(r.uv())
	if n := int(r.uv()); n > 0 {
		s.Links = make([]model.Link, n)
		for i := range s.Links {
			l := &s.Links[i]
			copy(l.TraceID[:], r.b[r.i:r.i+16])
			copy(l.SpanID[:], r.b[r.i+16:r.i+24])
			r.i += 24
			l.TraceState = r.str()
			l.Attributes = d.readKVs(&r)
			l.DroppedAttributesCount = uint32(r.uv())
			l.Flags = uint32(r.uv())
		}
	}
	s.DroppedLinksCount = uint32(r.uv())
	s.StatusCode = model.StatusCode(int32(uint32(r.uv())))
	s.StatusMessage = r.str()
	s.Service = r.str()
	if r.byte1() == 1 {
		l := &model.LLM{}
		l.Provider, l.RequestModel, l.ResponseModel, l.Operation = r.str(), r.str(), r.str(), r.str()
		l.InputTokens, l.OutputTokens, l.CacheReadTokens = r.sv(), r.sv(), r.sv()
		l.CacheCreationTokens, l.ReasoningTokens, l.CostNanoUSD = r.sv(), r.sv(), r.sv()
		l.CostSource = model.CostSource(r.byte1())
		l.SessionID, l.UserID, l.AgentName, l.ToolName = r.str(), r.str(), r.str(), r.str()
		l.TimeToFirstTokenNanos = r.uv()
		l.Counted = r.byte1() == 1
		s.LLM = l
	}
}

func (d *spanDecoder) decodeResource(b []byte) *model.Resource {
	r := reader{b: b}
	res := &model.Resource{Attributes: d.readKVs(&r)}
	res.DroppedAttributesCount = uint32(r.uv())
	res.SchemaURL = r.str()
	return res
}

func (d *spanDecoder) decodeScope(b []byte) *model.Scope {
	r := reader{b: b}
	s := &model.Scope{Name: r.str(), Version: r.str()}
	s.Attributes = d.readKVs(&r)
	s.DroppedAttributesCount = uint32(r.uv())
	s.SchemaURL = r.str()
	return s
}
