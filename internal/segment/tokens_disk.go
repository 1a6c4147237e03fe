package segment

import (
	"fmt"
	"math/bits"
)

// The second-level token filters (sections 11, 12 and 13,
// docs/format/segment.md): a per-segment filter kept on disk and read one
// small page per token, and per-block filters of every 64-row group.
//
// The disk summary is a blocked bloom filter: the hash picks one 64-byte
// page, and k bits inside it, so testing a token reads one page of 68 bytes
// (64 bytes of bits and their crc32c). It holds every distinct token of
// the segment at diskBitsPerToken bits each (about 0.3% false
// positives), which the 32 KiB resident summary cannot afford.

// groupDirNoGroups flags a section 13 written without row-group filters.
const groupDirNoGroups = 1

const (
	// diskPageBytes is the size of the bits of one disk-summary page.
	diskPageBytes = 64
	// diskPageStride is a stored page: bits then crc32c u32 LE.
	diskPageStride = diskPageBytes + 4
	// diskBitsPerToken sizes the disk summary.
	diskBitsPerToken = 12
	// diskK is the number of bits a token sets in its page: 7 probes of 9
	// bits each come from one 64-bit hash.
	diskK = 7
	// diskMaxTokens bounds the writer's set of the segment's distinct tokens
	// (a table of at most 16 MiB). A segment with more gets no disk summary.
	diskMaxTokens = 1 << 19
	// maxDiskPages bounds what a reader accepts (256 MiB of pages).
	maxDiskPages = 1 << 22

	// groupRows is the number of rows a row-group filter covers; it equals
	// the row-marks interval so that a group's rows decode from a mark.
	groupRows = markRows
	// groupFilterFP is the target false-positive rate of a row-group
	// filter. Row groups are consulted only in blocks whose filter passed,
	// so a higher rate than the block filter's costs little: a false group
	// decodes 64 more rows.
	groupFilterFP = 0.05
)

// diskPagesFor returns the pages of a disk summary for n distinct tokens.
func diskPagesFor(n int) int {
	if n <= 0 {
		return 0
	}
	return (n*diskBitsPerToken + 8*diskPageBytes - 1) / (8 * diskPageBytes)
}

// diskPage returns the page of h among pages.
func diskPage(h uint64, pages int) int {
	p, _ := bits.Mul64(h, uint64(pages))
	return int(p)
}

// diskProbes returns the in-page bit probes of h: diskK fields of 9 bits
// of a second hash.
func diskProbes(h uint64) uint64 { return probeStep(h ^ 0x5851f42d4c957f2d) }

// buildDiskSummary encodes section 11 for the set of distinct tokens:
// pages x (64 bytes of bits | crc32c u32 LE).
func buildDiskSummary(set *hashMap) (data []byte, pages int) {
	pages = diskPagesFor(set.len())
	if pages == 0 {
		return nil, 0
	}
	data = make([]byte, pages*diskPageStride)
	set.eachKey(func(h uint64) {
		page := data[diskPage(h, pages)*diskPageStride:]
		g := diskProbes(h)
		for j := 0; j < diskK; j++ {
			bit := g & 511
			page[bit>>3] |= 1 << (bit & 7)
			g >>= 9
		}
	})
	for p := 0; p < pages; p++ {
		page := data[p*diskPageStride:]
		le.PutUint32(page[diskPageBytes:], crc(page[:diskPageBytes]))
	}
	return data, pages
}

// diskPageHas tests h against its page's bits.
func diskPageHas(page []byte, h uint64) bool {
	g := diskProbes(h)
	for j := 0; j < diskK; j++ {
		bit := g & 511
		if page[bit>>3]&(1<<(bit&7)) == 0 {
			return false
		}
		g >>= 9
	}
	return true
}

// groupIndex is the resident part of sections 11-13: the directory of the
// row-group filters and the shape of the disk summary.
type groupIndex struct {
	present  bool  // the segment has section 13
	noGroups bool  // written without row-group filters (section 12 empty)
	err      error // damaged directory: every lookup returns it
	offset   int64 // of section 12
	offs     []uint64
	crcs     []uint32
	diskOff  int64 // of section 11
	pages    int   // 0: no disk summary
	distinct int
	isMap    bool // section 11 is a token map (flag groupDirTokenMap), shaped by shape
	places   int  // the token map lists up to this many places a token (flag groupDirTokenPlaces); 0: none
	shape    fuseShape
}

