package query

import (
	"reflect"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func mustParse(t testing.TB, q string) Expr {
	t.Helper()
	e, err := ParseTraceQL(q)
	if err != nil {
		t.Fatalf("ParseTraceQL(%s): %v", q, err)
	}
	return e
}

func TestFilterMatch(t *testing.T) {
	s := fixture() // checkout, "GET /cart", error, 150ms, server
	start := s.StartTimeUnixNano
	cases := []struct {
		name string
		f    Filter
		want bool
	}{
		{"zero", Filter{}, true},
		{"service", Filter{Service: "checkout"}, true},
		{"other service", Filter{Service: "cart"}, false},
		{"name", Filter{Name: "GET /cart"}, true},
		{"other name", Filter{Name: "GET"}, false},
		{"status", Filter{Status: model.StatusError, HasStatus: true}, true},
		{"status unset is a real filter", Filter{Status: model.StatusUnset, HasStatus: true}, false},
		{"min inclusive", Filter{MinDuration: uint64(150 * time.Millisecond)}, true},
		{"min above", Filter{MinDuration: uint64(150*time.Millisecond) + 1}, false},
		{"max inclusive", Filter{MaxDuration: uint64(150 * time.Millisecond)}, true},
		{"max below", Filter{MaxDuration: uint64(150*time.Millisecond) - 1}, false},
		{"start inclusive", Filter{Start: start}, true},
		{"start after", Filter{Start: start + 1}, false},
		{"end exclusive", Filter{End: start}, false},
		{"end after", Filter{End: start + 1}, true},
		{"expr", Filter{Expr: mustParse(t, `{ span.http.status_code >= 500 }`)}, true},
		{"expr false", Filter{Expr: mustParse(t, `{ kind = client }`)}, false},
		{"all fields", Filter{Expr: mustParse(t, `{ kind = server }`), Service: "checkout", Name: "GET /cart",
			Status: model.StatusError, HasStatus: true, MinDuration: 1, MaxDuration: uint64(time.Second),
			Start: start, End: start + 1, Limit: 1}, true},
		{"all but one", Filter{Expr: mustParse(t, `{ kind = server }`), Service: "checkout", Name: "GET /cart",
			Status: model.StatusOK, HasStatus: true}, false},
	}
	for _, c := range cases {
		if got := c.f.Match(s); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHints(t *testing.T) {
	ms := uint64(time.Millisecond)
	cases := []struct {
		f    Filter
		want Hints
	}{
		{Filter{}, Hints{}},
		{Filter{Expr: mustParse(t, `{ }`)}, Hints{}},
		{Filter{Service: "a", Name: "n", Status: model.StatusOK, HasStatus: true, MinDuration: 5, MaxDuration: 9, Start: 1, End: 2},
			Hints{Services: []string{"a"}, Names: []string{"n"}, Status: model.StatusOK, HasStatus: true, MinDuration: 5, MaxDuration: 9, Start: 1, End: 2}},
		{Filter{Expr: mustParse(t, `{ resource.service.name = "a" && name = "n" && status = error && kind = server && duration > 1ms && duration <= 1s }`)},
			Hints{Services: []string{"a"}, Names: []string{"n"}, Status: model.StatusError, HasStatus: true,
				Kinds: []model.SpanKind{model.KindServer}, MinDuration: ms + 1, MaxDuration: 1000 * ms}},
		{Filter{Expr: mustParse(t, `{ span.http.method = "GET" && resource.env = "prod" && .x = "y" && span.n = 5 && span.r =~ "a" }`)},
			Hints{AttrEquals: []AttrEq{{ScopeSpan, "http.method", "GET"}, {ScopeResource, "env", "prod"}, {ScopeAny, "x", "y"}},
				AttrAnyOf: []AttrAnyOf{{ScopeSpan, "n", nil, []int64{5}}}}},
		// A number equality is a one-of hint (an int, or a double equal to
		// it); Tempo's tag search for a value that reads as a number asks
		// for the string or the number; || of one attribute's values is
		// one of them.
		{Filter{Expr: mustParse(t, `{ (."user.id" = "123456" || ."user.id" = 123456) }`)},
			Hints{AttrAnyOf: []AttrAnyOf{{ScopeAny, "user.id", []string{"123456"}, []int64{123456}}}}},
		{Filter{Expr: mustParse(t, `{ span.a = "x" || span.a = "y" || span.a = "x" }`)},
			Hints{AttrAnyOf: []AttrAnyOf{{ScopeSpan, "a", []string{"x", "y"}, nil}}}},
		{Filter{Expr: mustParse(t, `{ span.a = 2.0 && span.b = -3 && span.c = 1ms }`)},
			Hints{AttrAnyOf: []AttrAnyOf{{ScopeSpan, "a", nil, []int64{2}}, {ScopeSpan, "b", nil, []int64{-3}}, {ScopeSpan, "c", nil, []int64{1e6}}}}},
		// Not hinted: a fraction (no int equals it), an integer a double
		// cannot hold exactly, different keys or scopes on the two sides,
		// an ordering.
		{Filter{Expr: mustParse(t, `{ span.a = 1.5 || span.b = 9007199254740993 }`)}, Hints{}},
		{Filter{Expr: mustParse(t, `{ span.a = 1 || span.b = 1 }`)}, Hints{}},
		{Filter{Expr: mustParse(t, `{ span.a = 1 || resource.a = 1 }`)}, Hints{}},
		{Filter{Expr: mustParse(t, `{ span.a >= 1 }`)}, Hints{}},
		// || unions what both sides constrain; the rest is dropped.
		{Filter{Expr: mustParse(t, `{ (kind = server || kind = client) && (resource.service.name = "a" || resource.service.name = "b") }`)},
			Hints{Services: []string{"a", "b"}, Kinds: []model.SpanKind{model.KindServer, model.KindClient}}},
		{Filter{Expr: mustParse(t, `{ name = "a" || kind = server }`)}, Hints{}},
		{Filter{Expr: mustParse(t, `{ duration > 5ms || duration > 1ms && duration < 3ms }`)}, Hints{MinDuration: ms + 1}},
		{Filter{Expr: mustParse(t, `{ span.a = "x" && span.b = "y" || span.a = "x" }`)},
			Hints{AttrEquals: []AttrEq{{ScopeSpan, "a", "x"}}}},
		// Negation and != contribute nothing.
		{Filter{Expr: mustParse(t, `{ !(name = "a") && name != "b" && status != ok && kind != server && resource.service.name != "x" }`)}, Hints{}},
		// Unscoped service.name may be a span attribute: no service hint.
		{Filter{Expr: mustParse(t, `{ .service.name = "a" }`)}, Hints{}},
		// Shortcut fields and expression intersect.
		{Filter{Service: "a", Expr: mustParse(t, `{ resource.service.name = "a" || resource.service.name = "b" }`)},
			Hints{Services: []string{"a"}}},
		// Contradictions say that nothing can match.
		{Filter{Service: "a", Expr: mustParse(t, `{ resource.service.name = "b" }`)}, Hints{Services: []string{}, Names: []string{}}},
		{Filter{Expr: mustParse(t, `{ status = ok && status = error }`)}, Hints{Services: []string{}, Names: []string{}}},
		{Filter{Expr: mustParse(t, `{ duration < 1ms && duration > 2ms }`)},
			Hints{Services: []string{}, Names: []string{}, MinDuration: 2*ms + 1, MaxDuration: ms - 1}},
	}
	for _, c := range cases {
		got := c.f.Hints()
		if !reflect.DeepEqual(got, c.want) {
			q := "<nil>"
			if c.f.Expr != nil {
				q = c.f.Expr.String()
			}
			t.Errorf("Hints(%s %+v):\n got %#v\nwant %#v", q, c.f, got, c.want)
		}
	}
}
