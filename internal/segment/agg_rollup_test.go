package segment

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestRollups: every project's coarse rollup and session table equal a
// brute-force aggregation of the project's spans with session and user
// blanked, and per session (Traces aside: a rollup sums them per block);
// the session table read without sketches has the same counts and no
// sketches; a segment without LLM spans has empty rollups; the fixtures
// written before the rollups have none, and say so; fsck finds nothing to
// report on a fresh segment.
func TestRollups(t *testing.T) {
	corpus := genCorpus(52, 3, 120, 60)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	if !r.HasRollups() {
		t.Fatal("HasRollups = false for a new segment")
	}
	sessions := 0
	for _, p := range r.Info().Projects {
		_, spans := expected(map[string][]model.Span{p.Name: corpus[p.Name]})
		coarseSpans := slices.Clone(spans)
		bySession := map[string][]model.Span{}
		for i := range coarseSpans {
			s := &coarseSpans[i]
			if s.LLM == nil {
				continue
			}
			l := *s.LLM
			bySession[l.SessionID] = append(bySession[l.SessionID], spans[i])
			l.SessionID, l.UserID = "", ""
			s.LLM = &l
		}
		coarse, err := r.CoarseAggregates(p.Name)
		if err != nil {
			t.Fatalf("CoarseAggregates(%q): %v", p.Name, err)
		}
		requireEntries(t, "coarse rollup of "+p.Name, coarse, bruteAggregate(coarseSpans), true)

		table, err := r.SessionTable(p.Name, true)
		if err != nil {
			t.Fatalf("SessionTable(%q): %v", p.Name, err)
		}
		counts, err := r.SessionTable(p.Name, false)
		if err != nil {
			t.Fatalf("SessionTable(%q) without sketches: %v", p.Name, err)
		}
		if len(table) != len(bySession) || len(counts) != len(table) {
			t.Fatalf("project %q: %d sessions (%d without sketches), want %d", p.Name, len(table), len(counts), len(bySession))
		}
		for i := range table {
			row := &table[i]
			if i > 0 && table[i-1].ID >= row.ID {
				t.Fatalf("project %q: sessions not sorted by id", p.Name)
			}
			ss := bySession[row.ID]
			if ss == nil {
				t.Fatalf("project %q: unexpected session %q", p.Name, row.ID)
			}
			// The brute-force entries of the session's spans, merged.
			var users []string
			for j := range ss {
				if u := ss[j].LLM.UserID; u != "" && !slices.Contains(users, u) {
					users = append(users, u)
				}
			}
			slices.Sort(users)
			var want AggMeasures
			for _, m := range bruteAggregate(ss) {
				want.Merge(&m)
			}
			if d := measuresDiff(&row.M, &want, true); d != "" {
				t.Fatalf("project %q session %q: %s", p.Name, row.ID, d)
			}
			lo, hi := ss[0].StartTimeUnixNano, ss[0].EndTimeUnixNano
			for j := range ss {
				lo, hi = min(lo, ss[j].StartTimeUnixNano), max(hi, ss[j].EndTimeUnixNano)
			}
			if row.M.MinStart != lo || row.M.MaxEnd != hi {
				t.Fatalf("session %q: seen [%d, %d], want [%d, %d]", row.ID, row.M.MinStart, row.M.MaxEnd, lo, hi)
			}
			if !slices.Equal(row.Users, users) {
				t.Fatalf("session %q: users %v, want %v", row.ID, row.Users, users)
			}
			c := counts[i]
			if c.ID != row.ID || !slices.Equal(c.Users, row.Users) || c.M.Latency != nil || c.M.TTFT != nil {
				t.Fatalf("session %q without sketches: %+v", row.ID, c)
			}
			c.M.Latency, c.M.TTFT = row.M.Latency, row.M.TTFT
			if c.M != row.M {
				t.Fatalf("session %q: counts differ without sketches: %+v vs %+v", row.ID, c.M, row.M)
			}
			sessions++
		}
		// The lazily-sketched table: the same rows, each row's sketches
		// decoded on demand equal the whole decode's.
		lazy, err := r.OpenSessionTable(p.Name)
		if err != nil {
			t.Fatalf("OpenSessionTable(%q): %v", p.Name, err)
		}
		if len(lazy.Rows) != len(table) {
			t.Fatalf("project %q: %d lazy rows, want %d", p.Name, len(lazy.Rows), len(table))
		}
		for i := range table {
			row, lr := &table[i], lazy.Rows[i]
			if lazy.Find(row.ID) != i || lr.ID != row.ID || !slices.Equal(lr.Users, row.Users) || lr.M.Latency != nil {
				t.Fatalf("project %q: lazy row %d is %+v, want %+v (Find %d)", p.Name, i, lr, *row, lazy.Find(row.ID))
			}
			if lr.M.Latency, lr.M.TTFT, err = lazy.Sketches(i); err != nil {
				t.Fatalf("project %q session %q: Sketches: %v", p.Name, row.ID, err)
			}
			if d := measuresDiff(&lr.M, &row.M, false); d != "" {
				t.Fatalf("project %q session %q lazily: %s", p.Name, row.ID, d)
			}
		}
		if lazy.Find("no such session") != -1 {
			t.Fatal("Find found an absent session")
		}
	}
	if sessions == 0 {
		t.Fatal("corpus has no LLM spans")
	}
	if got, err := r.SessionTable("no-such-project", true); got != nil || err != nil {
		t.Fatalf("SessionTable(unknown) = %v, %v", got, err)
	}
	if v, err := Verify(path); err != nil || len(v.Problems) != 0 {
		t.Fatalf("fsck of a fresh segment: %v %+v", err, v.Problems)
	}

	plain := map[string][]model.Span{"p": realisticCorpus(2, 500)}
	r2 := openT(t, func() string { p, _ := writeCorpus(t, plain, WriterOptions{BlockSpans: 100}); return p }())
	if !r2.HasRollups() {
		t.Fatal("HasRollups = false for a segment without LLM spans")
	}
	if c, err := r2.CoarseAggregates("p"); c != nil || err != nil {
		t.Fatalf("coarse rollup of a plain segment: %v, %v", c, err)
	}
	if s, err := r2.SessionTable("p", true); s != nil || err != nil {
		t.Fatalf("session table of a plain segment: %v, %v", s, err)
	}

	for _, fixture := range []string{"testdata/v1.rseg", "testdata/v1-llm.rseg", "testdata/v1-tokens.rseg"} {
		old := openT(t, fixture)
		if old.HasRollups() {
			t.Fatalf("%s claims LLM rollups", fixture)
		}
		for _, p := range old.Info().Projects {
			c, err := old.CoarseAggregates(p.Name)
			s, err2 := old.SessionTable(p.Name, true)
			if c != nil || s != nil || err != nil || err2 != nil {
				t.Fatalf("%s: rollups of %q: %v %v %v %v", fixture, p.Name, c, s, err, err2)
			}
		}
	}
}

