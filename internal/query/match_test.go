package query

import (
	"math"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func kv(k string, v model.Value) model.KeyValue { return model.KeyValue{Key: k, Value: v} }

// fixture is a normalised server span of service "checkout" that lasted
// 150ms and failed.
func fixture() *model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{
		kv("service.name", model.StringValue("checkout")),
		kv("deployment.environment", model.StringValue("prod-eu")),
		kv("host.cpus", model.IntValue(8)),
		kv("shared", model.StringValue("from-resource")),
		kv("res.only", model.StringValue("r")),
	}}
	start := uint64(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	s := &model.Span{
		Name:              "GET /cart",
		Kind:              model.KindServer,
		StartTimeUnixNano: start,
		EndTimeUnixNano:   start + uint64(150*time.Millisecond),
		StatusCode:        model.StatusError,
		StatusMessage:     "upstream timeout",
		Resource:          res,
		Attributes: []model.KeyValue{
			kv("http.method", model.StringValue("GET")),
			kv("http.status_code", model.IntValue(503)),
			kv("ratio", model.DoubleValue(0.25)),
			kv("whole", model.DoubleValue(3)),
			kv("cache.hit", model.BoolValue(true)),
			kv("shared", model.StringValue("from-span")),
			kv("my key", model.StringValue("spaced")),
			kv("gen_ai.usage.input_tokens", model.IntValue(1200)),
			kv("http-route", model.StringValue("/cart/{id}")),
			kv("empty", model.StringValue("")),
			kv("nan", model.DoubleValue(math.NaN())),
			kv("neg", model.IntValue(-5)),
			kv("arr", model.ArrayValue([]model.Value{model.StringValue("a")})),
			kv("multi\nline", model.StringValue("q\"uote\\")),
			kv("big", model.IntValue(1<<62)),
			kv("dur", model.IntValue(int64(2*time.Second))),
		},
	}
	var p model.Problems
	model.Normalize(s, &p)
	return s
}

