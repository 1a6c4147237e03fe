package model

import (
	"strings"
	"unicode/utf8"
)

// UnknownService is the service name given to spans whose resource has no
// service.name, following the OTel SDK convention.
const UnknownService = "unknown_service"

// Problems counts what Normalize had to repair. Receivers add these to
// /metrics; nothing about a repaired span is rejected.
type Problems struct {
	EndBeforeStart int // end time earlier than start time: end set to start
	MissingService int // no service.name on the resource: Service set to UnknownService
	InvalidUTF8    int // a string held invalid UTF-8: bad bytes replaced by U+FFFD
}

// Add accumulates o into p.
func (p *Problems) Add(o Problems) {
	p.EndBeforeStart += o.EndBeforeStart
	p.MissingService += o.MissingService
	p.InvalidUTF8 += o.InvalidUTF8
}

// Normalize repairs a decoded span in place so that the rest of the system can
// rely on: EndTimeUnixNano >= StartTimeUnixNano, a non-empty Service, and
// valid UTF-8 in every string the span owns. Resource and Scope are shared
// between spans and are normalised separately by NormalizeResource and
// NormalizeScope, which the decoders call once per ResourceSpans/ScopeSpans.
func Normalize(s *Span, p *Problems) {
	if s.EndTimeUnixNano < s.StartTimeUnixNano {
		s.EndTimeUnixNano = s.StartTimeUnixNano
		p.EndBeforeStart++
	}
	s.Service = ""
	if s.Resource != nil {
		if v, ok := Lookup(s.Resource.Attributes, "service.name"); ok && v.Type == ValueString && v.Str != "" {
			s.Service = v.Str
		}
	}
	if s.Service == "" {
		s.Service = UnknownService
		p.MissingService++
	}
	bad := false
	fix(&s.Name, &bad)
	fix(&s.TraceState, &bad)
	fix(&s.StatusMessage, &bad)
	fixKVs(s.Attributes, &bad)
	for i := range s.Events {
		fix(&s.Events[i].Name, &bad)
		fixKVs(s.Events[i].Attributes, &bad)
	}
	for i := range s.Links {
		fix(&s.Links[i].TraceState, &bad)
		fixKVs(s.Links[i].Attributes, &bad)
	}
	if bad {
		p.InvalidUTF8++
	}
}

// NormalizeResource repairs invalid UTF-8 in a resource; call it once per
// decoded resource, before Normalize runs on its spans.
func NormalizeResource(r *Resource, p *Problems) {
	bad := false
	fixKVs(r.Attributes, &bad)
	fix(&r.SchemaURL, &bad)
	if bad {
		p.InvalidUTF8++
	}
}

// NormalizeScope repairs invalid UTF-8 in an instrumentation scope.
func NormalizeScope(s *Scope, p *Problems) {
	bad := false
	fix(&s.Name, &bad)
	fix(&s.Version, &bad)
	fix(&s.SchemaURL, &bad)
	fixKVs(s.Attributes, &bad)
	if bad {
		p.InvalidUTF8++
	}
}

func fix(s *string, bad *bool) {
	if !utf8.ValidString(*s) {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
		*bad = true
	}
}

func fixKVs(kvs []KeyValue, bad *bool) {
	for i := range kvs {
		fix(&kvs[i].Key, bad)
		fixValue(&kvs[i].Value, bad)
	}
}

// fixValue repairs strings in place. A ValueRef's Str is a binary hash, not
// text, and is left alone (decoders never produce refs anyway).
func fixValue(v *Value, bad *bool) {
	switch v.Type {
	case ValueString:
		fix(&v.Str, bad)
	case ValueArray:
		elems := v.Elems()
		for i := range elems {
			fixValue(&elems[i], bad)
		}
	case ValueKvList:
		fixKVs(v.Fields(), bad)
	}
}
