package wal

import (
	"os"
	"path/filepath"
	"testing"
)

func TestVerifyDir(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(t *testing.T, dir string, size int64)
		records int
		damage  []string // file:offset of each corruption, as fileName(seq) and record index
		at      []int64
		torn    bool
	}{
		{name: "clean", mutate: func(*testing.T, string, int64) {}, records: 10},
		{name: "flip in a record of the older file", mutate: func(t *testing.T, dir string, size int64) {
			p := filepath.Join(dir, fileName(1))
			b, _ := os.ReadFile(p)
			b[recOff(2, size)+12] ^= 1
			os.WriteFile(p, b, 0o644)
		}, records: 9, damage: []string{fileName(1)}, at: []int64{-2}},
		{name: "flip in a middle record of the last file", mutate: func(t *testing.T, dir string, size int64) {
			p := filepath.Join(dir, fileName(2))
			b, _ := os.ReadFile(p)
			b[recOff(1, size)+3] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}, records: 9, damage: []string{fileName(2)}, at: []int64{-1}},
		{name: "torn tail of the last file is not damage", mutate: func(t *testing.T, dir string, size int64) {
			if err := os.Truncate(filepath.Join(dir, fileName(2)), recOff(4, size)+5); err != nil {
				t.Fatal(err)
			}
		}, records: 9, torn: true},
		{name: "torn-looking end of an older file is damage", mutate: func(t *testing.T, dir string, size int64) {
			if err := os.Truncate(filepath.Join(dir, fileName(1)), recOff(4, size)+5); err != nil {
				t.Fatal(err)
			}
		}, records: 9, damage: []string{fileName(1)}, at: []int64{-3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, size := corruptFixture(t, dir)
			c.mutate(t, dir, size)
			before1, before2 := fileLen(t, filepath.Join(dir, fileName(1))), fileLen(t, filepath.Join(dir, fileName(2)))
			rep, err := VerifyDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fileLen(t, filepath.Join(dir, fileName(1))) != before1 || fileLen(t, filepath.Join(dir, fileName(2))) != before2 {
				t.Fatalf("VerifyDir changed a file")
			}
			if rep.Records != c.records || rep.Files != 2 {
				t.Fatalf("records %d files %d, want %d and 2", rep.Records, rep.Files, c.records)
			}
			if len(rep.Corruptions) != len(c.damage) {
				t.Fatalf("corruptions %v, want %d", rep.Corruptions, len(c.damage))
			}
			for i, d := range c.damage {
				ce := rep.Corruptions[i]
				want := map[int64]int64{-1: recOff(1, size), -2: recOff(2, size), -3: recOff(4, size)}[c.at[i]]
				if ce.File != filepath.Join(dir, d) || ce.Offset != want {
					t.Fatalf("corruption %v, want %s at %d", ce, d, want)
				}
			}
			if (rep.TornTail != nil) != c.torn {
				t.Fatalf("torn tail %v, want %v", rep.TornTail, c.torn)
			}
		})
	}
	rep, err := VerifyDir(filepath.Join(t.TempDir(), "missing"))
	if err != nil || rep.Files != 0 {
		t.Fatalf("missing dir: %v %+v", err, rep)
	}
}
