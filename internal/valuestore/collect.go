package valuestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
)

// CollectStats reports what one Collect did.
type CollectStats struct {
	Live           int   // distinct stored values the live set named
	Missing        int   // refs in the live set the store does not hold (dangling references)
	Deleted        int   // values removed from the index
	PacksDeleted   int   // packs deleted because no live value was left in them
	PacksRewritten int   // packs whose live values were copied to new packs, then deleted
	PacksWritten   int   // new packs written by the rewrite
	BytesCopied    int64 // record bytes copied
	BytesFreed     int64 // pack bytes deleted minus bytes written
	Corrupt        []*CorruptionError
}

// move is one live record copied by Collect.
type move struct {
	ref  Ref
	from loc
	to   loc
}

// Collect deletes the values that no published segment references.
//
// live must yield every Ref still referenced by a published segment (the
// caller walks its published segments). CONTRACT: a value Put before Collect
// started and referenced only by a segment that is not yet published (being
// written or sealed) is not in live and WILL BE DELETED. The caller must
// serialise Collect with the publication of segments (the engine runs it
// between seals), or include such refs in live. Values Put during Collect, or
// Put again (deduplicated) during Collect, are kept whatever live says.
//
// Dead values leave the index at once (Has reports false, Get ErrNotFound).
// Packs with no live value are deleted; packs whose live bytes fall below
// Options.RewriteLiveFraction of their size, and small packs (under 1/4 of
// PackBytes, when there are at least two), have their live values copied into
// new packs, which are fsynced and indexed, then published through the
// manifest, and only then are the old packs deleted. A crash at any point
// leaves either the old or the new manifest, and every value either lists
// intact. Dead values in packs that are kept may reappear after a restart
// (they are collected again by the next Collect). Packs found damaged at Open
// are never deleted.
func (s *Store) Collect(live func(yield func(Ref) bool)) (CollectStats, error) {
	return s.collect(live, false)
}

// Purge is Collect that also rewrites every pack holding a value it deletes,
// however small the dead part, so that the deleted values' bytes leave the
// disk (erasure), not only the index. Packs found damaged at Open are still
// kept.
func (s *Store) Purge(live func(yield func(Ref) bool)) (CollectStats, error) {
	return s.collect(live, true)
}

