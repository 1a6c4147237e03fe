package otlp

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
)

// maxValueDepth bounds how deeply attribute values may nest (arrays in kvlists
// in arrays...): an attribute's own value is at depth 0, the elements of an
// array or kvlist value one level deeper than it. A value deeper than this is a
// decode error. The limit is the segment format's (internal/segment refuses to
// write deeper values, so a span accepted here would make every later seal
// fail); TestValueDepthMatchesSegment checks that the two agree. Every decoder
// (protobuf, OTLP/JSON, native JSON) enforces it.
const maxValueDepth = 100

// valueDepthReason is the reason given for a value nested deeper than maxValueDepth.
var valueDepthReason = "attribute value nested deeper than " + strconv.Itoa(maxValueDepth) + " levels"

// DecodeProto decodes an ExportTraceServiceRequest in protobuf wire format
// straight into model spans, with a decoder written over protowire.
//
// DecodeProto copies b once and the decoded strings and byte values alias that
// private copy, so the caller may reuse b as soon as DecodeProto returns; the
// decoded spans must be treated as immutable (their strings share memory).
// Their arrays come from a pool: Batch.Release gives them back once nothing
// holds the spans (not releasing is always safe).
//
// It follows protobuf-go's merge semantics so that it agrees with
// proto.Unmarshal on every input that decoder accepts: unknown fields and known
// fields with an unexpected wire type are skipped, the last value of a scalar
// field wins, and repeated occurrences of a message field are merged. Unlike
// proto.Unmarshal it accepts strings with invalid UTF-8; model.Normalize
// replaces the bad bytes and counts the span in Problems.InvalidUTF8.
// AnyValue.string_value_strindex (meant only for profiles) decodes as an
// empty value.
//
// Spans with invalid ids are counted in Batch.Rejected and left out; other
// malformed input returns an *Error naming the field path and byte offset.
func DecodeProto(b []byte) (Batch, error) {
	return decodeProto(append([]byte(nil), b...))
}

// DecodeProtoOwned is DecodeProto without the copy: the decoded strings and
// byte values alias b itself, so the caller must never modify b again (nor
// let anything else). The ingest paths own each request's body (read into
// memory of their own, then only written to the WAL) and save a copy of
// every request this way.
func DecodeProtoOwned(b []byte) (Batch, error) { return decodeProto(b) }

// decodeProto decodes buf, which it owns: decoded strings alias it.
func decodeProto(buf []byte) (Batch, error) {
	d := protoDecoder{buf: buf}
	sl := getSlabs(countRequest(d.buf))
	d.out.Spans, d.attrs, d.events = sl.spans, sl.attrs, sl.events
	d.eventAttrs, d.links, d.linkAttrs = sl.eventAttrs, sl.links, sl.linkAttrs
	err := d.request()
	// The final slabs (one regrows if the count was short), with every
	// element the decode wrote within their lengths (span drops them).
	sl.spans, sl.attrs, sl.events = d.out.Spans, d.attrs, d.events
	sl.eventAttrs, sl.links, sl.linkAttrs = d.eventAttrs, d.links, d.linkAttrs
	if err != nil {
		putSlabs(sl)
		return Batch{}, finish(err, "protobuf")
	}
	if len(d.out.Spans) == 0 {
		putSlabs(sl)
		d.out.Spans = nil
		return d.out, nil
	}
	d.out.slabs = sl
	return d.out, nil
}

type protoDecoder struct {
	buf []byte
	out Batch

	// Slabs: spans take sub-slices (with capacity capped) of these, so that a
	// request costs a few large allocations instead of one per span.
	attrs       []model.KeyValue // span attributes
	events      []model.Event
	eventAttrs  []model.KeyValue
	links       []model.Link
	linkAttrs   []model.KeyValue
	scopesOfRes []*model.Scope
}

// reader walks one message; base is the offset of b[0] in the request.
type reader struct {
	b      []byte
	base   int
	n0     int
	tagOff int // offset of the last tag read
}

