package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/durable"
)

// file is the seam under the commit goroutine: what it needs from an open
// log file. Tests substitute implementations that fail on demand.
type file interface {
	Write(p []byte) (int, error)
	// Sync makes everything written so far durable (fdatasync where available).
	Sync() error
	Close() error
}

// osFile is a log file on the operating system's filesystem. Its Sync is
// defined per platform (fdatasync on Linux).
type osFile struct{ *os.File }

// Sync flushes the file's data (fdatasync on Linux).
func (f osFile) Sync() error { return durable.DataSync(f.File) }

func createOSFile(path string) (file, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// fileName returns the name of log file seq: 20 zero-padded digits + ".wal".
func fileName(seq uint64) string {
	return fmt.Sprintf("%020d.wal", seq)
}

// parseFileName returns the sequence of a log file name, or ok=false.
func parseFileName(name string) (seq uint64, ok bool) {
	digits, found := strings.CutSuffix(name, ".wal")
	if !found || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return seq, true
}

// listFiles returns the sequences of the log files in dir, ascending, and their sizes.
func listFiles(dir string) ([]liveFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list wal dir %s: %w", dir, err)
	}
	var files []liveFile
	for _, e := range entries {
		seq, ok := parseFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("stat wal file %s: %w", filepath.Join(dir, e.Name()), err)
		}
		files = append(files, liveFile{seq: seq, size: info.Size()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].seq < files[j].seq })
	return files, nil
}
