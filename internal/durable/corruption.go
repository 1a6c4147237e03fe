package durable

import "errors"

// ErrCorruption marks damaged bytes found on disk. Every on-disk structure's
// corruption error (segment, WAL, value store, manifest and erasure list)
// keeps its own detail (file, offset, what is wrong) and also satisfies
// errors.Is(err, ErrCorruption), so a caller can tell damage from an I/O
// failure (EIO, ENOSPC, a closed file), which never does. store.ErrCorruption
// is the same value, for the API side.
var ErrCorruption = errors.New("corruption")

// ErrStopped marks the failure of a store that stopped accepting writes
// after a write or fsync error it cannot recover from (the WAL's fail-stop):
// only a restart, once the disk is checked, makes it take writes again.
var ErrStopped = errors.New("stopped accepting writes after a write or fsync error")
