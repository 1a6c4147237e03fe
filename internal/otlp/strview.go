package otlp

import "unsafe"

// The decoders copy their input once and let decoded strings (and bytes
// values, which model.Value keeps as strings) alias that private copy; the
// encoders read strings as bytes without copying them. Both views are only
// sound because neither side ever writes to the shared memory afterwards.

// stringOf returns a string sharing b's memory. b must never be modified again.
func stringOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// bytesOf returns a read-only view of s's bytes; the caller must not write to it.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
