package segment

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The LLM rollups (sections 16 and 17) answer the queries over a whole
// segment that do not need the per-(session, user, hour) entries of the
// project rollups in section 6, which a session-heavy workload makes large
// (one entry per session, user, hour, model, ... and a sketch each). Per
// project, in this order, two parts:
//
//   - the coarse rollup: the project rollup merged without session and
//     user (model, provider, service, operation, agent, hour), with
//     sketches; an aggregates part (encodeAggPart);
//   - the session table: one row per session id (the empty id included),
//     merged over everything else: counts, sums, first and last seen, the
//     session's users, and its latency sketches last, so that a reader
//     that wants counts only stops before them (encodeSessionPart).
//
// Both are derived from the same block entries as section 6, so they add
// nothing a rewrite from the blocks does not recompute. The directory
// (section 17) is encoded as section 10's with no block parts and two parts
// per project. Segments written before the rollups have neither section;
// the reader then answers from section 6.

// SessionEntry is one row of a segment's session table.
type SessionEntry struct {
	ID    string
	Users []string // the session's non-empty user ids, sorted
	// M: the session's measures merged over its keys (Traces summed as
	// in a rollup). Latency and TTFT are nil unless read with sketches.
	M AggMeasures
}

// rollupParts derives the coarse rollup and the session table of a
// project from its rollup entries (sorted by key).
func rollupParts(entries []AggEntry) (coarse []AggEntry, sessions []SessionEntry) {
	cidx := map[AggKey]int{}
	sidx := map[string]int{}
	for i := range entries {
		en := &entries[i]
		k := en.Key
		k.Session, k.User = "", ""
		j, ok := cidx[k]
		if !ok {
			j = len(coarse)
			cidx[k] = j
			coarse = append(coarse, AggEntry{Key: k})
		}
		coarse[j].M.Merge(&en.M)
		j, ok = sidx[en.Key.Session]
		if !ok {
			j = len(sessions)
			sidx[en.Key.Session] = j
			sessions = append(sessions, SessionEntry{ID: en.Key.Session})
		}
		s := &sessions[j]
		s.M.Merge(&en.M)
		if u := en.Key.User; u != "" && !slices.Contains(s.Users, u) {
			s.Users = append(s.Users, u)
		}
	}
	slices.SortFunc(coarse, func(x, y AggEntry) int { return compareAggKeys(&x.Key, &y.Key) })
	slices.SortFunc(sessions, func(x, y SessionEntry) int { return strings.Compare(x.ID, y.ID) })
	for i := range sessions {
		slices.Sort(sessions[i].Users)
	}
	return coarse, sessions
}

// addRollups writes the coarse rollup and the session table of the project
// whose rollup entries (sorted) are entries.
func (a *aggWriter) addRollups(w *Writer, entries []AggEntry) {
	coarse, sessions := rollupParts(entries)
	data := a.data // part() appends to a.data: borrow it for the rollups section
	a.data = a.rollData
	a.rolls = append(a.rolls, a.part(w, coarse))
	if len(sessions) == 0 {
		a.rolls = append(a.rolls, aggRef{Offset: uint64(len(a.data))})
	} else {
		raw := encodeSessionPart(nil, sessions)
		start := len(a.data)
		var codec uint32
		a.data, codec = compressInto(w.enc.enc, a.data, raw)
		a.rolls = append(a.rolls, aggRef{Codec: codec, Offset: uint64(start), Length: uint64(len(a.data) - start),
			RawLen: uint64(len(raw)), CRC: crc(a.data[start:])})
	}
	a.rollData, a.data = a.data, data
}

