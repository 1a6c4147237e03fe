package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// EncodeJSON encodes spans as one ExportTraceServiceRequest in OTLP/JSON,
// grouped like EncodeProto: lowerCamelCase keys, hex ids, 64-bit integers as
// strings, enums as integers, default values omitted.
func EncodeJSON(spans []model.Span) []byte {
	b := []byte(`{"resourceSpans":[`)
	for gi, g := range groupSpans(spans) {
		if gi > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		c := comma{}
		if g.res != nil {
			if len(g.res.Attributes) > 0 || g.res.DroppedAttributesCount != 0 {
				b = c.key(b, "resource")
				b = append(b, '{')
				rc := comma{}
				b = appendOTLPKVsField(b, &rc, "attributes", g.res.Attributes)
				b = appendUintField(b, &rc, "droppedAttributesCount", uint64(g.res.DroppedAttributesCount))
				b = append(b, '}')
			}
		}
		b = c.key(b, "scopeSpans")
		b = append(b, '[')
		for si, sg := range g.scopes {
			if si > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			sc := comma{}
			if s := sg.scope; s != nil && (s.Name != "" || s.Version != "" || len(s.Attributes) > 0 || s.DroppedAttributesCount != 0) {
				b = sc.key(b, "scope")
				b = append(b, '{')
				c2 := comma{}
				b = appendStrField(b, &c2, "name", s.Name)
				b = appendStrField(b, &c2, "version", s.Version)
				b = appendOTLPKVsField(b, &c2, "attributes", s.Attributes)
				b = appendUintField(b, &c2, "droppedAttributesCount", uint64(s.DroppedAttributesCount))
				b = append(b, '}')
			}
			b = sc.key(b, "spans")
			b = append(b, '[')
			for k, i := range sg.spans {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendOTLPSpan(b, &spans[i])
			}
			b = append(b, ']')
			if sg.scope != nil {
				b = appendStrField(b, &sc, "schemaUrl", sg.scope.SchemaURL)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
		if g.res != nil {
			b = appendStrField(b, &c, "schemaUrl", g.res.SchemaURL)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// comma writes the separators and keys of one JSON object.
type comma struct{ n int }

func (c *comma) key(b []byte, k string) []byte {
	if c.n > 0 {
		b = append(b, ',')
	}
	c.n++
	b = appendJSONString(b, k)
	return append(b, ':')
}

func appendStrField(b []byte, c *comma, k, v string) []byte {
	if v == "" {
		return b
	}
	b = c.key(b, k)
	return appendJSONString(b, v)
}

func appendUintField(b []byte, c *comma, k string, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = c.key(b, k)
	return strconv.AppendUint(b, v, 10)
}

// appendUint64StrField writes a 64-bit integer as a string, as proto3 JSON does.
func appendUint64StrField(b []byte, c *comma, k string, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = c.key(b, k)
	b = append(b, '"')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '"')
}

func appendHexField(b []byte, c *comma, k string, id []byte) []byte {
	b = c.key(b, k)
	b = append(b, '"')
	b = hex.AppendEncode(b, id)
	return append(b, '"')
}

func appendOTLPSpan(b []byte, s *model.Span) []byte {
	b = append(b, '{')
	c := comma{}
	b = appendHexField(b, &c, "traceId", s.TraceID[:])
	b = appendHexField(b, &c, "spanId", s.SpanID[:])
	b = appendStrField(b, &c, "traceState", s.TraceState)
	if !s.ParentSpanID.IsZero() {
		b = appendHexField(b, &c, "parentSpanId", s.ParentSpanID[:])
	}
	b = appendUintField(b, &c, "flags", uint64(s.Flags))
	b = appendStrField(b, &c, "name", s.Name)
	if s.Kind != 0 {
		b = c.key(b, "kind")
		b = strconv.AppendInt(b, int64(s.Kind), 10)
	}
	b = appendUint64StrField(b, &c, "startTimeUnixNano", s.StartTimeUnixNano)
	b = appendUint64StrField(b, &c, "endTimeUnixNano", s.EndTimeUnixNano)
	b = appendOTLPKVsField(b, &c, "attributes", s.Attributes)
	b = appendUintField(b, &c, "droppedAttributesCount", uint64(s.DroppedAttributesCount))
	if len(s.Events) > 0 {
		b = c.key(b, "events")
		b = append(b, '[')
		for i := range s.Events {
			e := &s.Events[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			ec := comma{}
			b = appendUint64StrField(b, &ec, "timeUnixNano", e.TimeUnixNano)
			b = appendStrField(b, &ec, "name", e.Name)
			b = appendOTLPKVsField(b, &ec, "attributes", e.Attributes)
			b = appendUintField(b, &ec, "droppedAttributesCount", uint64(e.DroppedAttributesCount))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendUintField(b, &c, "droppedEventsCount", uint64(s.DroppedEventsCount))
	if len(s.Links) > 0 {
		b = c.key(b, "links")
		b = append(b, '[')
		for i := range s.Links {
			l := &s.Links[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			lc := comma{}
			b = appendHexField(b, &lc, "traceId", l.TraceID[:])
			b = appendHexField(b, &lc, "spanId", l.SpanID[:])
			b = appendStrField(b, &lc, "traceState", l.TraceState)
			b = appendOTLPKVsField(b, &lc, "attributes", l.Attributes)
			b = appendUintField(b, &lc, "droppedAttributesCount", uint64(l.DroppedAttributesCount))
			b = appendUintField(b, &lc, "flags", uint64(l.Flags))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendUintField(b, &c, "droppedLinksCount", uint64(s.DroppedLinksCount))
	if s.StatusMessage != "" || s.StatusCode != 0 {
		b = c.key(b, "status")
		b = append(b, '{')
		sc := comma{}
		b = appendStrField(b, &sc, "message", s.StatusMessage)
		if s.StatusCode != 0 {
			b = sc.key(b, "code")
			b = strconv.AppendInt(b, int64(s.StatusCode), 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendOTLPKVsField(b []byte, c *comma, k string, kvs []model.KeyValue) []byte {
	if len(kvs) == 0 {
		return b
	}
	b = c.key(b, k)
	return appendOTLPKVs(b, kvs)
}

func appendOTLPKVs(b []byte, kvs []model.KeyValue) []byte {
	b = append(b, '[')
	for i := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, kvs[i].Key)
		if kvs[i].Value.Type != model.ValueEmpty {
			b = append(b, `,"value":`...)
			b = appendOTLPValue(b, &kvs[i].Value)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendOTLPValue writes an AnyValue object.
func appendOTLPValue(b []byte, v *model.Value) []byte {
	switch v.Type {
	case model.ValueString:
		b = append(b, `{"stringValue":`...)
		b = appendJSONString(b, v.Str)
	case model.ValueBool:
		b = append(b, `{"boolValue":`...)
		b = strconv.AppendBool(b, v.Bool())
	case model.ValueInt:
		b = append(b, `{"intValue":"`...)
		b = strconv.AppendInt(b, v.Int, 10)
		b = append(b, '"')
	case model.ValueDouble:
		b = append(b, `{"doubleValue":`...)
		b = appendJSONFloat(b, v.Double, false)
	case model.ValueBytes:
		b = append(b, `{"bytesValue":"`...)
		b = base64.StdEncoding.AppendEncode(b, bytesOf(v.Str))
		b = append(b, '"')
	case model.ValueArray:
		b = append(b, `{"arrayValue":{`...)
		if elems := v.Elems(); len(elems) > 0 {
			b = append(b, `"values":[`...)
			for i := range elems {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendOTLPValue(b, &elems[i])
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	case model.ValueKvList:
		b = append(b, `{"kvlistValue":{`...)
		if fields := v.Fields(); len(fields) > 0 {
			b = append(b, `"values":`...)
			b = appendOTLPKVs(b, fields)
		}
		b = append(b, '}')
	default:
		b = append(b, '{')
	}
	return append(b, '}')
}

// appendJSONFloat writes a double. Non-finite values become the strings
// "NaN", "Infinity", "-Infinity". With markDouble, integral values get a
// ".0" so that a reader telling ints from doubles by their text reads a double.
func appendJSONFloat(b []byte, f float64, markDouble bool) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	if markDouble {
		for _, c := range b[start:] {
			if c == '.' || c == 'e' {
				return b
			}
		}
		b = append(b, ".0"...)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// the output is always valid JSON; U+2028 and U+2029 are escaped for
// JavaScript consumers.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
