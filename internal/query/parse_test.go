package query

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	cases := []struct {
		q   string
		pos int
		msg string
	}{
		{``, 0, `expected { at start of query, got end of query`},
		{`span.a = 1`, 0, `expected { at start of query, got "span.a"`},
		{`{ span.a = 1`, 12, `missing closing } for { at position 0`},
		{`{`, 1, `expected condition (attribute or intrinsic), got end of query`},
		{`{ name && x }`, 7, `expected operator after name, got "&&"`},
		{`{ span.http.status_code && x }`, 27, `unknown intrinsic "x"`},
		{`{ span.http.status_code = 200 span.a = 1 }`, 30, `expected &&, || or }, got "span.a"`},
		{`{ span.a = 1 } | count() > 2`, 15, `pipelines (|) are not supported`},
		{`{ span.a = 1 } && { span.b = 2 }`, 15, `spanset operators between filters are not supported, got "&&" after }`},
		{`{ span.a = 1 } >> { span.b = 2 }`, 15, `spanset operators between filters are not supported, got ">>" after }`},
		{`{ span.a = 1 } x`, 15, `unexpected "x" after closing }`},
		{`{ span.a = 1 }}`, 14, `unexpected "}" after closing }`},
		{`{ foo = 1 }`, 2, `unknown intrinsic "foo"; attributes need a scope: span.foo, resource.foo or .foo`},
		{`{ span:foo = 1 }`, 2, `unknown intrinsic span:foo`},
		{`{ scope.name = "x" }`, 2, `attribute scope scope. does not exist`},
		{`{ nestedSetLeft > 3 }`, 2, `intrinsic nestedSetLeft is not supported`},
		{`{ traceDuration > "1s" }`, 18, `compares with a duration`},
		{`{ event:nope = "x" }`, 2, `unknown intrinsic event:nope`},
		{`{ event:timeSinceStart > "1s" }`, 25, `compares with a duration`},
		{`{ span:id > 5 }`, 12, `span:id compares with a string, got integer`},
		{`{ kind = banana }`, 9, `unknown span kind "banana": want unspecified, internal, server, client, producer or consumer`},
		{`{ status = broken }`, 11, `unknown status "broken": want ok, error or unset`},
		{`{ status = server }`, 11, `status compares with a status word, got kind`},
		{`{ kind = ok }`, 9, `kind compares with a kind word, got status`},
		{`{ kind > server }`, 7, `kind supports only = and !=, got >`},
		{`{ status =~ "ok" }`, 9, `status does not support =~`},
		{`{ name = 5 }`, 9, `name compares with a string, got integer`},
		{`{ statusMessage = true }`, 18, `statusMessage compares with a string, got boolean`},
		{`{ duration > "1s" }`, 13, `duration compares with a duration (100ms) or integer nanoseconds, got string`},
		{`{ duration > 1.5 }`, 13, `got float`},
		// The same number negated or in parentheses is read as arithmetic,
		// and refused alike (a fuzz finding: `--922.0` rendered as 922.0).
		{`{ duration >= --922.0 }`, 14, `got float`},
		{`{ duration > (1.5) }`, 13, `got float`},
		{`{ name = -(5) }`, 9, `name compares with a string, got integer`},
		{`{ span.a = ok }`, 11, `ok is a status value; compare it with the status intrinsic`},
		{`{ span.a = client }`, 11, `client is a kind value`},
		{`{ span.a = bar }`, 11, `expected value after span.a =, got "bar" (strings need double quotes)`},
		{`{ span.a = }`, 11, `expected value after span.a =, got "}"`},
		{`{ span.a > true }`, 9, `> supports only = and != with boolean`},
		{`{ span.a < nil }`, 9, `< supports only = and != with nil`},
		{`{ span.a =~ 5 }`, 12, `=~ needs a string regular expression, got integer`},
		{`{ name =~ "(" }`, 10, "invalid regular expression \"(\": error parsing regexp: missing closing ): `(`"},
		{`{ span.a !~ "a**" }`, 12, `invalid regular expression "a**": error parsing regexp: invalid nested repetition operator`},
		{`{ name = "abc }`, 9, `unterminated string: missing closing "`},
		{`{ name = "a\qb" }`, 11, `invalid escape \q in string`},
		{`{ name = "\u12" }`, 10, `invalid escape \u in string: want 4 hex digits`},
		{`{ name = "\uD800" }`, 10, `not a Unicode code point`},
		{`{ name = "a" & kind = server }`, 13, `expected && but found a single &`},
		{`{ name == "a" }`, 7, `unknown operator ==; use = for equality`},
		{`{ span. = 1 }`, 7, `expected attribute name after span., got ' '`},
		{`{ resource.`, 11, `expected attribute name after resource., got end of query`},
		{`{ . = 1 }`, 3, `expected attribute name after ., got ' '`},
		{`{ span."" = 1 }`, 7, `empty attribute name after span.`},
		{`{ span.a = 99999999999999999999 }`, 11, `integer 99999999999999999999 out of range`},
		{`{ span.a = 1e999 }`, 11, `float 1e999 out of range`},
		{`{ duration > 5parsecs }`, 13, `invalid duration "5parsecs"`},
		{`{ (kind = server }`, 17, `expected ) to close ( at position 2, got "}"`},
		{`{ kind = server) }`, 15, `unbalanced ): no matching (`},
		{`{ () }`, 3, `expected condition (attribute or intrinsic), got ")"`},
		{`{ kind = server && }`, 19, `expected condition (attribute or intrinsic), got "}"`},
		{`{ 5 =~ span.a }`, 4, `=~ needs the field on its left`},
		{`{ "a" = 5 }`, 6, `cannot compare string with integer using =`},
		{`{ 5 }`, 4, `expected operator after 5, got "}"`},
		{`{ span.a = 1 # }`, 13, `unexpected character '#'`},
		{"{ " + strings.Repeat("(", 300) + "kind = server" + strings.Repeat(")", 300) + " }", 202, `nested deeper than 200 levels`},
	}
	for _, c := range cases {
		_, err := ParseTraceQL(c.q)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseTraceQL(%s) = %v, want a *SyntaxError", c.q, err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("ParseTraceQL(%s):\n got position %d: %s\nwant position %d: ...%s...", c.q, se.Pos, se.Msg, c.pos, c.msg)
		}
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, err := ParseTraceQL(`{ name && span.a = 1 }`)
	want := `position 7: expected operator after name, got "&&"`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
}
