package durable

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSyncs(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	if err := DataSync(f); err != nil {
		t.Fatalf("DataSync: %v", err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	f.Close()
	if err := DataSync(f); err == nil {
		t.Fatal("DataSync of a closed file succeeded")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("SyncDir of a missing dir: %v", err)
	}
}
