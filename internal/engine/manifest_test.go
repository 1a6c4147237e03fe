package engine

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// TestManifestWriteFailures: a manifest write that fails at any step before
// its rename reports renamed false and leaves the old manifest and no
// temporary file; one that fails at the directory sync reports renamed
// true, since the new manifest is then what the store reads (a seal keeps
// its segment and its WAL; a merge keeps its inputs' files).
func TestManifestWriteFailures(t *testing.T) {
	const dir = "/data"
	old := manifest{Version: manifestVersion, WALStart: 3, NextSegment: 2, Segments: []string{"a.seg"}}
	next := manifest{Version: manifestVersion, WALStart: 7, NextSegment: 3, Segments: []string{"a.seg", "b.seg"}}
	boom := errors.New("EIO")
	for _, failing := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir} {
		m := vfs.NewMemFS()
		if _, err := writeManifestFS(m, dir, old); err != nil {
			t.Fatal(err)
		}
		ff := &vfs.Faulty{FS: m, Inject: func(op vfs.Op, name string, size int) vfs.Fault {
			if op == failing {
				return vfs.Fault{Err: boom}
			}
			return vfs.Fault{}
		}}
		renamed, err := writeManifestFS(ff, dir, next)
		if !errors.Is(err, boom) {
			t.Fatalf("%v failing: %v, want the error", failing, err)
		}
		if renamed != (failing == vfs.OpSyncDir) {
			t.Errorf("%v failing: renamed %t, want %t", failing, renamed, failing == vfs.OpSyncDir)
		}
		want := old
		if renamed {
			want = next
		}
		got, err := readManifestFS(m, dir)
		if err != nil || !slices.Equal(got.Segments, want.Segments) || got.WALStart != want.WALStart {
			t.Errorf("%v failing: the manifest reads %+v, %v; want %+v", failing, got, err, want)
		}
		if names, _ := m.List(dir); slices.Contains(names, manifestName+".tmp") {
			t.Errorf("%v failing: the temporary file is left: %v", failing, names)
		}
	}
}

// TestManifestEmptyIsCorruption: an empty MANIFEST (a filesystem can keep a
// rename but not the data before it) is reported as corruption, not as an
// I/O error, on the vfs seam as on the OS.
func TestManifestEmptyIsCorruption(t *testing.T) {
	dir := t.TempDir()
	for _, fsys := range []vfs.FS{vfs.NewMemFS(), vfs.OS{}} {
		if err := fsys.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.OpenFile(dir+"/"+manifestName, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		var ce *CorruptionError
		if _, err := readManifestFS(fsys, dir); !errors.As(err, &ce) || !errors.Is(err, durable.ErrCorruption) {
			t.Errorf("%T: an empty manifest reads as %v, want a corruption error", fsys, err)
		}
	}
}