// encodeSessionPart encodes a session table (sorted by id, ids distinct):
//
//	uvarint n strings | n x str                    (part-local dictionary of user ids)
//	uvarint n sessions
//	n x str session id
//	n x (uvarint n users | n x uvarint user index)
//	n x (uvarint spans | uvarint errors | uvarint counted | uvarint traces)
//	n x (varint input, output, cache read, cache creation, reasoning tokens | varint cost)
//	n x (uvarint min start | uvarint max end - min start (wrapping))
//	n x str latency sketch
//	n x str TTFT sketch (empty = nil)
func encodeSessionPart(dst []byte, sessions []SessionEntry) []byte {
	ids := map[string]uint64{}
	var table []string
	var body []byte
	for i := range sessions {
		body = appendStr(body, sessions[i].ID)
	}
	for i := range sessions {
		us := sessions[i].Users
		body = appendUvarints(body, uint64(len(us)))
		for _, u := range us {
			j, ok := ids[u]
			if !ok {
				j = uint64(len(table))
				ids[u] = j
				table = append(table, u)
			}
			body = appendUvarints(body, j)
		}
	}
	body = appendCountColumns(body, len(sessions), func(i int) *AggMeasures { return &sessions[i].M })
	for i := range sessions {
		m := &sessions[i].M
		body = appendUvarints(body, m.MinStart, m.MaxEnd-m.MinStart)
	}
	body = appendSketchColumns(body, len(sessions), func(i int) *AggMeasures { return &sessions[i].M })
	dst = appendUvarints(dst, uint64(len(table)))
	for _, s := range table {
		dst = appendStr(dst, s)
	}
	dst = appendUvarints(dst, uint64(len(sessions)))
	return append(dst, body...)
}

// decodeSessionPart parses and validates a session table; without
// sketches it stops before them (the part's checksum still covers them).
// Strings are copied out of s.
func decodeSessionPart(s string, sketches bool) ([]SessionEntry, error) {
	out, d, err := decodeSessionCounts(s, true)
	if err != nil || !sketches {
		return out, err
	}
	if err := decodeSketchColumns(d, len(out), func(i int) *AggMeasures { return &out[i].M }, "session"); err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.remaining() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return out, nil
}