func (s *Store) collect(live func(yield func(Ref) bool), purge bool) (CollectStats, error) {
	s.collectMu.Lock()
	defer s.collectMu.Unlock()
	var st CollectStats
	s.wmu.Lock()
	err := s.writableLocked()
	s.wmu.Unlock()
	if err != nil {
		return st, err
	}

	// Mark: every live ref gets the new epoch. Puts during Collect set it too.
	s.mu.Lock()
	s.epoch++
	epoch := s.epoch
	s.mu.Unlock()
	batch := make([]Ref, 0, 256)
	flush := func() {
		s.mu.Lock()
		for _, r := range batch {
			l, ok := s.index[r]
			switch {
			case !ok:
				st.Missing++
			case l.gen != epoch:
				l.gen = epoch
				s.index[r] = l
				st.Live++
			}
		}
		s.mu.Unlock()
		batch = batch[:0]
	}
	live(func(r Ref) bool {
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			flush()
		}
		return true
	})
	flush()

	// Sweep and plan, with appends stopped.
	s.wmu.Lock()
	if err := s.writableLocked(); err != nil {
		s.wmu.Unlock()
		return st, err
	}
	// The pending frame is written first, so that every value swept lies in a
	// pack.
	if err := s.flushLocked(); err != nil {
		err = s.failLocked(fmt.Errorf("collect: %w", err))
		s.wmu.Unlock()
		return st, err
	}
	deadIn := map[uint32]bool{}
	s.mu.Lock()
	for r, l := range s.index {
		if l.gen != epoch {
			delete(s.index, r)
			p := s.packs[l.pack]
			p.liveBytes -= l.recordBytes()
			p.liveCount--
			deadIn[l.pack] = true
			st.Deleted++
		}
	}
	a := s.active
	// Purge also seals an active pack that holds values found dead by an
	// earlier Collect (kept since, across a restart too).
	sealActive := a != nil && (deadIn[a.seq] || purge && (a.liveBytes < a.size-packHeaderSize || a.liveCount < a.total))
	s.mu.Unlock()
	if sealActive {
		// The active pack holds dead values: seal it so it can be rewritten.
		if err := s.sealLocked(a); err != nil {
			err = s.failLocked(fmt.Errorf("collect: seal pack %s: %w", a.path, err))
			s.wmu.Unlock()
			return st, err
		}
		s.active = nil
	}
	var drop, rewrite, small []*pack
	var outBytes int64
	s.mu.RLock()
	for _, p := range s.packs {
		if p == s.active || p.damaged {
			continue
		}
		body := float64(p.size - packHeaderSize)
		switch {
		case p.liveCount == 0:
			drop = append(drop, p)
		case float64(p.liveBytes) < s.opts.RewriteLiveFraction*body || (purge && (float64(p.liveBytes) < body || p.liveCount < p.total)):
			rewrite = append(rewrite, p)
		case p.size < s.opts.PackBytes/4:
			small = append(small, p)
		}
	}
	if len(small) >= 2 {
		for _, p := range small {
			rewrite = append(rewrite, p)
		}
	}
	rewriting := map[uint32]bool{}
	for _, p := range rewrite {
		rewriting[p.seq] = true
	}
	var moves []move
	if len(rewrite) > 0 {
		for r, l := range s.index {
			if rewriting[l.pack] {
				moves = append(moves, move{ref: r, from: l})
				// A value written again in a smaller frame may compress less
				// than its share of the old one, but takes at most its raw
				// bytes and a header.
				outBytes += max(l.recordBytes(), int64(l.rawLen)+2*binary.MaxVarintLen32+frameFixedSize)
			}
		}
	}
	s.mu.RUnlock()
	// Reserve sequences for the output packs: one per PackBytes of output,
	// plus one for the record that crosses each boundary.
	firstSeq := s.nextSeq
	reserved := uint32(0)
	if len(moves) > 0 {
		reserved = uint32(outBytes/s.opts.PackBytes) + 2
	}
	s.nextSeq += reserved
	s.wmu.Unlock()

	// Copy, with no lock held: the packs being rewritten are sealed and only
	// this Collect deletes or moves index entries.
	slices.SortFunc(moves, func(a, b move) int {
		if a.from.pack != b.from.pack {
			return int(int64(a.from.pack) - int64(b.from.pack))
		}
		if a.from.off != b.from.off {
			return int(int64(a.from.off) - int64(b.from.off))
		}
		return int(int64(a.from.rawOff) - int64(b.from.rawOff))
	})
	outs, kept, err := s.copyLive(moves, firstSeq, reserved, &st)
	if err != nil {
		s.discard(outs)
		return st, fmt.Errorf("collect: %w", err)
	}

	// Publish: the output packs in, the dropped and rewritten packs out.
	s.wmu.Lock()
	if err := s.writableLocked(); err != nil {
		s.wmu.Unlock()
		s.discard(outs)
		return st, err
	}
	var retire []*pack
	for _, p := range drop {
		retire = append(retire, p)
	}
	for _, p := range rewrite {
		if !kept[p.seq] {
			retire = append(retire, p)
		}
	}
	if len(retire) == 0 && len(outs) == 0 {
		s.wmu.Unlock()
		return st, nil
	}
	gone := map[uint32]bool{}
	for _, p := range retire {
		gone[p.seq] = true
	}
	var list []uint32
	for _, seq := range s.packListLocked() {
		if !gone[seq] {
			list = append(list, seq)
		}
	}
	for _, p := range outs {
		list = append(list, p.seq)
	}
	slices.Sort(list)
	if err := s.publishManifestLocked(list); err != nil {
		// The manifest on disk is now the old or the new one: keep every file.
		err = s.failLocked(fmt.Errorf("collect: %w", err))
		s.wmu.Unlock()
		return st, err
	}
	s.mu.Lock()
	for _, p := range outs {
		s.packs[p.seq] = p
	}
	for _, m := range moves {
		if kept[m.from.pack] || m.to.pack == 0 {
			continue
		}
		if cur, ok := s.index[m.ref]; ok && cur.pack == m.from.pack && cur.off == m.from.off && cur.rawOff == m.from.rawOff {
			m.to.gen = cur.gen
			s.index[m.ref] = m.to
			s.packs[m.from.pack].liveBytes -= m.from.recordBytes()
			s.packs[m.from.pack].liveCount--
			s.packs[m.to.pack].liveBytes += m.to.recordBytes()
			s.packs[m.to.pack].liveCount++
		}
	}
	for _, p := range retire {
		delete(s.packs, p.seq)
	}
	s.mu.Unlock()
	s.wmu.Unlock()

	// Delete the retired files. A crash before this leaves packs the manifest
	// does not list, which Open removes.
	var written int64
	for _, p := range outs {
		written += p.size + p.idxSize
	}
	var freed int64
	for _, p := range retire {
		freed += p.size + p.idxSize
		p.release()
		if err := s.fs.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return st, fmt.Errorf("collect: remove %s: %w", p.path, err)
		}
		if p.idxSize > 0 {
			if err := s.fs.Remove(s.path(idxName(p.seq))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return st, fmt.Errorf("collect: remove index of %s: %w", p.path, err)
			}
		}
		if rewriting[p.seq] {
			st.PacksRewritten++
		} else {
			st.PacksDeleted++
		}
	}
	st.PacksWritten = len(outs)
	st.BytesFreed = freed - written
	if err := s.fs.SyncDir(s.dir); err != nil {
		return st, fmt.Errorf("collect: sync value store dir %s: %w", s.dir, err)
	}
	return st, nil
}

