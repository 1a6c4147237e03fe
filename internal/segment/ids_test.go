package segment

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// idColumn makes n records of width bytes: zeros, repeats of the previous
// record and random ones, in the proportions given (out of 100).
func idColumn(rng *rand.Rand, n, width, zeros, repeats int) []byte {
	raw := make([]byte, n*width)
	for i := range n {
		rec := raw[i*width : (i+1)*width]
		switch p := rng.IntN(100); {
		case p < zeros:
		case p < zeros+repeats && i > 0:
			copy(rec, raw[(i-1)*width:i*width])
		default:
			for j := range rec {
				rec[j] = byte(rng.IntN(256))
			}
		}
	}
	return raw
}

// TestIDsRoundTrip: codec 3 gives back every column it accepts byte for
// byte, through decompress as a reader calls it, and refuses (leaving dst
// as it was) a column it would store in more than the bytes allowed.
func TestIDsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name                    string
		n, width, zeros, repeat int
	}{
		{"telemetrygen-parents", 2048, 8, 50, 0},
		{"trace-runs", 2048, 16, 0, 50},
		{"one-trace", 1000, 16, 0, 100},
		{"all-zero", 7, 8, 100, 0},
		{"mixed-odd-count", 1023, 8, 30, 30},
		{"one-record", 1, 16, 0, 0},
		{"random", 2048, 8, 0, 0},
		{"empty", 0, 8, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := idColumn(rng, c.n, c.width, c.zeros, c.repeat)
			prefix := []byte("kept")
			out, ok := appendIDs(append([]byte(nil), prefix...), raw, c.width, len(raw)+c.n/4+2)
			if !ok {
				t.Fatal("refused with room for every record")
			}
			if !bytes.HasPrefix(out, prefix) {
				t.Fatal("dst's bytes changed")
			}
			got, err := decompress(codecIDs, out[len(prefix):], uint64(len(raw)))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(raw) {
				t.Fatal("decoded column differs from the raw one")
			}
			// A partial read appends it to its scratch.
			app, err := appendDecodedIDs(append([]byte(nil), prefix...), out[len(prefix):], uint64(len(raw)))
			if err != nil || string(app) != string(prefix)+string(raw) {
				t.Fatalf("appended column differs: %v", err)
			}
			if len(raw) > 0 {
				lim := len(out) - len(prefix) - 1
				short, ok := appendIDs(append([]byte(nil), prefix...), raw, c.width, lim)
				if ok || !bytes.Equal(short, prefix) {
					t.Fatalf("accepted %d bytes under a limit of %d, or changed dst", len(short)-len(prefix), lim)
				}
			}
		})
	}
}

// TestIDsBlockSize: a block of telemetrygen's shape (two-span traces) stores
// its trace and parent id columns in codec 3 in about the bytes zstd took,
// and its random span ids raw, as before.
func TestIDsBlockSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	spans := idColumn(rng, 2048, 8, 0, 0)
	var traces, parents []byte
	for i := 0; i < 2048; i += 2 {
		tid := idColumn(rng, 1, 16, 0, 0)
		traces = append(append(traces, tid...), tid...)
		parents = append(append(parents, make([]byte, 8)...), spans[i*8:(i+1)*8]...)
	}
	enc, err := encoderFor(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	e := newBlockEncoder(enc)
	for _, c := range []struct {
		id        uint32
		raw       []byte
		width     int
		wantCodec uint32
	}{{colTraceID, traces, 16, codecIDs}, {colParentID, parents, 8, codecIDs}, {colSpanID, spans, 8, codecNone}} {
		e.out, e.cols = e.out[:0], e.cols[:0]
		e.putIDs(c.id, c.raw, c.width)
		z, _ := compressInto(enc, nil, c.raw)
		col := e.cols[0]
		if col.Codec != c.wantCodec {
			t.Fatalf("%s: codec %d, want %d", columnNames[c.id], col.Codec, c.wantCodec)
		}
		if col.Length > uint64(len(z))*21/20 {
			t.Errorf("%s: %d bytes, zstd %d: more than 5%% over", columnNames[c.id], col.Length, len(z))
		}
		got, err := decompress(col.Codec, e.out[col.Offset:col.Offset+col.Length], col.RawLen)
		if err != nil || got != string(c.raw) {
			t.Fatalf("%s: does not decode to its raw bytes: %v", columnNames[c.id], err)
		}
	}
}

// TestIDsCorrupt: each way a codec-3 column can be damaged is an error
// naming what is wrong, never a panic nor wrong bytes.
func TestIDsCorrupt(t *testing.T) {
	lit := bytes.Repeat([]byte{7}, 8)
	valid := append([]byte{8, 0b00_01_10_00}, lit...) // zero, literal, repeat, zero
	if got, err := decodeIDs(valid, 32); err != nil || got != string(make([]byte, 8))+string(lit)+string(lit)+string(make([]byte, 8)) {
		t.Fatalf("the valid column: %q, %v", got, err)
	}
	for _, c := range []struct {
		name   string
		stored []byte
		rawLen uint64
		want   string
	}{
		{"no width", nil, 8, "bad width"},
		{"zero width", []byte{0, 0}, 8, "out of range"},
		{"wide", []byte{65, 0}, 65, "out of range"},
		{"raw not records", []byte{8, 0}, 12, "not a multiple"},
		{"tags cut", []byte{8}, 40, "tag bytes"},
		{"first repeats", []byte{8, 0b01}, 8, "repeats none"},
		{"tag 3", []byte{8, 0b11}, 8, "invalid tag"},
		{"literal cut", append([]byte{8, 0b10}, lit[:5]...), 8, "cut short"},
		{"bytes after", append(append([]byte{8, 0b10}, lit...), 1), 8, "after the last record"},
		{"unused bits", []byte{8, 0b0100}, 8, "unused tag bits"},
		{"huge raw", []byte{8, 0}, maxColumnRawBytes + 8, "exceeds the limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decompress(codecIDs, c.stored, c.rawLen)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			dst := []byte("scratch")
			got, err := appendDecodedIDs(dst, c.stored, c.rawLen)
			if err == nil || string(got) != "scratch" {
				t.Fatalf("appending: %q, %v; want the scratch as it was and an error", got, err)
			}
		})
	}
}

// FuzzDecodeIDs: arbitrary stored bytes decode to exactly rawLen bytes or
// fail; whatever decodes encodes back to a column that decodes the same.
func FuzzDecodeIDs(f *testing.F) {
	f.Add([]byte{8, 0b00_01_10_00, 7, 7, 7, 7, 7, 7, 7, 7}, uint32(32))
	f.Add([]byte{16, 0b10}, uint32(16))
	f.Add([]byte{1, 0xff}, uint32(4))
	f.Fuzz(func(t *testing.T, stored []byte, rawLen uint32) {
		got, err := decodeIDs(stored, uint64(rawLen%(1<<16)))
		if err != nil {
			return
		}
		if uint32(len(got)) != rawLen%(1<<16) {
			t.Fatalf("decoded %d bytes, want %d", len(got), rawLen%(1<<16))
		}
		w, _ := binary.Uvarint(stored)
		again, ok := appendIDs(nil, []byte(got), int(w), len(got)+len(stored))
		if !ok {
			t.Fatal("re-encoding refused")
		}
		back, err := decodeIDs(again, uint64(len(got)))
		if err != nil || back != got {
			t.Fatalf("re-encoded column decodes to other bytes: %v", err)
		}
	})
}