// decodeSessionCounts parses and validates a session table up to its
// sketch columns, where it leaves the returned decoder. Strings are copied
// out of s when clone is set, else they point into s.
func decodeSessionCounts(s string, clone bool) ([]SessionEntry, *dec, error) {
	keep := func(x string) string { return x }
	if clone {
		keep = strings.Clone
	}
	d := &dec{s: s}
	table := d.strs()
	n := d.count(14) // a session takes at least 14 bytes
	if d.err != nil {
		return nil, nil, d.err
	}
	users := make([]string, len(table))
	for i, t := range table {
		users[i] = keep(t)
	}
	out := make([]SessionEntry, n)
	for i := range out {
		out[i].ID = keep(d.str())
		if i > 0 && d.err == nil && out[i-1].ID >= out[i].ID {
			return nil, nil, fmt.Errorf("session %d: ids not in increasing order", i)
		}
	}
	for i := range out {
		nu := d.count(1)
		if d.err != nil {
			return nil, nil, fmt.Errorf("session %d users: %w", i, d.err)
		}
		if nu > 0 {
			out[i].Users = make([]string, nu)
		}
		for j := range nu {
			u := d.index(len(users))
			if d.err != nil {
				return nil, nil, fmt.Errorf("session %d users: %w", i, d.err)
			}
			out[i].Users[j] = users[u]
			if j > 0 && out[i].Users[j-1] >= out[i].Users[j] {
				return nil, nil, fmt.Errorf("session %d: users not in increasing order", i)
			}
		}
	}
	if err := decodeCountColumns(d, len(out), func(i int) *AggMeasures { return &out[i].M }, "session"); err != nil {
		return nil, nil, err
	}
	for i := range out {
		m := &out[i].M
		m.MinStart = d.uvarint()
		m.MaxEnd = m.MinStart + d.uvarint()
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return out, d, nil
}

// openRollups loads the directory of the LLM rollups, like openAggs.
func (r *Reader) openRollups(sections map[uint32]tocEntry, load func(uint32) (string, int64, error)) {
	r.rolls = r.openParts(sections, load, sectionLLMRollups, sectionLLMRollupDir, "LLM rollups", 0, 2*len(r.info.Projects))
}

// HasRollups reports whether the segment was written with the LLM rollups
// (sections 16 and 17): a coarse rollup and a session table per project.
// Segments written before them have none; their project rollups
// (SegmentAggregates) answer the same questions.
func (r *Reader) HasRollups() bool { return r.rolls.present }

// rollRef returns the reference of part k (0: coarse rollup, 1: session
// table) of project, and false for a project the segment does not hold.
func (r *Reader) rollRef(project string, k int) (aggRef, bool, error) {
	if !r.rolls.present {
		return aggRef{}, false, nil
	}
	if r.rolls.err != nil {
		return aggRef{}, false, r.rolls.err
	}
	pi := sort.Search(len(r.info.Projects), func(i int) bool { return r.info.Projects[i].Name >= project })
	if pi == len(r.info.Projects) || r.info.Projects[pi].Name != project {
		return aggRef{}, false, nil
	}
	return r.rolls.projects[2*pi+k], true, nil
}

// CoarseAggregates returns a project's rollup without session and user:
// SegmentAggregates merged by key with Session and User blanked, sorted by
// key. It reads on demand; nil for a segment without rollups or an unknown
// project, damage is a *CorruptionError.
func (r *Reader) CoarseAggregates(project string) ([]AggEntry, error) {
	ref, ok, err := r.rollRef(project, 0)
	if !ok || err != nil {
		return nil, err
	}
	what := fmt.Sprintf("LLM coarse rollup of project %q", project)
	s, off, err := r.readPart(&r.rolls, ref, what)
	if err != nil || s == "" {
		return nil, err
	}
	entries, err := decodeAggPart(s)
	if err != nil {
		return nil, r.corrupt(off, "%s: %v", what, err)
	}
	return entries, nil
}

// SessionTable returns a project's sessions, sorted by id: SegmentAggregates
// merged by session. Without sketches the rows' Latency and TTFT are nil
// and only the counts are decoded. It reads on demand, like
// CoarseAggregates.
func (r *Reader) SessionTable(project string, sketches bool) ([]SessionEntry, error) {
	ref, ok, err := r.rollRef(project, 1)
	if !ok || err != nil {
		return nil, err
	}
	what := fmt.Sprintf("LLM session table of project %q", project)
	s, off, err := r.readPart(&r.rolls, ref, what)
	if err != nil || s == "" {
		return nil, err
	}
	rows, err := decodeSessionPart(s, sketches)
	if err != nil {
		return nil, r.corrupt(off, "%s: %v", what, err)
	}
	return rows, nil
}

// verifyRollups checks that the rollups decode and agree with the project
// rollups they are derived from (when those read): add records a problem.
func (r *Reader) verifyRollups(add func(off int64, format string, args ...any)) error {
	for pi, p := range r.info.Projects {
		coarse, err := r.CoarseAggregates(p.Name)
		if err != nil {
			return err
		}
		sessions, err := r.SessionTable(p.Name, true)
		if err != nil {
			return err
		}
		full, err := r.SegmentAggregates(p.Name)
		if err != nil || !r.aggs.present {
			continue // section 6's damage is reported by its own check
		}
		wc, ws := rollupParts(full)
		if !sameRollups(coarse, wc, sessions, ws) {
			add(r.rolls.offset+int64(r.rolls.projects[2*pi].Offset),
				"LLM rollups of project %q disagree with its project rollup (%d coarse entries and %d sessions, the rollup gives %d and %d)",
				p.Name, len(coarse), len(sessions), len(wc), len(ws))
		}
	}
	return nil
}

func sameRollups(coarse, wantCoarse []AggEntry, sessions, wantSessions []SessionEntry) bool {
	if len(coarse) != len(wantCoarse) || len(sessions) != len(wantSessions) {
		return false
	}
	same := func(a, b *AggMeasures) bool {
		x, y := *a, *b
		x.Latency, x.TTFT, y.Latency, y.TTFT = nil, nil, nil, nil
		return x == y && a.Latency.Count() == b.Latency.Count() && (a.TTFT == nil) == (b.TTFT == nil)
	}
	for i := range coarse {
		if coarse[i].Key != wantCoarse[i].Key || !same(&coarse[i].M, &wantCoarse[i].M) {
			return false
		}
	}
	for i := range sessions {
		if sessions[i].ID != wantSessions[i].ID || !slices.Equal(sessions[i].Users, wantSessions[i].Users) ||
			!same(&sessions[i].M, &wantSessions[i].M) {
			return false
		}
	}
	return true
}
