package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"testing"
)

const perFile = 5

// corruptFixture writes file 1 with records A0..A4 and file 2 with B0..B4
// and returns the records and their encoded size (all equal).
func corruptFixture(t *testing.T, dir string) (recs []string, recSize int64) {
	t.Helper()
	w := openT(t, Options{Dir: dir})
	for _, prefix := range []string{"A", "B"} {
		for i := range perFile {
			b := fmt.Sprintf("%s%d-payload-bytes", prefix, i)
			recs = append(recs, b)
			if err := w.Append(Record{Type: 1, Project: "pj", Body: []byte(b)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if prefix == "A" {
			if seq, err := w.Rotate(nil); err != nil || seq != 2 {
				t.Fatalf("rotate: seq %d, %v", seq, err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return recs, int64(recordHeaderSize + 2 + len("pj") + len(recs[0]))
}

func recOff(i int, size int64) int64 { return fileHeaderSize + int64(i)*size }

func TestCorruption(t *testing.T) {
	type result struct {
		want     []int // indexes into the fixture records
		file1    int64 // expected size of file 1 after replay; -1 = unchanged
		file2    int64 // expected size of file 2 after replay; -1 = unchanged
		corrupt1 bool  // an older-file corruption is reported
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	cases := []struct {
		name   string
		damage func(t *testing.T, p1, p2 string, rs int64)
		result func(rs int64) result
	}{
		{"bad checksum in last file", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(2, rs)+rs-1, []byte{'#'})
		}, func(rs int64) result { return result{[]int{0, 1, 2, 3, 4, 5, 6}, -1, recOff(2, rs), false} }},
		{"huge length", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), 0xFFFFFFF0)
		}, func(rs int64) result { return result{[]int{0, 1, 2, 3, 4, 5, 6}, -1, recOff(2, rs), false} }},
		{"length beyond file", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), 1000)
		}, func(rs int64) result { return result{[]int{0, 1, 2, 3, 4, 5, 6}, -1, recOff(2, rs), false} }},
		{"length too small", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), 1)
		}, func(rs int64) result { return result{[]int{0, 1, 2, 3, 4, 5, 6}, -1, recOff(2, rs), false} }},
		{"zero-filled tail", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(5, rs), make([]byte, 4096))
		}, func(rs int64) result { return result{all, -1, recOff(5, rs), false} }},
		{"zeroed last record", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(4, rs), make([]byte, rs))
		}, func(rs int64) result { return result{all[:9], -1, recOff(4, rs), false} }},
		{"garbage appended", func(t *testing.T, _, p2 string, rs int64) {
			g := make([]byte, 1000)
			rand.New(rand.NewSource(1)).Read(g)
			writeAt(t, p2, recOff(5, rs), g)
		}, func(rs int64) result { return result{all, -1, recOff(5, rs), false} }},
		{"corruption in the middle of an older file", func(t *testing.T, p1, _ string, rs int64) {
			writeAt(t, p1, recOff(2, rs)+12, []byte{'#'})
		}, func(rs int64) result { return result{[]int{0, 1, 5, 6, 7, 8, 9}, -1, -1, true} }},
		{"missing header in last file", func(t *testing.T, _, p2 string, rs int64) {
			b, err := os.ReadFile(p2)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p2, b[fileHeaderSize:], 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all[:5], -1, fileHeaderSize, false} }},
		{"missing header in older file", func(t *testing.T, p1, _ string, rs int64) {
			b, err := os.ReadFile(p1)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p1, b[fileHeaderSize:], 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all[5:], -1, -1, true} }},
		{"wrong magic in last file", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, 0, []byte("XWAL"))
		}, func(rs int64) result { return result{all[:5], -1, fileHeaderSize, false} }},
		{"header sequence mismatch in older file", func(t *testing.T, p1, _ string, rs int64) {
			writeAt(t, p1, 8, []byte{9})
		}, func(rs int64) result { return result{all[5:], -1, -1, true} }},
		{"empty last file", func(t *testing.T, _, p2 string, rs int64) {
			if err := os.Truncate(p2, 0); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all[:5], -1, fileHeaderSize, false} }},
		{"short header in last file", func(t *testing.T, _, p2 string, rs int64) {
			if err := os.Truncate(p2, 7); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all[:5], -1, fileHeaderSize, false} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs, rs := corruptFixture(t, dir)
			w0 := &WAL{opts: Options{Dir: dir}}
			p1, p2 := w0.path(1), w0.path(2)
			tc.damage(t, p1, p2, rs)
			size1 := fileLen(t, p1)
			res := tc.result(rs)
			var want []string
			for _, i := range res.want {
				want = append(want, recs[i])
			}
			checkRepair(t, dir, want, func(st ReplayStats) {
				if res.file1 == -1 && fileLen(t, p1) != size1 {
					t.Errorf("older file 1 was modified: %d -> %d bytes", size1, fileLen(t, p1))
				}
				if res.file2 != -1 && fileLen(t, p2) != res.file2 {
					t.Errorf("file 2 is %d bytes after repair, want %d", fileLen(t, p2), res.file2)
				}
				if len(st.Corruptions) != 1 {
					t.Fatalf("corruptions reported: %v, want 1", st.Corruptions)
				}
				if res.corrupt1 != (st.CorruptFiles == 1) || (res.corrupt1 && (st.TruncatedBytes != 0 || st.SkippedBytes == 0)) {
					t.Errorf("stats %+v: older-file corruption expected %v", st, res.corrupt1)
				}
			})
		})
	}
}

