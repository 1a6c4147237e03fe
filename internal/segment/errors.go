package segment

import (
	"errors"
	"fmt"

	"github.com/rastro-dev/rastro/internal/durable"
)

// CorruptionError reports a checksum or structure failure in a segment file:
// the file, the byte offset where the damaged part starts, and what is wrong.
// It is returned for damage found on disk, never for I/O failures, so callers
// can quarantine the file and keep serving the rest.
type CorruptionError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("segment %s: corrupt at offset %d: %s", e.File, e.Offset, e.Msg)
}

// Is makes errors.Is(err, durable.ErrCorruption) true for every corruption error.
func (e *CorruptionError) Is(target error) bool { return target == durable.ErrCorruption }

// IsCorruption reports whether err is, or wraps, a *CorruptionError.
func IsCorruption(err error) bool {
	var ce *CorruptionError
	return errors.As(err, &ce)
}

// ErrUnsupported is wrapped by errors for well-formed files this reader cannot
// read: a newer format version, a required section type it does not know, or
// a reserved value tag (stored-value references) it does not implement.
var ErrUnsupported = errors.New("unsupported segment feature")