// copyLive copies the live values of moves into new packs numbered from
// firstSeq, fills in each move's destination, and makes the new packs durable
// with their indexes (not yet published). A record whose values are all live
// is copied as it is; the live values of any other record (and of a
// version-1 record) are written again as a new frame, so a dead value's bytes
// are not copied. A source pack with a record that fails verification is kept
// as it is (kept[seq]) and its moves are abandoned.
func (s *Store) copyLive(moves []move, firstSeq, reserved uint32, st *CollectStats) ([]*pack, map[uint32]bool, error) {
	kept := map[uint32]bool{}
	var outs []*pack
	var out *pack
	finish := func() error {
		if out == nil {
			return nil
		}
		if err := out.f.Sync(); err != nil {
			return fmt.Errorf("sync pack %s: %w", out.path, err)
		}
		out.synced = out.size
		return nil
	}
	s.mu.RLock()
	srcs := map[uint32]*pack{}
	for _, m := range moves {
		if _, ok := srcs[m.from.pack]; !ok {
			p := s.packs[m.from.pack]
			p.acquire()
			srcs[m.from.pack] = p
		}
	}
	s.mu.RUnlock()
	defer func() {
		for _, p := range srcs {
			p.release()
		}
	}()
	var buf []byte
	for i := 0; i < len(moves); {
		j := i + 1
		for j < len(moves) && moves[j].from.pack == moves[i].from.pack && moves[j].from.off == moves[i].from.off {
			j++
		}
		group := moves[i:j]
		i = j
		from := group[0].from
		if kept[from.pack] {
			continue
		}
		src := srcs[from.pack]
		n := int(from.size)
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if k, err := src.f.ReadAt(buf, int64(from.off)); k < n {
			return outs, kept, fmt.Errorf("read pack %s at %d: %w", src.path, from.off, err)
		}
		rec, lens, err := s.recopy(src.version, buf, group)
		if err != nil {
			st.Corrupt = append(st.Corrupt, &CorruptionError{File: src.path, Offset: int64(from.off), Msg: err.Error() + "; pack kept as is"})
			kept[from.pack] = true
			continue
		}
		if out == nil || out.size >= s.opts.PackBytes {
			if err := finish(); err != nil {
				return outs, kept, err
			}
			if uint32(len(outs)) == reserved {
				return outs, kept, errors.New("ran out of reserved pack sequences (bug)")
			}
			out, err = s.createPack(firstSeq + uint32(len(outs)))
			if err != nil {
				return outs, kept, err
			}
			out.sealed = true
			outs = append(outs, out)
		}
		if _, err := out.f.WriteAt(rec, out.size); err != nil {
			return outs, kept, fmt.Errorf("write pack %s: %w", out.path, err)
		}
		if lens == nil {
			for k := range group {
				m := &group[k]
				m.to = loc{pack: out.seq, off: uint32(out.size), size: uint32(len(rec)), rawOff: m.from.rawOff, rawLen: m.from.rawLen, share: m.from.share}
			}
		} else {
			sh := shares(int64(len(rec)), lens)
			var rawOff uint32
			for k := range group {
				m := &group[k]
				m.to = loc{pack: out.seq, off: uint32(out.size), size: uint32(len(rec)), rawOff: rawOff, rawLen: lens[k], share: sh[k]}
				rawOff += lens[k]
			}
		}
		out.total += len(group)
		out.size += int64(len(rec))
		st.BytesCopied += int64(len(rec))
	}
	if err := finish(); err != nil {
		return outs, kept, err
	}
	// Records copied from a pack that was then kept are left out of the index:
	// their bytes are dead in the new pack.
	byPack := map[uint32][]idxEntry{}
	for _, m := range moves {
		if m.to.pack != 0 && !kept[m.from.pack] {
			byPack[m.to.pack] = append(byPack[m.to.pack], idxEntry{ref: m.ref, off: uint64(m.to.off), size: m.to.size, rawOff: m.to.rawOff, rawLen: m.to.rawLen})
		}
	}
	for _, p := range outs {
		es := byPack[p.seq]
		sortEntries(es)
		b := encodeIndex(p.seq, p.size, p.total, es)
		if err := s.writeFileAtomic(idxName(p.seq), b); err != nil {
			return outs, kept, fmt.Errorf("write index of pack %s: %w", p.path, err)
		}
		p.indexed, p.idxSize = p.size, int64(len(b))
	}
	return outs, kept, nil
}

