package query

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// MaxLimit is the largest limit FromValues accepts.
const MaxLimit = 10000

// DefaultWindow is how far back every listing of the API and the CLI looks
// when the request gives no since (docs/api.md#time-windows): recent data
// first, and an empty answer says how to look further back.
const DefaultWindow = 24 * time.Hour

// FromValues builds a Filter from URL query parameters:
//
//	q             TraceQL spanset filter, e.g. { span.http.status_code >= 500 }
//	service       exact service name
//	name          exact span name
//	status        ok, error or unset
//	min_duration  inclusive; Go duration ("100ms", "1.5s", "2d") or integer nanoseconds
//	max_duration  inclusive; same forms
//	since, until  window on span start time [since, until); see ParseTime
//	content       words the span's texts must contain, "quoted phrases" in order
//	              (text.ParseQuery); e.g. content=refund "order 42"
//	limit         integer 1..MaxLimit
//
// Empty parameters are ignored, as are parameters it does not know. Errors
// name the parameter (`min_duration: invalid duration "abc"`); a TraceQL
// error wraps the *SyntaxError.
func FromValues(v url.Values, now time.Time) (Filter, error) {
	var f Filter
	if q := v.Get("q"); strings.TrimSpace(q) != "" {
		e, err := ParseTraceQL(q)
		if err != nil {
			return Filter{}, fmt.Errorf("q: %w", err)
		}
		f.Expr = e
	}
	if c := v.Get("content"); strings.TrimSpace(c) != "" {
		q, err := text.ParseQuery(c)
		if err != nil {
			return Filter{}, fmt.Errorf("content: %w", err)
		}
		f.Content = q
	}
	f.Service = v.Get("service")
	f.Name = v.Get("name")
	if s := v.Get("status"); s != "" {
		c, ok := model.ParseStatusCode(strings.ToLower(s))
		if !ok {
			return Filter{}, fmt.Errorf("status: invalid status %q: want ok, error or unset", s)
		}
		f.Status, f.HasStatus = c, true
	}
	var err error
	if f.MinDuration, err = durationParam(v, "min_duration"); err != nil {
		return Filter{}, err
	}
	if f.MaxDuration, err = durationParam(v, "max_duration"); err != nil {
		return Filter{}, err
	}
	if f.MaxDuration != 0 && f.MinDuration > f.MaxDuration {
		return Filter{}, fmt.Errorf("min_duration: %s is above max_duration %s",
			time.Duration(f.MinDuration), time.Duration(f.MaxDuration))
	}
	if f.Start, err = timeParam(v, "since", now); err != nil {
		return Filter{}, err
	}
	if f.End, err = timeParam(v, "until", now); err != nil {
		return Filter{}, err
	}
	if f.End != 0 && f.Start >= f.End {
		return Filter{}, fmt.Errorf("since: %s is not before until %s",
			time.Unix(0, int64(f.Start)).UTC().Format(time.RFC3339Nano),
			time.Unix(0, int64(f.End)).UTC().Format(time.RFC3339Nano))
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return Filter{}, fmt.Errorf("limit: invalid limit %q: want an integer from 1 to %d", s, MaxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

func durationParam(v url.Values, name string) (uint64, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	d, err := parseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: invalid duration %q", name, s)
	}
	return uint64(d), nil
}

func timeParam(v url.Values, name string, now time.Time) (uint64, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	t, err := ParseTime(s, now)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	ns := t.UnixNano()
	if t.Year() < 1970 || ns < 0 || t.Year() > 2261 {
		return 0, fmt.Errorf("%s: time %q is outside 1970..2261", name, s)
	}
	return uint64(ns), nil
}

// ParseTime reads a point in time in one of these forms:
//
//	2024-05-01T12:00:00Z, 2024-05-01T12:00:00.123+02:00   RFC 3339, fraction optional
//	1714564800            integer Unix time; the digit count picks the unit:
//	                      up to 10 digits seconds, 11-13 milliseconds,
//	                      14-16 microseconds, 17-19 nanoseconds
//	now                   now
//	1h, 30m, 2d, 1w, 1h30m, now-15m   that long before now (d = 24h, w = 7d)
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("empty time")
	}
	if s == "now" {
		return now, nil
	}
	if isDigits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || len(s) > 19 {
			return time.Time{}, fmt.Errorf("invalid time %q: Unix time out of range", s)
		}
		switch {
		case len(s) <= 10:
			return time.Unix(n, 0), nil
		case len(s) <= 13:
			return time.UnixMilli(n), nil
		case len(s) <= 16:
			return time.UnixMicro(n), nil
		}
		return time.Unix(0, n), nil
	}
	if strings.ContainsRune(s, 'T') {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("invalid time %q: not RFC 3339 (2006-01-02T15:04:05Z07:00)", s)
		}
		return t, nil
	}
	rel := strings.TrimPrefix(s, "now-")
	if d, err := parseDuration(rel); err == nil && d >= 0 && !strings.HasPrefix(rel, "-") && !strings.HasPrefix(rel, "+") {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("invalid time %q: want RFC 3339, integer Unix time, or a duration before now such as 1h or 2d", s)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseDuration is time.ParseDuration plus the units d (24h) and w (7d).
func parseDuration(s string) (time.Duration, error) {
	if !strings.ContainsAny(s, "dw") {
		return time.ParseDuration(s)
	}
	var total float64
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		j := i
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') && rest[j] != '.' {
			j++
		}
		if i == 0 || j == i {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		unit := rest[i:j]
		switch unit {
		case "d":
			total += n * float64(24*time.Hour)
		case "w":
			total += n * float64(7*24*time.Hour)
		default:
			d, err := time.ParseDuration(rest[:j])
			if err != nil {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			total += float64(d)
		}
		rest = rest[j:]
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("invalid duration %q: out of range", s)
	}
	return time.Duration(total), nil
}
