package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
)

// DecodeJSON decodes an ExportTraceServiceRequest in OTLP/JSON (the proto3
// JSON mapping with OTLP's deviations): keys in lowerCamelCase (the proto
// field names in snake_case are accepted too), trace and span ids as hex
// strings of either case, 64-bit integers as JSON numbers or strings, enums as
// integers or as their names ("SPAN_KIND_SERVER"), bytesValue as base64
// (standard or URL alphabet, padding optional), doubleValue as a number or
// "NaN", "Infinity", "-Infinity". Unknown keys are ignored and null means
// "not set". Strings alias a private copy of b, as in DecodeProto.
//
// Spans with invalid ids (not hex, wrong length, all zeros) are counted in
// Batch.Rejected; anything else malformed returns an *Error naming the field
// path and byte offset.
func DecodeJSON(b []byte) (Batch, error) {
	d := jsonDecoder{r: newJReader(b)}
	if err := d.request(); err != nil {
		return Batch{}, finish(err, "otlp-json")
	}
	return d.out, nil
}

type jsonDecoder struct {
	r      *jreader
	out    Batch
	scopes []*model.Scope
}

// members calls fn for each member of an object; a null object is empty.
func (d *jsonDecoder) members(fn func(key string) error) error {
	r := d.r
	if isNull, err := r.null(); isNull || err != nil {
		return err
	}
	if err := r.object(); err != nil {
		return err
	}
	for first := true; ; {
		k, ok, err := r.key(&first)
		if err != nil || !ok {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
}

// elems calls fn for each element of an array; a null array is empty.
func (d *jsonDecoder) elems(field string, fn func(i int) error) error {
	r := d.r
	if isNull, err := r.null(); isNull || err != nil {
		return wrap(err, field)
	}
	if err := r.array(); err != nil {
		return wrap(err, field)
	}
	for i, first := 0, true; ; i++ {
		ok, err := r.elem(&first)
		if err != nil {
			return wrap(err, field)
		}
		if !ok {
			return nil
		}
		if err := fn(i); err != nil {
			return wrapIdx(err, field, i)
		}
	}
}

func (d *jsonDecoder) request() error {
	return d.exportRequest("resourceSpans", "resource_spans", d.resourceSpans)
}

// exportRequest decodes an export request, an object whose one member
// (camel, or snake in snake_case) is an array of resource groups, each
// decoded by fn with its index.
func (d *jsonDecoder) exportRequest(camel, snake string, fn func(i int) error) error {
	err := d.members(func(k string) error {
		if k == camel || k == snake {
			return d.elems(camel, fn)
		}
		return d.r.skip()
	})
	if err != nil {
		return err
	}
	return d.r.end()
}

// group decodes an object of the shape every signal nests its data in:
// ResourceSpans, ResourceLogs and ResourceMetrics (the "resource", the
// array of scope groups, "schemaUrl") and ScopeSpans, ScopeLogs and
// ScopeMetrics (the "scope", the array of spans, records or metrics,
// "schemaUrl"). head decodes the headKey member; item decodes each element
// of the itemsCamel (or itemsSnake) array with its index; the schema URL
// is stored in *url. The group must be an object, not null.
func (d *jsonDecoder) group(headKey string, head func() error, itemsCamel, itemsSnake string, item func(i int) error, url *string) error {
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	return d.members(func(k string) error {
		switch k {
		case headKey:
			return wrap(head(), headKey)
		case itemsCamel, itemsSnake:
			return d.elems(itemsCamel, item)
		case "schemaUrl", "schema_url":
			return d.str(url, "schemaUrl")
		}
		return d.r.skip()
	})
}

func (d *jsonDecoder) resourceSpans(rsIdx int) error {
	res := &model.Resource{}
	first := len(d.out.Spans)
	d.scopes = d.scopes[:0]
	err := d.group("resource", func() error { return d.resource(res) },
		"scopeSpans", "scope_spans", func(i int) error { return d.scopeSpans(res, rsIdx, i) },
		&res.SchemaURL)
	if err != nil {
		return err
	}
	finishResource(&d.out, res, d.scopes, first)
	return nil
}

// finishResource normalises a decoded ResourceSpans: the resource, its
// scopes, then its spans (which read service.name from the resource).
func finishResource(out *Batch, res *model.Resource, scopes []*model.Scope, first int) {
	model.NormalizeResource(res, &out.Problems)
	for _, sc := range scopes {
		model.NormalizeScope(sc, &out.Problems)
	}
	for i := first; i < len(out.Spans); i++ {
		model.Normalize(&out.Spans[i], &out.Problems)
	}
}

func (d *jsonDecoder) str(dst *string, field string) error {
	if isNull, err := d.r.null(); isNull || err != nil {
		return wrap(err, field)
	}
	s, err := d.r.str()
	if err != nil {
		return wrap(err, field)
	}
	*dst = s
	return nil
}

// uint parses a JSON number or a string holding one as an unsigned integer of the given bit size.
func (d *jsonDecoder) uint(field string, bits int) (uint64, error) {
	r := d.r
	if isNull, err := r.null(); isNull || err != nil {
		return 0, wrap(err, field)
	}
	start := r.i
	text, err := d.numberText()
	if err != nil {
		return 0, wrap(err, field)
	}
	v, err := strconv.ParseUint(text, 10, bits)
	if err != nil {
		f, ferr := strconv.ParseFloat(text, 64)
		if ferr != nil || f != math.Trunc(f) || f < 0 || f >= math.Ldexp(1, bits) {
			return 0, wrap(newError(start, "invalid unsigned "+strconv.Itoa(bits)+"-bit integer "+quoteShort(text)), field)
		}
		v = uint64(f)
	}
	return v, nil
}

func (d *jsonDecoder) int64(field string) (int64, error) {
	r := d.r
	start := r.i
	text, err := d.numberText()
	if err != nil {
		return 0, wrap(err, field)
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(text, 64)
		if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, wrap(newError(start, "invalid 64-bit integer "+quoteShort(text)), field)
		}
		v = int64(f)
	}
	return v, nil
}

// int64OrNull is int64 for a member that may be null: set is false, and
// nothing is read but the null, when it is.
func (d *jsonDecoder) int64OrNull(field string) (v int64, set bool, err error) {
	if isNull, err := d.r.null(); isNull || err != nil {
		return 0, false, wrap(err, field)
	}
	v, err = d.int64(field)
	return v, true, err
}

// uints appends the elements of an array of unsigned 64-bit integers
// (numbers or strings) to *dst.
func (d *jsonDecoder) uints(dst *[]uint64, field string) error {
	return d.elems(field, func(int) error {
		v, err := d.uint(field, 64)
		*dst = append(*dst, v)
		return err
	})
}

// numberText returns the text of a number given as a JSON number or string.
func (d *jsonDecoder) numberText() (string, error) {
	r := d.r
	if r.peek() == '"' {
		return r.str()
	}
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return "", r.typeError("number or numeric string")
	}
	text, _, err := r.number()
	return text, err
}