// recopy returns the record to write for the live values group of the
// record buf (of a pack of the given version), with the raw length of each
// value in it, or nil lengths when it is buf itself (every value of a
// version-2 record is live). It verifies the record's checksums, and the
// SHA-256 of each value it writes again.
func (s *Store) recopy(version uint8, buf []byte, group []move) ([]byte, []uint32, error) {
	if version == 1 {
		raw, err := valueV1(buf, group[0].ref)
		if err != nil {
			return nil, nil, err
		}
		if RefOf(raw) != group[0].ref {
			return nil, nil, errors.New("value does not hash to its SHA-256")
		}
		return encodeFrame(s.enc, [][]byte{raw}), []uint32{uint32(len(raw))}, nil
	}
	h, err := parseFrameHeader(buf)
	switch {
	case err != nil:
		return nil, nil, err
	case h.size() != int64(len(buf)):
		return nil, nil, fmt.Errorf("record of %d bytes, index says %d", h.size(), len(buf))
	case crc(buf[h.hdrLen:]) != h.bodyCRC:
		return nil, nil, errors.New("record body checksum mismatch")
	}
	if len(group) == len(h.lens) {
		return buf, nil, nil
	}
	raw, err := decodeFrame(h, buf[h.hdrLen:])
	if err != nil {
		return nil, nil, err
	}
	vals := make([][]byte, len(group))
	lens := make([]uint32, len(group))
	for k, m := range group {
		if uint64(m.from.rawOff)+uint64(m.from.rawLen) > uint64(len(raw)) {
			return nil, nil, fmt.Errorf("index places value %s outside the record", m.ref)
		}
		vals[k] = raw[m.from.rawOff : m.from.rawOff+m.from.rawLen]
		lens[k] = m.from.rawLen
		if RefOf(vals[k]) != m.ref {
			return nil, nil, fmt.Errorf("value %s does not hash to its SHA-256", m.ref)
		}
	}
	return encodeFrame(s.enc, vals), lens, nil
}

// discard closes and removes output packs of a Collect that was not published.
func (s *Store) discard(outs []*pack) {
	for _, p := range outs {
		p.release()
		_ = s.fs.Remove(p.path)
		_ = s.fs.Remove(s.path(idxName(p.seq)))
	}
}
