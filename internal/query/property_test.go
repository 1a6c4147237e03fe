package query

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// A small vocabulary so that random conditions and random spans meet often.
var (
	vocabKeys    = []string{"k1", "k2", "shared", "service.name", "my key"}
	vocabStrings = []string{"", "a", "b", "ab", "checkout", "cart"}
	vocabNames   = []string{"a", "b", "GET /x"}
	vocabSvcs    = []string{"checkout", "cart"}
	vocabDurs    = []uint64{0, 1, 5, uint64(time.Millisecond), uint64(100 * time.Millisecond)}
)

func randValue(r *rand.Rand) model.Value {
	switch r.IntN(5) {
	case 0:
		return model.StringValue(vocabStrings[r.IntN(len(vocabStrings))])
	case 1:
		return model.IntValue(int64(r.IntN(7) - 2))
	case 2:
		return model.DoubleValue([]float64{-0.5, 0, 0.5, 1, 2, math.NaN()}[r.IntN(6)])
	case 3:
		return model.BoolValue(r.IntN(2) == 0)
	}
	return model.Value{Type: model.ValueArray}
}

func randAttrs(r *rand.Rand) []model.KeyValue {
	var kvs []model.KeyValue
	for _, k := range vocabKeys {
		if r.IntN(2) == 0 {
			kvs = append(kvs, kv(k, randValue(r)))
		}
	}
	return kvs
}

func randSpan(r *rand.Rand) *model.Span {
	start := uint64(1000 + r.IntN(10))
	s := &model.Span{
		Name:              vocabNames[r.IntN(len(vocabNames))],
		Kind:              model.SpanKind(r.IntN(7)), // 6 is out of range on purpose
		StartTimeUnixNano: start,
		EndTimeUnixNano:   start + vocabDurs[r.IntN(len(vocabDurs))] + uint64(r.IntN(2)),
		StatusCode:        model.StatusCode(r.IntN(3)),
		StatusMessage:     vocabStrings[r.IntN(len(vocabStrings))],
		Attributes:        randAttrs(r),
	}
	if r.IntN(5) > 0 {
		res := &model.Resource{Attributes: randAttrs(r)}
		if r.IntN(3) > 0 {
			res.Attributes = append(res.Attributes, kv("service.name", model.StringValue(vocabSvcs[r.IntN(2)])))
		}
		if r.IntN(10) == 0 {
			res.Attributes = append([]model.KeyValue{kv("service.name", model.StringValue(""))}, res.Attributes...)
		}
		s.Resource = res
	}
	if r.IntN(4) == 0 {
		// A prompt, searched by content conditions whatever its length.
		var words []string
		for range 1 + r.IntN(4) {
			words = append(words, vocabStrings[1+r.IntN(len(vocabStrings)-1)])
		}
		s.Attributes = append(s.Attributes, kv("input.value", model.StringValue(strings.Join(words, " "))))
	}
	var p model.Problems
	model.Normalize(s, &p)
	return s
}

func randLiteralText(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0, 1:
		return fmt.Sprintf("%q", vocabStrings[r.IntN(len(vocabStrings))])
	case 2:
		return fmt.Sprint(r.IntN(7) - 2)
	case 3:
		return []string{"-0.5", "0.5", "1.0", "2e0"}[r.IntN(4)]
	case 4:
		return []string{"true", "false"}[r.IntN(2)]
	case 5:
		return "nil"
	case 6:
		return []string{"1ns", "5ns", "1ms", "100ms"}[r.IntN(4)]
	}
	return fmt.Sprintf("%q", []string{".*", "a|b", "a.*", "c.*"}[r.IntN(4)])
}

// randCond returns a random condition that satisfies the type rules.
func randCond(t testing.TB, r *rand.Rand) node {
	ops := []string{"=", "!=", ">", ">=", "<", "<="}
	var text string
	switch r.IntN(10) {
	case 9:
		words := []string{"a", "B", "ab", "checkout", "Cart", `\"a b\"`, `\"b a\"`, "zzz"}
		q := words[r.IntN(len(words))]
		if r.IntN(2) == 0 {
			q += " " + words[r.IntN(len(words))]
		}
		text = `content = "` + q + `"`
	case 0:
		text = fmt.Sprintf("name %s %q", []string{"=", "!=", "=~", "<"}[r.IntN(4)], vocabNames[r.IntN(3)])
	case 1:
		text = fmt.Sprintf("status %s %s", ops[r.IntN(2)], []string{"ok", "error", "unset"}[r.IntN(3)])
	case 2:
		text = fmt.Sprintf("kind %s %s", ops[r.IntN(2)], model.SpanKind(r.IntN(6)))
	case 3:
		text = fmt.Sprintf("duration %s %s", ops[r.IntN(len(ops))], []string{"0", "1", "-1", "5ns", "1ms", "100ms", "2"}[r.IntN(7)])
	case 4:
		text = fmt.Sprintf("statusMessage %s %q", []string{"=", "!~", ">="}[r.IntN(3)], vocabStrings[r.IntN(len(vocabStrings))])
	default:
		scope := []string{"span.", "resource.", "."}[r.IntN(3)]
		key := vocabKeys[r.IntN(len(vocabKeys))]
		if key == "my key" {
			key = `"my key"`
		}
		lit := randLiteralText(r)
		var o string
		switch {
		case lit == "nil" || lit == "true" || lit == "false":
			o = ops[r.IntN(2)]
		case lit[0] == '"' && r.IntN(3) == 0:
			o = []string{"=~", "!~"}[r.IntN(2)]
		default:
			o = ops[r.IntN(len(ops))]
		}
		text = scope + key + " " + o + " " + lit
	}
	e, err := ParseTraceQL("{ " + text + " }")
	if err != nil {
		t.Fatalf("generated condition %s: %v", text, err)
	}
	return e.(node)
}

