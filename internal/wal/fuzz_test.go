package wal

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// encodeFile builds a valid log file with the given bodies.
func encodeFile(seq uint64, bodies ...string) []byte {
	b := fileHeader(seq)
	for _, body := range bodies {
		r := Record{Type: 1, Project: "fz", Body: []byte(body)}
		h := recordHeader(&r)
		b = appendRecord(b, &h, &r)
	}
	return b
}

func FuzzReplay(f *testing.F) {
	valid := encodeFile(1, "alpha", "beta", "", "gamma-gamma")
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(valid[:fileHeaderSize])
	f.Add(valid[:5])
	f.Add([]byte{})
	f.Add(append(append([]byte(nil), valid...), make([]byte, 64)...))
	f.Add(encodeFile(2, "wrong sequence"))
	bad := append([]byte(nil), valid...)
	bad[fileHeaderSize+20] ^= 0xff
	f.Add(bad)
	badLen := append([]byte(nil), valid...)
	badLen[fileHeaderSize+3] ^= 0x40 // first record's length: resync by scanning
	f.Add(badLen)
	badMagic := append([]byte(nil), valid...)
	badMagic[1] = 'X'
	f.Add(badMagic)
	twoBad := append([]byte(nil), bad...)
	twoBad[len(twoBad)-2] ^= 0x01
	f.Add(twoBad)
	newer := append([]byte(nil), valid...)
	newer[4] = fileVersion + 1
	f.Add(newer)

	f.Fuzz(func(t *testing.T, data []byte) {
		// data as an older file: its damage is isolated, file 2 still replays.
		dir := t.TempDir()
		w0 := &WAL{opts: Options{Dir: dir}}
		if err := os.WriteFile(w0.path(1), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(w0.path(2), encodeFile(2, "next-file"), 0o644); err != nil {
			t.Fatal(err)
		}
		first := replayFuzz(t, dir)
		if first.err == nil && (len(first.bodies) == 0 || first.bodies[len(first.bodies)-1] != "next-file") {
			t.Fatalf("older-file damage hid the next file: %q", first.bodies)
		}

		// data as the last file: repaired, then appends work.
		dir = t.TempDir()
		w0 = &WAL{opts: Options{Dir: dir}}
		if err := os.WriteFile(w0.path(1), data, 0o644); err != nil {
			t.Fatal(err)
		}
		res := replayFuzz(t, dir)
		if res.err != nil {
			return // unsupported version: left alone
		}
		w, err := Open(Options{Dir: dir, Mode: ModeBuffered})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(Record{Body: []byte("appended")}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again := replayFuzz(t, dir)
		want := fmt.Sprintf("%q", append(res.bodies, "appended"))
		if again.err != nil || fmt.Sprintf("%q", again.bodies) != want || again.st.TruncatedBytes != 0 {
			t.Fatalf("after repair: %q (%v, %+v), want %s", again.bodies, again.err, again.st, want)
		}
	})
}

type fuzzResult struct {
	bodies []string
	st     ReplayStats
	err    error
}

func replayFuzz(t *testing.T, dir string) fuzzResult {
	w, err := Open(Options{Dir: dir, Mode: ModeBuffered})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var res fuzzResult
	res.st, res.err = w.Replay(0, func(r Record) error {
		res.bodies = append(res.bodies, string(r.Body))
		return nil
	})
	if res.err != nil && !errors.Is(res.err, ErrUnsupportedVersion) {
		t.Fatalf("replay: %v", res.err)
	}
	return res
}
