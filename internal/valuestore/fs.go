package valuestore

import "github.com/rastro-dev/rastro/internal/vfs"

// FS is the seam under the store (internal/vfs): every file operation it
// performs goes through here, so tests can fail any step and simulate a
// crash that keeps only what was synced. Names are full paths.
type FS = vfs.FS

// File is an open file of an FS.
type File = vfs.File

// OSFS is the operating system's filesystem.
type OSFS = vfs.OS
