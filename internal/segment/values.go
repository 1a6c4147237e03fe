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
// values of at least threshold bytes are handed to store and written as
// stored-value references (tag 8); refs collects every reference written,
// across blocks (reset does not clear it).
type kvEnc struct {
	keyIdx map[string]uint64
	keys   []string
	body   []byte
	err    error

	store     func(string) ([32]byte, error)
	threshold int
	apart     bool
	refs      map[[32]byte]struct{}
}

func (e *kvEnc) reset() {
	if e.keyIdx == nil {
		e.keyIdx = make(map[string]uint64)
	}
	clear(e.keyIdx)
	e.keys = e.keys[:0]
	e.body = e.body[:0]
	e.err = nil
}

func (e *kvEnc) key(k string) {
	i, ok := e.keyIdx[k]
	if !ok {
		i = uint64(len(e.keys))
		e.keyIdx[k] = i
		e.keys = append(e.keys, k)
	}
	e.body = binary.AppendUvarint(e.body, i)
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
		e.key(kvs[i].Key)
		e.value(&kvs[i].Value, depth)
	}
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
		if e.apart && e.store != nil && len(v.Str) >= e.threshold {
			ref, err := e.store(v.Str)
			if err != nil {
				if e.err == nil {
					e.err = fmt.Errorf("store value of %d bytes apart: %w", len(v.Str), err)
				}
				e.body = append(e.body, tagEmpty)
				return
			}
			e.ref(ref, int64(len(v.Str)))
			return
		}
		e.body = append(e.body, tagString)
		e.str(v.Str)
	case model.ValueRef:
		// A span read back from a segment (a rewrite): keep the reference.
		if len(v.Str) != 32 || v.Int < 0 {
			if e.err == nil {
				e.err = fmt.Errorf("malformed stored-value reference (%d-byte hash, length %d)", len(v.Str), v.Int)
			}
			e.body = append(e.body, tagEmpty)
			return
		}
		e.ref(v.Ref(), v.Int)
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

// ref writes a stored-value reference: tag 8 | 32-byte SHA-256 | uvarint
// length | original tag (1 = string).
func (e *kvEnc) ref(h [32]byte, n int64) {
	e.body = append(e.body, tagValueRef)
	e.body = append(e.body, h[:]...)
	e.body = binary.AppendUvarint(e.body, uint64(n))
	e.body = append(e.body, tagString)
	if e.refs == nil {
		e.refs = make(map[[32]byte]struct{})
	}
	e.refs[h] = struct{}{}
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
	default:
		if d.err == nil {
			d.fail(fmt.Errorf("unknown value tag %d", tag))
		}
	}
}

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
	default:
		if d.err == nil {
			d.fail(errors.New("unknown value tag"))
		}
	}
}