func newReader(b []byte, base int) reader { return reader{b: b, base: base, n0: len(b)} }

func (r *reader) off() int { return r.base + r.n0 - len(r.b) }

func (r *reader) next() (protowire.Number, protowire.Type, error) {
	r.tagOff = r.off()
	if len(r.b) > 0 && r.b[0] < 0x80 && r.b[0]>>3 != 0 { // fields 1-15: a one-byte tag
		c := r.b[0]
		r.b = r.b[1:]
		return protowire.Number(c >> 3), protowire.Type(c & 7), nil
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		return 0, 0, newError(r.off(), wireReason(n, "tag"))
	}
	if num > protowire.MaxValidNumber {
		return 0, 0, newError(r.off(), "invalid field number "+strconv.Itoa(int(num)))
	}
	r.b = r.b[n:]
	return num, typ, nil
}

// bytes consumes a length-delimited value and returns it with the offset of its first byte.
func (r *reader) bytes(field string) ([]byte, int, error) {
	start := r.off()
	if len(r.b) > 0 && r.b[0] < 0x80 && int(r.b[0]) < len(r.b) { // a one-byte length
		n := int(r.b[0])
		v := r.b[1 : 1+n : 1+n]
		r.b = r.b[1+n:]
		return v, start + 1, nil
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		return nil, 0, wrap(newError(start, wireReason(n, "length-delimited field")), field)
	}
	r.b = r.b[n:]
	return v, start + n - len(v), nil
}

// bytesAt is bytes for element i of a repeated field; the path is built only on error.
func (r *reader) bytesAt(field string, i int) ([]byte, int, error) {
	start := r.off()
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		return nil, 0, wrapIdx(newError(start, wireReason(n, "length-delimited field")), field, i)
	}
	r.b = r.b[n:]
	return v, start + n - len(v), nil
}

func (r *reader) str(field string) (string, error) {
	v, _, err := r.bytes(field)
	if err != nil {
		return "", err
	}
	return stringOf(v), nil
}

