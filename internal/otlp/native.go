package otlp

import (
	"encoding/base64"
	"math"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// DecodeNative decodes the body of Rastro's native JSON route: a JSON array
// of flat spans (the shape is documented in the package comment). Spans with
// invalid ids or without a start time are counted in Batch.Rejected; any other
// problem returns an *Error naming the field path and byte offset. Spans with
// the same service and resource share one *model.Resource, and spans with the
// same scope one *model.Scope.
func DecodeNative(b []byte) (Batch, error) {
	d := nativeDecoder{jsonDecoder: jsonDecoder{r: newJReader(b)}, resources: map[string]*model.Resource{}, scopes: map[string]*model.Scope{}}
	if err := d.body(); err != nil {
		return Batch{}, finish(err, "native-json")
	}
	return d.out, nil
}

// nativeDecoder reuses jsonDecoder's scalar readers and its Batch.
type nativeDecoder struct {
	jsonDecoder
	resources map[string]*model.Resource
	scopes    map[string]*model.Scope
	key       []byte
}

func (d *nativeDecoder) body() error {
	if d.r.peek() != '[' {
		return d.r.fail("native body must be a JSON array of spans, got " + d.r.what())
	}
	if err := d.elems("", d.span); err != nil {
		return err
	}
	return d.r.end()
}

func (d *nativeDecoder) span(idx int) error {
	r := d.r
	if r.peek() != '{' {
		return r.typeError("object")
	}
	var s model.Span
	res := &model.Resource{}
	sc := &model.Scope{}
	service, hasStart, hasEnd := "", false, false
	var duration uint64
	hasDuration := false
	traceLen, spanLen, parentLen := 0, 0, 0
	problem := ""
	note := func(n int, reason string) int {
		if reason != "" && problem == "" {
			problem = reason
		}
		return n
	}
	err := d.members(func(k string) error {
		var err error
		var n int
		var reason string
		switch k {
		case "trace_id":
			n, reason, err = d.id(s.TraceID[:], k)
			traceLen = note(n, reason)
		case "span_id":
			n, reason, err = d.id(s.SpanID[:], k)
			spanLen = note(n, reason)
		case "parent_span_id":
			n, reason, err = d.id(s.ParentSpanID[:], k)
			parentLen = note(n, reason)
		case "name":
			err = d.str(&s.Name, k)
		case "kind":
			var v int32
			v, err = d.nameOrInt(k, func(name string) (int32, bool) {
				kind, ok := model.ParseSpanKind(name)
				return int32(kind), ok
			})
			s.Kind = model.SpanKind(v)
		case "start_time", "start_time_unix_nano":
			var isNull bool
			s.StartTimeUnixNano, isNull, err = d.time(k)
			hasStart = hasStart || !isNull
		case "end_time", "end_time_unix_nano":
			var isNull bool
			s.EndTimeUnixNano, isNull, err = d.time(k)
			hasEnd = hasEnd || !isNull
		case "duration_ns":
			hasDuration = d.r.peek() != 'n'
			duration, err = d.uint(k, 64)
		case "service":
			err = d.str(&service, k)
		case "status":
			var v int32
			v, err = d.nameOrInt(k, func(name string) (int32, bool) {
				c, ok := model.ParseStatusCode(name)
				return int32(c), ok
			})
			s.StatusCode = model.StatusCode(v)
		case "status_message":
			err = d.str(&s.StatusMessage, k)
		case "trace_state":
			err = d.str(&s.TraceState, k)
		case "flags":
			err = d.u32(&s.Flags, k)
		case "attributes":
			err = d.attrs(&s.Attributes, k)
		case "dropped_attributes_count":
			err = d.u32(&s.DroppedAttributesCount, k)
		case "dropped_events_count":
			err = d.u32(&s.DroppedEventsCount, k)
		case "dropped_links_count":
			err = d.u32(&s.DroppedLinksCount, k)
		case "resource":
			err = d.attrs(&res.Attributes, k)
		case "resource_schema_url":
			err = d.str(&res.SchemaURL, k)
		case "resource_dropped_attributes_count":
			err = d.u32(&res.DroppedAttributesCount, k)
		case "scope":
			err = wrap(d.members(func(k string) error {
				switch k {
				case "name":
					return d.str(&sc.Name, k)
				case "version":
					return d.str(&sc.Version, k)
				case "attributes":
					return d.attrs(&sc.Attributes, k)
				case "schema_url":
					return d.str(&sc.SchemaURL, k)
				case "dropped_attributes_count":
					return d.u32(&sc.DroppedAttributesCount, k)
				}
				return d.r.skip()
			}), "scope")
		case "events":
			err = d.elems(k, func(int) error {
				s.Events = append(s.Events, model.Event{})
				return d.event(&s.Events[len(s.Events)-1])
			})
		case "links":
			err = d.elems(k, func(i int) error {
				s.Links = append(s.Links, model.Link{})
				reason, err := d.link(&s.Links[len(s.Links)-1], i)
				note(0, reason)
				return err
			})
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
	if reason == "" && !hasStart {
		reason = "start_time is required"
	}
	if reason != "" {
		d.out.reject(func() string { return "[" + strconv.Itoa(idx) + "]" }, reason)
		return nil
	}
	if !hasEnd {
		s.EndTimeUnixNano = s.StartTimeUnixNano
		if hasDuration {
			s.EndTimeUnixNano += duration
			if s.EndTimeUnixNano < s.StartTimeUnixNano {
				s.EndTimeUnixNano = math.MaxUint64
			}
		}
	}
	setService(res, service)
	s.Resource = d.shareResource(res)
	s.Scope = d.shareScope(sc)
	model.Normalize(&s, &d.out.Problems)
	d.out.Spans = append(d.out.Spans, s)
	return nil
}

// setService makes service (when not empty) the resource's service.name,
// placed first, as the native shapes' "service" field says.
func setService(res *model.Resource, service string) {
	if service == "" {
		return
	}
	attrs := make([]model.KeyValue, 0, len(res.Attributes)+1)
	attrs = append(attrs, model.KeyValue{Key: "service.name", Value: model.StringValue(service)})
	for _, kv := range res.Attributes {
		if kv.Key != "service.name" {
			attrs = append(attrs, kv)
		}
	}
	res.Attributes = attrs
}

func (d *nativeDecoder) shareResource(res *model.Resource) *model.Resource {
	d.key = appendResourceKey(d.key[:0], res)
	if old, ok := d.resources[string(d.key)]; ok {
		return old
	}
	model.NormalizeResource(res, &d.out.Problems)
	d.resources[string(d.key)] = res
	return res
}

func (d *nativeDecoder) shareScope(sc *model.Scope) *model.Scope {
	d.key = appendScopeKey(d.key[:0], sc)
	if old, ok := d.scopes[string(d.key)]; ok {
		return old
	}
	model.NormalizeScope(sc, &d.out.Problems)
	d.scopes[string(d.key)] = sc
	return sc
}

func (d *nativeDecoder) id(dst []byte, field string) (int, string, error) {
	var s string
	if err := d.str(&s, field); err != nil {
		return 0, "", err
	}
	n, reason := parseHexID(dst, s, field)
	return n, reason, nil
}

// nameOrInt reads a lowercase enum name or an integer.
func (d *nativeDecoder) nameOrInt(field string, parse func(string) (int32, bool)) (int32, error) {
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
		if v, ok := parse(s); ok {
			return v, nil
		}
		return 0, wrap(newError(start, "unknown value "+quoteShort(s)), field)
	}
	text, isInt, err := r.number()
	if err != nil {
		return 0, wrap(r.typeError("string or integer"), field)
	}
	v, perr := strconv.ParseInt(text, 10, 32)
	if !isInt || perr != nil {
		return 0, wrap(newError(start, "invalid integer "+quoteShort(text)), field)
	}
	return int32(v), nil
}

// time reads an RFC 3339 timestamp or an integer of Unix nanoseconds (as a
// number or a string of digits). isNull reports a JSON null.
func (d *nativeDecoder) time(field string) (ns uint64, isNull bool, err error) {
	r := d.r
	if isNull, err := r.null(); isNull || err != nil {
		return 0, isNull, wrap(err, field)
	}
	start := r.i
	if r.peek() != '"' {
		ns, err = d.uint(field, 64)
		return ns, false, err
	}
	s, err := r.str()
	if err != nil {
		return 0, false, wrap(err, field)
	}
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false, wrap(newError(start, "invalid time "+quoteShort(s)+": want RFC 3339 or integer Unix nanoseconds"), field)
	}
	sec := t.Unix()
	if sec < 0 || uint64(sec) > (math.MaxUint64-uint64(t.Nanosecond()))/1e9 {
		return 0, false, wrap(newError(start, "time "+quoteShort(s)+" is outside 1970..2554"), field)
	}
	return uint64(sec)*1e9 + uint64(t.Nanosecond()), false, nil
}

func (d *nativeDecoder) event(e *model.Event) error {
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	return d.members(func(k string) error {
		var err error
		switch k {
		case "time", "time_unix_nano":
			e.TimeUnixNano, _, err = d.time(k)
		case "name":
			err = d.str(&e.Name, k)
		case "attributes":
			err = d.attrs(&e.Attributes, k)
		case "dropped_attributes_count":
			err = d.u32(&e.DroppedAttributesCount, k)
		default:
			err = d.r.skip()
		}
		return err
	})
}

func (d *nativeDecoder) link(l *model.Link, idx int) (string, error) {
	traceLen, spanLen := 0, 0
	problem := ""
	if d.r.peek() != '{' {
		return "", d.r.typeError("object")
	}
	err := d.members(func(k string) error {
		var err error
		var reason string
		switch k {
		case "trace_id":
			traceLen, reason, err = d.id(l.TraceID[:], k)
		case "span_id":
			spanLen, reason, err = d.id(l.SpanID[:], k)
		case "trace_state":
			err = d.str(&l.TraceState, k)
		case "flags":
			err = d.u32(&l.Flags, k)
		case "attributes":
			err = d.attrs(&l.Attributes, k)
		case "dropped_attributes_count":
			err = d.u32(&l.DroppedAttributesCount, k)
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

// attrs reads a JSON object of attributes, keeping key order.
func (d *nativeDecoder) attrs(dst *[]model.KeyValue, field string) error {
	return wrap(d.members(func(k string) error {
		var v model.Value
		if err := d.value(&v, 0); err != nil {
			return wrap(err, strconv.Quote(k))
		}
		*dst = append(*dst, model.KeyValue{Key: k, Value: v})
		return nil
	}), field)
}

// value maps JSON to an attribute value: strings, booleans, integers (int),
// other numbers (double), arrays, objects (kvlist) and null (empty).
func (d *nativeDecoder) value(v *model.Value, depth int) error {
	r := d.r
	if depth > maxValueDepth {
		return r.fail(valueDepthReason)
	}
	switch r.peek() {
	case '"':
		s, err := r.str()
		*v = model.StringValue(s)
		return err
	case 't', 'f':
		b, err := r.boolean()
		*v = model.BoolValue(b)
		return err
	case 'n':
		*v = model.Value{}
		return r.literal("null")
	case '[':
		*v = model.Value{Type: model.ValueArray}
		if err := r.array(); err != nil {
			return err
		}
		var elems []model.Value
		for i, first := 0, true; ; i++ {
			ok, err := r.elem(&first)
			if err != nil || !ok {
				*v = model.ArrayValue(elems)
				return err
			}
			elems = append(elems, model.Value{})
			if err := d.value(&elems[i], depth+1); err != nil {
				return wrap(err, "["+strconv.Itoa(i)+"]")
			}
		}
	case '{':
		var fields []model.KeyValue
		err := d.members(func(k string) error {
			var e model.Value
			if err := d.value(&e, depth+1); err != nil {
				return wrap(err, strconv.Quote(k))
			}
			fields = append(fields, model.KeyValue{Key: k, Value: e})
			return nil
		})
		*v = model.KvListValue(fields)
		return err
	}
	start := r.i
	text, isInt, err := r.number()
	if err != nil {
		return err
	}
	if isInt {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			*v = model.IntValue(i)
			return nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return newError(start, "number out of range "+quoteShort(text))
	}
	*v = model.DoubleValue(f)
	return nil
}

// EncodeNative encodes spans as a native JSON route body (a JSON array in
// the AppendSpanJSON shape). DecodeNative(EncodeNative(spans)) gives the spans
// back, except for what the native shape cannot express: bytes values (they
// come back as a kvlist {"bytes": base64 string}), NaN and infinite doubles
// (they come back as strings).
func EncodeNative(spans []model.Span) []byte {
	b := []byte{'['}
	for i := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSpanJSON(b, &spans[i], true)
	}
	return append(b, ']')
}

// AppendSpanJSON appends one span in Rastro's API JSON shape (documented in
// the package comment) to dst. The output is valid JSON for every span.
func AppendSpanJSON(dst []byte, s *model.Span) []byte { return appendSpanJSON(dst, s, false) }

func appendSpanJSON(b []byte, s *model.Span, native bool) []byte {
	b = append(b, '{')
	c := comma{}
	b = appendHexField(b, &c, "trace_id", s.TraceID[:])
	b = appendHexField(b, &c, "span_id", s.SpanID[:])
	if !s.ParentSpanID.IsZero() {
		b = appendHexField(b, &c, "parent_span_id", s.ParentSpanID[:])
	}
	b = c.key(b, "name")
	b = appendJSONString(b, s.Name)
	b = c.key(b, "kind")
	b = appendEnum(b, int32(s.Kind), s.Kind.String())
	var resAttrs []model.KeyValue
	if s.Resource != nil {
		resAttrs = s.Resource.Attributes
	}
	if native {
		// "service" becomes resource attribute service.name placed first: only
		// write it when that reproduces the resource exactly.
		if len(resAttrs) > 0 && resAttrs[0].Key == "service.name" && resAttrs[0].Value.Type == model.ValueString &&
			resAttrs[0].Value.Str != "" && !hasKey(resAttrs[1:], "service.name") {
			b = c.key(b, "service")
			b = appendJSONString(b, resAttrs[0].Value.Str)
			resAttrs = resAttrs[1:]
		}
	} else {
		b = c.key(b, "service")
		b = appendJSONString(b, s.Service)
	}
	b = c.key(b, "start_time")
	b = appendRFC3339(b, s.StartTimeUnixNano)
	b = c.key(b, "start_time_unix_nano")
	b = strconv.AppendUint(b, s.StartTimeUnixNano, 10)
	b = c.key(b, "end_time_unix_nano")
	b = strconv.AppendUint(b, s.EndTimeUnixNano, 10)
	b = c.key(b, "duration_ns")
	b = strconv.AppendUint(b, s.Duration(), 10)
	b = c.key(b, "status")
	b = appendEnum(b, int32(s.StatusCode), s.StatusCode.String())
	b = appendStrField(b, &c, "status_message", s.StatusMessage)
	b = appendStrField(b, &c, "trace_state", s.TraceState)
	b = appendUintField(b, &c, "flags", uint64(s.Flags))
	b = c.key(b, "attributes")
	b = appendAttrsObject(b, s.Attributes)
	b = c.key(b, "resource")
	b = appendAttrsObject(b, resAttrs)
	if s.Resource != nil {
		b = appendStrField(b, &c, "resource_schema_url", s.Resource.SchemaURL)
		b = appendUintField(b, &c, "resource_dropped_attributes_count", uint64(s.Resource.DroppedAttributesCount))
	}
	if sc := s.Scope; sc != nil && (sc.Name != "" || sc.Version != "" || len(sc.Attributes) > 0 || sc.SchemaURL != "" || sc.DroppedAttributesCount != 0) {
		b = c.key(b, "scope")
		b = append(b, '{')
		c2 := comma{}
		b = appendStrField(b, &c2, "name", sc.Name)
		b = appendStrField(b, &c2, "version", sc.Version)
		if len(sc.Attributes) > 0 {
			b = c2.key(b, "attributes")
			b = appendAttrsObject(b, sc.Attributes)
		}
		b = appendStrField(b, &c2, "schema_url", sc.SchemaURL)
		b = appendUintField(b, &c2, "dropped_attributes_count", uint64(sc.DroppedAttributesCount))
		b = append(b, '}')
	}
	b = c.key(b, "events")
	b = append(b, '[')
	for i := range s.Events {
		e := &s.Events[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		ec := comma{}
		b = ec.key(b, "time")
		b = appendRFC3339(b, e.TimeUnixNano)
		b = ec.key(b, "time_unix_nano")
		b = strconv.AppendUint(b, e.TimeUnixNano, 10)
		b = ec.key(b, "name")
		b = appendJSONString(b, e.Name)
		b = ec.key(b, "attributes")
		b = appendAttrsObject(b, e.Attributes)
		b = appendUintField(b, &ec, "dropped_attributes_count", uint64(e.DroppedAttributesCount))
		b = append(b, '}')
	}
	b = append(b, ']')
	b = c.key(b, "links")
	b = append(b, '[')
	for i := range s.Links {
		l := &s.Links[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		lc := comma{}
		b = appendHexField(b, &lc, "trace_id", l.TraceID[:])
		b = appendHexField(b, &lc, "span_id", l.SpanID[:])
		b = appendStrField(b, &lc, "trace_state", l.TraceState)
		b = appendUintField(b, &lc, "flags", uint64(l.Flags))
		b = lc.key(b, "attributes")
		b = appendAttrsObject(b, l.Attributes)
		b = appendUintField(b, &lc, "dropped_attributes_count", uint64(l.DroppedAttributesCount))
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendUintField(b, &c, "dropped_attributes_count", uint64(s.DroppedAttributesCount))
	b = appendUintField(b, &c, "dropped_events_count", uint64(s.DroppedEventsCount))
	b = appendUintField(b, &c, "dropped_links_count", uint64(s.DroppedLinksCount))
	if l := s.LLM; l != nil && !native {
		b = c.key(b, "llm")
		b = appendLLMJSON(b, l)
	}
	return append(b, '}')
}

var costSourceNames = [...]string{model.CostNone: "none", model.CostClient: "client", model.CostComputed: "computed"}

// appendLLMJSON writes the LLM fields the server derived at ingest (the API
// span JSON's "llm" member): strings when set, token counts when reported
// (not negative), the cost in USD with where it came from.
func appendLLMJSON(b []byte, l *model.LLM) []byte {
	b = append(b, '{')
	c := comma{}
	b = appendStrField(b, &c, "provider", l.Provider)
	b = appendStrField(b, &c, "model", l.Model())
	b = appendStrField(b, &c, "request_model", l.RequestModel)
	b = appendStrField(b, &c, "response_model", l.ResponseModel)
	b = appendStrField(b, &c, "operation", l.Operation)
	b = appendStrField(b, &c, "session_id", l.SessionID)
	b = appendStrField(b, &c, "user_id", l.UserID)
	b = appendStrField(b, &c, "agent", l.AgentName)
	b = appendStrField(b, &c, "tool", l.ToolName)
	for _, t := range []struct {
		k string
		v int64
	}{{"input_tokens", l.InputTokens}, {"output_tokens", l.OutputTokens}, {"cache_read_tokens", l.CacheReadTokens},
		{"cache_creation_tokens", l.CacheCreationTokens}, {"reasoning_tokens", l.ReasoningTokens}} {
		if t.v >= 0 {
			b = c.key(b, t.k)
			b = strconv.AppendInt(b, t.v, 10)
		}
	}
	b = appendUintField(b, &c, "time_to_first_token_ns", l.TimeToFirstTokenNanos)
	b = c.key(b, "counted")
	b = strconv.AppendBool(b, l.Counted)
	if int(l.CostSource) < len(costSourceNames) && l.CostSource != model.CostNone {
		b = c.key(b, "cost_usd")
		b = strconv.AppendFloat(b, float64(l.CostNanoUSD)/1e9, 'f', -1, 64)
		b = c.key(b, "cost_source")
		b = appendJSONString(b, costSourceNames[l.CostSource])
	}
	return append(b, '}')
}

func hasKey(kvs []model.KeyValue, key string) bool {
	_, ok := model.Lookup(kvs, key)
	return ok
}

// appendEnum writes a known enum value by name and an unknown one as its number.
func appendEnum(b []byte, v int32, name string) []byte {
	if name == "unknown" {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return appendJSONString(b, name)
}

func appendRFC3339(b []byte, ns uint64) []byte {
	t := time.Unix(int64(ns/1e9), int64(ns%1e9)).UTC()
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func appendAttrsObject(b []byte, kvs []model.KeyValue) []byte {
	b = append(b, '{')
	for i := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, kvs[i].Key)
		b = append(b, ':')
		b = appendValueJSON(b, &kvs[i].Value)
	}
	return append(b, '}')
}

// appendValueJSON writes an attribute value in the API shape.
func appendValueJSON(b []byte, v *model.Value) []byte {
	switch v.Type {
	case model.ValueString:
		return appendJSONString(b, v.Str)
	case model.ValueBool:
		return strconv.AppendBool(b, v.Bool())
	case model.ValueInt:
		return strconv.AppendInt(b, v.Int, 10)
	case model.ValueDouble:
		return appendJSONFloat(b, v.Double, true)
	case model.ValueBytes:
		b = append(b, `{"bytes":"`...)
		b = base64.StdEncoding.AppendEncode(b, bytesOf(v.Str))
		return append(b, `"}`...)
	case model.ValueArray:
		b = append(b, '[')
		elems := v.Elems()
		for i := range elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValueJSON(b, &elems[i])
		}
		return append(b, ']')
	case model.ValueKvList:
		return appendAttrsObject(b, v.Fields())
	}
	return append(b, "null"...)
}
