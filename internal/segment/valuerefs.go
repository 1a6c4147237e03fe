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

// encodeValueRefTable builds section 18: the distinct stored-value hashes
// the blocks reference, n x 32 bytes, in the order of their first reference
// (value tag 9 names them by position), no duplicates.
func encodeValueRefTable(table [][32]byte) []byte {
	out := make([]byte, 0, len(table)*valueRefLen)
	for _, h := range table {
		out = append(out, h[:]...)
	}
	return out
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

	mu     sync.Mutex // guards loaded and data: section 18, read for the blocks
	loaded bool
	data   string
}

func (r *Reader) openValueRefs(sections map[uint32]tocEntry) {
	e, ok := sections[sectionValueRefTable]
	if ok {
		r.vrefs.table = true
	} else if e, ok = sections[sectionValueRefs]; !ok {
		return
	}
	r.vrefs.present, r.vrefs.entry = true, e
	switch {
	case e.Codec != codecNone || e.RawLen != e.Length:
		r.vrefs.err = r.corrupt(int64(e.Offset), "value references section must be stored uncompressed")
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
		t, err := r.valueRefTable()
		if err != nil {
			return err
		}
		for i := 0; i < len(t); i += valueRefLen {
			if !yield([32]byte([]byte(t[i : i+valueRefLen]))) {
				return nil
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

// valueRefTable returns section 18, read on first use and kept while the
// reader is open: the blocks' tag 9 values index it. A segment without it
// returns "". A failed read (an I/O error) is tried again by the next call.
func (r *Reader) valueRefTable() (string, error) {
	if !r.vrefs.table {
		return "", nil
	}
	if r.vrefs.err != nil {
		return "", r.vrefs.err
	}
	r.vrefs.mu.Lock()
	defer r.vrefs.mu.Unlock()
	if r.vrefs.loaded {
		return r.vrefs.data, nil
	}
	e := r.vrefs.entry
	if e.Length > maxSectionBytes {
		return "", r.corrupt(int64(e.Offset), "value reference table of %d bytes exceeds the limit", e.Length)
	}
	b, err := r.readAt(int64(e.Offset), int64(e.Length))
	if err != nil {
		return "", err
	}
	if crc(b) != e.CRC {
		return "", r.corrupt(int64(e.Offset), "value reference table checksum mismatch")
	}
	r.vrefs.loaded, r.vrefs.data = true, string(b)
	return r.vrefs.data, nil
}
