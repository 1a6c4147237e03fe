package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
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
		want      []int // indexes into the fixture records
		file2     int64 // expected size of file 2 after replay; -1 = unchanged
		damaged   int   // corruptions reported
		resyncs   int   // times replay resumed after damage
		skipped   int64 // SkippedBytes
		truncated int64 // TruncatedBytes
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	except := func(skip ...int) []int {
		var out []int
		for _, i := range all {
			if !slices.Contains(skip, i) {
				out = append(out, i)
			}
		}
		return out
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, p1, p2 string, rs int64)
		result func(rs int64) result
	}{
		// Damage inside one record of the newest file: only that record is lost
		// (before resynchronisation, the rest of the file was truncated).
		{"bad checksum in last file", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(2, rs)+rs-1, []byte{'#'})
		}, func(rs int64) result { return result{except(7), -1, 1, 1, rs, 0} }},
		{"huge length", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), 0xFFFFFFF0)
		}, func(rs int64) result { return result{except(7), -1, 1, 1, rs, 0} }},
		{"length beyond file", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), 1000)
		}, func(rs int64) result { return result{except(7), -1, 1, 1, rs, 0} }},
		{"length too small", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), 1)
		}, func(rs int64) result { return result{except(7), -1, 1, 1, rs, 0} }},
		{"plausible wrong length", func(t *testing.T, _, p2 string, rs int64) {
			putU32(t, p2, recOff(2, rs), uint32(rs)) // points 8 bytes into the next record
		}, func(rs int64) result { return result{except(7), -1, 1, 1, rs, 0} }},
		{"two damaged records in last file", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(1, rs)+15, []byte{'#'})
			putU32(t, p2, recOff(3, rs), 3)
		}, func(rs int64) result { return result{except(6, 8), -1, 2, 2, 2 * rs, 0} }},
		{"damaged record, then a torn tail", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(1, rs)+15, []byte{'#'})
			if err := os.Truncate(p2, recOff(4, rs)+rs/2); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{except(6, 9), recOff(4, rs), 2, 1, rs, rs / 2} }},
		// A torn or zero-filled tail has no intact record after it: truncated.
		{"zero-filled tail", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(5, rs), make([]byte, 4096))
		}, func(rs int64) result { return result{all, recOff(5, rs), 1, 0, 0, 4096} }},
		{"zeroed last record", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, recOff(4, rs), make([]byte, rs))
		}, func(rs int64) result { return result{all[:9], recOff(4, rs), 1, 0, 0, rs} }},
		{"garbage appended", func(t *testing.T, _, p2 string, rs int64) {
			g := make([]byte, 1000)
			rand.New(rand.NewSource(1)).Read(g)
			writeAt(t, p2, recOff(5, rs), g)
		}, func(rs int64) result { return result{all, recOff(5, rs), 1, 0, 0, 1000} }},
		// Older files are never modified; only the damaged record is lost
		// (before resynchronisation, the rest of the file was skipped).
		{"corruption in the middle of an older file", func(t *testing.T, p1, _ string, rs int64) {
			writeAt(t, p1, recOff(2, rs)+12, []byte{'#'})
		}, func(rs int64) result { return result{except(2), -1, 1, 1, rs, 0} }},
		{"torn tail in older file", func(t *testing.T, p1, _ string, rs int64) {
			if err := os.Truncate(p1, recOff(4, rs)+3); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{except(4), -1, 1, 0, 3, 0} }},
		// A damaged file header hides nothing: the records after it are
		// found (before, the last file was reset and an older one skipped).
		{"missing header in last file", func(t *testing.T, _, p2 string, rs int64) {
			b, err := os.ReadFile(p2)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p2, b[fileHeaderSize:], 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all, -1, 1, 1, 0, 0} }},
		{"missing header in older file", func(t *testing.T, p1, _ string, rs int64) {
			b, err := os.ReadFile(p1)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p1, b[fileHeaderSize:], 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all, -1, 1, 1, 0, 0} }},
		{"wrong magic in last file", func(t *testing.T, _, p2 string, rs int64) {
			writeAt(t, p2, 0, []byte("XWAL"))
		}, func(rs int64) result { return result{all, -1, 1, 1, fileHeaderSize, 0} }},
		{"reserved header bytes set in older file", func(t *testing.T, p1, _ string, rs int64) {
			writeAt(t, p1, 6, []byte{1})
		}, func(rs int64) result { return result{all, -1, 1, 1, fileHeaderSize, 0} }},
		// A header naming another sequence marks a misplaced file: none of it
		// is replayed.
		{"header sequence mismatch in older file", func(t *testing.T, p1, _ string, rs int64) {
			writeAt(t, p1, 8, []byte{9})
		}, func(rs int64) result { return result{all[5:], -1, 1, 0, recOff(perFile, rs), 0} }},
		{"empty last file", func(t *testing.T, _, p2 string, rs int64) {
			if err := os.Truncate(p2, 0); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all[:5], fileHeaderSize, 1, 0, 0, 0} }},
		{"short header in last file", func(t *testing.T, _, p2 string, rs int64) {
			if err := os.Truncate(p2, 7); err != nil {
				t.Fatal(err)
			}
		}, func(rs int64) result { return result{all[:5], fileHeaderSize, 1, 0, 0, 7} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs, rs := corruptFixture(t, dir)
			w0 := &WAL{opts: Options{Dir: dir}}
			p1, p2 := w0.path(1), w0.path(2)
			tc.damage(t, p1, p2, rs)
			size1, size2 := fileLen(t, p1), fileLen(t, p2)
			res := tc.result(rs)
			var want []string
			for _, i := range res.want {
				want = append(want, recs[i])
			}
			checkRepair(t, dir, want, func(st ReplayStats) {
				if fileLen(t, p1) != size1 {
					t.Errorf("older file 1 was modified: %d -> %d bytes", size1, fileLen(t, p1))
				}
				if want := res.file2; want == -1 && fileLen(t, p2) != size2 {
					t.Errorf("file 2 was modified: %d -> %d bytes", size2, fileLen(t, p2))
				} else if want != -1 && fileLen(t, p2) != want {
					t.Errorf("file 2 is %d bytes after repair, want %d", fileLen(t, p2), want)
				}
				if len(st.Corruptions) != res.damaged || st.CorruptFiles != 1 {
					t.Fatalf("corruptions reported: %v in %d files, want %d in 1", st.Corruptions, st.CorruptFiles, res.damaged)
				}
				if st.Resyncs != res.resyncs || st.SkippedBytes != res.skipped || st.TruncatedBytes != res.truncated {
					t.Errorf("stats %+v: want %d resyncs, %d bytes skipped, %d truncated", st, res.resyncs, res.skipped, res.truncated)
				}
				var lost int64
				for _, c := range st.Corruptions {
					lost += c.Skipped
				}
				if lost != st.SkippedBytes+st.TruncatedBytes {
					t.Errorf("corruptions account for %d bytes, stats for %d skipped + %d truncated", lost, st.SkippedBytes, st.TruncatedBytes)
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
		if c.File == "" || !bytes.Contains(logs.Bytes(), []byte(c.Error())) {
			t.Errorf("corruption %v not logged with its file and offset (log: %s)", c, logs.String())
		}
		if !bytes.Contains(logs.Bytes(), []byte(fmt.Sprintf(" %d bytes", c.Skipped))) {
			t.Errorf("corruption %v: the %d bytes skipped are not logged (log: %s)", c, c.Skipped, logs.String())
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
