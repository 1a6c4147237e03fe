package otlp

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
)

// The functions below let a store keep a resource, a scope or the free-form
// part of a log record in OTLP's own protobuf encoding (internal/logstore's
// segments do). The decoders alias b: strings share its memory.

// AppendResourceProto appends r as a protobuf Resource message.
func AppendResourceProto(b []byte, r *model.Resource) []byte { return appendResource(b, r) }

// DecodeResourceProto decodes a protobuf Resource message; SchemaURL is not
// part of it and stays empty.
func DecodeResourceProto(b []byte) (*model.Resource, error) {
	var d protoDecoder
	res := &model.Resource{}
	if err := d.resource(b, 0, res); err != nil {
		return nil, finish(err, "protobuf")
	}
	return res, nil
}

// AppendScopeProto appends s as a protobuf InstrumentationScope message.
func AppendScopeProto(b []byte, s *model.Scope) []byte { return appendScope(b, s) }

// DecodeScopeProto decodes a protobuf InstrumentationScope message.
func DecodeScopeProto(b []byte) (*model.Scope, error) {
	var d protoDecoder
	sc := &model.Scope{}
	if err := d.scope(b, 0, sc); err != nil {
		return nil, finish(err, "protobuf")
	}
	return sc, nil
}

// AppendLogPayloadProto appends the free-form fields of r (severity text,
// event name, body, attributes, dropped attribute count, flags) as a protobuf
// LogRecord message; times, severity number and ids are left out for the
// caller to store as columns.
func AppendLogPayloadProto(b []byte, r *model.LogRecord) []byte {
	b = appendStringField(b, 3, r.SeverityText)
	if r.Body.Type != model.ValueEmpty {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeValue(&r.Body)))
		b = appendValue(b, &r.Body)
	}
	b = appendKVs(b, 6, r.Attributes)
	b = appendVarintField(b, 7, uint64(r.DroppedAttributesCount))
	b = appendFixed32Field(b, 8, r.Flags)
	return appendStringField(b, 12, r.EventName)
}

// DecodeLogPayloadProto decodes what AppendLogPayloadProto wrote into r's
// free-form fields, leaving the others as they are.
func DecodeLogPayloadProto(b []byte, r *model.LogRecord) error {
	d := logsProtoDecoder{}
	if err := d.logRecord(b, 0, nil, nil, 0, 0, 0); err != nil {
		return finish(err, "protobuf")
	}
	if len(d.logs.Records) != 1 {
		return &Error{Format: "protobuf", Reason: "log payload carries ids"}
	}
	p := &d.logs.Records[0]
	r.SeverityText, r.EventName, r.Body = p.SeverityText, p.EventName, p.Body
	r.Attributes, r.DroppedAttributesCount, r.Flags = p.Attributes, p.DroppedAttributesCount, p.Flags
	return nil
}

// EncodeLogsProto encodes records as an ExportLogsServiceRequest, one
// ResourceLogs per run of records sharing a Resource pointer and one
// ScopeLogs per run sharing a Scope pointer (the grouping the decoders
// produce); with the decoders it round-trips every field.
func EncodeLogsProto(records []model.LogRecord) []byte {
	var out []byte
	for i := 0; i < len(records); {
		res := records[i].Resource
		j := i
		for j < len(records) && records[j].Resource == res {
			j++
		}
		var rl []byte
		if res != nil {
			rl = protowire.AppendTag(rl, 1, protowire.BytesType)
			rl = protowire.AppendBytes(rl, appendResource(nil, res))
		}
		for k := i; k < j; {
			sc := records[k].Scope
			m := k
			for m < j && records[m].Scope == sc {
				m++
			}
			var sl []byte
			if sc != nil {
				sl = protowire.AppendTag(sl, 1, protowire.BytesType)
				sl = protowire.AppendBytes(sl, appendScope(nil, sc))
			}
			for _, r := range records[k:m] {
				lr := appendFixed64Field(nil, 1, r.TimeUnixNano)
				lr = appendVarintField(lr, 2, uint64(int64(r.SeverityNumber)))
				lr = AppendLogPayloadProto(lr, &r)
				if !r.TraceID.IsZero() {
					lr = protowire.AppendTag(lr, 9, protowire.BytesType)
					lr = protowire.AppendBytes(lr, r.TraceID[:])
				}
				if !r.SpanID.IsZero() {
					lr = protowire.AppendTag(lr, 10, protowire.BytesType)
					lr = protowire.AppendBytes(lr, r.SpanID[:])
				}
				lr = appendFixed64Field(lr, 11, r.ObservedTimeUnixNano)
				sl = protowire.AppendTag(sl, 2, protowire.BytesType)
				sl = protowire.AppendBytes(sl, lr)
			}
			if sc != nil {
				sl = appendStringField(sl, 3, sc.SchemaURL)
			}
			rl = protowire.AppendTag(rl, 2, protowire.BytesType)
			rl = protowire.AppendBytes(rl, sl)
			k = m
		}
		if res != nil {
			rl = appendStringField(rl, 3, res.SchemaURL)
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, rl)
		i = j
	}
	return out
}

// AppendLogJSON appends one log record in Rastro's API JSON shape: times as
// RFC 3339 and as nanosecond strings, the severity as number and text, the
// body as the JSON form of its value (a string for most records), the
// attributes, resource and scope as objects, and the ids in hex.
func AppendLogJSON(b []byte, r *model.LogRecord) []byte {
	b = append(b, '{')
	c := comma{}
	t := r.Time()
	b = c.key(b, "time")
	b = appendRFC3339(b, t)
	b = c.key(b, "time_unix_nano")
	b = strconv.AppendUint(b, r.TimeUnixNano, 10)
	b = c.key(b, "observed_time_unix_nano")
	b = strconv.AppendUint(b, r.ObservedTimeUnixNano, 10)
	b = c.key(b, "severity_number")
	b = strconv.AppendInt(b, int64(r.SeverityNumber), 10)
	b = c.key(b, "severity")
	b = appendJSONString(b, r.SeverityNumber.String())
	b = appendStrField(b, &c, "severity_text", r.SeverityText)
	b = c.key(b, "service")
	b = appendJSONString(b, r.Service)
	b = appendStrField(b, &c, "event_name", r.EventName)
	b = c.key(b, "body")
	b = appendValueJSON(b, &r.Body)
	b = c.key(b, "attributes")
	b = appendAttrsObject(b, r.Attributes)
	if !r.TraceID.IsZero() {
		b = appendHexField(b, &c, "trace_id", r.TraceID[:])
	}
	if !r.SpanID.IsZero() {
		b = appendHexField(b, &c, "span_id", r.SpanID[:])
	}
	b = appendUintField(b, &c, "flags", uint64(r.Flags))
	b = appendUintField(b, &c, "dropped_attributes_count", uint64(r.DroppedAttributesCount))
	b = c.key(b, "resource")
	if r.Resource != nil {
		b = appendAttrsObject(b, r.Resource.Attributes)
	} else {
		b = append(b, "{}"...)
	}
	if sc := r.Scope; sc != nil && (sc.Name != "" || sc.Version != "") {
		b = c.key(b, "scope")
		b = append(b, '{')
		c2 := comma{}
		b = appendStrField(b, &c2, "name", sc.Name)
		b = appendStrField(b, &c2, "version", sc.Version)
		b = append(b, '}')
	}
	return append(b, '}')
}
