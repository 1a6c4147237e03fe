package query

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestArithmetic: arithmetic conditions compare what direct computation
// gives, with the usual precedence (^ right-associative, then * / %, then
// + -), and render back to themselves.
func TestArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		x, y := int64(rng.IntN(10)), rng.Float64()*10
		s := model.Span{Name: "n", StartTimeUnixNano: 1e9, EndTimeUnixNano: 1e9 + uint64(rng.IntN(5e9)),
			Attributes: []model.KeyValue{{Key: "x", Value: model.IntValue(x)}, {Key: "y", Value: model.DoubleValue(y)}, {Key: "s", Value: model.StringValue("a")}}}
		k := rng.IntN(20)
		d := float64(s.Duration())
		for _, c := range []struct {
			q    string
			want bool
		}{
			{fmt.Sprintf("{ span.x + span.y > %d }", k), float64(x)+y > float64(k)},
			{fmt.Sprintf("{ span.x * 2 + 1 <= %d }", k), float64(x)*2+1 <= float64(k)},
			{fmt.Sprintf("{ %d < span.x * span.y - 3 }", k), float64(k) < float64(x)*y-3},
			{fmt.Sprintf("{ span.x > span.y / 2 }"), float64(x) > y/2},
			{"{ duration / 2 > 1s }", d/2 > 1e9},
			{fmt.Sprintf("{ span.x %% 3 = %d }", k%3), math.Mod(float64(x), 3) == float64(k%3)},
			{"{ 2 ^ 3 ^ 2 = 512 }", true},
			{"{ 2 * (2 + 3) = 10 }", true},
			{"{ 2 + 3 * 2 = 8 }", true},
			{"{ span.s + 1 > 0 }", false}, // a string is not a number
			{"{ span.missing * 2 >= 0 }", false},
			{"{ span.x = span.x }", true},
			{"{ span.s != span.x }", true},
		} {
			e, err := ParseTraceQL(c.q)
			if err != nil {
				t.Fatalf("%s: %v", c.q, err)
			}
			if got := e.Match(&s); got != c.want {
				t.Fatalf("%s with x=%d y=%v duration=%v: %v, want %v", c.q, x, y, d, got, c.want)
			}
			again, err := ParseTraceQL(e.String())
			if err != nil || again.String() != e.String() || again.Match(&s) != c.want {
				t.Fatalf("%s renders as %s, which parses as %v (%v)", c.q, e, again, err)
			}
		}
	}
	for _, bad := range []string{`{ span.x + > 1 }`, `{ span.x + 1 }`, `{ span.x + 1 =~ "a" }`, `{ span.x * (1 + 2 > 3 }`} {
		if _, err := ParseTraceQL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
