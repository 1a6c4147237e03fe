package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// manifestName is the file that names the published segments. It is the
// single point of truth for what the store holds: a segment file that the
// manifest does not name is not part of the store.
const manifestName = "MANIFEST"

const manifestVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// manifest is written as JSON followed by a line holding the CRC-32C of the
// JSON bytes in hex (see docs/format.md).
type manifest struct {
	Version     int      `json:"version"`
	WALStart    uint64   `json:"wal_start"`    // replay WAL files with sequence >= this
	NextSegment uint64   `json:"next_segment"` // id of the next segment to write
	Segments    []string `json:"segments"`     // file names under segments/, oldest first
}

func readManifest(dir string) (manifest, error) { return readManifestFS(vfs.OS{}, dir) }

func readManifestFS(fsys vfs.FS, dir string) (manifest, error) {
	path := filepath.Join(dir, manifestName)
	b, err := readFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return manifest{Version: manifestVersion, NextSegment: 1}, nil
	}
	if err != nil {
		return manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	var m manifest
	if err := decodeFramed(path, "manifest", b, &m); err != nil {
		return manifest{}, err
	}
	if m.Version != manifestVersion {
		return manifest{}, fmt.Errorf("manifest %s: unsupported version %d (this build reads %d)", path, m.Version, manifestVersion)
	}
	return m, nil
}

// writeManifest publishes m atomically: temporary file, fsync, rename, fsync
// dir. renamed reports whether the rename happened: from then on the new
// manifest may be what a restart reads, even when err (a failed directory
// fsync) is not nil.
func writeManifest(dir string, m manifest) (renamed bool, err error) {
	return writeManifestFS(vfs.OS{}, dir, m)
}

// writeManifestFS is writeManifest on a filesystem.
func writeManifestFS(fsys vfs.FS, dir string, m manifest) (renamed bool, err error) {
	buf, err := encodeFramed(m)
	if err != nil {
		return false, fmt.Errorf("encode manifest: %w", err)
	}
	return writeFileAtomic(fsys, dir, manifestName, buf)
}

// encodeFramed encodes v as the store's small metadata files are framed
// (MANIFEST, ERASURES): indented JSON, then a line with the CRC-32C of the
// JSON bytes in hex.
func encodeFramed(v any) ([]byte, error) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	buf := append(body, '\n')
	return append(buf, fmt.Sprintf("%08x\n", crc32.Checksum(body, castagnoli))...), nil
}

// decodeFramed checks and decodes a file written by encodeFramed; what
// names the file's kind in errors.
func decodeFramed(path, what string, b []byte, v any) error {
	i := bytes.LastIndexByte(bytes.TrimRight(b, "\n"), '\n')
	if i < 0 {
		return &CorruptionError{File: path, Offset: 0, Msg: what + " has no checksum line"}
	}
	body, sumLine := b[:i], bytes.TrimSpace(b[i+1:])
	want, err := strconv.ParseUint(string(sumLine), 16, 32)
	if err != nil {
		return &CorruptionError{File: path, Offset: int64(i + 1), Msg: what + " checksum line is not hex"}
	}
	if got := crc32.Checksum(body, castagnoli); got != uint32(want) {
		return &CorruptionError{File: path, Offset: 0, Msg: fmt.Sprintf("%s checksum mismatch: stored %08x, computed %08x", what, want, got)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &CorruptionError{File: path, Offset: 0, Msg: what + " is not valid JSON: " + err.Error()}
	}
	return nil
}

// writeFileAtomic publishes data as dir/name with vfs.WriteFileAtomic:
// temporary file, fsync, rename, fsync of dir. renamed reports whether the
// rename happened, as writeManifest's does.
func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte) (renamed bool, err error) {
	err = vfs.WriteFileAtomic(fsys, filepath.Join(dir, name), data)
	var notSynced *vfs.DirSyncError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &notSynced):
		return true, err
	}
	return false, fmt.Errorf("write %s: %w", name, err)
}

// readFile reads a whole file from fsys (vfs.ReadFile: a missing file is
// fs.ErrNotExist, an empty one reads as empty).
func readFile(fsys vfs.FS, path string) ([]byte, error) { return vfs.ReadFile(fsys, path) }

// fileExists reports whether path exists on fsys (an error other than
// "does not exist" counts as existing: the caller will meet it).
func fileExists(fsys vfs.FS, path string) bool {
	f, err := fsys.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	f.Close()
	return true
}

// CorruptionError reports damaged bytes in a store file, with where they are.
type CorruptionError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corruption in %s at offset %d: %s", e.File, e.Offset, e.Msg)
}

// Is makes errors.Is(err, durable.ErrCorruption) true for every corruption error.
func (e *CorruptionError) Is(target error) bool { return target == durable.ErrCorruption }
