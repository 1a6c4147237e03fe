// Package model defines Rastro's span model: the one in-memory shape that every
// receiver decodes into, the engine stores, and every query surface reads.
package model

import (
	"encoding/hex"
	"errors"
	"strconv"
)

// TraceID is a 16-byte W3C trace id.
type TraceID [16]byte

// SpanID is an 8-byte W3C span id.
type SpanID [8]byte

// IsZero reports whether every byte of the id is zero (an invalid id).
func (t TraceID) IsZero() bool { return t == TraceID{} }

// IsZero reports whether every byte of the id is zero (an invalid id, or "no parent").
func (s SpanID) IsZero() bool { return s == SpanID{} }

// String returns the id as 32 lowercase hex digits.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// String returns the id as 16 lowercase hex digits.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// ParseTraceID parses 32 hex digits (either case). The all-zero id is rejected.
func ParseTraceID(s string) (TraceID, error) {
	var t TraceID
	if len(s) != 32 {
		return t, errors.New("trace id must be 32 hex digits, got " + strconv.Itoa(len(s)) + " characters")
	}
	if _, err := hex.Decode(t[:], []byte(s)); err != nil {
		return t, errors.New("trace id is not hex: " + quoteShort(s))
	}
	if t.IsZero() {
		return t, errors.New("trace id is all zeros")
	}
	return t, nil
}

// SpanKind mirrors OTLP's Span.SpanKind enum values.
type SpanKind int32

const (
	KindUnspecified SpanKind = 0
	KindInternal    SpanKind = 1
	KindServer      SpanKind = 2
	KindClient      SpanKind = 3
	KindProducer    SpanKind = 4
	KindConsumer    SpanKind = 5
)

var kindNames = [...]string{"unspecified", "internal", "server", "client", "producer", "consumer"}

// String returns the lowercase name used by the API and TraceQL ("server", ...).
func (k SpanKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// ParseSpanKind maps a lowercase kind name back to its value.
func ParseSpanKind(s string) (SpanKind, bool) {
	for i, n := range kindNames {
		if n == s {
			return SpanKind(i), true
		}
	}
	return 0, false
}

// StatusCode mirrors OTLP's Status.StatusCode enum values.
type StatusCode int32

const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

var statusNames = [...]string{"unset", "ok", "error"}

// String returns "unset", "ok" or "error".
func (c StatusCode) String() string {
	if c >= 0 && int(c) < len(statusNames) {
		return statusNames[c]
	}
	return "unknown"
}

// ParseStatusCode maps "unset", "ok" or "error" back to its value.
func ParseStatusCode(s string) (StatusCode, bool) {
	for i, n := range statusNames {
		if n == s {
			return StatusCode(i), true
		}
	}
	return 0, false
}

// Resource is the entity that produced a span (OTLP Resource plus the schema
// URL of its ResourceSpans). Spans decoded from one ResourceSpans share one
// *Resource; treat it as immutable once built.
type Resource struct {
	Attributes             []KeyValue
	DroppedAttributesCount uint32
	SchemaURL              string
}

// Scope is the instrumentation scope (OTLP InstrumentationScope plus the
// schema URL of its ScopeSpans). Shared and immutable like Resource.
type Scope struct {
	Name                   string
	Version                string
	Attributes             []KeyValue
	DroppedAttributesCount uint32
	SchemaURL              string
}

// Event is a timestamped annotation on a span.
type Event struct {
	TimeUnixNano           uint64
	Name                   string
	Attributes             []KeyValue
	DroppedAttributesCount uint32
}

// Link points from a span to another span, possibly in another trace.
type Link struct {
	TraceID                TraceID
	SpanID                 SpanID
	TraceState             string
	Attributes             []KeyValue
	DroppedAttributesCount uint32
	Flags                  uint32
}

// Span is one stored span. Field meanings follow OTLP's Span message; Service
// is derived from the resource's service.name (see Normalize).
type Span struct {
	TraceID      TraceID
	SpanID       SpanID
	ParentSpanID SpanID // zero for a root span
	TraceState   string
	Flags        uint32

	Name              string
	Kind              SpanKind
	StartTimeUnixNano uint64
	EndTimeUnixNano   uint64

	Attributes             []KeyValue
	DroppedAttributesCount uint32
	Events                 []Event
	DroppedEventsCount     uint32
	Links                  []Link
	DroppedLinksCount      uint32

	StatusCode    StatusCode
	StatusMessage string

	Resource *Resource
	Scope    *Scope

	// Service is resource attribute service.name, or "unknown_service" when absent.
	Service string

	// LLM holds normalised LLM fields, derived at ingest from the attributes
	// (nil for spans without LLM information). It is derived data: decoders
	// leave it nil and the engine fills it before storing.
	LLM *LLM
}

// Duration returns end minus start in nanoseconds (never negative once normalised).
func (s *Span) Duration() uint64 {
	if s.EndTimeUnixNano < s.StartTimeUnixNano {
		return 0
	}
	return s.EndTimeUnixNano - s.StartTimeUnixNano
}

// IsRoot reports whether the span has no parent.
func (s *Span) IsRoot() bool { return s.ParentSpanID.IsZero() }

// Attr returns the span attribute named key.
func (s *Span) Attr(key string) (Value, bool) { return Lookup(s.Attributes, key) }

// ResourceAttr returns the resource attribute named key.
func (s *Span) ResourceAttr(key string) (Value, bool) {
	if s.Resource == nil {
		return Value{}, false
	}
	return Lookup(s.Resource.Attributes, key)
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return "\"" + s + "\""
}