func (d *jsonDecoder) u32(dst *uint32, field string) error {
	v, err := d.uint(field, 32)
	*dst = uint32(v)
	return err
}

// enum reads an enum as an integer or as one of names (indexed by value).
func (d *jsonDecoder) enum(field string, names []string) (int32, error) {
	r := d.r
	if isNull, err := r.null(); isNull || err != nil {
		return 0, wrap(err, field)
	}
	start := r.i
	if r.peek() == '"' {
		s, err := r.str()
		if err != nil {
			return 0, wrap(err, field)
		}
		for i, n := range names {
			if s == n {
				return int32(i), nil
			}
		}
		if v, err := strconv.ParseInt(s, 10, 32); err == nil {
			return int32(v), nil
		}
		return 0, wrap(newError(start, "unknown enum value "+quoteShort(s)), field)
	}
	text, _, err := r.number()
	if err != nil {
		return 0, wrap(r.typeError("enum number or name"), field)
	}
	v, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		return 0, wrap(newError(start, "invalid enum number "+quoteShort(text)), field)
	}
	return int32(v), nil
}

var spanKindNames = []string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}
var statusCodeNames = []string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}

// hexID reads an id string into dst. It returns the decoded length, or -1
// with a reason when the string is not hex; a wrong JSON type is an error.
func (d *jsonDecoder) hexID(dst []byte, field string) (int, string, error) {
	var s string
	if err := d.str(&s, field); err != nil {
		return 0, "", err
	}
	n, reason := parseHexID(dst, s, snakeIDName(field))
	return n, reason, nil
}