func TestMatchTable(t *testing.T) {
	s := fixture()
	cases := []struct {
		q    string
		want bool
	}{
		{`{ }`, true},
		{`{}`, true},
		// strings, every operator
		{`{ span.http.method = "GET" }`, true},
		{`{ span.http.method = "get" }`, false},
		{`{ span.http.method != "POST" }`, true},
		{`{ span.http.method != "GET" }`, false},
		{`{ span.http.method > "FOO" }`, true},
		{`{ span.http.method >= "GET" }`, true},
		{`{ span.http.method < "GET" }`, false},
		{`{ span.http.method <= "GET" }`, true},
		{`{ span.http.method < "POST" }`, true},
		{`{ span.http.method =~ "G.T" }`, true},
		{`{ span.http.method =~ "G" }`, false}, // anchored
		{`{ span.http.method =~ ".*E.*" }`, true},
		{`{ span.http.method =~ "GE|PO" }`, false}, // anchoring wraps alternation
		{`{ span.http.method =~ "GET|POST" }`, true},
		{`{ span.http.method !~ "P.*" }`, true},
		{`{ span.http.method !~ "G.*" }`, false},
		{`{ span.empty = "" }`, true},
		{`{ span.empty != "" }`, false},
		{`{ span."my key" = "spaced" }`, true},
		{`{ span."multi\nline" = "q\"uote\\" }`, true},
		{`{ span.http-route = "/cart/{id}" }`, true},
		{`{ span.http.method = "\u0047ET" }`, true},
		{`{ span.http.method = "\x47ET" }`, true},
		// ints, floats, int vs float
		{`{ span.http.status_code = 503 }`, true},
		{`{ span.http.status_code != 503 }`, false},
		{`{ span.http.status_code > 500 }`, true},
		{`{ span.http.status_code >= 503 }`, true},
		{`{ span.http.status_code < 503 }`, false},
		{`{ span.http.status_code <= 503 }`, true},
		{`{ span.http.status_code = 503.0 }`, true},
		{`{ span.http.status_code > 502.5 }`, true},
		{`{ span.http.status_code < 5.04e2 }`, true},
		{`{ span.ratio = 0.25 }`, true},
		{`{ span.ratio < 1 }`, true},
		{`{ span.ratio > 0 }`, true},
		{`{ span.whole = 3 }`, true},
		{`{ span.neg = -5 }`, true},
		{`{ span.neg < -4.5 }`, true},
		{`{ span.neg > 0 }`, false},
		{`{ span.big = 4611686018427387904 }`, true},
		{`{ span.big != 4611686018427387905 }`, true}, // exact int comparison
		{`{ span.gen_ai.usage.input_tokens >= 1000 }`, true},
		{`{ span.nan = 0 }`, false},
		{`{ span.nan != 0 }`, false},
		{`{ span.nan > -1.5 }`, false},
		// durations against an int attribute compare as nanoseconds
		{`{ span.dur = 2s }`, true},
		{`{ span.dur > 1500ms }`, true},
		// booleans
		{`{ span.cache.hit = true }`, true},
		{`{ span.cache.hit != true }`, false},
		{`{ span.cache.hit = false }`, false},
		{`{ span.cache.hit != false }`, true},
		// type mismatches are false, whatever the operator
		{`{ span.http.status_code = "503" }`, false},
		{`{ span.http.status_code != "503" }`, false},
		{`{ span.http.method = 1 }`, false},
		{`{ span.http.method != 1 }`, false},
		{`{ span.cache.hit = 1 }`, false},
		{`{ span.cache.hit != "true" }`, false},
		{`{ span.http.status_code =~ "5.*" }`, false},
		{`{ span.http.status_code !~ "5.*" }`, false},
		{`{ span.arr = "a" }`, false},
		{`{ span.arr != "a" }`, false},
		// missing attributes: every comparison is false, nil tests presence
		{`{ span.missing = "x" }`, false},
		{`{ span.missing != "x" }`, false},
		{`{ span.missing !~ "x" }`, false},
		{`{ span.missing < 5 }`, false},
		{`{ span.missing = nil }`, true},
		{`{ span.missing != nil }`, false},
		{`{ span.arr != nil }`, true},
		{`{ span.http.method = nil }`, false},
		{`{ !(span.missing = "x") }`, true},
		// scopes
		{`{ resource.deployment.environment = "prod-eu" }`, true},
		{`{ span.deployment.environment = "prod-eu" }`, false},
		{`{ .deployment.environment = "prod-eu" }`, true},
		{`{ resource.host.cpus = 8 }`, true},
		{`{ span.shared = "from-span" }`, true},
		{`{ resource.shared = "from-resource" }`, true},
		{`{ .shared = "from-span" }`, true}, // span wins
		{`{ .shared = "from-resource" }`, false},
		{`{ .res.only = "r" }`, true},
		{`{ resource.http.method = "GET" }`, false},
		{`{ resource.service.name = "checkout" }`, true},
		{`{ .service.name = "checkout" }`, true},
		{`{ resource.service.name =~ "check.*" }`, true},
		// intrinsics
		{`{ name = "GET /cart" }`, true},
		{`{ span:name = "GET /cart" }`, true},
		{`{ name =~ "GET .*" }`, true},
		{`{ name != "GET /cart" }`, false},
		{`{ status = error }`, true},
		{`{ span:status = error }`, true},
		{`{ status != ok }`, true},
		{`{ status = ok }`, false},
		{`{ status = unset }`, false},
		{`{ kind = server }`, true},
		{`{ span:kind = server }`, true},
		{`{ kind = client }`, false},
		{`{ kind != internal }`, true},
		{`{ kind = unspecified }`, false},
		{`{ duration = 150ms }`, true},
		{`{ duration > 100ms }`, true},
		{`{ span:duration > 100ms }`, true},
		{`{ duration >= 0.15s }`, true},
		{`{ duration < 1m }`, true},
		{`{ duration <= 149999us }`, false},
		{`{ duration > 1h }`, false},
		{`{ duration = 150000000 }`, true},
		{`{ duration > 149999999 }`, true},
		{`{ duration > 10µs }`, true},
		{`{ duration != 5ns }`, true},
		{`{ duration > -1 }`, true},
		{`{ duration < 1h30m }`, true},
		{`{ statusMessage = "upstream timeout" }`, true},
		{`{ span:statusMessage =~ ".*timeout" }`, true},
		{`{ statusMessage < "a" }`, false},
		// combinations, precedence, parentheses, negation
		{`{ status = ok || kind = server && name = "GET /cart" }`, true},
		{`{ status = ok || kind = client && name = "GET /cart" }`, false},
		{`{ (status = ok || kind = server) && name = "nope" }`, false},
		{`{ status = ok || kind = server && name = "nope" }`, false},
		{`{ kind = server && name = "nope" || status = error }`, true},
		{`{ kind = server && (name = "nope" || status = error) }`, true},
		{`{ ((kind = server)) }`, true},
		{`{ !(kind = server) }`, false},
		{`{ !kind = server }`, false},
		{`{ !!(kind = server) }`, true},
		{`{ !(status = ok || kind = client) && duration > 1ms }`, true},
		{`{ span.http.method="GET"&&span.http.status_code>=500 }`, true},
		{"{\n\tspan.http.method = \"GET\"\n}", true},
	}
	for _, c := range cases {
		e, err := ParseTraceQL(c.q)
		if err != nil {
			t.Errorf("ParseTraceQL(%s): %v", c.q, err)
			continue
		}
		if got := e.Match(s); got != c.want {
			t.Errorf("%s: Match = %v, want %v (canonical %s)", c.q, got, c.want, e)
		}
		// The canonical form must mean the same.
		e2, err := ParseTraceQL(e.String())
		if err != nil {
			t.Errorf("%s: re-parse of %s: %v", c.q, e, err)
			continue
		}
		if e2.Match(s) != c.want || e2.String() != e.String() {
			t.Errorf("%s: canonical %s re-parses to %s matching %v", c.q, e, e2, e2.Match(s))
		}
	}
}

