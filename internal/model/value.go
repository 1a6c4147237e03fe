package model

import (
	"encoding/base64"
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
)

var valueTypeNames = [...]string{"empty", "string", "bool", "int", "double", "array", "kvlist", "bytes"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return "invalid"
}

// Value is an attribute value (OTLP AnyValue). Only the field matching Type is meaningful.
type Value struct {
	Type   ValueType
	Str    string     // ValueString
	Int    int64      // ValueInt; ValueBool stores 0 or 1
	Double float64    // ValueDouble
	Bytes  []byte     // ValueBytes
	Array  []Value    // ValueArray
	KvList []KeyValue // ValueKvList
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

// Bool returns the boolean held by a ValueBool.
func (v Value) Bool() bool { return v.Int != 0 }

// AsString renders the value as text: strings as they are, numbers in Go's
// shortest form, bytes as base64, arrays and kvlists as compact JSON-like text.
func (v Value) AsString() string {
	switch v.Type {
	case ValueString:
		return v.Str
	case ValueBool:
		return strconv.FormatBool(v.Bool())
	case ValueInt:
		return strconv.FormatInt(v.Int, 10)
	case ValueDouble:
		return strconv.FormatFloat(v.Double, 'g', -1, 64)
	case ValueBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes)
	case ValueArray:
		b := []byte{'['}
		for i, e := range v.Array {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONish(b, e)
		}
		return string(append(b, ']'))
	case ValueKvList:
		b := []byte{'{'}
		for i, kv := range v.KvList {
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
	case ValueString, ValueBytes:
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
		return string(v.Bytes) == string(o.Bytes)
	case ValueArray:
		if len(v.Array) != len(o.Array) {
			return false
		}
		for i := range v.Array {
			if !v.Array[i].Equal(o.Array[i]) {
				return false
			}
		}
		return true
	case ValueKvList:
		return EqualKeyValues(v.KvList, o.KvList)
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
