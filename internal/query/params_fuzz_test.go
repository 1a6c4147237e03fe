package query

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// fuzzNow is the "now" of the parameter fuzz tests.
var fuzzNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// FuzzFromValues: any query string gives a Filter or an error that names
// the parameter at fault; a Filter holds its invariants (limit in range,
// since before until, min_duration at most max_duration).
func FuzzFromValues(f *testing.F) {
	for _, s := range []string{
		"q=%7B+span.http.status_code+%3E%3D+500+%7D&service=checkout&status=error&limit=20",
		"since=2024-05-01T12:00:00Z&until=2024-05-01T13:00:00.5%2B02:00",
		"since=1714564800&until=1714564800123456789",
		"since=now-15m&until=now", "since=1h30m&min_duration=100ms&max_duration=2d",
		"min_duration=1500000&max_duration=1w", "limit=1000000", "limit=-1", "status=OK",
		"content=refund+%22order+42%22", "content=%22", "since=99999999999999999999", "q=%7B",
		"min_duration=2s&max_duration=1s", "since=now-&until=-1h", "since=1.5d",
	} {
		f.Add(s)
	}
	params := []string{"q", "content", "status", "min_duration", "max_duration", "since", "until", "limit"}
	f.Fuzz(func(t *testing.T, raw string) {
		v, _ := url.ParseQuery(raw) // what parsed, as net/http gives it
		flt, err := FromValues(v, fuzzNow)
		if err != nil {
			name, _, ok := strings.Cut(err.Error(), ":")
			if !ok || !contains(params, name) {
				t.Fatalf("FromValues(%q): error %q does not start with the parameter's name", raw, err)
			}
			return
		}
		if flt.Limit < 0 || flt.Limit > MaxLimit {
			t.Fatalf("FromValues(%q): limit %d", raw, flt.Limit)
		}
		if flt.End != 0 && flt.Start >= flt.End {
			t.Fatalf("FromValues(%q): since %d not before until %d", raw, flt.Start, flt.End)
		}
		if flt.MaxDuration != 0 && flt.MinDuration > flt.MaxDuration {
			t.Fatalf("FromValues(%q): min_duration %d above max_duration %d", raw, flt.MinDuration, flt.MaxDuration)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FuzzParseTime: any string gives a time or an error; a time in the range
// the API accepts survives a round trip through RFC 3339.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123+02:00", "1714564800", "1714564800123",
		"1714564800123456", "1714564800123456789", "now", "1h", "30m", "2d", "1w", "1h30m", "now-15m",
		"", " ", "-1h", "now-", "T", "99999999999999999999", "1.5d2h", "2d-1h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s, fuzzNow)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "time") {
				t.Fatalf("ParseTime(%q): error %q does not say what it wanted", s, msg)
			}
			return
		}
		if tm.Year() < 1970 || tm.Year() > 2261 {
			return // refused by FromValues, with its own message
		}
		again, err := ParseTime(tm.UTC().Format(time.RFC3339Nano), fuzzNow)
		if err != nil || !again.Equal(tm) {
			t.Fatalf("ParseTime(%q) = %v, whose RFC 3339 form reads as %v (%v)", s, tm, again, err)
		}
	})
}

// FuzzParseDuration: the API's durations are never negative, and without
// the units d and w they are exactly time.ParseDuration's.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"100ms", "1.5s", "2d", "1w", "1h30m", "1d12h", "0.5w", "10µs", "", "d", "1", "-1d", "1d-1h",
		"106751d", "106752d", "1e3d", "1..5d", "9223372036854775807ns",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if !strings.ContainsAny(s, "dw") {
			want, werr := time.ParseDuration(s)
			if (err == nil) != (werr == nil) || err == nil && d != want {
				t.Fatalf("parseDuration(%q) = %v, %v; time.ParseDuration: %v, %v", s, d, err, want, werr)
			}
			return
		}
		if err == nil && d < 0 {
			t.Fatalf("parseDuration(%q) = %v, negative", s, d)
		}
	})
}