func TestResourceServiceNameFallsBackToService(t *testing.T) {
	s := &model.Span{Name: "x", Resource: &model.Resource{}}
	var p model.Problems
	model.Normalize(s, &p)
	for q, want := range map[string]bool{
		`{ resource.service.name = "unknown_service" }`: true,
		`{ resource.service.name != nil }`:              true,
		`{ span.service.name = nil }`:                   true,
	} {
		e, err := ParseTraceQL(q)
		if err != nil {
			t.Fatal(err)
		}
		if e.Match(s) != want {
			t.Errorf("%s: Match = %v, want %v", q, !want, want)
		}
	}
}

func TestCanonicalString(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `{ }`},
		{`{span.a=1}`, `{ span.a = 1 }`},
		{`{ span:name = "x" }`, `{ name = "x" }`},
		{`{ .a = 1.0 }`, `{ .a = 1.0 }`},
		{`{ .a = 1e6 }`, `{ .a = 1e+06 }`},
		{`{ .a = -2.5 }`, `{ .a = -2.5 }`},
		{`{ duration > 1500ms }`, `{ duration > 1.5s }`},
		{`{ duration > 90m }`, `{ duration > 1h30m0s }`},
		{`{ duration > 10us }`, `{ duration > 10µs }`},
		{`{ span."my key" = "a\"b" }`, `{ span."my key" = "a\"b" }`},
		{`{ span."plain" = "\x41\u00e9\n" }`, "{ span.plain = \"A\u00e9\\n\" }"},
		{`{ (kind = server || kind = client) && status = error }`, `{ (kind = server || kind = client) && status = error }`},
		{`{ kind = server || kind = client && status = error }`, `{ kind = server || kind = client && status = error }`},
		{`{ (kind = server && status = ok) || name = "x" }`, `{ kind = server && status = ok || name = "x" }`},
		{`{ !(kind = server) }`, `{ !(kind = server) }`},
		{`{ !kind = server && name = "a" }`, `{ !(kind = server) && name = "a" }`},
		{`{ span.x = nil && .y != nil }`, `{ span.x = nil && .y != nil }`},
		{`{ span.b = true || span.b = false }`, `{ span.b = true || span.b = false }`},
	}
	for _, c := range cases {
		e, err := ParseTraceQL(c.in)
		if err != nil {
			t.Errorf("ParseTraceQL(%s): %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("String(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestMatchEventsLinksScopeAndConstants: Tempo's event., link. and
// instrumentation. scopes and span-level intrinsics, conditions with the
// value first, bare attributes and constant conditions.
func TestMatchEventsLinksScopeAndConstants(t *testing.T) {
	s := fixture()
	s.TraceID = model.TraceID{0xab, 15: 1}
	s.SpanID = model.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	s.ParentSpanID = model.SpanID{8, 7, 6, 5, 4, 3, 2, 1}
	s.Scope = &model.Scope{Name: "grpc", Version: "v3.34", Attributes: []model.KeyValue{kv("lib", model.StringValue("x"))}}
	s.Events = []model.Event{
		{Name: "retry", TimeUnixNano: s.StartTimeUnixNano + uint64(20*time.Millisecond), Attributes: []model.KeyValue{kv("attempt", model.IntValue(2))}},
		{Name: "exception", TimeUnixNano: s.StartTimeUnixNano + uint64(2*time.Second), Attributes: []model.KeyValue{kv("exception.type", model.StringValue("Timeout"))}},
	}
	s.Links = []model.Link{{TraceID: model.TraceID{0xf1, 15: 0xf1}, SpanID: model.SpanID{0xf1, 7: 0xf1}, Attributes: []model.KeyValue{kv("kind", model.StringValue("batch"))}}}
	cases := []struct {
		q    string
		want bool
	}{
		{`{ event:name = "exception" }`, true},
		{`{ event:name = "nope" }`, false},
		{`{ event:name =~ "retr.*" }`, true},
		{`{ event:timeSinceStart > 1s }`, true},
		{`{ event:timeSinceStart > 3s }`, false},
		{`{ event.attempt = 2 }`, true},
		{`{ event.attempt = 3 }`, false},
		{`{ event.exception.type = "Timeout" && event:name = "exception" }`, true},
		{`{ event.missing = nil }`, true},
		{`{ event.attempt = nil }`, false},
		{`{ link.kind = "batch" }`, true},
		{`{ link:traceID = "f10000000000000000000000000000f1" }`, true},
		{`{ link:spanID = "f1000000000000f1" }`, true},
		{`{ instrumentation:name = "grpc" && instrumentation:version = "v3.34" }`, true},
		{`{ instrumentation.lib = "x" }`, true},
		{`{ span:id = "0102030405060708" }`, true},
		{`{ span:parentID = "0807060504030201" }`, true},
		{`{ trace:id = "ab000000000000000000000000000001" }`, true},
		{`{ trace:id = "ab" }`, false},
		{`{ true }`, true},
		{`{ false }`, false},
		{`{ !true }`, false},
		{`{ true && false }`, false},
		{`{ 1 < 1h }`, true},
		{`{ 1 <= 1.1 }`, true},
		{`{ -1 = 2 }`, false},
		{`{ "test" =~ "te.*" }`, true},
		{`{ "test" != "test" }`, false},
		{`{ nil = nil }`, true},
		{`{ 500 <= span.http.status_code }`, true}, // value first: flipped
		{`{ 600 <= span.http.status_code }`, false},
		{`{ .cache.hit }`, true}, // a bare attribute is = true
		{`{ !.cache.hit }`, false},
		{`{ .http.method }`, false}, // a string is not true
		{`{ !("test" != .c || ((true && .b) || 3 < .neg)) }`, true},
	}
	for _, c := range cases {
		e, err := ParseTraceQL(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		if got := e.Match(s); got != c.want {
			t.Errorf("%s (read as %s) = %v, want %v", c.q, e, got, c.want)
		}
		again, err := ParseTraceQL(e.String())
		if err != nil || again.String() != e.String() {
			t.Errorf("%s: String %q does not parse back to itself: %v", c.q, e, err)
		}
	}
}

// TestMatchTraceLevel: trace-level intrinsics read the trace a backend
// binds with WithTraces, once per trace; unbound, they do not hold.
func TestMatchTraceLevel(t *testing.T) {
	s := fixture()
	info := TraceInfo{HasRoot: true, RootName: "GET /", RootService: "gateway", Duration: uint64(3 * time.Second)}
	calls := 0
	lookup := func(model.TraceID) (TraceInfo, bool) { calls++; return info, true }
	cases := []struct {
		q    string
		want bool
	}{
		{`{ rootServiceName = "gateway" }`, true},
		{`{ trace:rootService = "gateway" && status = error }`, true},
		{`{ rootName =~ "GET.*" }`, true},
		{`{ rootName = "POST /" }`, false},
		{`{ traceDuration > 2s }`, true},
		{`{ trace:duration < 2s }`, false},
		{`{ !(rootServiceName = "gateway") }`, false},
	}
	for _, c := range cases {
		e, err := ParseTraceQL(c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		f := &Filter{Expr: e}
		if !f.NeedsTrace() {
			t.Fatalf("%s: NeedsTrace false", c.q)
		}
		calls = 0
		bound := WithTraces(f, lookup)
		if got := bound.Match(s); got != c.want {
			t.Errorf("%s = %v, want %v", c.q, got, c.want)
		}
		bound.Match(s) // the same trace again: no lookup
		if calls != 1 {
			t.Errorf("%s: %d lookups for one trace, want 1", c.q, calls)
		}
		if f.Match(s) && c.q != `{ !(rootServiceName = "gateway") }` {
			t.Errorf("%s: matched without its trace", c.q)
		}
	}
	if e, _ := ParseTraceQL(`{ status = error }`); (&Filter{Expr: e}).NeedsTrace() {
		t.Error("a span-level filter needs its trace")
	}
}

// TestTraceQLReviewCases: cases a review found wrong, kept as regressions.
func TestTraceQLReviewCases(t *testing.T) {
	for _, q := range []string{`{ "foo" = content }`, `{ 5 = content }`, `{ "zzz" =~ "a)|(" }`} {
		if e, err := ParseTraceQL(q); err == nil {
			t.Errorf("%s accepted (as %s)", q, e)
		}
	}
	bare := fixture() // no events, no links, a root span
	bare.TraceID = model.TraceID{0, 0, 0, 0, 0, 0, 0, 0, 0x2f, 0x3e, 1, 2, 3, 4, 5, 6}
	root := TraceInfo{HasRoot: true, RootName: "r", RootService: "s", Duration: 5}
	noRoot := TraceInfo{Duration: 5}
	for _, c := range []struct {
		q    string
		info *TraceInfo // nil: not bound
		want bool
	}{
		{`{ 9007199254740993 > 9007199254740992 }`, nil, true},
		{`{ event:name != nil }`, nil, false},
		{`{ event:name = nil }`, nil, true},
		{`{ link:traceID = nil }`, nil, true},
		{`{ span:parentID = nil }`, nil, true},
		{`{ trace:id = "2F3E010203040506" }`, nil, true}, // leading zeros optional, any case
		{`{ trace:id = "00000000000000002f3e010203040506" }`, nil, true},
		{`{ trace:id != "2f3e010203040506" }`, nil, false},
		{`{ rootName = nil }`, &noRoot, true},
		{`{ rootName != nil }`, &noRoot, false},
		{`{ rootName != nil }`, &root, true},
		{`{ rootName != nil }`, nil, false},
		{`{ rootName = nil }`, nil, false},
	} {
		e, err := ParseTraceQL(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		f := &Filter{Expr: e}
		if c.info != nil {
			info := *c.info
			f = WithTraces(f, func(model.TraceID) (TraceInfo, bool) { return info, true })
		}
		if got := f.Match(bare); got != c.want {
			t.Errorf("%s = %v, want %v", c.q, got, c.want)
		}
	}
	// Trace-level conditions are decided after the span's own: a span the
	// other side rejects costs no trace lookup.
	e, _ := ParseTraceQL(`{ rootName = "x" && name = "nope" }`)
	lookups := 0
	f := WithTraces(&Filter{Expr: e}, func(model.TraceID) (TraceInfo, bool) { lookups++; return root, true })
	if f.Match(bare) || lookups != 0 {
		t.Fatalf("match %v after %d lookups, want false after 0", f.Match(bare), lookups)
	}
}
