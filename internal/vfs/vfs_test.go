package vfs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
)

func write(t *testing.T, m FS, name, data string, sync bool) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewAppender(f)
	if _, err := a.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func content(t *testing.T, m *MemFS, name string) (string, bool) {
	t.Helper()
	b, err := m.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// A power cut keeps synced data under names whose directory was synced,
// and nothing else.
func TestMemFSCrash(t *testing.T) {
	m := NewMemFS()
	f := write(t, m, "/d/a", "durable", true)
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	a, _ := NewAppender(f)
	a.Write([]byte("+lost"))
	write(t, m, "/d/b", "file synced, directory not", true)
	write(t, m, "/e/c", "other directory", true)
	m.SyncDir("/e")
	if err := m.Rename("/d/a", "/d/a2"); err != nil {
		t.Fatal(err)
	}

	c := m.Crash(CrashOptions{})
	if got, ok := content(t, c, "/d/a"); !ok || got != "durable" {
		t.Fatalf("/d/a after the crash: %q %v, want the synced data under the synced name", got, ok)
	}
	for _, name := range []string{"/d/a2", "/d/b"} {
		if _, ok := content(t, c, name); ok {
			t.Fatalf("%s survived without a directory sync", name)
		}
	}
	if got, _ := content(t, c, "/e/c"); got != "other directory" {
		t.Fatalf("/e/c: %q", got)
	}
	k := m.Crash(CrashOptions{KeepDirOps: true})
	if got, ok := content(t, k, "/d/a2"); !ok || got != "durable" {
		t.Fatalf("with directory operations kept: /d/a2 = %q %v", got, ok)
	}
	torn := m.Crash(CrashOptions{KeepDirOps: true, Torn: true, Rand: rand.New(rand.NewPCG(1, 1))})
	if got, _ := content(t, torn, "/d/a2"); len(got) < len("durable") || got != "durable+lost"[:len(got)] {
		t.Fatalf("torn: %q is not a prefix of the written data at least as long as the synced part", got)
	}
	if got, _ := content(t, m.Restart(), "/d/a2"); got != "durable+lost" {
		t.Fatalf("a process restart keeps every write: %q", got)
	}
}

func TestFaultyDiskFullAndShortWrites(t *testing.T) {
	m := NewMemFS()
	d := NewDisk(10)
	ff := &Faulty{FS: m, Inject: d.Inject}
	f, err := ff.OpenFile("/x", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewAppender(f)
	n, err := a.Write([]byte("0123456789abc"))
	if n != 10 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the free space: %d bytes, %v; want 10 and ENOSPC", n, err)
	}
	d.SetFree(100)
	if _, err := a.Write([]byte("abc")); err != nil {
		t.Fatalf("after space returns: %v", err)
	}
	if got, _ := content(t, m, "/x"); got != "0123456789abc" {
		t.Fatalf("file holds %q", got)
	}
	boom := errors.New("EIO")
	ff.Inject = func(op Op, name string, size int) Fault {
		if op == OpSync {
			return Fault{Err: boom}
		}
		return Fault{}
	}
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("sync: %v", err)
	}
}
