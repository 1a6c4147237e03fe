package query

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// supportSpan is an LLM span of service "support" whose prompt mentions a
// refund for order 42.
func supportSpan() *model.Span {
	s := &model.Span{
		Name:     "chat gpt-4o",
		Resource: &model.Resource{Attributes: []model.KeyValue{kv("service.name", model.StringValue("support"))}},
		Attributes: []model.KeyValue{
			kv("gen_ai.input.messages", model.StringValue(`[{"role":"user","parts":[{"type":"text","content":"Où est le remboursement de la Commande 42 ? I asked for a refund for order 42."}]}]`)),
			kv("gen_ai.output.messages", model.StringValue(`[{"role":"assistant","parts":[{"type":"text","content":"您的退款已处理 👍"}]}]`)),
		},
	}
	var p model.Problems
	model.Normalize(s, &p)
	return s
}

func TestContentTraceQL(t *testing.T) {
	s, fx := supportSpan(), fixture()
	cases := []struct {
		q          string
		span, fixt bool // want on supportSpan, on fixture
	}{
		{`{ content = "refund" }`, true, false},
		{`{ content = "REFUND Order" }`, true, false},
		{`{ content = "refund \"order 42\"" && resource.service.name = "support" }`, true, false},
		{`{ content = "refund \"order 42\"" && resource.service.name = "checkout" }`, false, false},
		{`{ content = "\"42 order\"" }`, false, false},
		{`{ content = "commande remboursement ou" }`, true, false},
		{`{ content = "退款" }`, true, false},
		{`{ content = "款退" }`, false, false},
		{`{ content = "👍🏽" }`, true, false},
		{`{ content = "user" }`, false, false}, // a role, not text
		{`{ content = "upstream timeout" }`, false, true},
		{`{ content = "\"timeout upstream\"" }`, false, false},
		{`{ content = "refund" || content = "timeout" }`, true, true},
		{`{ !(content = "refund") }`, false, true},
		{`{ content = "refund" && !(content = "lighthouse") }`, true, false},
	}
	for _, c := range cases {
		e := mustParse(t, c.q)
		if got := e.Match(s); got != c.span {
			t.Errorf("%s on the support span = %v, want %v", c.q, got, c.span)
		}
		if got := e.Match(fx); got != c.fixt {
			t.Errorf("%s on the fixture = %v, want %v", c.q, got, c.fixt)
		}
		text := e.String()
		e2, err := ParseTraceQL(text)
		if err != nil || e2.String() != text || e2.Match(s) != c.span || e2.Match(fx) != c.fixt {
			t.Errorf("%s renders %s, which does not parse back to the same query (%v)", c.q, text, err)
		}
	}
}

func TestContentString(t *testing.T) {
	e := mustParse(t, `{ content = "Naïve  \"Order 42\"" && name = "x" }`)
	if got, want := e.String(), `{ content = "naive \"order 42\"" && name = "x" }`; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
}

func TestContentParseErrors(t *testing.T) {
	cases := []struct {
		q   string
		pos int
		msg string
	}{
		{`{ content != "x" }`, 10, `content supports only = with a string of words, got !=`},
		{`{ content =~ "x.*" }`, 10, `content supports only = with a string of words, got =~`},
		{`{ content > "x" }`, 10, `got >`},
		{`{ content = 5 }`, 12, `content compares with a string of words, got integer`},
		{`{ content = nil }`, 12, `got nil`},
		{`{ content = "" }`, 12, `empty query`},
		{`{ content = "?!" }`, 12, `empty query`},
		{`{ content = "refund \"order 42" }`, 12, `position 7: unterminated quote`},
		{`{ content = refund }`, 12, `strings need double quotes`},
		{`{ span.a = 1 && content }`, 24, `expected operator after content`},
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

func TestContentParam(t *testing.T) {
	f, err := FromValues(url.Values{"content": {`Refund "order 42"`}, "service": {"support"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if f.Content == nil || f.Content.String() != `refund "order 42"` {
		t.Fatalf("Content = %v", f.Content)
	}
	if !f.Match(supportSpan()) || f.Match(fixture()) {
		t.Error("content= must select the support span only")
	}
	if f, err := FromValues(url.Values{"content": {"  "}}, now); err != nil || f.Content != nil {
		t.Errorf("a blank content= must be ignored: %v %v", f.Content, err)
	}
	for in, want := range map[string]string{
		`refund "order`: `content: position 7: unterminated quote`,
		`...`:           `content: position 0: empty query`,
	} {
		_, err := FromValues(url.Values{"content": {in}}, now)
		var pe *text.ParseError
		if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.As(err, &pe) {
			t.Errorf("content=%s: error %v, want %s... wrapping a *text.ParseError", in, err, want)
		}
	}
}

func TestContentHints(t *testing.T) {
	h := func(words ...string) []uint64 {
		var out []uint64
		for _, w := range words {
			out = append(out, text.Hash(w))
		}
		return out
	}
	q, err := text.ParseQuery("timeout")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		f    Filter
		want []uint64
	}{
		{Filter{}, nil},
		{Filter{Content: q}, h("timeout")},
		{Filter{Expr: mustParse(t, `{ content = "a \"b c\"" }`)}, h("a", "b", "c")},
		{Filter{Expr: mustParse(t, `{ content = "a b" && name = "x" && content = "b c" }`), Content: q}, h("timeout", "a", "b", "c")},
		{Filter{Expr: mustParse(t, `{ content = "a b" || content = "b c" }`)}, h("b")},
		{Filter{Expr: mustParse(t, `{ content = "a" || name = "x" }`)}, nil},
		{Filter{Expr: mustParse(t, `{ !(content = "a") }`)}, nil},
	}
	for _, c := range cases {
		got := c.f.Hints().ContentHashes
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: ContentHashes = %x, want %x", c.f.Expr, got, c.want)
		}
	}
}

func TestContentMatchDoesNotAllocate(t *testing.T) {
	s := supportSpan()
	q, err := text.ParseQuery(`refund "order 42"`)
	if err != nil {
		t.Fatal(err)
	}
	f := Filter{Expr: mustParse(t, `{ content = "remboursement" && resource.service.name = "support" }`), Content: q}
	if !f.Match(s) {
		t.Fatal("the filter must match")
	}
	if n := testing.AllocsPerRun(100, func() { f.Match(s) }); n != 0 {
		t.Errorf("Match with content allocates %v times per call", n)
	}
}
