package segment

import (
	"bytes"
	"slices"
	"sync"
)

// valueRefLen is the size of one entry of section 9: a SHA-256.
const valueRefLen = 32

// encodeValueRefs builds section 9: the distinct stored-value hashes the
// segment's blocks reference, n x 32 bytes, sorted ascending (bytewise), no
// duplicates. The count is the section length / 32.
func encodeValueRefs(refs map[[32]byte]struct{}) []byte {
	keys := make([][32]byte, 0, len(refs))
	for h := range refs {
		keys = append(keys, h)
	}
	slices.SortFunc(keys, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	out := make([]byte, 0, len(keys)*valueRefLen)
	for _, h := range keys {
		out = append(out, h[:]...)
	}
	return out
}

// Section 18 is read a page at a time: pages of refTablePageRefs hashes,
// each followed by the CRC-32C of its hashes.
const (
	refTablePageRefs  = 128
	refTablePageBytes = refTablePageRefs*valueRefLen + 4
	// refTableCachePages bounds the pages a reader keeps (512 KiB).
	refTableCachePages = 128
)

// encodeValueRefTable builds section 18: the distinct stored-value hashes
// the blocks reference, in the order of their first reference (value tag 9
// names them by position), no duplicates, in checksummed pages.
func encodeValueRefTable(table [][32]byte) []byte {
	out := make([]byte, 0, len(table)*valueRefLen+(len(table)/refTablePageRefs+1)*4)
	for i := 0; i < len(table); i += refTablePageRefs {
		start := len(out)
		for _, h := range table[i:min(i+refTablePageRefs, len(table))] {
			out = append(out, h[:]...)
		}
		out = le.AppendUint32(out, crc(out[start:]))
	}
	return out
}

// refTableEntries returns the number of hashes of a section 18 of n bytes.
func refTableEntries(n uint64) (int, bool) {
	full, rest := n/refTablePageBytes, n%refTablePageBytes
	if rest != 0 && (rest <= 4 || (rest-4)%valueRefLen != 0) {
		return 0, false
	}
	entries := full * refTablePageRefs
	if rest != 0 {
		entries += (rest - 4) / valueRefLen
	}
	return int(entries), true
}

// valueRefsIndex locates section 9 (sorted hashes, files whose blocks hold
// the hashes themselves) or section 18 (the table tag 9 indexes). Damage
// found at Open (a bad TOC entry) is kept in err and returned by ValueRefs
// and the blocks that need the table only, so the rest stays readable.
type valueRefsIndex struct {
	present bool
	table   bool // section 18
	entry   tocEntry
	err     error

	entries int // section 18's hashes
	mu      sync.Mutex
	pages   map[int]string // section 18's pages read for the blocks (hashes only), at most refTableCachePages
}

func (r *Reader) openValueRefs(sections map[uint32]tocEntry) {
	e, ok := sections[sectionValueRefTable]
	if ok {
		r.vrefs.table = true
	} else if e, ok = sections[sectionValueRefs]; !ok {
		return
	}
	r.vrefs.present, r.vrefs.entry = true, e
	n, tableOK := refTableEntries(e.Length)
	switch {
	case e.Codec != codecNone || e.RawLen != e.Length:
		r.vrefs.err = r.corrupt(int64(e.Offset), "value references section must be stored uncompressed")
	case r.vrefs.table && !tableOK:
		r.vrefs.err = r.corrupt(int64(e.Offset), "value reference table of %d bytes is not a whole number of entries", e.Length)
	case r.vrefs.table:
		r.vrefs.entries = n
		r.info.ValueRefs = n
	case e.Length%valueRefLen != 0:
		r.vrefs.err = r.corrupt(int64(e.Offset), "value references section of %d bytes is not a multiple of %d", e.Length, valueRefLen)
	default:
		r.info.ValueRefs = int(e.Length / valueRefLen)
	}
}

// HasValueRefs reports whether the segment references stored values
// (section 9 is present), without reading it.
func (r *Reader) HasValueRefs() bool { return r.vrefs.present }

// ValueRefs reads section 9 and yields every distinct stored-value hash the
// segment's blocks reference, in ascending byte order, until yield returns
// false. A segment without stored values yields nothing. Damage to the
// section returns a *CorruptionError (before anything is yielded); the rest of
// the segment stays readable. Garbage collection and fsck use it: it reads
// one section, not the blocks.
func (r *Reader) ValueRefs(yield func([32]byte) bool) error {
	if !r.vrefs.present {
		return nil
	}
	if r.vrefs.table {
		if r.vrefs.err != nil {
			return r.vrefs.err
		}
		e := r.vrefs.entry
		if e.Length > maxSectionBytes {
			return r.corrupt(int64(e.Offset), "value reference table of %d bytes exceeds the limit", e.Length)
		}
		b, err := r.readAt(int64(e.Offset), int64(e.Length))
		if err != nil {
			return err
		}
		if crc(b) != e.CRC {
			return r.corrupt(int64(e.Offset), "value reference table checksum mismatch")
		}
		for off := 0; off < len(b); off += refTablePageBytes {
			page := b[off:min(off+refTablePageBytes, len(b))]
			hashes := page[:len(page)-4]
			for i := 0; i < len(hashes); i += valueRefLen {
				if !yield([32]byte(hashes[i : i+valueRefLen])) {
					return nil
				}
			}
		}
		return nil
	}
	if r.vrefs.err != nil {
		return r.vrefs.err
	}
	e := r.vrefs.entry
	if e.Length > maxSectionBytes {
		return r.corrupt(int64(e.Offset), "value references section of %d bytes exceeds the limit", e.Length)
	}
	b, err := r.readAt(int64(e.Offset), int64(e.Length))
	if err != nil {
		return err
	}
	if crc(b) != e.CRC {
		return r.corrupt(int64(e.Offset), "value references section checksum mismatch")
	}
	for i := valueRefLen; i < len(b); i += valueRefLen {
		if bytes.Compare(b[i-valueRefLen:i], b[i:i+valueRefLen]) >= 0 {
			return r.corrupt(int64(e.Offset)+int64(i), "value references not in strictly ascending order")
		}
	}
	for i := 0; i < len(b); i += valueRefLen {
		if !yield([32]byte(b[i : i+valueRefLen])) {
			return nil
		}
	}
	return nil
}

// refTable is the view of section 18 the block decoder uses.
type refTable struct{ r *Reader }

// valueRefTable returns the reader's section 18 (nil without one).
func (r *Reader) valueRefTable() *refTable {
	if !r.vrefs.table {
		return nil
	}
	return &refTable{r}
}

// hash returns entry i of section 18 (32 bytes), reading its page on first
// use and keeping at most refTableCachePages pages. A page whose checksum
// fails is a *CorruptionError at the page; a failed read (an I/O error) is
// tried again by the next call.
func (t *refTable) hash(i int) (string, error) {
	v := &t.r.vrefs
	if v.err != nil {
		return "", v.err
	}
	pg := i / refTablePageRefs
	v.mu.Lock()
	page, ok := v.pages[pg]
	v.mu.Unlock()
	if !ok {
		off := int64(v.entry.Offset) + int64(pg)*refTablePageBytes
		n := min(refTablePageRefs, v.entries-pg*refTablePageRefs)
		b, err := t.r.readAt(off, int64(n*valueRefLen+4))
		if err != nil {
			return "", err
		}
		if crc(b[:len(b)-4]) != le.Uint32(b[len(b)-4:]) {
			return "", t.r.corrupt(off, "value reference table page %d checksum mismatch", pg)
		}
		page = string(b[:len(b)-4])
		v.mu.Lock()
		if v.pages == nil {
			v.pages = make(map[int]string)
		}
		if len(v.pages) >= refTableCachePages {
			for k := range v.pages { // evict one page, any
				delete(v.pages, k)
				break
			}
		}
		v.pages[pg] = page
		v.mu.Unlock()
	}
	j := (i % refTablePageRefs) * valueRefLen
	return page[j : j+valueRefLen], nil
}