func (r *reader) varint(field string) (uint64, error) {
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		return 0, wrap(newError(r.off(), wireReason(n, "varint")), field)
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *reader) fixed64(field string) (uint64, error) {
	v, n := protowire.ConsumeFixed64(r.b)
	if n < 0 {
		return 0, wrap(newError(r.off(), wireReason(n, "fixed64 field")), field)
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *reader) fixed32(field string) (uint32, error) {
	v, n := protowire.ConsumeFixed32(r.b)
	if n < 0 {
		return 0, wrap(newError(r.off(), wireReason(n, "fixed32 field")), field)
	}
	r.b = r.b[n:]
	return v, nil
}

// u32 reads a varint field kept as a uint32 (a count or flags), keeping
// the low 32 bits as protobuf-go does.
func (r *reader) u32(field string) (uint32, error) {
	x, err := r.varint(field)
	return uint32(x), err
}

func (r *reader) float(field string) (float64, error) {
	x, err := r.fixed64(field)
	return math.Float64frombits(x), err
}

// setTraceID sets *dst to the trace id v when it has 16 bytes, to zeros
// otherwise, and returns len(v), which the caller checks (checkIDs,
// checkLinkIDs, checkLogIDs).
func setTraceID(dst *model.TraceID, v []byte) int {
	*dst = model.TraceID{}
	if len(v) == len(dst) {
		*dst = model.TraceID(v)
	}
	return len(v)
}

// setSpanID is setTraceID for a span id (8 bytes).
func setSpanID(dst *model.SpanID, v []byte) int {
	*dst = model.SpanID{}
	if len(v) == len(dst) {
		*dst = model.SpanID(v)
	}
	return len(v)
}

// fixed64s reads a repeated fixed64 field, packed (one length-delimited
// run) or not (one value), appending to dst.
func (r *reader) fixed64s(field string, typ protowire.Type, dst []uint64) ([]uint64, error) {
	if typ == protowire.Fixed64Type {
		x, err := r.fixed64(field)
		return append(dst, x), err
	}
	v, vb, err := r.bytes(field)
	if err != nil {
		return dst, err
	}
	if len(v)%8 != 0 {
		return dst, wrap(newError(vb, "packed fixed64 run of "+strconv.Itoa(len(v))+" bytes, not a multiple of 8"), field)
	}
	for len(v) > 0 {
		x, _ := protowire.ConsumeFixed64(v)
		dst = append(dst, x)
		v = v[8:]
	}
	return dst, nil
}

// skip consumes the value of a field this decoder does not use (unknown, or
// known with an unexpected wire type, which protobuf-go also treats as unknown).
func (r *reader) skip(num protowire.Number, typ protowire.Type) error {
	start := r.off()
	n := protowire.ConsumeFieldValue(num, typ, r.b)
	if n < 0 {
		reason := wireReason(n, "field")
		if n == errCodeReserved {
			reason = "invalid wire type " + strconv.Itoa(int(typ))
			start = r.tagOff
		}
		return wrap(newError(start, reason), "field "+strconv.Itoa(int(num)))
	}
	r.b = r.b[n:]
	return nil
}

// protowire's (unexported) error codes, as returned in n < 0.
const (
	errCodeTruncated      = -1
	errCodeFieldNumber    = -2
	errCodeOverflow       = -3
	errCodeReserved       = -4
	errCodeEndGroup       = -5
	errCodeRecursionDepth = -6
)

func wireReason(n int, what string) string {
	switch n {
	case errCodeTruncated:
		return "truncated " + what
	case errCodeFieldNumber:
		return "invalid field number in " + what
	case errCodeOverflow:
		return "varint overflow in " + what
	case errCodeReserved:
		return "invalid wire type"
	case errCodeEndGroup:
		return "mismatched end-group marker"
	case errCodeRecursionDepth:
		return "groups nested too deeply"
	}
	return "malformed " + what + ": " + protowire.ParseError(n).Error()
}

func (d *protoDecoder) request() error {
	return eachResource(d.buf, "resource_spans", d.resourceSpans)
}

// eachResource calls fn for each field 1 (resource_spans, resource_logs or
// resource_metrics: a request's only field) of an export request, with its
// bytes, their offset in the request and its index; errors name the field
// and index.
func eachResource(buf []byte, name string, fn func(b []byte, base, idx int) error) error {
	r := newReader(buf, 0)
	idx := 0
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		if num == 1 && typ == protowire.BytesType {
			v, base, err := r.bytesAt(name, idx)
			if err != nil {
				return err
			}
			if err := fn(v, base, idx); err != nil {
				return wrapIdx(err, name, idx)
			}
			idx++
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// walkGroup walks a message of the shape every signal nests its data in:
// ResourceSpans, ResourceLogs and ResourceMetrics (field 1 the resource, 2
// the scope groups, 3 the schema URL) and ScopeSpans, ScopeLogs and
// ScopeMetrics (1 the scope, 2 the spans, records or metrics, 3 the schema
// URL). head decodes each field 1, which errors name headName; item decodes
// each field 2 with its index, which errors name itemName[i]; the last
// field 3 is stored in *url.
func walkGroup(b []byte, base int, headName string, head func(b []byte, base int) error,
	itemName string, item func(b []byte, base, idx int) error, url *string) error {
	r := newReader(b, base)
	idx := 0
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		if typ == protowire.BytesType {
			switch num {
			case 1:
				v, vb, err := r.bytes(headName)
				if err != nil {
					return err
				}
				if err := head(v, vb); err != nil {
					return wrap(err, headName)
				}
				continue
			case 2:
				v, vb, err := r.bytesAt(itemName, idx)
				if err != nil {
					return err
				}
				if err := item(v, vb, idx); err != nil {
					return wrapIdx(err, itemName, idx)
				}
				idx++
				continue
			case 3:
				if *url, err = r.str("schema_url"); err != nil {
					return err
				}
				continue
			}
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

func (d *protoDecoder) resourceSpans(b []byte, base, rsIdx int) error {
	res := &model.Resource{}
	first := len(d.out.Spans)
	d.scopesOfRes = d.scopesOfRes[:0]
	err := walkGroup(b, base,
		"resource", func(v []byte, vb int) error { return d.resource(v, vb, res) },
		"scope_spans", func(v []byte, vb, ssIdx int) error { return d.scopeSpans(v, vb, res, rsIdx, ssIdx) },
		&res.SchemaURL)
	if err != nil {
		return err
	}
	// The resource may follow its spans on the wire, so normalise only now.
	p := &d.out.Problems
	model.NormalizeResource(res, p)
	for _, sc := range d.scopesOfRes {
		model.NormalizeScope(sc, p)
	}
	spans := d.out.Spans[first:]
	for i := range spans {
		model.Normalize(&spans[i], p)
	}
	return nil
}

func (d *protoDecoder) scopeSpans(b []byte, base int, res *model.Resource, rsIdx, ssIdx int) error {
	sc := &model.Scope{}
	d.scopesOfRes = append(d.scopesOfRes, sc)
	return walkGroup(b, base,
		"scope", func(v []byte, vb int) error { return d.scope(v, vb, sc) },
		"spans", func(v []byte, vb, spIdx int) error { return d.span(v, vb, res, sc, rsIdx, ssIdx, spIdx) },
		&sc.SchemaURL)
}

// resource decodes a Resource into res (shared by every signal).
func (d *protoDecoder) resource(b []byte, base int, res *model.Resource) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			if err := d.appendKeyValue(&r, "attributes", &res.Attributes, 0, 0); err != nil {
				return err
			}
			continue
		case num == 2 && typ == protowire.VarintType:
			if res.DroppedAttributesCount, err = r.u32("dropped_attributes_count"); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// scope decodes an InstrumentationScope into sc (shared by every signal).
func (d *protoDecoder) scope(b []byte, base int, sc *model.Scope) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			if sc.Name, err = r.str("name"); err != nil {
				return err
			}
			continue
		case num == 2 && typ == protowire.BytesType:
			if sc.Version, err = r.str("version"); err != nil {
				return err
			}
			continue
		case num == 3 && typ == protowire.BytesType:
			if err := d.appendKeyValue(&r, "attributes", &sc.Attributes, 0, 0); err != nil {
				return err
			}
			continue
		case num == 4 && typ == protowire.VarintType:
			if sc.DroppedAttributesCount, err = r.u32("dropped_attributes_count"); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// appendKeyValue reads a KeyValue, an element of the repeated field named
// field (attributes, or the values of a kvlist value at depth), and
// appends it to *dst. The message's own elements start at first in *dst:
// spans, events, links and log records append to a request's slab, so the
// index errors name is len(*dst)-first. A repeated "value" in the KeyValue
// merges into the earlier one (protobuf merge semantics).
func (d *protoDecoder) appendKeyValue(r *reader, field string, dst *[]model.KeyValue, first, depth int) error {
	i := len(*dst) - first
	b, base, err := r.bytesAt(field, i)
	if err != nil {
		return err
	}
	kvs := append(*dst, model.KeyValue{})
	*dst = kvs
	kv := &kvs[len(kvs)-1]
	if plainKeyValue(b, kv) {
		return nil
	}
	if err := d.keyValue(b, base, kv, depth); err != nil {
		return wrapIdx(err, field, i)
	}
	return nil
}

// keyValue decodes a KeyValue message into kv: the general path.
func (d *protoDecoder) keyValue(b []byte, base int, kv *model.KeyValue, depth int) error {
	kr := newReader(b, base)
	for len(kr.b) > 0 {
		num, typ, err := kr.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			if kv.Key, err = kr.str("key"); err != nil {
				return err
			}
			continue
		case num == 2 && typ == protowire.BytesType:
			v, vb, err := kr.bytes("value")
			if err != nil {
				return err
			}
			if err := d.anyValue(v, vb, &kv.Value, depth); err != nil {
				return wrap(err, "value")
			}
			continue
		}
		if err := kr.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

// plainKeyValue decodes the shape nearly every attribute has on the wire,
// without a reader: the key (field 1), then the value (field 2) holding
// only a string (AnyValue field 1) or an int (field 3), each length one
// byte (below 128), nothing else. It fills kv and reports true for that
// shape, exactly as the general path would; anything else reports false
// and leaves kv alone.
func plainKeyValue(b []byte, kv *model.KeyValue) bool {
	if len(b) < 4 || b[0] != 0x0a || b[1] >= 0x80 || len(b) < 2+int(b[1])+2 {
		return false
	}
	kl := int(b[1])
	key, rest := b[2:2+kl], b[2+kl:]
	if rest[0] != 0x12 || rest[1] >= 0x80 || int(rest[1]) != len(rest)-2 || len(rest) < 4 {
		return false
	}
	v := rest[2:]
	switch v[0] {
	case 0x0a: // string_value
		if v[1] >= 0x80 || int(v[1]) != len(v)-2 {
			return false
		}
		kv.Key, kv.Value = stringOf(key), model.Value{Type: model.ValueString, Str: stringOf(v[2:])}
		return true
	case 0x18: // int_value
		x, n := protowire.ConsumeVarint(v[1:])
		if n != len(v)-1 {
			return false
		}
		kv.Key, kv.Value = stringOf(key), model.IntValue(int64(x))
		return true
	}
	return false
}

// span decodes one Span and appends it to d.out.Spans unless its ids are invalid.
func (d *protoDecoder) span(b []byte, base int, res *model.Resource, sc *model.Scope, rsIdx, ssIdx, spIdx int) error {
	d.out.Spans = append(d.out.Spans, model.Span{Resource: res, Scope: sc})
	s := &d.out.Spans[len(d.out.Spans)-1]
	attr0, ev0, link0 := len(d.attrs), len(d.events), len(d.links)
	evAttr0, linkAttr0 := len(d.eventAttrs), len(d.linkAttrs)
	traceLen, spanLen, parentLen := 0, 0, 0
	linkProblem := ""
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		if typ == protowire.BytesType {
			switch num {
			case 1:
				v, _, err := r.bytes("trace_id")
				if err != nil {
					return err
				}
				traceLen = setTraceID(&s.TraceID, v)
				continue
			case 2:
				v, _, err := r.bytes("span_id")
				if err != nil {
					return err
				}
				spanLen = setSpanID(&s.SpanID, v)
				continue
			case 3:
				if s.TraceState, err = r.str("trace_state"); err != nil {
					return err
				}
				continue
			case 4:
				v, _, err := r.bytes("parent_span_id")
				if err != nil {
					return err
				}
				parentLen = setSpanID(&s.ParentSpanID, v)
				continue
			case 5:
				if s.Name, err = r.str("name"); err != nil {
					return err
				}
				continue
			case 9:
				if err := d.appendKeyValue(&r, "attributes", &d.attrs, attr0, 0); err != nil {
					return err
				}
				continue
			case 11:
				i := len(d.events) - ev0
				v, vb, err := r.bytesAt("events", i)
				if err != nil {
					return err
				}
				if err := d.event(v, vb); err != nil {
					return wrapIdx(err, "events", i)
				}
				continue
			case 13:
				i := len(d.links) - link0
				v, vb, err := r.bytesAt("links", i)
				if err != nil {
					return err
				}
				p, err := d.link(v, vb, i)
				if err != nil {
					return wrapIdx(err, "links", i)
				}
				if linkProblem == "" {
					linkProblem = p
				}
				continue
			case 15:
				v, vb, err := r.bytes("status")
				if err != nil {
					return err
				}
				if err := status(v, vb, s); err != nil {
					return wrap(err, "status")
				}
				continue
			}
		} else if typ == protowire.VarintType {
			switch num {
			case 6:
				x, err := r.varint("kind")
				if err != nil {
					return err
				}
				s.Kind = model.SpanKind(int32(x))
				continue
			case 10:
				if s.DroppedAttributesCount, err = r.u32("dropped_attributes_count"); err != nil {
					return err
				}
				continue
			case 12:
				if s.DroppedEventsCount, err = r.u32("dropped_events_count"); err != nil {
					return err
				}
				continue
			case 14:
				if s.DroppedLinksCount, err = r.u32("dropped_links_count"); err != nil {
					return err
				}
				continue
			}
		} else if typ == protowire.Fixed64Type && (num == 7 || num == 8) {
			if num == 7 {
				if s.StartTimeUnixNano, err = r.fixed64("start_time_unix_nano"); err != nil {
					return err
				}
			} else if s.EndTimeUnixNano, err = r.fixed64("end_time_unix_nano"); err != nil {
				return err
			}
			continue
		} else if typ == protowire.Fixed32Type && num == 16 {
			if s.Flags, err = r.fixed32("flags"); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	reason := checkIDs(traceLen, spanLen, parentLen, s)
	if reason == "" {
		reason = linkProblem
	}
	if reason != "" {
		d.out.reject(func() string { return spanPos(rsIdx, ssIdx, spIdx) }, reason)
		// Drop the span and what it appended, zeroed: the slabs may be
		// pooled, and nothing beyond their lengths may hold a pointer.
		d.out.Spans = dropFrom(d.out.Spans, len(d.out.Spans)-1)
		d.attrs, d.events, d.links = dropFrom(d.attrs, attr0), dropFrom(d.events, ev0), dropFrom(d.links, link0)
		d.eventAttrs, d.linkAttrs = dropFrom(d.eventAttrs, evAttr0), dropFrom(d.linkAttrs, linkAttr0)
		return nil
	}
	if n := len(d.attrs); n > attr0 {
		s.Attributes = d.attrs[attr0:n:n]
	}
	if n := len(d.events); n > ev0 {
		s.Events = d.events[ev0:n:n]
	}
	if n := len(d.links); n > link0 {
		s.Links = d.links[link0:n:n]
	}
	return nil
}

func status(b []byte, base int, s *model.Span) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 2 && typ == protowire.BytesType:
			if s.StatusMessage, err = r.str("message"); err != nil {
				return err
			}
			continue
		case num == 3 && typ == protowire.VarintType:
			x, err := r.varint("code")
			if err != nil {
				return err
			}
			s.StatusCode = model.StatusCode(int32(x))
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

func (d *protoDecoder) event(b []byte, base int) error {
	d.events = append(d.events, model.Event{})
	e := &d.events[len(d.events)-1]
	a0 := len(d.eventAttrs)
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			if e.TimeUnixNano, err = r.fixed64("time_unix_nano"); err != nil {
				return err
			}
			continue
		case num == 2 && typ == protowire.BytesType:
			if e.Name, err = r.str("name"); err != nil {
				return err
			}
			continue
		case num == 3 && typ == protowire.BytesType:
			if err := d.appendKeyValue(&r, "attributes", &d.eventAttrs, a0, 0); err != nil {
				return err
			}
			continue
		case num == 4 && typ == protowire.VarintType:
			if e.DroppedAttributesCount, err = r.u32("dropped_attributes_count"); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	if n := len(d.eventAttrs); n > a0 {
		e.Attributes = d.eventAttrs[a0:n:n]
	}
	return nil
}

// link decodes one link and returns why its ids are invalid ("" when valid).
func (d *protoDecoder) link(b []byte, base, idx int) (string, error) {
	d.links = append(d.links, model.Link{})
	l := &d.links[len(d.links)-1]
	a0 := len(d.linkAttrs)
	traceLen, spanLen := 0, 0
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return "", err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, _, err := r.bytes("trace_id")
			if err != nil {
				return "", err
			}
			traceLen = setTraceID(&l.TraceID, v)
			continue
		case num == 2 && typ == protowire.BytesType:
			v, _, err := r.bytes("span_id")
			if err != nil {
				return "", err
			}
			spanLen = setSpanID(&l.SpanID, v)
			continue
		case num == 3 && typ == protowire.BytesType:
			if l.TraceState, err = r.str("trace_state"); err != nil {
				return "", err
			}
			continue
		case num == 4 && typ == protowire.BytesType:
			if err := d.appendKeyValue(&r, "attributes", &d.linkAttrs, a0, 0); err != nil {
				return "", err
			}
			continue
		case num == 5 && typ == protowire.VarintType:
			if l.DroppedAttributesCount, err = r.u32("dropped_attributes_count"); err != nil {
				return "", err
			}
			continue
		case num == 6 && typ == protowire.Fixed32Type:
			if l.Flags, err = r.fixed32("flags"); err != nil {
				return "", err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return "", err
		}
	}
	if n := len(d.linkAttrs); n > a0 {
		l.Attributes = d.linkAttrs[a0:n:n]
	}
	return checkLinkIDs(idx, traceLen, spanLen, l), nil
}

// anyValue decodes an AnyValue into v. A oneof member replaces what v held,
// except that a repeated array_value or kvlist_value merges into the previous one.
func (d *protoDecoder) anyValue(b []byte, base int, v *model.Value, depth int) error {
	if depth > maxValueDepth {
		return newError(base, valueDepthReason)
	}
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch typ {
		case protowire.BytesType:
			switch num {
			case 1:
				s, err := r.str("string_value")
				if err != nil {
					return err
				}
				*v = model.Value{Type: model.ValueString, Str: s}
				continue
			case 5:
				x, xb, err := r.bytes("array_value")
				if err != nil {
					return err
				}
				if v.Type != model.ValueArray {
					*v = model.Value{Type: model.ValueArray}
				}
				if err := d.arrayValue(x, xb, v, depth+1); err != nil {
					return wrap(err, "array_value")
				}
				continue
			case 6:
				x, xb, err := r.bytes("kvlist_value")
				if err != nil {
					return err
				}
				if v.Type != model.ValueKvList {
					*v = model.Value{Type: model.ValueKvList}
				}
				if err := d.kvlistValue(x, xb, v, depth+1); err != nil {
					return wrap(err, "kvlist_value")
				}
				continue
			case 7:
				x, _, err := r.bytes("bytes_value")
				if err != nil {
					return err
				}
				*v = model.Value{Type: model.ValueBytes, Str: stringOf(x)}
				continue
			}
		case protowire.VarintType:
			switch num {
			case 2:
				x, err := r.varint("bool_value")
				if err != nil {
					return err
				}
				*v = model.BoolValue(x != 0)
				continue
			case 3:
				x, err := r.varint("int_value")
				if err != nil {
					return err
				}
				*v = model.IntValue(int64(x))
				continue
			case 8:
				if _, err := r.varint("string_value_strindex"); err != nil {
					return err
				}
				*v = model.Value{} // profiles-only dictionary reference: meaningless here
				continue
			}
		case protowire.Fixed64Type:
			if num == 4 {
				x, err := r.fixed64("double_value")
				if err != nil {
					return err
				}
				*v = model.DoubleValue(math.Float64frombits(x))
				continue
			}
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

func (d *protoDecoder) arrayValue(b []byte, base int, v *model.Value, depth int) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		if num == 1 && typ == protowire.BytesType {
			if v.List == nil {
				v.List = &model.List{}
			}
			l := v.List
			i := len(l.Array)
			x, xb, err := r.bytesAt("values", i)
			if err != nil {
				return err
			}
			l.Array = append(l.Array, model.Value{})
			if err := d.anyValue(x, xb, &l.Array[i], depth); err != nil {
				return wrapIdx(err, "values", i)
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}

func (d *protoDecoder) kvlistValue(b []byte, base int, v *model.Value, depth int) error {
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		if num == 1 && typ == protowire.BytesType {
			if v.List == nil {
				v.List = &model.List{}
			}
			if err := d.appendKeyValue(&r, "values", &v.List.KvList, 0, depth); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	return nil
}
