package segment

import (
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/rastro-dev/rastro/internal/vfs"

	"github.com/rastro-dev/rastro/internal/model"
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
	// ContentTokens, when set, is called for each span and emits the 64-bit
	// hashes of its searchable tokens; the writer builds a token filter per
	// block and a summary filter for the segment (sections 7 and 8). Nil
	// writes no token filters (--no-content-index). It may emit a hash more
	// than once; it must be a pure function of the span.
	ContentTokens func(s *model.Span, emit func(hash uint64))
	// TokenFilterFP is the target false-positive rate of a per-block token
	// filter, in (0, 0.5]; 0 selects DefaultTokenFilterFP.
	TokenFilterFP float64
	// RowGroupTokenFilters adds, with ContentTokens, a token filter per
	// 64-row group of every block (section 12), so that a rare word decodes
	// about 64 rows instead of a block. Off by default: on text-heavy spans
	// (the bench content corpus) they cost about 6% of the segment on disk,
	// beyond the 5% budget of the whole token index.
	RowGroupTokenFilters bool
	// StoreValue, when set, stores a string apart (in the value store) and
	// returns its SHA-256. String values of span, event and link attributes
	// (at any nesting depth) of at least ValueThreshold bytes are cut into
	// pieces (valuepieces.go: JSON arrays at their elements, long text by
	// content), each handed to it, and written as stored-value references
	// (value tag 9); section 18 lists the distinct references. Resource and
	// scope attributes always stay inline. Token filters, attribute filters
	// and LLM aggregates are computed from the full values. An error from
	// StoreValue fails the write. Nil keeps every value inline.
	StoreValue func(v string) ([32]byte, error)
	// ValueThreshold is the length in bytes from which StoreValue is used;
	// 0 selects DefaultValueThreshold. Ignored without StoreValue.
	ValueThreshold int
	// IsContent reports the span and event attribute keys that hold prompt
	// or completion text (one attribute per message in several LLM
	// dialects): their string values are stored apart from ContentThreshold
	// bytes, so that a conversation that resends its history on every call
	// stores each message once. Nil: no key is content.
	IsContent func(key string) bool
	// ContentThreshold is the length in bytes from which IsContent's values
	// are stored apart; 0 selects DefaultContentThreshold.
	ContentThreshold int
	// FS is the filesystem the segment is written to (internal/vfs); nil
	// means the operating system's.
	FS vfs.FS
	// AnyTraceOrder lets traces come in any order (each trace still in one
	// run, its spans in (start, span id) order). Compaction needs it: a
	// merged trace's earliest span may be dropped (retention, a newer copy
	// of a re-sent span), moving its start after the next trace's.
	AnyTraceOrder bool
}

// DefaultValueThreshold is the default WriterOptions.ValueThreshold (1 KiB).
const DefaultValueThreshold = 1024

// DefaultContentThreshold is the default WriterOptions.ContentThreshold.
const DefaultContentThreshold = 128

// Validate reports options that cannot be used.
func (o WriterOptions) Validate() error {
	if o.BlockSpans < 0 || o.BlockSpans > maxBlockSpans {
		return fmt.Errorf("segment writer: BlockSpans %d out of range [0, %d]", o.BlockSpans, maxBlockSpans)
	}
	if o.ZstdLevel < 0 || o.ZstdLevel > int(zstd.SpeedBestCompression) {
		return fmt.Errorf("segment writer: ZstdLevel %d out of range [0, %d]", o.ZstdLevel, int(zstd.SpeedBestCompression))
	}
	if o.TokenFilterFP < 0 || o.TokenFilterFP > 0.5 || o.TokenFilterFP != o.TokenFilterFP {
		return fmt.Errorf("segment writer: TokenFilterFP %v out of range (0, 0.5]", o.TokenFilterFP)
	}
	if o.ContentThreshold < 0 {
		return fmt.Errorf("segment writer: ContentThreshold %d is negative", o.ContentThreshold)
	}
	if o.ValueThreshold < 0 {
		return fmt.Errorf("segment writer: ValueThreshold %d is negative", o.ValueThreshold)
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
	if o.TokenFilterFP == 0 {
		o.TokenFilterFP = DefaultTokenFilterFP
	}
	if o.ContentThreshold == 0 {
		o.ContentThreshold = DefaultContentThreshold
	}
	if o.ValueThreshold == 0 {
		o.ValueThreshold = DefaultValueThreshold
	}
	return o
}
