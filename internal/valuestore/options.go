package valuestore

import (
	"errors"
	"fmt"
	"log/slog"
)

// Defaults for Options fields left zero.
const (
	DefaultPackBytes           = 64 << 20
	DefaultZstdLevel           = 3
	DefaultRewriteLiveFraction = 0.5
	DefaultFrameBytes          = 4 << 10
)

// MaxValueBytes is the largest value Put accepts (1 GiB).
const MaxValueBytes = 1 << 30

// Options configure a Store. Only Dir is required.
type Options struct {
	// Dir holds the store's files. It is created if missing.
	Dir string
	// PackBytes rotates the active pack once it holds at least this many bytes
	// (default 64 MiB; 1 KiB to 1 GiB).
	PackBytes int64
	// ZstdLevel is the zstd level (1-22, default 3). -1 stores every value
	// uncompressed.
	ZstdLevel int
	// FrameBytes: Put gathers values into one record (a frame, compressed as a
	// whole) until it holds at least this many raw bytes, or until Sync
	// (default 4 KiB; at most 1 MiB). Larger frames compress better, but a
	// Get decompresses its value's whole frame. 1 writes every value in a
	// record of its own.
	FrameBytes int
	// RewriteLiveFraction: Collect rewrites a pack whose live bytes fall below
	// this fraction of its size (default 0.5). 1 rewrites every pack holding any
	// dead value, so dead bytes are physically gone when Collect returns (erasure).
	RewriteLiveFraction float64
	// Logger receives warnings about repairs made at Open (default: discard).
	Logger *slog.Logger
	// FS is the filesystem the store uses (default: the operating system's).
	// Tests substitute one that injects faults and simulates crashes.
	FS FS
}

func (o Options) withDefaults() Options {
	if o.PackBytes == 0 {
		o.PackBytes = DefaultPackBytes
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = DefaultZstdLevel
	}
	if o.FrameBytes == 0 {
		o.FrameBytes = DefaultFrameBytes
	}
	if o.RewriteLiveFraction == 0 {
		o.RewriteLiveFraction = DefaultRewriteLiveFraction
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	return o
}

// Validate reports the first invalid field of o (after defaults are applied).
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Dir == "":
		return errors.New("valuestore options: Dir is empty")
	case o.PackBytes < 1<<10 || o.PackBytes > 1<<30:
		return fmt.Errorf("valuestore options: PackBytes %d outside [1 KiB, 1 GiB]", o.PackBytes)
	case o.ZstdLevel != -1 && (o.ZstdLevel < 1 || o.ZstdLevel > 22):
		return fmt.Errorf("valuestore options: ZstdLevel %d outside 1..22 (or -1 for none)", o.ZstdLevel)
	case o.FrameBytes < 1 || o.FrameBytes > 1<<20:
		return fmt.Errorf("valuestore options: FrameBytes %d outside [1, 1 MiB]", o.FrameBytes)
	case o.RewriteLiveFraction < 0 || o.RewriteLiveFraction > 1:
		return fmt.Errorf("valuestore options: RewriteLiveFraction %g outside [0, 1]", o.RewriteLiveFraction)
	}
	return nil
}