// TestSessionPartRoundTrip: a session table decodes to what was encoded,
// refuses ids out of order, and stops before the sketches when asked.
func TestSessionPartRoundTrip(t *testing.T) {
	var rows []SessionEntry
	a := NewAggregator()
	for i := range 50 {
		a.Reset()
		s := model.Span{StartTimeUnixNano: uint64(1e18 + i*1e9), EndTimeUnixNano: uint64(1e18 + i*1e9 + 5e8),
			LLM: &model.LLM{Counted: true, InputTokens: int64(i), TimeToFirstTokenNanos: uint64(i % 3)}}
		a.Add(&s)
		row := SessionEntry{ID: fmt.Sprintf("s%03d", i), M: a.Entries()[0].M}
		for u := range i % 3 {
			row.Users = append(row.Users, fmt.Sprintf("u%d", u+i%5))
		}
		rows = append(rows, row)
	}
	b := encodeSessionPart(nil, rows)
	got, err := decodeSessionPart(string(b), true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if got[i].ID != rows[i].ID || !slices.Equal(got[i].Users, rows[i].Users) || measuresDiff(&got[i].M, &rows[i].M, false) != "" {
			t.Fatalf("row %d: %+v, want %+v", i, got[i], rows[i])
		}
	}
	if _, err := decodeSessionPart(string(b[:len(b)-1]), true); err == nil {
		t.Fatal("a truncated table decoded")
	}
	// Indexed without decoding the sketches: a truncated table is refused
	// too, and a sketch that disagrees with its row's span count is
	// reported when that row's sketches are read.
	tb := &SessionTable{}
	rows2, d, err := decodeSessionCounts(string(b[:len(b)-1]), false)
	if err == nil {
		tb.Rows = rows2
		err = tb.index(d)
	}
	if err == nil {
		t.Fatal("a truncated table was indexed")
	}
	bad := slices.Clone(rows)
	bad[7].M.Spans++
	tb = &SessionTable{part: string(encodeSessionPart(nil, bad))}
	rows2, d, err = decodeSessionCounts(tb.part, false)
	if err != nil {
		t.Fatal(err)
	}
	tb.Rows = rows2
	if err := tb.index(d); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Sketches(6); err != nil {
		t.Fatalf("row 6: %v", err)
	}
	var ce *CorruptionError
	if _, _, err := tb.Sketches(7); !errors.As(err, &ce) {
		t.Fatalf("row 7 (sketch of fewer values than spans): %v, want a *CorruptionError", err)
	}
	rows[3], rows[4] = rows[4], rows[3]
	if _, err := decodeSessionPart(string(encodeSessionPart(nil, rows)), false); err == nil {
		t.Fatal("ids out of order decoded")
	}
}

// FuzzDecodeSessionPart: any bytes decode to an error or to a table whose
// encoding decodes again, without panicking, with and without sketches.
func FuzzDecodeSessionPart(f *testing.F) {
	a := NewAggregator()
	a.Add(&model.Span{StartTimeUnixNano: 1e18, EndTimeUnixNano: 1e18 + 5e8, LLM: &model.LLM{Counted: true, InputTokens: 7, TimeToFirstTokenNanos: 9}})
	m := a.Entries()[0].M
	f.Add(encodeSessionPart(nil, []SessionEntry{{ID: "a", Users: []string{"u1", "u2"}, M: m}, {ID: "b", M: m}}))
	f.Add(encodeSessionPart(nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if rows, d, err := decodeSessionCounts(string(b), false); err == nil {
			tb := &SessionTable{Rows: rows, part: string(b)}
			if tb.index(d) == nil {
				for i := range tb.Rows {
					tb.Sketches(i) // an error, or sketches: never a panic
				}
			}
		}
		if _, err := decodeSessionPart(string(b), false); err != nil {
			return
		}
		rows, err := decodeSessionPart(string(b), true)
		if err != nil {
			return
		}
		if again := encodeSessionPart(nil, rows); string(again) != string(b) {
			// Varints have several encodings: only the decoded rows must agree.
			back, err := decodeSessionPart(string(again), true)
			if err != nil || len(back) != len(rows) {
				t.Fatalf("re-encoded table does not decode: %v", err)
			}
		}
	})
}
