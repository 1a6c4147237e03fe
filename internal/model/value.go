package model

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
)

// ValueType tags the variant held by a Value; it mirrors OTLP's AnyValue oneof.
type ValueType uint8

const (
	ValueEmpty  ValueType = iota // AnyValue with no field set
	ValueString                  // string_value
	ValueBool                    // bool_value
	ValueInt                     // int_value
	ValueDouble                  // double_value
	ValueArray                   // array_value
	ValueKvList                  // kvlist_value
	ValueBytes                   // bytes_value
	// ValueRef is not an OTLP variant: it is a string value kept in the value
	// store (internal/valuestore) that has not been read back. Segments
	// return it for large strings; the engine resolves it to the ValueString
	// it stands for before a result leaves it. Decoders never produce it.
	ValueRef
)

var valueTypeNames = [...]string{"empty", "string", "bool", "int", "double", "array", "kvlist", "bytes", "ref"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return "invalid"
}

// Value is an attribute value (OTLP AnyValue). Only the fields matching Type
// are meaningful; the rest are zero. The layout is kept small (48 bytes on
// 64-bit platforms) because spans carry many attributes and are held in memory
// until sealed:
//
//	ValueString  Str
//	ValueBytes   Str holds the raw bytes (use Bytes to get a []byte copy)
//	ValueBool    Int is 0 or 1
//	ValueInt     Int
//	ValueDouble  Double
//	ValueArray   List.Array (List is nil when the array is empty)
//	ValueKvList  List.KvList (List is nil when the list is empty)
//	ValueRef     Str holds the 32 raw bytes of the SHA-256 of the stored
//	             string, or of each of its pieces in order (n x 32 bytes:
//	             the string is their concatenation), Int its length in bytes
//
// A ValueBytes and a ValueString with the same Str are different values.
// Copies of a Value share its List, as they shared slices before. Values are
// not comparable with ==; use Equal.
type Value struct {
	_      [0]func() // not comparable: == would compare List pointers
	Type   ValueType
	Str    string  // ValueString; ValueBytes keeps its raw bytes here too (immutable)
	Int    int64   // ValueInt; ValueBool stores 0 or 1
	Double float64 // ValueDouble
	List   *List   // ValueArray and ValueKvList only; nil otherwise or when empty
}

// List holds the elements of an array or kvlist value: Array for a
// ValueArray, KvList for a ValueKvList. It lives behind a pointer so that the
// common scalar values do not pay for two slice headers.
type List struct {
	Array  []Value
	KvList []KeyValue
}

// KeyValue is one attribute.
type KeyValue struct {
	Key   string
	Value Value
}

// StringValue, IntValue, DoubleValue and BoolValue build scalar values.
func StringValue(s string) Value  { return Value{Type: ValueString, Str: s} }
func IntValue(i int64) Value      { return Value{Type: ValueInt, Int: i} }
func DoubleValue(f float64) Value { return Value{Type: ValueDouble, Double: f} }
func BoolValue(b bool) Value {
	v := Value{Type: ValueBool}
	if b {
		v.Int = 1
	}
	return v
}

// BytesValue builds a ValueBytes holding a copy of b.
func BytesValue(b []byte) Value { return Value{Type: ValueBytes, Str: string(b)} }

// ArrayValue builds a ValueArray that takes ownership of elems.
func ArrayValue(elems []Value) Value {
	v := Value{Type: ValueArray}
	if len(elems) > 0 {
		v.List = &List{Array: elems}
	}
	return v
}

// KvListValue builds a ValueKvList that takes ownership of fields.
func KvListValue(fields []KeyValue) Value {
	v := Value{Type: ValueKvList}
	if len(fields) > 0 {
		v.List = &List{KvList: fields}
	}
	return v
}

// RefValue builds a ValueRef: a reference to a string of length bytes whose
// SHA-256 is ref, kept in the value store. It always resolves to a
// ValueString.
func RefValue(ref [32]byte, length int) Value {
	return Value{Type: ValueRef, Str: string(ref[:]), Int: int64(length)}
}

// PiecesValue builds a ValueRef to a string of length bytes stored as
// pieces: hashes holds the SHA-256 of each piece, in order, 32 bytes each;
// the string is the concatenation of the pieces.
func PiecesValue(hashes string, length int64) Value {
	return Value{Type: ValueRef, Str: hashes, Int: length}
}

// IsRef reports whether v is an unresolved stored-value reference.
func (v Value) IsRef() bool { return v.Type == ValueRef }

// RefPieces returns the number of stored pieces a ValueRef names (1 for a
// value stored whole; 0 for any other value or a malformed ref).
func (v Value) RefPieces() int {
	if v.Type != ValueRef || len(v.Str) == 0 || len(v.Str)%32 != 0 {
		return 0
	}
	return len(v.Str) / 32
}

