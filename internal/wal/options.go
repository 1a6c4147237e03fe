package wal

import (
	"errors"
	"fmt"
	"time"

	"github.com/rastro-dev/rastro/internal/vfs"
)

// Mode selects when Append acknowledges a record.
type Mode int

const (
	// ModeSync acknowledges after the record's batch is written and fdatasync'ed.
	ModeSync Mode = iota
	// ModeBuffered acknowledges after write(2); the file is fsync'ed every
	// SyncInterval, on Rotate and on Close.
	ModeBuffered
)

// String returns "sync" or "buffered".
func (m Mode) String() string {
	switch m {
	case ModeSync:
		return "sync"
	case ModeBuffered:
		return "buffered"
	default:
		return fmt.Sprintf("Mode(%d)", int(m))
	}
}

// Defaults used by Options.Validate for zero fields.
const (
	DefaultSyncInterval  = time.Second
	DefaultFileBytes     = 64 << 20
	DefaultMaxBatchBytes = 8 << 20
)

// Options configures a WAL. The zero value of every field except Dir is valid.
type Options struct {
	// Dir holds the log files; it is created if missing.
	Dir string
	// Mode selects when Append returns; see ModeSync and ModeBuffered.
	Mode Mode
	// SyncInterval is how often ModeBuffered fsyncs the active file. Default 1s.
	SyncInterval time.Duration
	// FileBytes: the commit goroutine starts a new file once the active one
	// exceeds this many bytes. Default 64 MiB.
	FileBytes int64
	// MaxBatchBytes caps the bytes gathered into one group commit; appenders
	// wait while the pending batch is full. A single larger record still gets
	// its own batch. Default 8 MiB.
	MaxBatchBytes int
	// MinSeq is the lowest sequence Open may give the file it starts: Open
	// uses max(highest existing sequence + 1, MinSeq). An engine passes the
	// first sequence its manifest still needs replayed (wal_start), so that if
	// the directory was emptied or lost, new records never get a sequence
	// below it (which a later replay from wal_start would skip). 0 = no floor.
	MinSeq uint64
	// Step runs one step of the commit loop (a group commit: its write,
	// fsync and applies; or a timed fsync) and returns when step has
	// returned: every write, fsync and apply happens inside a step, one at
	// a time. An engine passes its process's policy (an OS thread at
	// lowered priority). nil: steps run on the commit goroutine.
	Step func(step func())
	// Logf receives warnings (torn tail cut, corruption skipped). Default: discard.
	Logf func(format string, args ...any)

	// FS is the filesystem under the log (internal/vfs); nil means the
	// operating system's. Tests use a MemFS to cut power at any point.
	FS vfs.FS

	// createFile opens a new log file for writing; tests replace it to inject
	// faults. nil means FS.
	createFile func(path string) (file, error)
}

// Validate checks the options and fills defaults for zero fields.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("wal options: Dir is empty")
	}
	if o.Mode != ModeSync && o.Mode != ModeBuffered {
		return fmt.Errorf("wal options: unknown mode %d", int(o.Mode))
	}
	if o.SyncInterval < 0 || o.FileBytes < 0 || o.MaxBatchBytes < 0 {
		return errors.New("wal options: SyncInterval, FileBytes and MaxBatchBytes must not be negative")
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.FileBytes == 0 {
		o.FileBytes = DefaultFileBytes
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	o.FS = vfs.Or(o.FS)
	if o.createFile == nil {
		fs := o.FS
		o.createFile = func(path string) (file, error) { return createFile(fs, path) }
	}
	return nil
}
