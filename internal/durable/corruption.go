package durable

import "errors"

// ErrCorruption marks damaged bytes found on disk. Every on-disk structure's
// corruption error (segment, WAL, value store, manifest and erasure list)
// keeps its own detail (file, offset, what is wrong) and also satisfies
// errors.Is(err, ErrCorruption), so a caller can tell damage from an I/O
// failure (EIO, ENOSPC, a closed file), which never does. store.ErrCorruption
// is the same value, for the API side.
var ErrCorruption = errors.New("corruption")
