package logstore

import (
	"cmp"
	"errors"
	"io/fs"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// compiled is a Query with its words tokenised.
type compiled struct {
	Query
	words  []string
	hashes []uint64
	// hidden, when set, drops records an erasure in progress covers (and
	// those Match refuses).
	hidden func(r *model.LogRecord, seq uint64) bool
}

func compile(q Query) compiled {
	c := compiled{Query: q}
	seen := map[string]bool{}
	text.Tokens(q.Text, func(tok string) {
		if !seen[tok] {
			seen[tok] = true
			c.words = append(c.words, tok)
			c.hashes = append(c.hashes, text.Hash(tok))
		}
	})
	if c.Limit <= 0 {
		c.Limit = 100
	}
	return c
}

// inWindow reports whether time t and sequence seq fall in the window and
// before the cursor.
func (c *compiled) inWindow(t, seq uint64) bool {
	if t < c.Since || (c.Until != 0 && t >= c.Until) {
		return false
	}
	if b := c.Before; b != nil && (t > b.Time || (t == b.Time && seq >= b.Seq)) {
		return false
	}
	return true
}

func (c *compiled) headerMatch(h *header) bool {
	return c.inWindow(h.time, h.seq) && h.severity >= c.MinSeverity &&
		(c.TraceID.IsZero() || h.traceID == c.TraceID) && (c.SpanID.IsZero() || h.spanID == c.SpanID) &&
		(c.Service == "" || h.service == c.Service)
}

// entryMatch is recordMatch using a buffered record's word hashes.
func (c *compiled) entryMatch(e *entry) bool {
	if e.toks == nil {
		return c.recordMatch(&e.rec)
	}
	for _, h := range c.hashes {
		if _, found := slices.BinarySearch(e.toks, h); !found {
			return false
		}
	}
	return c.Match == nil || c.Match(&e.rec)
}

// tokensMatch reports whether a buffered record's word hashes (projBuf.tokens)
// hold every word of the query.
func (c *compiled) tokensMatch(toks []byte) bool {
	for _, h := range c.hashes {
		if !hasToken(toks, h) {
			return false
		}
	}
	return true
}

func (c *compiled) recordMatch(r *model.LogRecord) bool {
	if len(c.words) > 0 {
		have := map[uint64]bool{}
		recordTokens(r, func(h uint64) { have[h] = true })
		for _, h := range c.hashes {
			if !have[h] {
				return false
			}
		}
	}
	return c.Match == nil || c.Match(r)
}

// blockMayMatch prunes a block by its footer entry.
func (c *compiled) blockMayMatch(m *blockMeta) bool {
	if m.maxT < c.Since || (c.Until != 0 && m.minT >= c.Until) || m.maxSev < c.MinSeverity {
		return false
	}
	if b := c.Before; b != nil && m.minT > b.Time {
		return false
	}
	if !c.TraceID.IsZero() && !m.traces.has(traceHash(c.TraceID)) {
		return false
	}
	if c.Service != "" && !slices.Contains(m.services, c.Service) {
		return false
	}
	for _, h := range c.hashes {
		if m.keyed {
			h = keyHash(wordKey(h))
		}
		if !m.tokens.has(h) {
			return false
		}
	}
	return true
}

// newer orders hits newest first.
func newer(a, b Hit) int {
	if c := cmp.Compare(b.Record.Time(), a.Record.Time()); c != 0 {
		return c
	}
	return cmp.Compare(b.Seq, a.Seq)
}

// SearchLogs returns the newest records matching q, at most q.Limit, and a
// cursor when more may follow.
func (s *Store) SearchLogs(q Query) (Page, error) {
	c := compile(q)
	s.mu.RLock()
	var mem []projBuf // snapshots: the records and summaries so far
	for _, m := range []map[string]*projBuf{s.bufs, s.sealing} {
		if pb := m[q.Project]; pb != nil && pb.n > 0 {
			mem = append(mem, *pb)
		}
	}
	if erased := erasedIn(s.man.Erased, q.Project); erased != nil {
		// An erasure in progress: its records are hidden at once.
		match := c.Match
		c.Match = nil
		c.hidden = func(r *model.LogRecord, seq uint64) bool {
			return isErased(erased, r.TraceID, seq) || match != nil && !match(r)
		}
	}
	var segs []*segment
	for _, seg := range s.segs {
		if seg.project == q.Project && seg.maxT >= c.Since && (c.Until == 0 || seg.minT < c.Until) {
			segs = append(segs, seg)
		}
	}
	acquire(segs) // kept while a merge or retention replaces them
	s.mu.RUnlock()
	defer func() {
		for _, seg := range segs {
			s.release(seg)
		}
	}()

	var page Page
	// hits keeps at most Limit+1 of the newest matches seen so far; floor
	// is the oldest of them once it is full: nothing older can enter.
	var hits []Hit
	full := func() bool { return len(hits) > c.Limit }
	keep := func(h Hit) {
		hits = append(hits, h)
		if len(hits) > 2*(c.Limit+1) {
			slices.SortFunc(hits, newer)
			hits = hits[:c.Limit+1]
		}
	}
	floor := func() uint64 {
		slices.SortFunc(hits, newer)
		hits = hits[:min(len(hits), c.Limit+1)]
		return hits[len(hits)-1].Record.Time()
	}
	for i := range mem {
		pb := &mem[i]
		scan := func(from, to int) error {
			for i := from; i < to; i++ {
				r := pb.row(i)
				h := header{time: r.recTime(), seq: r.seq, severity: r.severity, traceID: r.traceID, spanID: r.spanID, service: pb.services[r.service]}
				if !c.headerMatch(&h) || !c.tokensMatch(pb.tokens(r)) {
					continue
				}
				rec, err := pb.record(r)
				if err != nil {
					return err
				}
				if (c.Match == nil || c.Match(&rec)) && (c.hidden == nil || !c.hidden(&rec, r.seq)) {
					keep(Hit{Seq: r.seq, Record: rec})
				}
			}
			return nil
		}
		for ci := range pb.sums {
			if c.chunkMayMatch(&pb.sums[ci]) {
				if err := scan(ci*chunkRecords, (ci+1)*chunkRecords); err != nil {
					return Page{}, err
				}
			}
		}
		if err := scan(len(pb.sums)*chunkRecords, pb.n); err != nil {
			return Page{}, err
		}
	}
	// Segments newest first, and their blocks from the newest.
	slices.SortFunc(segs, func(a, b *segment) int { return cmp.Compare(b.maxT, a.maxT) })
	for _, seg := range segs {
		if full() && seg.maxT < floor() {
			continue
		}
		for bi := len(seg.blocks) - 1; bi >= 0; bi-- {
			m := &seg.blocks[bi]
			if !c.blockMayMatch(m) || (full() && m.maxT < floor()) {
				page.BlocksSkipped++
				continue
			}
			page.BlocksRead++
			blk, err := seg.readBlock(bi)
			if errors.Is(err, fs.ErrNotExist) && !s.live(seg) {
				break // retention removed it after the snapshot
			}
			if err != nil {
				return Page{}, err
			}
			// A word search reads the block's word index and looks only
			// at the records it lists.
			var cand []int
			if len(c.hashes) > 0 && m.cols[colWords] > 0 {
				ix, err := blk.col(colWords)
				if err != nil {
					return Page{}, err
				}
				if cand, err = lookupWords(ix, c.hashes, m.n); err != nil {
					return Page{}, blk.corrupt(err.Error())
				}
				if len(cand) == 0 {
					continue
				}
			}
			hs, err := blk.headers()
			if err != nil {
				return Page{}, err
			}
			var idx []int
			if cand != nil {
				for _, i := range cand {
					if c.headerMatch(&hs[i]) {
						idx = append(idx, i)
					}
				}
			} else {
				for i := range hs {
					if c.headerMatch(&hs[i]) {
						idx = append(idx, i)
					}
				}
			}
			if len(idx) == 0 {
				continue
			}
			es, err := blk.records(hs, idx)
			if err != nil {
				return Page{}, err
			}
			for i := range es {
				if c.recordMatch(&es[i].rec) && (c.hidden == nil || !c.hidden(&es[i].rec, es[i].seq)) {
					keep(Hit{Seq: es[i].seq, Record: es[i].rec})
				}
			}
		}
	}
	slices.SortFunc(hits, newer)
	if len(hits) > c.Limit {
		hits = hits[:c.Limit]
		last := hits[len(hits)-1]
		page.Next = &Cursor{Time: last.Record.Time(), Seq: last.Seq}
	}
	page.Hits = hits
	return page, nil
}

func (s *Store) live(seg *segment) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Contains(s.segs, seg)
}