// RefPiece returns the SHA-256 of piece i of a ValueRef (see RefPieces).
func (v Value) RefPiece(i int) [32]byte {
	return [32]byte([]byte(v.Str[i*32 : i*32+32]))
}

// Ref returns the SHA-256 held by a ValueRef stored whole (zero for any
// other value, for a ref stored as several pieces, or for a malformed one).
func (v Value) Ref() [32]byte {
	var r [32]byte
	if v.Type == ValueRef && len(v.Str) == len(r) {
		copy(r[:], v.Str)
	}
	return r
}

// Elems returns the elements of a ValueArray (nil for any other value).
func (v Value) Elems() []Value {
	if v.Type != ValueArray || v.List == nil {
		return nil
	}
	return v.List.Array
}

// Fields returns the entries of a ValueKvList (nil for any other value).
func (v Value) Fields() []KeyValue {
	if v.Type != ValueKvList || v.List == nil {
		return nil
	}
	return v.List.KvList
}

// Bytes returns a copy of the bytes of a ValueBytes (nil for any other value
// and for empty bytes).
func (v Value) Bytes() []byte {
	if v.Type != ValueBytes || v.Str == "" {
		return nil
	}
	return []byte(v.Str)
}

// Bool returns the boolean held by a ValueBool.
func (v Value) Bool() bool { return v.Int != 0 }

// AsString renders the value as text: strings as they are, numbers in Go's
// shortest form, bytes as base64, arrays and kvlists as compact JSON-like text.
// An unresolved ValueRef renders as a placeholder,
// "<stored value sha256:HEX, N bytes>" ("<stored value in P pieces, first
// sha256:HEX, N bytes>" for one stored as pieces), never as the stored string: callers
// that need the text resolve the reference first.
func (v Value) AsString() string {
	switch v.Type {
	case ValueRef:
		if n := v.RefPieces(); n > 1 {
			return "<stored value in " + strconv.Itoa(n) + " pieces, first sha256:" + hex.EncodeToString([]byte(v.Str[:32])) +
				", " + strconv.FormatInt(v.Int, 10) + " bytes>"
		}
		return "<stored value sha256:" + hex.EncodeToString([]byte(v.Str)) + ", " + strconv.FormatInt(v.Int, 10) + " bytes>"
	case ValueString:
		return v.Str
	case ValueBool:
		return strconv.FormatBool(v.Bool())
	case ValueInt:
		return strconv.FormatInt(v.Int, 10)
	case ValueDouble:
		return strconv.FormatFloat(v.Double, 'g', -1, 64)
	case ValueBytes:
		return base64.StdEncoding.EncodeToString([]byte(v.Str))
	case ValueArray:
		b := []byte{'['}
		for i, e := range v.Elems() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONish(b, e)
		}
		return string(append(b, ']'))
	case ValueKvList:
		b := []byte{'{'}
		for i, kv := range v.Fields() {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, kv.Key)
			b = append(b, ':')
			b = appendJSONish(b, kv.Value)
		}
		return string(append(b, '}'))
	}
	return ""
}

func appendJSONish(b []byte, v Value) []byte {
	switch v.Type {
	case ValueString, ValueBytes, ValueRef:
		return strconv.AppendQuote(b, v.AsString())
	case ValueEmpty:
		return append(b, "null"...)
	}
	return append(b, v.AsString()...)
}

// AsFloat returns the value as a number when it is an int or a double.
func (v Value) AsFloat() (float64, bool) {
	switch v.Type {
	case ValueInt:
		return float64(v.Int), true
	case ValueDouble:
		return v.Double, !math.IsNaN(v.Double)
	}
	return 0, false
}

// Equal reports deep equality. Doubles compare bit-for-bit so NaN equals NaN.
// A ValueRef equals only a ValueRef with the same hash and length: it is not
// equal to the string it stands for (resolve it first to compare text).
func (v Value) Equal(o Value) bool {
	if v.Type != o.Type {
		return false
	}
	switch v.Type {
	case ValueString:
		return v.Str == o.Str
	case ValueBool, ValueInt:
		return v.Int == o.Int
	case ValueDouble:
		return math.Float64bits(v.Double) == math.Float64bits(o.Double)
	case ValueBytes:
		return v.Str == o.Str
	case ValueRef:
		return v.Str == o.Str && v.Int == o.Int
	case ValueArray:
		a, b := v.Elems(), o.Elems()
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if !a[i].Equal(b[i]) {
				return false
			}
		}
		return true
	case ValueKvList:
		return EqualKeyValues(v.Fields(), o.Fields())
	}
	return true
}

// EqualKeyValues compares two attribute lists in order.
func EqualKeyValues(a, b []KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}

// Lookup returns the value of the first attribute named key.
func Lookup(kvs []KeyValue, key string) (Value, bool) {
	for i := range kvs {
		if kvs[i].Key == key {
			return kvs[i].Value, true
		}
	}
	return Value{}, false
}
