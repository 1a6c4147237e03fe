package model

import (
	"encoding/hex"
	"errors"
	"strconv"
)

// SeverityNumber is OTLP's log severity (logs.proto SeverityNumber): 0 is
// unspecified, 1-4 TRACE, 5-8 DEBUG, 9-12 INFO, 13-16 WARN, 17-20 ERROR,
// 21-24 FATAL. The wire enum is open, so other values are kept as sent.
type SeverityNumber int32

// severityNames are the short names of the six ranges, TRACE first.
var severityNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

// String gives the range name and its step within the range as the data model
// spells it ("INFO", "INFO2", ... "FATAL4"), "UNSPECIFIED" for 0 and the
// number for values outside 0-24.
func (n SeverityNumber) String() string {
	switch {
	case n == 0:
		return "UNSPECIFIED"
	case n < 0 || n > 24:
		return strconv.Itoa(int(n))
	}
	name := severityNames[(n-1)/4]
	if step := (n-1)%4 + 1; step > 1 {
		return name + strconv.Itoa(int(step))
	}
	return name
}

// LogRecord is one decoded OTLP log record (logs.proto LogRecord) with its
// resource and scope, which are shared by the records of one
// ResourceLogs/ScopeLogs as a Span's are.
type LogRecord struct {
	// TimeUnixNano is when the event happened, 0 when the source did not
	// know; ObservedTimeUnixNano is when a collector or SDK saw it.
	TimeUnixNano         uint64
	ObservedTimeUnixNano uint64

	SeverityNumber SeverityNumber
	SeverityText   string
	// EventName names the class of event the record reports ("" for a plain log).
	EventName string

	// Body is any AnyValue: a string for most logs, a map for structured ones.
	Body                   Value
	Attributes             []KeyValue
	DroppedAttributesCount uint32

	// Flags holds the W3C trace flags in its low byte.
	Flags uint32
	// TraceID and SpanID tie the record to a span; zero when absent.
	TraceID TraceID
	SpanID  SpanID

	Resource *Resource
	Scope    *Scope

	// Service is resource attribute service.name, or UnknownService.
	Service string
}

// Time is the record's time for ordering and windows: TimeUnixNano, or the
// observed time when the source did not set one (the data model's rule).
func (r *LogRecord) Time() uint64 {
	if r.TimeUnixNano != 0 {
		return r.TimeUnixNano
	}
	return r.ObservedTimeUnixNano
}

// NormalizeLog repairs a decoded log record in place as Normalize does a
// span: a non-empty Service and valid UTF-8 in every string the record owns.
// The resource and scope are normalised separately, once each.
func NormalizeLog(r *LogRecord, p *Problems) {
	r.Service = ""
	if r.Resource != nil {
		if v, ok := Lookup(r.Resource.Attributes, "service.name"); ok && v.Type == ValueString && v.Str != "" {
			r.Service = v.Str
		}
	}
	if r.Service == "" {
		r.Service = UnknownService
		p.MissingService++
	}
	bad := false
	fix(&r.SeverityText, &bad)
	fix(&r.EventName, &bad)
	fixValue(&r.Body, &bad)
	fixKVs(r.Attributes, &bad)
	if bad {
		p.InvalidUTF8++
	}
}

// ParseSpanID parses 16 hex digits (either case). The all-zero id is rejected.
func ParseSpanID(s string) (SpanID, error) {
	var id SpanID
	if len(s) != 16 {
		return id, errors.New("span id must be 16 hex digits, got " + strconv.Itoa(len(s)) + " characters")
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, errors.New("span id is not hex: " + quoteShort(s))
	}
	if id.IsZero() {
		return id, errors.New("span id is all zeros")
	}
	return id, nil
}
