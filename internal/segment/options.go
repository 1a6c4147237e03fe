package segment

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// DefaultBlockSpans is the default target number of spans per block.
const DefaultBlockSpans = 2048

// DefaultZstdLevel is the compression level used when WriterOptions.ZstdLevel
// is zero (see BenchmarkWrite for the measurement behind the choice).
const DefaultZstdLevel = int(zstd.SpeedFastest)

// WriterOptions configure a Writer. The zero value selects the defaults.
type WriterOptions struct {
	BlockSpans int // target spans per block; default DefaultBlockSpans, at most 1<<20
	// ZstdLevel is a klauspost zstd.EncoderLevel: 1 SpeedFastest, 2 SpeedDefault,
	// 3 SpeedBetterCompression, 4 SpeedBestCompression; 0 selects DefaultZstdLevel.
	ZstdLevel int
}

// Validate reports options that cannot be used.
func (o WriterOptions) Validate() error {
	if o.BlockSpans < 0 || o.BlockSpans > maxBlockSpans {
		return fmt.Errorf("segment writer: BlockSpans %d out of range [0, %d]", o.BlockSpans, maxBlockSpans)
	}
	if o.ZstdLevel < 0 || o.ZstdLevel > int(zstd.SpeedBestCompression) {
		return fmt.Errorf("segment writer: ZstdLevel %d out of range [0, %d]", o.ZstdLevel, int(zstd.SpeedBestCompression))
	}
	return nil
}

func (o WriterOptions) withDefaults() WriterOptions {
	if o.BlockSpans == 0 {
		o.BlockSpans = DefaultBlockSpans
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = DefaultZstdLevel
	}
	return o
}