// id reads an id member as hexID does into dst and its length into *n,
// keeping the first reason an id of the message is malformed in *problem.
func (d *jsonDecoder) id(dst []byte, field string, n *int, problem *string) error {
	m, reason, err := d.hexID(dst, field)
	*n = m
	if reason != "" && *problem == "" {
		*problem = reason
	}
	return err
}

func parseHexID(dst []byte, s, field string) (int, string) {
	clear(dst)
	if len(s)%2 != 0 {
		return -1, field + " must be " + strconv.Itoa(2*len(dst)) + " hex digits, got " + strconv.Itoa(len(s))
	}
	if len(s) != 2*len(dst) {
		if _, err := hex.DecodeString(s); err != nil {
			return -1, notHex(field, s, len(dst))
		}
		return len(s) / 2, ""
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		clear(dst)
		return -1, notHex(field, s, len(dst))
	}
	return len(dst), ""
}

func snakeIDName(camel string) string {
	switch camel {
	case "traceId":
		return "trace_id"
	case "spanId":
		return "span_id"
	case "parentSpanId":
		return "parent_span_id"
	}
	return camel
}

func notHex(field, s string, size int) string {
	msg := field + " is not hex: " + quoteShort(s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == size {
		msg += " (looks like base64; OTLP/JSON ids are hex)"
	}
	return msg
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

func (d *jsonDecoder) resource(res *model.Resource) error {
	return d.members(func(k string) error {
		switch k {
		case "attributes":
			return d.kvs(&res.Attributes, "attributes", 0)
		case "droppedAttributesCount", "dropped_attributes_count":
			return d.u32(&res.DroppedAttributesCount, "droppedAttributesCount")
		}
		return d.r.skip()
	})
}

func (d *jsonDecoder) scopeSpans(res *model.Resource, rsIdx, ssIdx int) error {
	sc := &model.Scope{}
	d.scopes = append(d.scopes, sc)
	return d.group("scope", func() error { return d.scopeJSON(sc) },
		"spans", "spans", func(i int) error { return d.span(res, sc, rsIdx, ssIdx, i) },
		&sc.SchemaURL)
}

// scopeJSON decodes an InstrumentationScope.
func (d *jsonDecoder) scopeJSON(sc *model.Scope) error {
	return d.members(func(k string) error {
		switch k {
		case "name":
			return d.str(&sc.Name, "name")
		case "version":
			return d.str(&sc.Version, "version")
		case "attributes":
			return d.kvs(&sc.Attributes, "attributes", 0)
		case "droppedAttributesCount", "dropped_attributes_count":
			return d.u32(&sc.DroppedAttributesCount, "droppedAttributesCount")
		}
		return d.r.skip()
	})
}

func (d *jsonDecoder) span(res *model.Resource, sc *model.Scope, rsIdx, ssIdx, spIdx int) error {
	s := model.Span{Resource: res, Scope: sc}
	traceLen, spanLen, parentLen := 0, 0, 0
	problem := ""
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	err := d.members(func(k string) error {
		var err error
		switch k {
		case "traceId", "trace_id":
			err = d.id(s.TraceID[:], "traceId", &traceLen, &problem)
		case "spanId", "span_id":
			err = d.id(s.SpanID[:], "spanId", &spanLen, &problem)
		case "parentSpanId", "parent_span_id":
			err = d.id(s.ParentSpanID[:], "parentSpanId", &parentLen, &problem)
		case "traceState", "trace_state":
			err = d.str(&s.TraceState, "traceState")
		case "flags":
			err = d.u32(&s.Flags, "flags")
		case "name":
			err = d.str(&s.Name, "name")
		case "kind":
			var v int32
			v, err = d.enum("kind", spanKindNames)
			s.Kind = model.SpanKind(v)
		case "startTimeUnixNano", "start_time_unix_nano":
			s.StartTimeUnixNano, err = d.uint("startTimeUnixNano", 64)
		case "endTimeUnixNano", "end_time_unix_nano":
			s.EndTimeUnixNano, err = d.uint("endTimeUnixNano", 64)
		case "attributes":
			err = d.kvs(&s.Attributes, "attributes", 0)
		case "droppedAttributesCount", "dropped_attributes_count":
			err = d.u32(&s.DroppedAttributesCount, "droppedAttributesCount")
		case "events":
			err = d.elems("events", func(int) error {
				s.Events = append(s.Events, model.Event{})
				return d.event(&s.Events[len(s.Events)-1])
			})
		case "droppedEventsCount", "dropped_events_count":
			err = d.u32(&s.DroppedEventsCount, "droppedEventsCount")
		case "links":
			err = d.elems("links", func(i int) error {
				s.Links = append(s.Links, model.Link{})
				reason, err := d.link(&s.Links[len(s.Links)-1], i)
				if reason != "" && problem == "" {
					problem = reason
				}
				return err
			})
		case "droppedLinksCount", "dropped_links_count":
			err = d.u32(&s.DroppedLinksCount, "droppedLinksCount")
		case "status":
			err = wrap(d.members(func(k string) error {
				switch k {
				case "message":
					return d.str(&s.StatusMessage, "message")
				case "code":
					v, err := d.enum("code", statusCodeNames)
					s.StatusCode = model.StatusCode(v)
					return err
				}
				return d.r.skip()
			}), "status")
		default:
			err = d.r.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	reason := problem
	if traceLen >= 0 && spanLen >= 0 && parentLen >= 0 {
		if r := checkIDs(traceLen, spanLen, parentLen, &s); r != "" {
			reason = r
		}
	}
	if reason != "" {
		d.out.reject(func() string {
			return "resourceSpans[" + strconv.Itoa(rsIdx) + "].scopeSpans[" + strconv.Itoa(ssIdx) + "].spans[" + strconv.Itoa(spIdx) + "]"
		}, reason)
		return nil
	}
	d.out.Spans = append(d.out.Spans, s)
	return nil
}

func (d *jsonDecoder) event(e *model.Event) error {
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	return d.members(func(k string) error {
		var err error
		switch k {
		case "timeUnixNano", "time_unix_nano":
			e.TimeUnixNano, err = d.uint("timeUnixNano", 64)
		case "name":
			err = d.str(&e.Name, "name")
		case "attributes":
			err = d.kvs(&e.Attributes, "attributes", 0)
		case "droppedAttributesCount", "dropped_attributes_count":
			err = d.u32(&e.DroppedAttributesCount, "droppedAttributesCount")
		default:
			err = d.r.skip()
		}
		return err
	})
}

// link decodes a link and returns why its ids are invalid ("" when valid).
func (d *jsonDecoder) link(l *model.Link, idx int) (string, error) {
	traceLen, spanLen := 0, 0
	problem := ""
	if d.r.peek() != '{' {
		return "", d.r.typeError("object")
	}
	err := d.members(func(k string) error {
		var err error
		var reason string
		switch k {
		case "traceId", "trace_id":
			traceLen, reason, err = d.hexID(l.TraceID[:], "traceId")
		case "spanId", "span_id":
			spanLen, reason, err = d.hexID(l.SpanID[:], "spanId")
		case "traceState", "trace_state":
			err = d.str(&l.TraceState, "traceState")
		case "attributes":
			err = d.kvs(&l.Attributes, "attributes", 0)
		case "droppedAttributesCount", "dropped_attributes_count":
			err = d.u32(&l.DroppedAttributesCount, "droppedAttributesCount")
		case "flags":
			err = d.u32(&l.Flags, "flags")
		default:
			err = d.r.skip()
		}
		if reason != "" && problem == "" {
			problem = "links[" + strconv.Itoa(idx) + "]." + reason
		}
		return err
	})
	if err != nil || problem != "" {
		return problem, err
	}
	return checkLinkIDs(idx, traceLen, spanLen, l), nil
}

func (d *jsonDecoder) kvs(dst *[]model.KeyValue, field string, depth int) error {
	return d.elems(field, func(int) error {
		*dst = append(*dst, model.KeyValue{})
		kv := &(*dst)[len(*dst)-1]
		if d.r.peek() != '{' {
			return d.r.typeError("object")
		}
		return d.members(func(k string) error {
			switch k {
			case "key":
				return d.str(&kv.Key, "key")
			case "value":
				return wrap(d.anyValue(&kv.Value, depth), "value")
			}
			return d.r.skip()
		})
	})
}

func (d *jsonDecoder) anyValue(v *model.Value, depth int) error {
	if depth > maxValueDepth {
		return d.r.fail(valueDepthReason)
	}
	return d.members(func(k string) error {
		r := d.r
		if isNull, err := r.null(); isNull || err != nil {
			return wrap(err, k)
		}
		switch k {
		case "stringValue", "string_value":
			s, err := r.str()
			*v = model.StringValue(s)
			return wrap(err, "stringValue")
		case "boolValue", "bool_value":
			b, err := r.boolean()
			*v = model.BoolValue(b)
			return wrap(err, "boolValue")
		case "intValue", "int_value":
			i, err := d.int64("intValue")
			*v = model.IntValue(i)
			return err
		case "doubleValue", "double_value":
			f, err := d.double()
			*v = model.DoubleValue(f)
			return wrap(err, "doubleValue")
		case "bytesValue", "bytes_value":
			start := r.i
			s, err := r.str()
			if err != nil {
				return wrap(err, "bytesValue")
			}
			b, err := decodeBase64(s)
			if err != nil {
				return wrap(newError(start, "invalid base64"), "bytesValue")
			}
			// b is freshly decoded and owned by nobody else: alias it.
			*v = model.Value{Type: model.ValueBytes}
			if len(b) > 0 {
				v.Str = unsafe.String(&b[0], len(b))
			}
			return nil
		case "arrayValue", "array_value":
			var elems []model.Value
			err := d.members(func(k string) error {
				if k != "values" {
					return d.r.skip()
				}
				return d.elems("values", func(int) error {
					elems = append(elems, model.Value{})
					if d.r.peek() != '{' {
						return d.r.typeError("object")
					}
					return d.anyValue(&elems[len(elems)-1], depth+1)
				})
			})
			*v = model.ArrayValue(elems)
			return wrap(err, "arrayValue")
		case "kvlistValue", "kvlist_value":
			var fields []model.KeyValue
			err := d.members(func(k string) error {
				if k != "values" {
					return d.r.skip()
				}
				return d.kvs(&fields, "values", depth+1)
			})
			*v = model.KvListValue(fields)
			return wrap(err, "kvlistValue")
		case "stringValueStrindex", "string_value_strindex":
			*v = model.Value{} // profiles-only dictionary reference: meaningless here
			_, err := d.int64("stringValueStrindex")
			return err
		}
		return r.skip()
	})
}

// double reads a JSON number, or a string holding a number, "NaN", "Infinity" or "-Infinity".
func (d *jsonDecoder) double() (float64, error) {
	r := d.r
	start := r.i
	var text string
	var err error
	if r.peek() == '"' {
		text, err = r.str()
		if err != nil {
			return 0, err
		}
		switch text {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		if strings.ContainsAny(text, "nNiI_xXpP") || strings.TrimSpace(text) != text {
			return 0, newError(start, "invalid number "+quoteShort(text))
		}
	} else if text, _, err = r.number(); err != nil {
		return 0, r.typeError("number")
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		// ParseFloat rounds overflow to ±Inf and reports ErrRange; protojson rejects it.
		return 0, newError(start, "invalid number "+quoteShort(text))
	}
	return f, nil
}

func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}
