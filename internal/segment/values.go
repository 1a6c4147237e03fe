package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/rastro-dev/rastro/internal/model"
)

// kvEnc encodes attribute lists into a column body while collecting the
// column's key dictionary. finish writes the dictionary, then the body.
//
// With store set and apart true (span, event and link attributes), string
// values of at least threshold bytes (contentThreshold for the top-level
// keys content says hold prompt or completion text) are cut into pieces
// (valuepieces.go), each handed to store, and written as tag 9: positions in
// table, the distinct references of every block in the order of their first
// use (section 18; reset does not clear it).
type kvEnc struct {
	keyIdx map[string]uint64
	keys   []string
	body   []byte
	err    error

	store            func(string) ([32]byte, error)
	threshold        int
	contentThreshold int
	content          func(key string) bool
	apart            bool
	isContent        bool // the value being written is a top-level content key's
	tablePos         map[[32]byte]uint64
	table            [][32]byte
	cuts             []int
	pos              []uint64
	sorted           map[[32]byte]struct{} // writeValueRefsSorted: the refs of section 9
	// keyCache sits in front of keyIdx: the same few keys recur span after
	// span, and comparing a string with the one cached in its slot is
	// cheaper than hashing it. keyContent caches content(key) per key
	// index (0 not asked yet, 1 no, 2 yes).
	keyCache   [strCacheSlots]cachedStr
	keyContent []uint8
}

// strCacheSlots is the size of the direct-mapped string caches of the block
// encoder (a power of two).
const strCacheSlots = 32

// cachedStr is a slot of a direct-mapped string cache: a string and what it
// maps to. The empty slot has set false.
type cachedStr struct {
	s   string
	i   uint64
	set bool
}

// strSlot picks the slot of s in a direct-mapped cache from its length and
// its first and last bytes: cheap, and different for most keys and values
// of a block. Two strings in one slot only cost a miss.
func strSlot(s string) int {
	if s == "" {
		return 0
	}
	return (len(s) + 7*int(s[0]) + 3*int(s[len(s)-1])) & (strCacheSlots - 1)
}

// writeValueRefsSorted makes writers produce the stored-value references of
// the files written before section 18 (whole values, the hash in the row,
// tag 8, and section 9), so that tests check those files stay readable.
var writeValueRefsSorted = false

func (e *kvEnc) reset() {
	if e.keyIdx == nil {
		e.keyIdx = make(map[string]uint64)
	}
	clear(e.keyIdx)
	e.keys = e.keys[:0]
	e.keyCache = [strCacheSlots]cachedStr{}
	e.keyContent = e.keyContent[:0]
	e.body = e.body[:0]
	e.err = nil
}

// key writes the index of k in the column's key table, adding it if new,
// and returns the index.
func (e *kvEnc) key(k string) uint64 {
	c := &e.keyCache[strSlot(k)]
	if c.set && c.s == k {
		e.body = binary.AppendUvarint(e.body, c.i)
		return c.i
	}
	i, ok := e.keyIdx[k]
	if !ok {
		i = uint64(len(e.keys))
		e.keyIdx[k] = i
		e.keys = append(e.keys, k)
		e.keyContent = append(e.keyContent, 0)
	}
	*c = cachedStr{s: k, i: i, set: true}
	e.body = binary.AppendUvarint(e.body, i)
	return i
}

// contentKey reports content(k) for the key of index i, asking once per
// key and column.
func (e *kvEnc) contentKey(i uint64, k string) bool {
	switch e.keyContent[i] {
	case 1:
		return false
	case 2:
		return true
	}
	yes := e.content(k)
	e.keyContent[i] = 1
	if yes {
		e.keyContent[i] = 2
	}
	return yes
}

func (e *kvEnc) uvarint(v uint64) { e.body = binary.AppendUvarint(e.body, v) }
func (e *kvEnc) varint(v int64)   { e.body = binary.AppendVarint(e.body, v) }
func (e *kvEnc) str(s string) {
	e.body = binary.AppendUvarint(e.body, uint64(len(s)))
	e.body = append(e.body, s...)
}

func (e *kvEnc) kvs(kvs []model.KeyValue, depth int) {
	e.uvarint(uint64(len(kvs)))
	for i := range kvs {
		k := e.key(kvs[i].Key)
		e.isContent = depth == 0 && e.content != nil && kvs[i].Value.Type == model.ValueString && e.contentKey(k, kvs[i].Key)
		e.value(&kvs[i].Value, depth)
	}
	e.isContent = false
}

