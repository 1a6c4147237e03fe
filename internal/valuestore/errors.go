package valuestore

import (
	"errors"
	"fmt"

	"github.com/rastro-dev/rastro/internal/durable"
)

// ErrNotFound is returned by Get for a Ref the store does not hold.
var ErrNotFound = errors.New("valuestore: value not found")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("valuestore: store is closed")

// ErrFailed is wrapped by the errors of Put, Sync and Collect after a write,
// fsync or manifest publication failed: what is on disk is then unknown, so the
// store refuses further writes until it is reopened (Get keeps working).
var ErrFailed = errors.New("valuestore: store failed on an earlier write; reopen it")

// ErrUnsupportedVersion is wrapped by Open's error when a manifest, pack or
// pack index carries a format version this code does not know. It is not
// corruption: the files are left untouched.
var ErrUnsupportedVersion = errors.New("valuestore: unsupported format version")

// CorruptionError reports damage found on disk: the file, the byte offset where
// the damaged part starts, and what is wrong. It is never used for I/O failures
// (EIO, ENOSPC), which are returned as wrapped OS errors, so callers can tell a
// damaged file from a failing disk.
type CorruptionError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("valuestore %s: corrupt at offset %d: %s", e.File, e.Offset, e.Msg)
}

// Is makes errors.Is(err, durable.ErrCorruption) true for every corruption error.
func (e *CorruptionError) Is(target error) bool { return target == durable.ErrCorruption }

// IsCorruption reports whether err is, or wraps, a *CorruptionError.
func IsCorruption(err error) bool {
	var ce *CorruptionError
	return errors.As(err, &ce)
}
