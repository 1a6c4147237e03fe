package segment

import (
	"fmt"
	"sort"

	"github.com/rastro-dev/rastro/internal/sketch"
)

// SessionTable is a project's session table (section 16) with its sketch
// columns left encoded: Rows carry every count, sum and bound, and
// Sketches decodes one row's latency sketches on demand. A query that
// ranks sessions by their counts and shows percentiles for a page of them
// (group by session with a limit) decodes a page of sketches instead of
// one per session, which dominates decoding the table whole.
//
// A SessionTable holds the decompressed part; it is immutable and safe
// for concurrent use.
type SessionTable struct {
	Rows []SessionEntry // sorted by ID; M.Latency and M.TTFT are nil
	part string         // the decompressed part; Rows' strings point into it
	sk   []uint32       // 2n offsets in part: row i's latency sketch string at sk[i], its TTFT one at sk[n+i]
	file string         // for corruption errors
	off  int64          // of the part in the file
	what string
}

// Find returns the index of session id in Rows, or -1.
func (t *SessionTable) Find(id string) int {
	i := sort.Search(len(t.Rows), func(i int) bool { return t.Rows[i].ID >= id })
	if i < len(t.Rows) && t.Rows[i].ID == id {
		return i
	}
	return -1
}

// Sketches decodes the latency and time-to-first-token sketches of row i
// (ttft nil when the session has none). Damage is a *CorruptionError.
func (t *SessionTable) Sketches(i int) (lat, ttft *sketch.Sketch, err error) {
	if i < 0 || i >= len(t.Rows) {
		return nil, nil, fmt.Errorf("%s: session row %d out of range [0, %d)", t.what, i, len(t.Rows))
	}
	spans := uint64(t.Rows[i].M.Spans)
	corrupt := func(format string, args ...any) error {
		return &CorruptionError{File: t.file, Offset: t.off, Msg: fmt.Sprintf("%s: session %d: ", t.what, i) + fmt.Sprintf(format, args...)}
	}
	d := dec{s: t.part, off: int(t.sk[i])}
	if lat, err = sketch.Decode([]byte(d.str())); err != nil {
		return nil, nil, corrupt("latency sketch: %v", err)
	}
	if lat.Count() != spans {
		return nil, nil, corrupt("latency sketch counts %d values for %d spans", lat.Count(), spans)
	}
	d.off = int(t.sk[len(t.Rows)+i])
	if b := d.str(); b != "" {
		if ttft, err = sketch.Decode([]byte(b)); err != nil {
			return nil, nil, corrupt("time-to-first-token sketch: %v", err)
		}
		if ttft.Count() == 0 || ttft.Count() > spans {
			return nil, nil, corrupt("time-to-first-token sketch counts %d values for %d spans", ttft.Count(), spans)
		}
	}
	return lat, ttft, nil
}

// OpenSessionTable reads a project's session table with its counts
// decoded and its sketch columns indexed, not decoded (see SessionTable).
// It returns nil for a segment without rollups (HasRollups) or an unknown
// project; damage is a *CorruptionError.
func (r *Reader) OpenSessionTable(project string) (*SessionTable, error) {
	ref, ok, err := r.rollRef(project, 1)
	if !ok || err != nil {
		return nil, err
	}
	what := fmt.Sprintf("LLM session table of project %q", project)
	s, off, err := r.readPart(&r.rolls, ref, what)
	if err != nil {
		return nil, err
	}
	t := &SessionTable{part: s, file: r.path, off: off, what: what}
	if s == "" {
		return t, nil
	}
	rows, d, err := decodeSessionCounts(s, false)
	if err == nil {
		t.Rows = rows
		err = t.index(d)
	}
	if err != nil {
		return nil, r.corrupt(off, "%s: %v", what, err)
	}
	return t, nil
}

// index records where each row's sketch strings lie, from d (left at the
// sketch columns by decodeSessionCounts) to the end of the part.
func (t *SessionTable) index(d *dec) error {
	n := len(t.Rows)
	t.sk = make([]uint32, 2*n)
	for i := range t.sk {
		t.sk[i] = uint32(d.off)
		d.skipStr()
		if d.err != nil {
			return fmt.Errorf("session %d sketch: %w", i%max(n, 1), d.err)
		}
	}
	if d.remaining() != 0 {
		return fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return nil
}