func (e *kvEnc) value(v *model.Value, depth int) {
	if depth > maxValueDepth {
		if e.err == nil {
			e.err = fmt.Errorf("attribute value nested deeper than %d levels", maxValueDepth)
		}
		e.body = append(e.body, tagEmpty)
		return
	}
	switch v.Type {
	case model.ValueEmpty:
		e.body = append(e.body, tagEmpty)
	case model.ValueString:
		if e.apart && e.store != nil && (len(v.Str) >= e.threshold || e.isContent && len(v.Str) >= e.contentThreshold) {
			e.storePieces(v.Str)
			return
		}
		e.body = append(e.body, tagString)
		e.str(v.Str)
	case model.ValueRef:
		// A span read back from a segment (a rewrite): keep the reference.
		n := v.RefPieces()
		if n == 0 || n > maxValuePieces || v.Int < 0 {
			if e.err == nil {
				e.err = fmt.Errorf("malformed stored-value reference (%d bytes of hashes, length %d)", len(v.Str), v.Int)
			}
			e.body = append(e.body, tagEmpty)
			return
		}
		e.pos = e.pos[:0]
		for i := range n {
			e.pos = append(e.pos, e.position(v.RefPiece(i)))
		}
		e.pieces(e.pos, v.Int)
	case model.ValueBool:
		// Value.Int holds the bool; keep it exactly (normally 0 or 1).
		e.body = append(e.body, tagBool)
		e.varint(v.Int)
	case model.ValueInt:
		e.body = append(e.body, tagInt)
		e.varint(v.Int)
	case model.ValueDouble:
		e.body = append(e.body, tagDouble)
		e.body = le.AppendUint64(e.body, math.Float64bits(v.Double))
	case model.ValueBytes:
		e.body = append(e.body, tagBytes)
		e.str(v.Str)
	case model.ValueArray:
		e.body = append(e.body, tagArray)
		elems := v.Elems()
		e.uvarint(uint64(len(elems)))
		for i := range elems {
			e.value(&elems[i], depth+1)
		}
	case model.ValueKvList:
		e.body = append(e.body, tagKvList)
		fields := v.Fields()
		e.uvarint(uint64(len(fields)))
		for i := range fields {
			e.key(fields[i].Key)
			e.value(&fields[i].Value, depth+1)
		}
	default:
		if e.err == nil {
			e.err = fmt.Errorf("attribute value of unknown type %d", v.Type)
		}
		e.body = append(e.body, tagEmpty)
	}
}

// storePieces stores v apart, cut into pieces, and writes its reference.
func (e *kvEnc) storePieces(v string) {
	if writeValueRefsSorted {
		ref, err := e.store(v)
		if err != nil {
			if e.err == nil {
				e.err = fmt.Errorf("store value of %d bytes apart: %w", len(v), err)
			}
			e.body = append(e.body, tagEmpty)
			return
		}
		e.body = append(e.body, tagValueRef)
		e.body = append(e.body, ref[:]...)
		e.uvarint(uint64(len(v)))
		e.body = append(e.body, tagString)
		if e.sorted == nil {
			e.sorted = make(map[[32]byte]struct{})
		}
		e.sorted[ref] = struct{}{}
		return
	}
	e.cuts = cutPieces(v, e.cuts)
	if len(e.cuts) > maxValuePieces {
		e.cuts = append(e.cuts[:0], len(v)) // cannot happen below MaxValueBytes; stay correct anyway
	}
	e.pos = e.pos[:0]
	start := 0
	for _, end := range e.cuts {
		ref, err := e.store(v[start:end])
		if err != nil {
			if e.err == nil {
				e.err = fmt.Errorf("store value of %d bytes apart: %w", len(v), err)
			}
			e.body = append(e.body, tagEmpty)
			return
		}
		e.pos = append(e.pos, e.position(ref))
		start = end
	}
	e.pieces(e.pos, int64(len(v)))
}

// position returns h's position in the reference table, adding it.
func (e *kvEnc) position(h [32]byte) uint64 {
	if i, ok := e.tablePos[h]; ok {
		return i
	}
	if e.tablePos == nil {
		e.tablePos = make(map[[32]byte]uint64)
	}
	i := uint64(len(e.table))
	e.tablePos[h] = i
	e.table = append(e.table, h)
	return i
}

// pieces writes a stored-value reference: tag 9 | uvarint n | n x uvarint
// position | uvarint length | original tag (1 = string).
func (e *kvEnc) pieces(pos []uint64, n int64) {
	e.body = append(e.body, tagValuePieces)
	e.uvarint(uint64(len(pos)))
	for _, p := range pos {
		e.uvarint(p)
	}
	e.uvarint(uint64(n))
	e.body = append(e.body, tagString)
}

// finish appends the key dictionary and the body to dst.
func (e *kvEnc) finish(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(e.keys)))
	for _, k := range e.keys {
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
	}
	return append(dst, e.body...)
}

// kvDec decodes attribute lists written by kvEnc.
type kvDec struct {
	dec
	keys []string
	// table is section 18, which tag 9 values index (nil without one).
	table *refTable
}

func (d *kvDec) init(s string) {
	d.dec = dec{s: s}
	d.keys = d.strs()
}

func (d *kvDec) kvs() []model.KeyValue {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	out := make([]model.KeyValue, n)
	for i := range out {
		out[i].Key = d.keyAt()
		d.value(&out[i].Value, 0)
	}
	if d.err != nil {
		return nil
	}
	return out
}

func (d *kvDec) keyAt() string {
	i := d.index(len(d.keys))
	if d.err != nil {
		return ""
	}
	return d.keys[i]
}

