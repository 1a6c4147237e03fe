package segment

import (
	"github.com/rastro-dev/rastro/internal/model"
)

// BlockMeta is the resident summary of one block, used to prune blocks
// before reading them.
type BlockMeta struct {
	Project     string
	Spans       int
	Errors      int    // spans with StatusCode == model.StatusError
	MinStart    uint64 // span start times, unix ns
	MaxStart    uint64
	MinDuration uint64 // model.Span.Duration(), ns
	MaxDuration uint64
	Kinds       uint8    // bit i set if a span of model.SpanKind(i) is present (kinds 0..7)
	Services    []string // distinct services in the block, sorted
	Names       []string // distinct span names in the block, sorted
}

// columnRef locates one column inside its block.
type columnRef struct {
	ID     uint32
	Codec  uint32
	Offset uint64 // from the start of the block
	Length uint64 // stored bytes
	RawLen uint64 // decompressed bytes
	CRC    uint32 // crc32c of the stored bytes
}

// blockEntry is one block's row in the block index.
type blockEntry struct {
	Offset, Length uint64 // in the file
	ProjectIdx     int
	Meta           BlockMeta
	Cols           []columnRef
}

func (b *blockEntry) col(id uint32) (columnRef, bool) {
	for _, c := range b.Cols {
		if c.ID == id {
			return c, true
		}
	}
	return columnRef{}, false
}

func kindBit(k model.SpanKind) uint8 {
	if k < 0 || k > 7 {
		return 0
	}
	return 1 << uint(k)
}