// randExpr builds a tree directly, including shapes the parser never
// produces (right-nested && and ||).
func randExpr(t testing.TB, r *rand.Rand, depth int) node {
	if depth == 0 || r.IntN(3) == 0 {
		return randCond(t, r)
	}
	switch r.IntN(5) {
	case 0, 1:
		return andExpr{randExpr(t, r, depth-1), randExpr(t, r, depth-1)}
	case 2, 3:
		return orExpr{randExpr(t, r, depth-1), randExpr(t, r, depth-1)}
	}
	return notExpr{randExpr(t, r, depth-1)}
}

func TestPropertyStringReparses(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	spans := make([]*model.Span, 200)
	for i := range spans {
		spans[i] = randSpan(r)
	}
	for range 500 {
		e := randExpr(t, r, 4)
		text := e.String()
		e2, err := ParseTraceQL(text)
		if err != nil {
			t.Fatalf("re-parse %s: %v", text, err)
		}
		if e2.String() != text {
			t.Fatalf("String is not a fixed point:\n%s\n%s", text, e2)
		}
		for _, s := range spans {
			if e.Match(s) != e2.Match(s) {
				t.Fatalf("%s: tree and re-parsed form disagree on %+v", text, s)
			}
		}
	}
}

// satisfies is an independent statement of what Hints promise.
func satisfies(h Hints, s *model.Span) error {
	d := s.Duration()
	switch {
	case h.Services != nil && !slices.Contains(h.Services, s.Service):
		return fmt.Errorf("service %q not in %q", s.Service, h.Services)
	case h.Names != nil && !slices.Contains(h.Names, s.Name):
		return fmt.Errorf("name %q not in %q", s.Name, h.Names)
	case d < h.MinDuration || h.MaxDuration != 0 && d > h.MaxDuration:
		return fmt.Errorf("duration %d outside [%d, %d]", d, h.MinDuration, h.MaxDuration)
	case h.Start != 0 && s.StartTimeUnixNano < h.Start || h.End != 0 && s.StartTimeUnixNano >= h.End:
		return fmt.Errorf("start %d outside [%d, %d)", s.StartTimeUnixNano, h.Start, h.End)
	case h.HasStatus && s.StatusCode != h.Status:
		return fmt.Errorf("status %v, hint %v", s.StatusCode, h.Status)
	case h.Kinds != nil && !slices.Contains(h.Kinds, s.Kind):
		return fmt.Errorf("kind %v not in %v", s.Kind, h.Kinds)
	}
	if len(h.ContentHashes) > 0 {
		toks := map[uint64]bool{}
		text.SpanTokens(s, 0, func(h uint64) { toks[h] = true })
		for _, x := range h.ContentHashes {
			if !toks[x] {
				return fmt.Errorf("content token %#x not among the span's tokens", x)
			}
		}
	}
	for _, a := range h.AttrEquals {
		var v model.Value
		var ok bool
		switch a.Scope {
		case ScopeSpan:
			v, ok = s.Attr(a.Key)
		case ScopeResource:
			v, ok = s.ResourceAttr(a.Key)
		default:
			if v, ok = s.Attr(a.Key); !ok {
				v, ok = s.ResourceAttr(a.Key)
			}
		}
		if !ok || v.Type != model.ValueString || v.Str != a.Value {
			return fmt.Errorf("attribute %v %q = %v, hint %q", a.Scope, a.Key, v, a.Value)
		}
	}
	for _, a := range h.AttrAnyOf {
		v, ok := resolveAttr(s, a.Scope, a.Key)
		in := ok && (v.Type == model.ValueString && slices.Contains(a.Strs, v.Str) ||
			v.Type == model.ValueInt && slices.Contains(a.Ints, v.Int) ||
			v.Type == model.ValueDouble && slices.ContainsFunc(a.Ints, func(i int64) bool { return float64(i) == v.Double }))
		if !in {
			return fmt.Errorf("attribute %v %q = %v, hint one of %q or %d", a.Scope, a.Key, v, a.Strs, a.Ints)
		}
	}
	return nil
}

