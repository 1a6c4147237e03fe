package llm

import (
	"math"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// maxCount bounds a token count (about 1.1e12): larger values are not
// counts, and sums of a few counts cannot overflow.
const maxCount = 1 << 40

// count reads a token count. SDKs send counts as ints, as doubles (the Go
// and JS SDKs when the number passed through a float64) or as numeric
// strings; all are accepted. Negative, fractional-overflowing, NaN and
// non-numeric values are not counts.
func count(v model.Value) (int64, bool) {
	switch v.Type {
	case model.ValueInt:
		if v.Int >= 0 && v.Int <= maxCount {
			return v.Int, true
		}
	case model.ValueDouble:
		return floatCount(v.Double)
	case model.ValueString:
		s := strings.TrimSpace(v.Str)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n >= 0 && n <= maxCount {
				return n, true
			}
			return 0, false
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return floatCount(f)
		}
	}
	return 0, false
}

func floatCount(f float64) (int64, bool) {
	if math.IsNaN(f) || f < 0 || f > maxCount {
		return 0, false
	}
	return int64(math.Round(f)), true
}

// number reads a non-negative real (a cost in USD, a duration in seconds)
// sent as an int, a double or a numeric string.
func number(v model.Value) (float64, bool) {
	var f float64
	switch v.Type {
	case model.ValueInt:
		f = float64(v.Int)
	case model.ValueDouble:
		f = v.Double
	case model.ValueString:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v.Str), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	return f, true
}

// usdToNano converts US dollars to billionths of a dollar, rounding.
func usdToNano(usd float64) (int64, bool) {
	n := usd * 1e9
	if n >= math.MaxInt64 {
		return 0, false
	}
	return int64(math.Round(n)), true
}

// secondsToNanos converts seconds to nanoseconds, rounding.
func secondsToNanos(s float64) (uint64, bool) {
	n := s * 1e9
	if n >= math.MaxInt64 {
		return 0, false
	}
	return uint64(math.Round(n)), true
}