func (d *kvDec) value(v *model.Value, depth int) {
	if depth > maxValueDepth {
		d.failf("attribute value nested too deeply")
		return
	}
	switch tag := d.byte1(); tag {
	case tagEmpty:
		v.Type = model.ValueEmpty
	case tagString:
		v.Type = model.ValueString
		v.Str = d.str()
	case tagBool:
		v.Type = model.ValueBool
		v.Int = d.varint()
	case tagInt:
		v.Type = model.ValueInt
		v.Int = d.varint()
	case tagDouble:
		v.Type = model.ValueDouble
		v.Double = math.Float64frombits(d.u64le())
	case tagBytes:
		v.Type = model.ValueBytes
		v.Str = d.str() // aliases the block like strings do; values are immutable
	case tagArray:
		v.Type = model.ValueArray
		n := d.count(1)
		if n > 0 {
			elems := make([]model.Value, n)
			v.List = &model.List{Array: elems}
			for i := range elems {
				d.value(&elems[i], depth+1)
			}
		}
	case tagKvList:
		v.Type = model.ValueKvList
		n := d.count(2)
		if n > 0 {
			fields := make([]model.KeyValue, n)
			v.List = &model.List{KvList: fields}
			for i := range fields {
				fields[i].Key = d.keyAt()
				d.value(&fields[i].Value, depth+1)
			}
		}
	case tagValueRef:
		h := d.fixed(32)
		n := d.i64()
		if orig := d.byte1(); orig != tagString && d.err == nil {
			d.fail(fmt.Errorf("stored-value reference to a value of tag %d: %w", orig, ErrUnsupported))
		}
		v.Type = model.ValueRef
		v.Str = h // aliases the block like strings do
		v.Int = n
	case tagValuePieces:
		n := d.count(1)
		switch {
		case d.err != nil:
			return
		case n == 0 || n > maxValuePieces:
			d.fail(fmt.Errorf("stored value of %d pieces", n))
			return
		case d.table == nil:
			d.failf("stored value by position in a segment without a value reference table")
			return
		}
		entries := d.table.r.vrefs.entries
		if n == 1 {
			v.Str = d.tableHash(d.index(entries)) // aliases the cached page
		} else {
			b := make([]byte, 0, n*valueRefLen)
			for range n {
				b = append(b, d.tableHash(d.index(entries))...)
			}
			v.Str = string(b)
		}
		v.Type = model.ValueRef
		v.Int = d.i64()
		if orig := d.byte1(); orig != tagString && d.err == nil {
			d.fail(fmt.Errorf("stored-value reference to a value of tag %d: %w", orig, ErrUnsupported))
		}
		if d.err != nil {
			v.Str = ""
		}
	default:
		if d.err == nil {
			d.fail(fmt.Errorf("unknown value tag %d", tag))
		}
	}
}

// tableHash returns entry i of section 18, failing the decoder (and
// returning a zero hash) when it cannot be read.
func (d *kvDec) tableHash(i int) string {
	if d.err != nil {
		return zeroHash
	}
	h, err := d.table.hash(i)
	if err != nil {
		d.fail(refTableError{err})
		return zeroHash
	}
	return h
}

// refTableError carries a failure to read section 18 through the block
// decoder: the block read returns it as it is (the damaged page, or an I/O
// error), not as damage to the column.
type refTableError struct{ err error }

func (e refTableError) Error() string { return e.err.Error() }
func (e refTableError) Unwrap() error { return e.err }

var zeroHash = string(make([]byte, valueRefLen))

func (d *kvDec) skipKVs() {
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		d.index(len(d.keys))
		d.skipValue(0)
	}
}

func (d *kvDec) skipValue(depth int) {
	if depth > maxValueDepth {
		d.failf("attribute value nested too deeply")
		return
	}
	switch tag := d.byte1(); tag {
	case tagEmpty:
	case tagString, tagBytes:
		d.skipStr()
	case tagBool, tagInt:
		d.uvarint()
	case tagDouble:
		d.fixed(8)
	case tagArray:
		n := d.count(1)
		for i := 0; i < n && d.err == nil; i++ {
			d.skipValue(depth + 1)
		}
	case tagKvList:
		n := d.count(2)
		for i := 0; i < n && d.err == nil; i++ {
			d.index(len(d.keys))
			d.skipValue(depth + 1)
		}
	case tagValueRef:
		d.fixed(32)
		d.uvarint()
		if orig := d.byte1(); orig != tagString && d.err == nil {
			d.fail(fmt.Errorf("stored-value reference to a value of tag %d: %w", orig, ErrUnsupported))
		}
	case tagValuePieces:
		n := d.count(1)
		for i := 0; i < n && d.err == nil; i++ {
			d.uvarint()
		}
		d.uvarint()
		if orig := d.byte1(); orig != tagString && d.err == nil {
			d.fail(fmt.Errorf("stored-value reference to a value of tag %d: %w", orig, ErrUnsupported))
		}
	default:
		if d.err == nil {
			d.fail(errors.New("unknown value tag"))
		}
	}
}