// encodeGroupDir encodes section 13:
//
//	uvarint flags | uvarint pages | uvarint distinct |
//	(flag bit 1 only:) u64 LE seed | uvarint segment length | uvarint segment count | uvarint slot bits |
//	(flag bit 2 only:) uvarint places |
//	uvarint n blocks | n x (uvarint length | crc32c u32 LE)
//
// Flag bit 0 (groupDirNoGroups): no row-group filters; n is then 0. Flag
// bit 1 (groupDirTokenMap): section 11 is a token map of the given shape,
// not a blocked bloom filter. Flag bit 2 (groupDirTokenPlaces, with bit 1
// only): the token map lists up to places (> 0) places of a token.
func encodeGroupDir(noGroups bool, pages, distinct int, shape *fuseShape, places int, lens []uint64, crcs []uint32) []byte {
	var flags uint64
	if noGroups {
		flags = groupDirNoGroups
	}
	if shape != nil {
		flags |= groupDirTokenMap
		if places > 0 {
			flags |= groupDirTokenPlaces
		}
	}
	b := appendUvarints(nil, flags, uint64(pages), uint64(distinct))
	if shape != nil {
		b = le.AppendUint64(b, shape.seed)
		b = appendUvarints(b, uint64(shape.segLen), uint64(shape.segCount), uint64(shape.w))
		if places > 0 {
			b = appendUvarints(b, uint64(places))
		}
	}
	b = appendUvarints(b, uint64(len(lens)))
	for i, n := range lens {
		b = appendUvarints(b, n)
		b = le.AppendUint32(b, crcs[i])
	}
	return b
}

// decodeGroupDir decodes section 13 for a segment of nBlocks blocks whose
// section 12 has groupLen bytes and section 11 diskLen bytes.
func decodeGroupDir(s string, nBlocks int, groupLen, diskLen uint64) (groupIndex, error) {
	d := dec{s: s}
	var gi groupIndex
	flags := d.uvarint()
	pages := d.uvarint()
	distinct := d.uvarint()
	if flags&groupDirTokenMap != 0 {
		gi.isMap = true
		gi.shape = decodeFuseShape(&d, pages)
		if flags&groupDirTokenPlaces != 0 {
			n := d.uvarint()
			if d.err == nil && (n < 2 || n > maxTokenPlacesRead) {
				d.failf(fmt.Sprintf("token map of %d places a token", n))
			}
			gi.places = int(n)
		}
	}
	if d.err == nil {
		switch {
		case flags&^(groupDirNoGroups|groupDirTokenMap|groupDirTokenPlaces) != 0:
			d.failf(fmt.Sprintf("unknown flags %#x", flags))
		case flags&groupDirTokenPlaces != 0 && !gi.isMap:
			d.failf("token places flagged without a token map")
		case pages > maxDiskPages:
			d.failf(fmt.Sprintf("disk summary of %d pages exceeds the limit", pages))
		case pages*diskPageStride != diskLen:
			d.failf(fmt.Sprintf("disk summary of %d pages in a section of %d bytes", pages, diskLen))
		case pages > 0 && distinct == 0:
			d.failf("disk summary with pages but no tokens")
		case distinct > diskMaxTokens:
			d.failf(fmt.Sprintf("disk summary of %d tokens exceeds the limit", distinct))
		}
	}
	n := d.count(5)
	gi.noGroups = flags&groupDirNoGroups != 0
	switch {
	case d.err != nil:
	case gi.noGroups && (n != 0 || groupLen != 0):
		d.failf("row-group filters listed with the no-groups flag")
	case !gi.noGroups && n != nBlocks:
		d.failf(fmt.Sprintf("directory lists %d blocks, the segment has %d", n, nBlocks))
	}
	if d.err != nil {
		return groupIndex{}, d.err
	}
	gi.offs = make([]uint64, n+1)
	gi.crcs = make([]uint32, n)
	for i := 0; i < n; i++ {
		l := d.uvarint()
		gi.crcs[i] = d.u32le()
		if d.err == nil && l > groupLen-gi.offs[i] {
			d.failf(fmt.Sprintf("row-group filters of block %d lie outside their section", i))
		}
		gi.offs[i+1] = gi.offs[i] + l
	}
	if d.err == nil && gi.offs[n] != groupLen {
		d.failf(fmt.Sprintf("row-group filters cover %d bytes, the section has %d", gi.offs[n], groupLen))
	}
	if d.err == nil && d.remaining() != 0 {
		d.failf(fmt.Sprintf("%d trailing bytes", d.remaining()))
	}
	if d.err != nil {
		return groupIndex{}, d.err
	}
	gi.present, gi.pages, gi.distinct = true, int(pages), int(distinct)
	return gi, nil
}

