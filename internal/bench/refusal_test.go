package bench

import (
	"strings"
	"testing"
)

func TestRefusals(t *testing.T) {
	good := LoadResult{Requests: 10, AckedRequests: 10, SentSpans: 10000, AcceptedSpans: 10000}
	cases := []struct {
		name string
		f    RunFacts
		want []string // substrings, one per expected reason; nil = accepted
	}{
		{"clean run", RunFacts{Load: good, Expected: 10000, Stored: 10000}, nil},
		{"clean wal run", RunFacts{Load: good, Expected: 10000, Stored: 10000, Restarted: true, RestartStored: 10000}, nil},
		{"stored more (resent spans elsewhere) is fine", RunFacts{Load: good, Expected: 10000, Stored: 10001}, nil},
		{"one 429", RunFacts{Load: with(good, func(l *LoadResult) { l.Status429 = 1; l.AcceptedSpans = 9000; l.FirstError = "429 Too Many Requests" }), Expected: 10000, Stored: 9000},
			[]string{"1 of 10 batches failed (1 answered 429, 0 errors): first: 429", "acknowledged 9000 of 10000", "stored count 9000 is short"}},
		{"error status", RunFacts{Load: with(good, func(l *LoadResult) { l.Errors = 2; l.AcceptedSpans = 8000 }), Expected: 10000, Stored: 10000},
			[]string{"2 of 10 batches failed (0 answered 429, 2 errors)", "acknowledged 8000 of 10000"}},
		{"shed connection", RunFacts{Load: with(good, func(l *LoadResult) { l.Shed = 1; l.AcceptedSpans = 9000 }), Expected: 10000, Stored: 10000},
			[]string{"shed 1 connections", "acknowledged 9000"}},
		{"partial success", RunFacts{Load: with(good, func(l *LoadResult) { l.RejectedSpans = 5; l.AcceptedSpans = 9995 }), Expected: 10000, Stored: 9995},
			[]string{"acknowledged 9995 of 10000 spans (5 rejected", "stored count 9995 is short"}},
		{"stored short", RunFacts{Load: good, Expected: 10000, Stored: 9999}, []string{"stored count 9999 is short of 10000"}},
		{"stored unreadable", RunFacts{Load: good, Expected: 10000, Stored: -1}, []string{"could not be read"}},
		{"lost on restart", RunFacts{Load: good, Expected: 10000, Stored: 10000, Restarted: true, RestartStored: 9000},
			[]string{"after restart the stored count 9000 is short"}},
		{"interrupted", RunFacts{Load: with(good, func(l *LoadResult) { l.SentSpans = 5000; l.AcceptedSpans = 5000 }), Expected: 10000, Stored: 5000},
			[]string{"only 5000 of 10000 spans were sent", "acknowledged 5000", "stored count 5000"}},
	}
	for _, c := range cases {
		got := Refusals(c.f)
		if len(got) != len(c.want) {
			t.Errorf("%s: reasons = %q, want %d reasons", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: reason %d = %q, want it to contain %q", c.name, i, got[i], w)
			}
		}
	}
}

func with(l LoadResult, f func(*LoadResult)) LoadResult { f(&l); return l }
