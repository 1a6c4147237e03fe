package valuestore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirSnapshot returns every file of dir with its bytes, to prove VerifyDir
// changes nothing.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func verifyDirT(t *testing.T, dir string) *DirVerification {
	t.Helper()
	before := dirSnapshot(t, dir)
	v, err := VerifyDir(dir)
	if err != nil {
		t.Fatalf("VerifyDir: %v", err)
	}
	after := dirSnapshot(t, dir)
	if len(before) != len(after) {
		t.Fatalf("VerifyDir changed the directory: %d files before, %d after", len(before), len(after))
	}
	for n, b := range before {
		if after[n] != b {
			t.Fatalf("VerifyDir modified %s", n)
		}
	}
	return v
}

func TestVerifyDirTable(t *testing.T) {
	// Values 4..7 live in pack 2 (0000000002.pack); value 5 is its second record.
	type want struct {
		file string // base name the problem must name ("" = no problem)
		off  int64  // -1 = any
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, f *corruptFixture)
		want   want
		lost   func(f *corruptFixture) []int // values no longer intact
		note   string
	}{
		{name: "clean", mutate: func(*testing.T, *corruptFixture) {}},
		{name: "record body flip", mutate: func(t *testing.T, f *corruptFixture) {
			flipByte(t, f.file(packName(2)), int64(f.locs[5].off)+recordHeaderSize+10)
		}, want: want{packName(2), -2}, lost: only(5)},
		{name: "record header flip", mutate: func(t *testing.T, f *corruptFixture) {
			flipByte(t, f.file(packName(2)), int64(f.locs[5].off)+33)
		}, want: want{packName(2), -2}, lost: only(5)},
		{name: "pack header flip", mutate: func(t *testing.T, f *corruptFixture) {
			flipByte(t, f.file(packName(2)), 2)
		}, want: want{packName(2), 0}, lost: inPack(2, 0)},
		{name: "index flip", mutate: func(t *testing.T, f *corruptFixture) {
			flipByte(t, f.file(idxName(2)), idxHeaderSize+50)
		}, want: want{idxName(2), -1}},
		{name: "manifest flip", mutate: func(t *testing.T, f *corruptFixture) {
			flipByte(t, f.file(manifestName), 9)
		}, want: want{manifestName, -1}},
		{name: "manifest missing", mutate: func(t *testing.T, f *corruptFixture) {
			if err := os.Remove(f.file(manifestName)); err != nil {
				t.Fatal(err)
			}
		}, want: want{manifestName, 0}},
		{name: "pack missing", mutate: func(t *testing.T, f *corruptFixture) {
			if err := os.Remove(f.file(packName(2))); err != nil {
				t.Fatal(err)
			}
		}, want: want{packName(2), 0}, lost: inPack(2, 0)},
		{name: "pack truncated", mutate: func(t *testing.T, f *corruptFixture) {
			if err := os.Truncate(f.file(packName(2)), int64(f.locs[5].off)+20); err != nil {
				t.Fatal(err)
			}
		}, want: want{packName(2), -1}, lost: inPack(2, 5)},
		{name: "torn tail after the index is normal", mutate: func(t *testing.T, f *corruptFixture) {
			fh, err := os.OpenFile(f.file(packName(f.locs[19].pack)), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.Write(make([]byte, 30))
			fh.Close()
		}, note: "torn tail"},
		{name: "unlisted pack is a note", mutate: func(t *testing.T, f *corruptFixture) {
			b, _ := os.ReadFile(f.file(packName(2)))
			os.WriteFile(f.file(packName(99)), b, 0o644)
		}, note: "not in the manifest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newCorruptFixture(t)
			c.mutate(t, f)
			v := verifyDirT(t, f.dir)
			if c.want.file == "" {
				if !v.Clean() {
					t.Fatalf("problems: %v", v.Problems)
				}
			} else {
				found := false
				for _, p := range v.Problems {
					if p.File == f.file(c.want.file) && (c.want.off == -1 || p.Offset == c.want.off ||
						c.want.off == -2 && p.Offset == int64(f.locs[5].off)) {
						found = true
					}
				}
				if !found {
					t.Fatalf("no problem in %s at %d: %v", c.want.file, c.want.off, v.Problems)
				}
			}
			lost := map[int]bool{}
			if c.lost != nil {
				for _, i := range c.lost(f) {
					lost[i] = true
				}
			}
			for i, val := range f.vals {
				if got := v.Has(RefOf(val)); got == lost[i] {
					t.Fatalf("value %d: intact = %v, want %v", i, got, !lost[i])
				}
			}
			if c.note != "" && !strings.Contains(strings.Join(v.Notes, "\n"), c.note) {
				t.Fatalf("notes %q lack %q", v.Notes, c.note)
			}
		})
	}
}

func only(i int) func(*corruptFixture) []int { return func(*corruptFixture) []int { return []int{i} } }

// inPack lists the values from index `from` on that live in pack seq.
func inPack(seq uint32, from int) func(*corruptFixture) []int {
	return func(f *corruptFixture) []int {
		var out []int
		for i := from; i < len(f.locs); i++ {
			if f.locs[i].pack == seq {
				out = append(out, i)
			}
		}
		return out
	}
}

func TestVerifyDirMissingIsEmpty(t *testing.T) {
	v, err := VerifyDir(filepath.Join(t.TempDir(), "nope"))
	if err != nil || !v.Clean() || v.Values != 0 {
		t.Fatalf("missing dir: %v %+v", err, v)
	}
}
