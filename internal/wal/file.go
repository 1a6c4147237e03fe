package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/vfs"
)

// file is the seam under the commit goroutine: what it needs from an open
// log file. Tests substitute implementations that fail on demand.
type file interface {
	Write(p []byte) (int, error)
	// Sync makes everything written so far durable (fdatasync where available).
	Sync() error
	// Truncate cuts the file to size bytes; the next Write goes there.
	Truncate(size int64) error
	Close() error
}

// createFile creates a new, empty log file on fs, written at its end.
func createFile(fs vfs.FS, path string) (file, error) {
	f, err := fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, err
	}
	return &vfs.Appender{F: f}, nil
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
func listFiles(fs vfs.FS, dir string) ([]liveFile, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list wal dir %s: %w", dir, err)
	}
	var files []liveFile
	for _, name := range names {
		seq, ok := parseFileName(name)
		if !ok {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := fs.OpenFile(path, os.O_RDONLY)
		if err != nil {
			return nil, fmt.Errorf("stat wal file %s: %w", path, err)
		}
		size, err := f.Size()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("stat wal file %s: %w", path, err)
		}
		files = append(files, liveFile{seq: seq, size: size})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].seq < files[j].seq })
	return files, nil
}
