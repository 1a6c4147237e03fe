package query

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func TestParseTime(t *testing.T) {
	cases := []struct {
		in   string
		want time.Time
	}{
		{"2024-05-01T10:00:00Z", time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)},
		{"2024-05-01T10:00:00.123456789Z", time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC)},
		{"2024-05-01T12:00:00.5+02:00", time.Date(2024, 5, 1, 10, 0, 0, 500000000, time.UTC)},
		{"1714557600", time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)}, // seconds
		{"0", time.Unix(0, 0)}, // seconds
		{"1714557600123", time.Date(2024, 5, 1, 10, 0, 0, 123000000, time.UTC)},       // ms
		{"1714557600123456", time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC)},    // us
		{"1714557600123456789", time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC)}, // ns
		{"now", now},
		{"1h", now.Add(-time.Hour)},
		{"30m", now.Add(-30 * time.Minute)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"2d", now.Add(-48 * time.Hour)},
		{"1w", now.Add(-7 * 24 * time.Hour)},
		{"1.5d", now.Add(-36 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"now-15m", now.Add(-15 * time.Minute)},
		{" 5m ", now.Add(-5 * time.Minute)},
	}
	for _, c := range cases {
		got, err := ParseTime(c.in, now)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", c.in, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("ParseTime(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	bad := []string{"", "abc", "-1h", "-5", "+1h", "2024-05-01", "2024-05-01T10:00:00", "2024-13-01T00:00:00Z",
		"12345678901234567890", "1x", "now-", "now+1h", "d"}
	for _, in := range bad {
		if got, err := ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) = %v, want an error", in, got)
		}
	}
}

func TestFromValues(t *testing.T) {
	v := url.Values{
		"q":            {`{ span.http.status_code >= 500 }`},
		"service":      {"checkout"},
		"name":         {"GET /cart"},
		"status":       {"error"},
		"min_duration": {"100ms"},
		"max_duration": {"1500000000"},
		"since":        {"1h"},
		"until":        {"2024-05-01T12:00:00Z"},
		"limit":        {"20"},
		"unknown":      {"ignored"},
	}
	f, err := FromValues(v, now)
	if err != nil {
		t.Fatal(err)
	}
	if f.Expr == nil || f.Expr.String() != `{ span.http.status_code >= 500 }` {
		t.Errorf("Expr = %v", f.Expr)
	}
	want := Filter{Expr: f.Expr, Service: "checkout", Name: "GET /cart", Status: model.StatusError, HasStatus: true,
		MinDuration: uint64(100 * time.Millisecond), MaxDuration: 1500000000,
		Start: uint64(now.Add(-time.Hour).UnixNano()), End: uint64(now.UnixNano()), Limit: 20}
	if f != want {
		t.Errorf("FromValues = %+v\nwant %+v", f, want)
	}
	// The fixture starts exactly at until, which the window excludes.
	if f.Match(fixture()) {
		t.Errorf("a span starting at until must not match")
	}

	if f, err := FromValues(url.Values{}, now); err != nil || f != (Filter{}) {
		t.Errorf("empty values: %+v, %v", f, err)
	}
	if f, err := FromValues(url.Values{"min_duration": {"1.5s"}, "status": {"OK"}, "q": {"  "}}, now); err != nil ||
		f.MinDuration != 1500000000 || f.Status != model.StatusOK || f.Expr != nil {
		t.Errorf("1.5s / OK / blank q: %+v, %v", f, err)
	}
}

func TestFromValuesErrors(t *testing.T) {
	cases := []struct {
		v    url.Values
		want string
	}{
		{url.Values{"min_duration": {"abc"}}, `min_duration: invalid duration "abc"`},
		{url.Values{"max_duration": {"-5ms"}}, `max_duration: invalid duration "-5ms"`},
		{url.Values{"max_duration": {"-5"}}, `max_duration: invalid duration "-5"`},
		{url.Values{"min_duration": {"2s"}, "max_duration": {"1s"}}, `min_duration: 2s is above max_duration 1s`},
		{url.Values{"status": {"failed"}}, `status: invalid status "failed": want ok, error or unset`},
		{url.Values{"limit": {"0"}}, `limit: invalid limit "0": want an integer from 1 to 10000`},
		{url.Values{"limit": {"10001"}}, `limit: invalid limit "10001"`},
		{url.Values{"limit": {"ten"}}, `limit: invalid limit "ten"`},
		{url.Values{"since": {"yesterday"}}, `since: invalid time "yesterday"`},
		{url.Values{"until": {"2024-02-30T00:00:00Z"}}, `until: invalid time "2024-02-30T00:00:00Z": not RFC 3339`},
		{url.Values{"since": {"1800-01-01T00:00:00Z"}}, `since: time "1800-01-01T00:00:00Z" is outside 1970..2261`},
		{url.Values{"since": {"1h"}, "until": {"2h"}}, `since: 2024-05-01T11:00:00Z is not before until 2024-05-01T10:00:00Z`},
		{url.Values{"q": {`{ kind = banana }`}}, `q: position 9: unknown span kind "banana"`},
	}
	for _, c := range cases {
		_, err := FromValues(c.v, now)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("FromValues(%v) error = %v, want prefix %s", c.v, err, c.want)
		}
	}
	_, err := FromValues(url.Values{"q": {`{ x }`}}, now)
	var se *SyntaxError
	if !errors.As(err, &se) || se.Pos != 2 {
		t.Errorf("q error must wrap a *SyntaxError at position 2, got %v", err)
	}
}