func resolveAttr(s *model.Span, scope Scope, key string) (model.Value, bool) {
	switch scope {
	case ScopeSpan:
		return s.Attr(key)
	case ScopeResource:
		return s.ResourceAttr(key)
	}
	if v, ok := s.Attr(key); ok {
		return v, true
	}
	return s.ResourceAttr(key)
}

func randFilter(t testing.TB, r *rand.Rand) Filter {
	var f Filter
	if r.IntN(4) > 0 {
		f.Expr = randExpr(t, r, 3)
	}
	if r.IntN(4) == 0 {
		f.Service = vocabSvcs[r.IntN(2)]
	}
	if r.IntN(4) == 0 {
		f.Name = vocabNames[r.IntN(3)]
	}
	if r.IntN(4) == 0 {
		f.Status, f.HasStatus = model.StatusCode(r.IntN(3)), true
	}
	if r.IntN(4) == 0 {
		f.MinDuration = vocabDurs[r.IntN(len(vocabDurs))]
	}
	if r.IntN(4) == 0 {
		f.MaxDuration = vocabDurs[r.IntN(len(vocabDurs))]
	}
	if r.IntN(4) == 0 {
		f.Start = uint64(1000 + r.IntN(10))
	}
	if r.IntN(4) == 0 {
		f.End = uint64(1000 + r.IntN(10))
	}
	if r.IntN(6) == 0 {
		q, err := text.ParseQuery([]string{"a", "b checkout", "cart", `"a b"`}[r.IntN(4)])
		if err != nil {
			t.Fatal(err)
		}
		f.Content = q
	}
	return f
}

func TestPropertyHintsSound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	spans := make([]*model.Span, 300)
	for i := range spans {
		spans[i] = randSpan(r)
	}
	// Edge cases the random generator reaches rarely.
	var edges []Filter
	for _, q := range []string{
		`{ resource.service.name = "" }`, `{ resource.service.name = "unknown_service" }`,
		`{ .service.name = "checkout" }`, `{ span.k1 = "" && resource.k1 = "a" }`,
		`{ duration < 1 }`, `{ duration <= 0 }`, `{ duration = -1 }`, `{ duration > -1 }`,
		`{ .k1 = "1" || .k1 = 1 }`, `{ span.k1 = 2.0 || span.k1 = "a" }`, `{ span.k1 = -0.0 }`, `{ .k1 = 1s || resource.k1 = 1 }`,
	} {
		edges = append(edges, Filter{Expr: mustParse(t, q)})
	}
	// One attribute's values joined by || (the form of Tempo's tag search),
	// numbers among them: one-of hints.
	for range 300 {
		scope, key := []string{"span.", "resource.", "."}[r.IntN(3)], fmt.Sprintf("%q", vocabKeys[r.IntN(len(vocabKeys))])
		lit := func() string {
			if r.IntN(3) == 0 {
				return fmt.Sprintf("%q", vocabStrings[r.IntN(len(vocabStrings))])
			}
			return []string{"-2", "0", "1", "2", "1.0", "2e0", "-0.0", "1ns", "0.5"}[r.IntN(9)]
		}
		edges = append(edges, Filter{Expr: mustParse(t, "{ "+scope+key+" = "+lit()+" || "+scope+key+" = "+lit()+" }")})
	}
	matched, hinted, contentHinted, anyOfHinted := 0, 0, 0, 0
	for i := range 2000 + len(edges) {
		var f Filter
		if i < len(edges) {
			f = edges[i]
		} else {
			f = randFilter(t, r)
		}
		h := f.Hints()
		if h.Services != nil || h.Names != nil || h.Kinds != nil || h.HasStatus || h.AttrEquals != nil ||
			h.MinDuration != 0 || h.MaxDuration != 0 || h.ContentHashes != nil {
			hinted++
		}
		if h.ContentHashes != nil {
			contentHinted++
		}
		if h.AttrAnyOf != nil {
			hinted++
			anyOfHinted++
		}
		for _, s := range spans {
			if !f.Match(s) {
				continue
			}
			matched++
			if err := satisfies(h, s); err != nil {
				q := "<nil>"
				if f.Expr != nil {
					q = f.Expr.String()
				}
				t.Fatalf("filter %s %+v matches a span that breaks its hints: %v\nhints %+v", q, f, err, h)
			}
		}
	}
	t.Logf("%d matches, %d filters with hints, %d with content hints, %d with one-of hints", matched, hinted, contentHinted, anyOfHinted)
	// The property must not hold vacuously.
	if matched < 10000 || hinted < 500 || contentHinted < 100 || anyOfHinted < 100 {
		t.Fatalf("too few matches (%d) or hinted filters (%d) for the property to mean anything", matched, hinted)
	}
}