// TestTornLastRecord cuts the last record at every byte offset.
func TestTornLastRecord(t *testing.T) {
	base := t.TempDir()
	recs, rs := corruptFixture(t, base)
	b1, _ := os.ReadFile((&WAL{opts: Options{Dir: base}}).path(1))
	b2, _ := os.ReadFile((&WAL{opts: Options{Dir: base}}).path(2))
	start := recOff(4, rs)
	for cut := start; cut < start+rs; cut++ {
		dir := t.TempDir()
		w0 := &WAL{opts: Options{Dir: dir}}
		if err := os.WriteFile(w0.path(1), b1, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(w0.path(2), b2[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		checkRepair(t, dir, recs[:9], func(st ReplayStats) {
			if got := fileLen(t, w0.path(2)); got != start {
				t.Fatalf("cut at %d: file 2 is %d bytes after repair, want %d", cut, got, start)
			}
			if st.TruncatedBytes != cut-start || (cut > start && len(st.Corruptions) != 1) {
				t.Fatalf("cut at %d: stats %+v", cut, st)
			}
		})
	}
}

// checkRepair replays dir expecting want, runs check, then appends a record
// and checks that a second reopen replays want plus that record, cleanly.
func checkRepair(t *testing.T, dir string, want []string, check func(ReplayStats)) {
	t.Helper()
	var logs bytes.Buffer
	opts := Options{Dir: dir, Logf: func(f string, a ...any) { fmt.Fprintf(&logs, f+"\n", a...) }}
	w := openT(t, opts)
	var got []string
	st, err := w.Replay(0, func(r Record) error {
		if r.Type != 1 || r.Project != "pj" {
			t.Errorf("record %q: type %d project %q", r.Body, r.Type, r.Project)
		}
		got = append(got, string(r.Body))
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	for _, c := range st.Corruptions {
		if c.File == "" || !bytes.Contains(logs.Bytes(), []byte(c.File)) {
			t.Errorf("corruption %v not logged with its file (log: %s)", c, logs.String())
		}
	}
	check(st)
	if err := w.Append(Record{Type: 1, Project: "pj", Body: []byte("after-repair")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, st2 := replayAll(t, Options{Dir: dir})
	got = got[:0]
	for _, r := range recs {
		got = append(got, string(r.Body))
	}
	want = append(append([]string(nil), want...), "after-repair")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after repair and append, replayed %q, want %q", got, want)
	}
	if st2.TruncatedBytes != 0 {
		t.Fatalf("second replay truncated again: %+v", st2)
	}
}

func TestUnsupportedVersionLeftAlone(t *testing.T) {
	dir := t.TempDir()
	corruptFixture(t, dir)
	w0 := &WAL{opts: Options{Dir: dir}}
	writeAt(t, w0.path(2), 4, []byte{fileVersion + 1})
	before, _ := os.ReadFile(w0.path(2))
	w := openT(t, Options{Dir: dir})
	n := 0
	_, err := w.Replay(0, func(Record) error { n++; return nil })
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("replay of a newer-version file: %v, want ErrUnsupportedVersion", err)
	}
	if n != perFile {
		t.Fatalf("replayed %d records before the newer file, want %d", n, perFile)
	}
	after, _ := os.ReadFile(w0.path(2))
	if !bytes.Equal(before, after) {
		t.Fatal("newer-version file was modified")
	}
}

func TestReplayCallbackErrorAborts(t *testing.T) {
	dir := t.TempDir()
	corruptFixture(t, dir)
	w := openT(t, Options{Dir: dir})
	stop := errors.New("stop")
	n := 0
	_, err := w.Replay(0, func(Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("replay: %v after %d records, want stop after 3", err, n)
	}
}
