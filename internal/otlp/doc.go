// Package otlp decodes trace export requests into model spans and encodes
// spans back: OTLP protobuf (DecodeProto, EncodeProto), OTLP/JSON (DecodeJSON,
// EncodeJSON), and Rastro's native JSON (DecodeNative, EncodeNative,
// AppendSpanJSON).
//
// Every decoder runs model.NormalizeResource and model.NormalizeScope once per
// resource and scope and model.Normalize on every span, and returns what they
// repaired in Batch.Problems. A span with invalid ids is not returned: it is
// counted in Batch.Rejected and the rest of the request is kept. Input that
// cannot be decoded returns an *Error with the field path and byte offset, and
// no spans. No input makes a decoder panic. Attribute values may nest (arrays
// and kvlists inside each other) at most 100 levels below the attribute, the
// limit of the segment format; a deeper value fails the request with an *Error
// whose Path names the attribute.
//
// # Native JSON
//
// The native route takes a JSON array of flat spans (a single object is
// refused). Field names are snake_case; unknown fields are ignored:
//
//	[{
//	  "trace_id": "5b8efff798038103d269b633813fc60c",  // 32 hex digits, required
//	  "span_id": "eee19b7ec3c1b174",                   // 16 hex digits, required
//	  "parent_span_id": "eee19b7ec3c1b173",            // optional; absent or "" for a root span
//	  "name": "GET /users/{id}",
//	  "kind": "server",           // unspecified|internal|server|client|producer|consumer, or the OTLP integer
//	  "start_time": "2026-01-02T15:04:05.123456789Z",  // required: RFC 3339, or integer Unix nanoseconds
//	  "end_time": "2026-01-02T15:04:05.2Z",            // same forms; or instead:
//	  "duration_ns": 76543211,                         // used when end_time is absent (neither: zero duration)
//	  "service": "api",           // becomes resource attribute service.name
//	  "status": "error",          // unset|ok|error, or the OTLP integer
//	  "status_message": "timeout",
//	  "trace_state": "vendor=1",
//	  "flags": 1,
//	  "attributes": {"http.response.status_code": 504, "retry": true, "tags": ["a", "b"], "ratio": 0.5},
//	  "resource": {"deployment.environment": "prod"},
//	  "resource_schema_url": "https://opentelemetry.io/schemas/1.26.0",
//	  "scope": {"name": "my-lib", "version": "1.2.0", "attributes": {}, "schema_url": ""},
//	  "events": [{"time": "2026-01-02T15:04:05.15Z", "name": "retry", "attributes": {"attempt": 2}}],
//	  "links": [{"trace_id": "...", "span_id": "...", "trace_state": "", "flags": 0, "attributes": {}}],
//	  "dropped_attributes_count": 0, "dropped_events_count": 0, "dropped_links_count": 0
//	}]
//
// Also accepted: start_time_unix_nano, end_time_unix_nano and events' time_unix_nano
// (aliases of start_time, end_time and time), resource_dropped_attributes_count,
// and dropped_attributes_count inside scope, events and links.
//
// Attribute values map from JSON as: string -> string, true/false -> bool,
// integer literal within int64 -> int, any other number -> double,
// array -> array, object -> kvlist (key order kept), null -> empty value.
//
// When "service" is given the resource is service.name followed by the
// "resource" attributes (a service.name among them is dropped); otherwise it is
// the "resource" attributes as given, and the span's service is taken from
// their service.name or is "unknown_service". Spans with equal service,
// resource and resource_schema_url share one *model.Resource; equal scopes share
// one *model.Scope.
//
// A span is rejected (counted, not stored, the others kept) when an id is not
// hex, has the wrong length or is all zeros, or start_time is missing. A body
// that is not valid JSON, or a field of the wrong JSON type, fails the request.
//
// # API span JSON
//
// AppendSpanJSON writes a span the way the query API returns it: the native
// shape above, always with "service", "start_time" (RFC 3339, nanoseconds,
// UTC), "start_time_unix_nano", "end_time_unix_nano" and "duration_ns" as
// integers, "kind" and "status" as names (the integer when the value is not a
// known enum), "attributes", "resource", "events" and "links" (possibly empty),
// and "parent_span_id", "status_message", "trace_state", "flags", "scope",
// "resource_schema_url" and dropped counts only when set. Integers are exact
// JSON numbers; doubles are JSON numbers with a fraction or exponent (so 2.0
// is written "2.0"), or the strings "NaN", "Infinity", "-Infinity"; bytes
// are {"bytes": "<base64>"}; empty values are null. Strings with invalid UTF-8
// are written with U+FFFD, so the output is always valid JSON.
//
// EncodeNative writes a native body in this same shape, which DecodeNative
// reads back (see EncodeNative for what does not round-trip).
//
// # Memory
//
// Decoded strings (and bytes values) alias one private copy of the input made
// by each Decode call: the caller may reuse its buffer at once, and must treat
// decoded spans as immutable. The protobuf decoder counts spans, attributes,
// events and links first and allocates each backing array once per request.
package otlp
