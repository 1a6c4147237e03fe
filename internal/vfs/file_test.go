package vfs

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
)

// TestWriteFileAtomic: after a power cut at any point of a replacement the
// file holds the old content or the new one, whole; once WriteFileAtomic
// returns, the new content survives a power cut; a failed step leaves the
// old content and no temporary file.
func TestWriteFileAtomic(t *testing.T) {
	m := NewMemFS()
	if err := WriteFileAtomic(m, "/d/f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	// Cut the power before each operation of the second write.
	for cut := 0; ; cut++ {
		ops := 0
		var crashed *MemFS
		ff := &Faulty{FS: m.Restart(), Inject: nil}
		ff.Inject = func(op Op, name string, size int) Fault {
			if ops == cut && crashed == nil {
				crashed = ff.FS.(*MemFS).Crash(CrashOptions{})
			}
			ops++
			return Fault{}
		}
		if err := WriteFileAtomic(ff, "/d/f", []byte("new content")); err != nil {
			t.Fatal(err)
		}
		if crashed == nil {
			got, err := ReadFile(ff.FS.(*MemFS).Crash(CrashOptions{}), "/d/f")
			if err != nil || string(got) != "new content" {
				t.Fatalf("after a completed write and a power cut: %q, %v", got, err)
			}
			if cut < 4 {
				t.Fatalf("only %d operations: the write does not sync and rename", cut)
			}
			break
		}
		got, err := ReadFile(crashed, "/d/f")
		if err != nil || (string(got) != "old" && string(got) != "new content") {
			t.Fatalf("power cut before operation %d: %q, %v; want the old or the new content whole", cut, got, err)
		}
	}

	boom := errors.New("EIO")
	for _, failing := range []Op{OpWrite, OpSync, OpRename, OpSyncDir} {
		ff := &Faulty{FS: NewMemFS(), Inject: func(op Op, name string, size int) Fault {
			if op == failing {
				return Fault{Err: boom}
			}
			return Fault{}
		}}
		ff.FS.(*MemFS).MkdirAll("/d")
		if err := WriteFileAtomic(ff.FS, "/d/f", []byte("old")); err != nil {
			t.Fatal(err)
		}
		err := WriteFileAtomic(ff, "/d/f", []byte("new"))
		if !errors.Is(err, boom) {
			t.Fatalf("%v failing: %v, want the error", failing, err)
		}
		names, _ := ff.FS.List("/d")
		if slices.Contains(names, "f.tmp") {
			t.Errorf("%v failing: the temporary file is left: %v", failing, names)
		}
		// Only a failed directory sync comes after the rename: the caller
		// must know the new content may already be what a restart reads.
		var ds *DirSyncError
		if renamed := errors.As(err, &ds); renamed != (failing == OpSyncDir) {
			t.Errorf("%v failing: reported as a failed directory sync: %t", failing, renamed)
		}
		want := "old"
		if failing == OpSyncDir {
			want = "new"
		}
		if got, _ := ReadFile(ff.FS, "/d/f"); string(got) != want {
			t.Errorf("%v failing: the file holds %q, want %q", failing, got, want)
		}
	}
	if _, err := ReadFile(m, "/d/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestReadFileEmpty: an empty file reads as empty, on every FS (MemFS's
// ReadAt answers a read at the end with io.EOF, as io.ReaderAt allows), so
// that a store finds an emptied file damaged rather than failing to open.
func TestReadFileEmpty(t *testing.T) {
	dir := t.TempDir()
	for _, fsys := range []FS{NewMemFS(), OS{}} {
		if err := WriteFileAtomic(fsys, dir+"/empty", nil); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(fsys, dir+"/empty")
		if err != nil || len(got) != 0 {
			t.Errorf("%T: an empty file reads as %q, %v; want empty and no error", fsys, got, err)
		}
	}
}

// TestRemoveLeftovers: temporary files and unlisted files of the kind go;
// listed files and other kinds stay.
func TestRemoveLeftovers(t *testing.T) {
	m := NewMemFS()
	for _, n := range []string{"a.seg", "b.seg", "c.seg.tmp", "MANIFEST.json", "MANIFEST.json.tmp", "notes.txt"} {
		if err := WriteFileAtomic(m, "/d/"+n, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var told []string
	err := RemoveLeftovers(m, "/d", ".seg", map[string]bool{"a.seg": true}, "a test", func(f string, a ...any) { told = append(told, a[0].(string)) })
	if err != nil {
		t.Fatal(err)
	}
	names, _ := m.List("/d")
	slices.Sort(names)
	if want := []string{"MANIFEST.json", "a.seg", "notes.txt"}; !slices.Equal(names, want) {
		t.Fatalf("left %v, want %v", names, want)
	}
	if len(told) != 3 {
		t.Fatalf("told of %v, want the three removals", told)
	}
}