// openGroups loads section 13. Damage does not fail Open: it is kept in
// r.grp.err and returned by the lookups, which then answer "may contain".
func (r *Reader) openGroups(sections map[uint32]tocEntry, load func(uint32) (string, int64, error)) {
	disk, okDisk := sections[sectionTokenPages]
	grp, okGrp := sections[sectionTokenGroups]
	dir, okDir := sections[sectionTokenGroupDir]
	if !okDisk && !okGrp && !okDir {
		return
	}
	r.grp.present = true
	if !okDisk || !okGrp || !okDir {
		r.grp.err = r.corrupt(int64(dir.Offset+grp.Offset+disk.Offset), "row-group token filters: sections %d, %d and %d not all present",
			sectionTokenPages, sectionTokenGroups, sectionTokenGroupDir)
		return
	}
	for _, e := range []tocEntry{disk, grp} {
		if e.Codec != codecNone || e.RawLen != e.Length {
			r.grp.err = r.corrupt(int64(e.Offset), "token section %d must be stored uncompressed", e.Type)
			return
		}
	}
	s, off, err := load(sectionTokenGroupDir)
	if err != nil {
		r.grp.err = err
		return
	}
	r.resident -= len(s)
	gi, err := decodeGroupDir(s, len(r.blocks), grp.Length, disk.Length)
	if err != nil {
		r.grp.err = r.corrupt(off, "row-group token directory: %v", err)
		return
	}
	gi.offset, gi.diskOff = int64(grp.Offset), int64(disk.Offset)
	r.grp = gi
	r.info.Tokens.DiskSummaryBytes = int64(disk.Length)
	r.info.Tokens.RowGroupFilterBytes = int64(grp.Length)
	r.info.Tokens.ResidentBytes += groupDirResident(len(gi.crcs))
	r.tok.stats = r.info.Tokens
	r.resident += 8*len(gi.offs) + 4*len(gi.crcs) + 64
}

// SegmentMayContainTokensDisk answers after the resident summary from the
// disk summary: one 68-byte read per hash (stopping at the first absent
// one). False is certain. It returns true without I/O when the resident
// summary passes and the segment has no disk summary (older writers, or
// over diskMaxTokens distinct tokens). Whenever err is non-nil the answer
// is true: a damaged page or directory is a *CorruptionError.
func (r *Reader) SegmentMayContainTokensDisk(hashes []uint64) (bool, error) {
	if !r.SegmentMayContainTokens(hashes) {
		return false, nil
	}
	if len(hashes) == 0 || !r.grp.present {
		return true, nil
	}
	if r.grp.err != nil {
		return true, r.grp.err
	}
	if r.grp.isMap {
		loc, err := r.LocateTokens(hashes)
		return !loc.Absent, err
	}
	return r.diskMayContain(hashes)
}

// diskMayContain tests the hashes against the disk summary alone.
func (r *Reader) diskMayContain(hashes []uint64) (bool, error) {
	if r.grp.pages == 0 {
		return true, nil
	}
	var buf [diskPageStride]byte
	for _, h := range hashes {
		p := diskPage(h, r.grp.pages)
		off := r.grp.diskOff + int64(p)*diskPageStride
		if err := r.readFull(buf[:], off); err != nil {
			return true, err
		}
		if crc(buf[:diskPageBytes]) != le.Uint32(buf[diskPageBytes:]) {
			return true, r.corrupt(off, "token disk summary page %d: checksum mismatch", p)
		}
		if !diskPageHas(buf[:diskPageBytes], h) {
			return false, nil
		}
	}
	return true, nil
}

// readFull fills buf from off; a short read is corruption.
func (r *Reader) readFull(buf []byte, off int64) error {
	got, err := r.f.ReadAt(buf, off)
	if got == len(buf) {
		return nil
	}
	if err == nil || isEOF(err) {
		return r.corrupt(off+int64(got), "file ends inside a part of %d bytes at offset %d", len(buf), off)
	}
	return fmt.Errorf("read segment %s at offset %d: %w", r.path, off, err)
}

// verifyDiskPages reads and verifies every page of the disk summary (for
// tests and offline checks).
func (r *Reader) verifyDiskPages() error {
	if !r.grp.present || r.grp.err != nil {
		return r.grp.err
	}
	var buf [diskPageStride]byte
	for p := 0; p < r.grp.pages; p++ {
		off := r.grp.diskOff + int64(p)*diskPageStride
		if err := r.readFull(buf[:], off); err != nil {
			return err
		}
		if crc(buf[:diskPageBytes]) != le.Uint32(buf[diskPageBytes:]) {
			return r.corrupt(off, "token disk summary page %d: checksum mismatch", p)
		}
	}
	return nil
}
