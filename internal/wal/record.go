package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/rastro-dev/rastro/internal/durable"
)

// Record is one log entry: normally one accepted ingest request.
type Record struct {
	// Type is defined by the caller (e.g. 1 = OTLP protobuf, 2 = OTLP JSON).
	Type uint8
	// Project is the tenant; at most 255 bytes.
	Project string
	// Body is the raw request. During Replay it is only valid until the
	// callback returns; copy it to keep it.
	Body []byte
}

const (
	fileMagic      = "RWAL"
	fileVersion    = 1
	fileHeaderSize = 16
	// recordHeaderSize is length (4) + crc (4).
	recordHeaderSize = 8
	// MaxRecordBytes bounds type+project length+project+body of one record, so
	// that a corrupt length field can never make Replay allocate more.
	MaxRecordBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by this package.
var (
	// ErrClosed is returned by Append, Rotate and Replay after Close.
	ErrClosed = errors.New("wal: closed")
	// ErrFailed wraps the first write or fsync error; once returned, the WAL
	// accepts nothing more until it is reopened. It satisfies
	// errors.Is(err, durable.ErrStopped).
	ErrFailed error = stoppedError("wal: failed")
	// ErrNoSpace is returned by Append when the disk was full: the batch was
	// not stored (the file was cut back to before it), and the WAL takes the
	// next batch as usual, so writes resume by themselves once space is free.
	// It wraps the filesystem's error (errors.Is(err, syscall.ENOSPC)).
	ErrNoSpace = errors.New("wal: no space left on the device")
	// ErrUnsupportedVersion is returned by Replay when a file was written by a
	// newer format version; the file is left untouched.
	ErrUnsupportedVersion = errors.New("wal: unsupported file version")
)

// CorruptionError locates a damaged part of a log file.
type CorruptionError struct {
	File   string // path of the log file
	Offset int64  // byte offset of the first bad byte (record or header start)
	Reason string // what is wrong
	// Skipped is how many bytes from the damage on were not replayed: up to
	// the intact record where replay resumed, or to the end of the file.
	Skipped int64
}

// Error implements error.
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corruption in %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, durable.ErrCorruption) true for every corruption error.
func (e *CorruptionError) Is(target error) bool { return target == durable.ErrCorruption }

// recordSize returns the encoded size of r.
func recordSize(r *Record) int {
	return recordHeaderSize + 2 + len(r.Project) + len(r.Body)
}

// checkRecord rejects records that cannot be encoded.
func checkRecord(r *Record) error {
	if len(r.Project) > 255 {
		return fmt.Errorf("wal append: project name is %d bytes, limit 255", len(r.Project))
	}
	if n := 2 + len(r.Project) + len(r.Body); n > MaxRecordBytes {
		return fmt.Errorf("wal append: record is %d bytes, limit %d", n, MaxRecordBytes)
	}
	return nil
}

// recordHeader computes the 10 bytes that precede the project: length, crc,
// type and project length. It reads r only, so appenders run it in parallel
// before taking the lock.
func recordHeader(r *Record) [recordHeaderSize + 2]byte {
	var h [recordHeaderSize + 2]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(2+len(r.Project)+len(r.Body)))
	h[8] = r.Type
	h[9] = uint8(len(r.Project))
	crc := crcSmall(0, string(h[0:4]))
	crc = crcSmall(crc, string(h[8:10]))
	crc = crcSmall(crc, r.Project)
	crc = crc32.Update(crc, castagnoli, r.Body)
	binary.LittleEndian.PutUint32(h[4:8], crc)
	return h
}

// crcSmall is crc32.Update for a few bytes held in a string. crc32.Update
// would make its argument escape to the heap (it calls through a function
// value), costing an allocation per record.
func crcSmall(crc uint32, s string) uint32 {
	crc = ^crc
	for i := 0; i < len(s); i++ {
		crc = castagnoli[byte(crc)^s[i]] ^ (crc >> 8)
	}
	return ^crc
}

// appendRecord appends the encoding of r (with its precomputed header) to buf.
func appendRecord(buf []byte, h *[recordHeaderSize + 2]byte, r *Record) []byte {
	buf = append(buf, h[:]...)
	buf = append(buf, r.Project...)
	return append(buf, r.Body...)
}

// fileHeader returns the 16-byte header of file seq.
func fileHeader(seq uint64) []byte {
	h := make([]byte, fileHeaderSize)
	copy(h, fileMagic)
	h[4] = fileVersion
	binary.LittleEndian.PutUint64(h[8:], seq)
	return h
}

// stoppedError is a fail-stop error: errors.Is(err, durable.ErrStopped).
type stoppedError string

func (e stoppedError) Error() string   { return string(e) }
func (e stoppedError) Is(t error) bool { return t == durable.ErrStopped }
