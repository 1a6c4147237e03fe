// Package query holds Rastro's query model: a span Filter, the index Hints
// derived from it, parsers for Grafana Tempo's TraceQL, and the parsing of
// HTTP API parameters and times.
//
// ParseTraceQL reads one spanset filter, matched span by span (below).
// ParseQuery reads whole queries: spanset and structural operators,
// pipelines and metrics functions, evaluated per trace (pipeline.go,
// metrics.go; docs/traceql.md).
//
// # Spanset filters
//
// `{ }` matches every span; `{ cond }` combines conditions with `&&`,
// `||`, `!` (negation) and parentheses; `&&` binds tighter than `||`.
// Conditions may use arithmetic (arith.go). The nested-set intrinsics are
// not supported and are reported as syntax errors.
//
// A condition is `field op value` or `value op field` (read as the field
// first, the operator mirrored), a bare attribute (`{ .a }` is
// `{ .a = true }`), or a comparison of two values, decided at parse time
// (`{ true }`, `{ 1 < 1h }`, `{ "a" =~ "a.*" }`, `{ nil = nil }`). Fields:
//
//	span.KEY      span attribute
//	resource.KEY  resource attribute
//	.KEY          span attribute if the span has it, else resource attribute
//	event.KEY     an attribute of one of the span's events
//	link.KEY      an attribute of one of the span's links
//	instrumentation.KEY   an attribute of the span's instrumentation scope
//	name, status, duration, kind, statusMessage   intrinsics
//	span:name, span:status, span:duration, span:kind, span:statusMessage
//	span:id, span:parentID, trace:id   ids as lowercase hex
//	event:name, event:timeSinceStart   of one of the span's events
//	link:traceID, link:spanID          of one of the span's links
//	instrumentation:name, instrumentation:version
//	traceDuration, rootName, rootServiceName   of the span's trace (also
//	              trace:duration, trace:rootName, trace:rootService); they
//	              hold only where a backend binds the trace (WithTraces)
//	content       full-text search (a Rastro extension, below)
//
// A condition on events or links holds when it holds for one of them; its
// `= nil` form holds when none has the key.
//
// Unquoted keys are letters, digits and `_ - . / @`; any other key is
// written quoted: span."my key". resource.service.name reads the resource's
// service.name attribute; when the resource has none it reads the span's
// Service (model.UnknownService after normalisation), so it agrees with
// the Service shortcut of Filter.
//
// Operators are = != > >= < <= =~ !~. Values are double-quoted strings
// (escapes \" \\ \n \t \r \b \f \a \v \/ \xHH \uXXXX \UXXXXXXXX), integers
// and floats (optionally negative, floats with exponent), true, false,
// durations (100ms, 1.5s, 2m, 1h, 10us, 10µs, 5ns, 1h30m), the status words
// ok, error, unset, the kind words unspecified, internal, server, client,
// producer, consumer, and nil.
//
// Semantics, following Tempo:
//   - Regular expressions are Go RE2 and fully anchored, as in Tempo since
//     2.7 (grafana/tempo#4329): `=~ "ab"` is `^(?s:ab)$`; use `=~ ".*ab.*"`
//     for a substring.
//   - A comparison against a missing attribute is false, for every operator
//     including != and !~ (grafana/tempo#5007). `= nil` is true when the
//     attribute is missing, `!= nil` when it is present (any type).
//   - A comparison between an attribute and a value of another type is
//     false, except that ints, doubles, integer literals, float literals and
//     durations (as nanoseconds) compare numerically. NaN compares false.
//   - Ordering operators on strings compare bytewise (lexically).
//   - Booleans, nil, status and kind allow only = and !=.
//   - Intrinsics are typed: name and statusMessage take strings, duration a
//     duration or integer nanoseconds, status and kind their words; other
//     combinations (`kind = banana`, `name = 5`) are syntax errors, as are
//     status or kind words compared with an attribute.
//   - `!(x)` is true exactly when x is false, so `!(span.a = 1)` matches spans
//     without span.a.
//
// Full-text search: `content = "words"` matches spans whose texts (LLM
// prompts and completions of every dialect, exception messages and stack
// traces, event attributes, the status message and long string attributes;
// see package text) contain every word, case- and accent-insensitively, with
// each quoted phrase as consecutive words inside one text. Quotes inside the
// string are escaped: `{ content = "refund \"order 42\"" &&
// resource.service.name = "support" }`. Only = with a string is allowed;
// any other operator or value type is a syntax error at its position, as is
// a string with no word or an unterminated inner quote. It combines with
// &&, || and ! like any condition. String renders the words in canonical
// form (lower case, accents removed): `content = "naive \"order 42\""`.
//
// Syntax errors are *SyntaxError values whose Pos is the 0-based byte offset
// of the offending token in the query.
package query
