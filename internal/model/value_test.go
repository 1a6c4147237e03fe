package model

import (
	"math"
	"testing"
	"unsafe"
)

// Spans hold many attributes and sit in the write buffer until sealed, so the
// size of Value is part of the memory budget: growing it should be a decision.
func TestValueLayoutSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		if got := unsafe.Sizeof(Value{}); got != 48 {
			t.Errorf("sizeof(Value) = %d, want 48", got)
		}
		if got := unsafe.Sizeof(KeyValue{}); got != 64 {
			t.Errorf("sizeof(KeyValue) = %d, want 64", got)
		}
	}
}

func TestBytesValueCopiesAndStaysDistinctFromString(t *testing.T) {
	src := []byte{'h', 'i', 0xff}
	v := BytesValue(src)
	src[0] = 'X'
	if got := v.Bytes(); string(got) != "hi\xff" {
		t.Fatalf("BytesValue aliased its argument: Bytes() = %q", got)
	}
	got := v.Bytes()
	got[0] = 'Y'
	if string(v.Bytes()) != "hi\xff" {
		t.Fatalf("Bytes() did not return a copy")
	}
	if v.Equal(StringValue("hi\xff")) || StringValue("hi\xff").Equal(v) {
		t.Errorf("bytes and string with the same content compare equal")
	}
	if !v.Equal(BytesValue([]byte("hi\xff"))) || v.Equal(BytesValue([]byte("hi"))) {
		t.Errorf("bytes equality is wrong")
	}
	if StringValue("x").Bytes() != nil || BytesValue(nil).Bytes() != nil {
		t.Errorf("Bytes() of a string or of empty bytes is not nil")
	}
	if got := v.AsString(); got != "aGn/" {
		t.Errorf("AsString(bytes) = %q, want base64 aGn/", got)
	}
}

func TestListValues(t *testing.T) {
	arr := ArrayValue([]Value{IntValue(1), StringValue("a"), BytesValue([]byte("b"))})
	kv := KvListValue([]KeyValue{{Key: "k", Value: DoubleValue(1.5)}, {Key: "e"}})
	if len(arr.Elems()) != 3 || arr.Fields() != nil || len(kv.Fields()) != 2 || kv.Elems() != nil {
		t.Fatalf("accessors: arr %d/%d, kv %d/%d", len(arr.Elems()), len(arr.Fields()), len(kv.Fields()), len(kv.Elems()))
	}
	if StringValue("x").Elems() != nil || (Value{}).Fields() != nil {
		t.Errorf("accessors of scalars are not nil")
	}
	if got := arr.AsString(); got != `[1,"a","Yg=="]` {
		t.Errorf("AsString(array) = %s", got)
	}
	if got := kv.AsString(); got != `{"k":1.5,"e":null}` {
		t.Errorf("AsString(kvlist) = %s", got)
	}
	// Empty lists carry no List, however they were built, and are equal.
	for _, e := range []Value{ArrayValue(nil), ArrayValue([]Value{}), {Type: ValueArray}, {Type: ValueArray, List: &List{}}} {
		if !e.Equal(ArrayValue(nil)) || e.AsString() != "[]" || len(e.Elems()) != 0 {
			t.Errorf("empty array %+v is not the empty array", e)
		}
	}
	if ArrayValue(nil).List != nil || KvListValue([]KeyValue{}).List != nil {
		t.Errorf("constructors allocate a List for empty lists")
	}
	if KvListValue(nil).Equal(ArrayValue(nil)) {
		t.Errorf("empty kvlist equals empty array")
	}
	nan := ArrayValue([]Value{DoubleValue(math.NaN())})
	if !nan.Equal(ArrayValue([]Value{DoubleValue(math.NaN())})) {
		t.Errorf("NaN elements do not compare equal bit-for-bit")
	}
	if arr.Equal(ArrayValue([]Value{IntValue(1), StringValue("a"), StringValue("b")})) {
		t.Errorf("arrays differing in an element's type compare equal")
	}
	if kv.Equal(KvListValue([]KeyValue{{Key: "k", Value: DoubleValue(1.5)}, {Key: "f"}})) {
		t.Errorf("kvlists differing in a key compare equal")
	}
}

func TestNormalizeRepairsNestedStringsButNotBytes(t *testing.T) {
	s := Span{
		TraceID: TraceID{1}, SpanID: SpanID{1},
		Attributes: []KeyValue{
			{Key: "a", Value: ArrayValue([]Value{StringValue("ok\xff"), BytesValue([]byte{0xff})})},
			{Key: "k", Value: KvListValue([]KeyValue{{Key: "n", Value: StringValue("\xfe")}})},
		},
	}
	var p Problems
	Normalize(&s, &p)
	if p.InvalidUTF8 != 1 {
		t.Errorf("InvalidUTF8 = %d, want 1", p.InvalidUTF8)
	}
	elems := s.Attributes[0].Value.Elems()
	if elems[0].Str != "ok\uFFFD" || string(elems[1].Bytes()) != "\xff" {
		t.Errorf("array after Normalize = %q, %q", elems[0].Str, elems[1].Bytes())
	}
	if got := s.Attributes[1].Value.Fields()[0].Value.Str; got != "\uFFFD" {
		t.Errorf("kvlist after Normalize = %q", got)
	}
}

func TestRefValue(t *testing.T) {
	var h [32]byte
	for i := range h {
		h[i] = byte(i)
	}
	v := RefValue(h, 5000)
	if !v.IsRef() || v.Type.String() != "ref" || v.Ref() != h || v.Int != 5000 {
		t.Fatalf("RefValue = %+v (type %s)", v, v.Type)
	}
	if StringValue(v.Str).IsRef() || StringValue("x").Ref() != ([32]byte{}) {
		t.Errorf("a string is a ref")
	}
	want := "<stored value sha256:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f, 5000 bytes>"
	if got := v.AsString(); got != want {
		t.Errorf("AsString = %s", got)
	}
	if !v.Equal(RefValue(h, 5000)) || v.Equal(RefValue(h, 4999)) || v.Equal(StringValue(v.Str)) {
		t.Errorf("ref equality is wrong")
	}
	h2 := h
	h2[31] = 0xff
	if v.Equal(RefValue(h2, 5000)) {
		t.Errorf("refs with different hashes compare equal")
	}
	if got := ArrayValue([]Value{v}).AsString(); got != `["`+want+`"]` {
		t.Errorf("AsString(array of ref) = %s", got)
	}
	s := Span{Attributes: []KeyValue{{Key: "k", Value: RefValue([32]byte{0xff, 0xfe}, 3)}}}
	var p Problems
	Normalize(&s, &p)
	if p.InvalidUTF8 != 0 || s.Attributes[0].Value.Ref() != ([32]byte{0xff, 0xfe}) {
		t.Errorf("Normalize rewrote a ref's binary hash: %+v", p)
	}
}
