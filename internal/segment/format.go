package segment

import (
	"encoding/binary"
	"hash/crc32"
)

// FormatVersion is the segment format version written in the header and the
// footer. It changes only when an existing structure changes meaning; new
// section types, new column ids and new trailing fields of a block entry do
// not change it (older readers skip them). See docs/format/segment.md.
const FormatVersion = 1

// File magics: the header starts with headerMagic, the footer ends with footerMagic.
const (
	headerMagic = "RSTROSEG"
	footerMagic = "RSTROEND"
)

// Fixed sizes of the framing structures.
const (
	headerLen   = 16 // magic 8 | version u32 | crc32c u32
	footerLen   = 40 // tocOffset u64 | tocLength u64 | tocCRC u32 | version u32 | flags u32 | crc u32 | magic 8
	tocEntryLen = 40 // type u32 | flags u32 | codec u32 | crc u32 | offset u64 | length u64 | rawLength u64
)

// Section types of the table of contents. Unknown types are skipped by a
// reader unless their entry has sectionRequired set.
const (
	sectionInfo        = 1 // segment summary: counts, time range, projects
	sectionBlockIndex  = 2 // per-block metadata and column directories
	sectionAttrBlooms  = 3 // per-block attribute-value bloom filters
	sectionTraceIndex  = 4 // (project, trace id) -> (block, row, count), in checksummed pages
	sectionTraceFences = 5 // first key and checksum of every trace-index page
	// Optional: per-block partial LLM aggregates and per-project rollups, in
	// parts read on demand (like the trace index); section 10 is their directory.
	sectionLLMAggregates = 6
	// Optional (WriterOptions.ContentTokens): per-block full-text token
	// filters read on demand, and their resident summary and directory.
	sectionTokenFilters = 7
	sectionTokenSummary = 8
	// Optional (WriterOptions.StoreValue): the distinct stored-value hashes
	// the blocks reference; written with sectionRequired set.
	sectionValueRefs = 9
	sectionLLMAggDir = 10 // directory of section 6: one part per block and per project rollup
	// Optional (with sections 7 and 8): the disk summary of the segment's
	// tokens (blocked bloom, one 68-byte page per lookup), the per-block
	// row-group token filters, and their resident directory.
	sectionTokenPages    = 11
	sectionTokenGroups   = 12
	sectionTokenGroupDir = 13
	// Optional: per project, the LLM rollups without session and user and
	// the session table, in parts read on demand; section 17 is their
	// directory (agg_rollup.go).
	sectionLLMRollups   = 16
	sectionLLMRollupDir = 17
	// Optional: per-block service aggregates (RED per service, span name
	// and minute; error groups) and per-project rollups, in parts read on
	// demand; section 15 is their directory (ops_section.go).
	sectionOpsAggregates = 14
	sectionOpsAggDir     = 15
	// Optional (WriterOptions.StoreValue): the distinct stored-value hashes
	// the blocks reference, in the order of their first reference; value tag
	// 9 names them by position. Written instead of section 9, with
	// sectionRequired set.
	sectionValueRefTable = 18
	// Optional: the resident attribute value summary of the segment
	// (attrsummary.go), checked before any block filter.
	sectionAttrSummary = 19
	// Optional: the per-block attribute filters of section 3, each over
	// its entries prefixed by the block number (u32 LE), so that blocks
	// with the same entries do not share false positives. A writer of it
	// writes section 3 with filters that pass everything, so that readers
	// that do not know section 20 answer correctly (without pruning).
	sectionAttrBloomsSalted = 20
	lastKnownSection        = sectionAttrBloomsSalted
	sectionFirstUserRange   = 64
)

// Flags of a record in the LLM column.
const (
	llmPresent = 1 // the span has LLM fields
	llmCounted = 2 // model.LLM.Counted
)

// sectionRequired in a TOC entry's flags tells a reader that does not know the
// section type that it must refuse the file rather than skip the section.
const sectionRequired = 1

// Codecs of sections and columns. Pieces are for block columns only: a
// section with codec 2 is corrupt. Writers use codec 3 for the id columns
// only; a reader decodes it wherever it finds it.
const (
	codecNone   = 0
	codecZstd   = 1
	codecPieces = 2 // independently compressed pieces cut at row marks (compress.go)
	codecIDs    = 3 // fixed-width ids as zero, repeated or literal records (ids.go)
)

// Column ids inside a block. A reader ignores ids it does not know.
const (
	colTraceID       = 1
	colSpanID        = 2
	colParentID      = 3
	colStart         = 4
	colDuration      = 5
	colName          = 6
	colService       = 7
	colKindStatus    = 8
	colStatusMessage = 9
	colTraceState    = 10
	colResource      = 11
	colScope         = 12
	colAttrs         = 13
	colDropped       = 14
	colEvents        = 15
	colLinks         = 16
	colRowMarks      = 17 // optional: byte offsets of every markRows-th row in the variable-width columns
	colLLM           = 18 // optional: model.LLM of every span (written when a span of the block has one)
	requiredColumns  = 16 // columns 1..16 must be present
	numColumns       = 18
	markRows         = 64
)

var columnNames = [...]string{"", "trace_id", "span_id", "parent_id", "start", "duration", "name", "service",
	"kind_status_flags", "status_message", "trace_state", "resource", "scope", "attributes", "dropped",
	"events", "links", "row_marks", "llm"}

// Value tags on disk. They equal model.ValueType for the OTLP variants, but
// are a separate, frozen list: the model may change, the disk may not.
const (
	tagEmpty    = 0
	tagString   = 1
	tagBool     = 2
	tagInt      = 3
	tagDouble   = 4
	tagArray    = 5
	tagKvList   = 6
	tagBytes    = 7
	tagValueRef = 8 // stored-value reference: SHA-256 (32 bytes) | uvarint length | original tag (1)
	// Stored value in pieces, named by their position in section 18:
	// uvarint n (>= 1) | n x uvarint position | uvarint length | original tag (1).
	// The value is the concatenation of the pieces.
	tagValuePieces = 9
)

// maxValuePieces bounds the pieces of one stored value.
const maxValuePieces = 1 << 16

// Limits that bound what a reader allocates or recurses on hostile input.
const (
	maxValueDepth     = 100     // nesting of arrays / kvlists; the writer refuses deeper values
	maxColumnRawBytes = 1 << 30 // decompressed size of one column
	maxBlockBytes     = 1 << 31 // stored size of one block
	maxSectionBytes   = 1 << 30 // decompressed size of one resident section
	maxTOCEntries     = 1 << 16 // table of contents entries
	maxBlockSpans     = 1 << 20 // spans in one block (also the WriterOptions.BlockSpans limit)
	tracePageEntries  = 128     // trace-index entries per page (4 KiB pages)
	traceEntryLen     = 32      // project u32 | trace id 16 | block u32 | row u32 | count u32
	fenceLen          = 24      // project u32 | first trace id 16 | page crc32c u32
	maxFencePage      = 1 << 16 // largest page size (entries) a reader accepts
	maxBloomWords     = 1 << 24 // 128 MiB of bloom bits for one block: far beyond any writer
	maxStringTable    = 1 << 26 // entries of the block-index string table
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var le = binary.LittleEndian

// tocEntry is one row of the table of contents.
type tocEntry struct {
	Type, Flags, Codec, CRC uint32
	Offset, Length, RawLen  uint64
}

func appendHeader(b []byte) []byte {
	b = append(b, headerMagic...)
	b = le.AppendUint32(b, FormatVersion)
	return le.AppendUint32(b, crc(b[len(b)-12:]))
}

func appendTOC(b []byte, entries []tocEntry) []byte {
	b = le.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = le.AppendUint32(b, e.Type)
		b = le.AppendUint32(b, e.Flags)
		b = le.AppendUint32(b, e.Codec)
		b = le.AppendUint32(b, e.CRC)
		b = le.AppendUint64(b, e.Offset)
		b = le.AppendUint64(b, e.Length)
		b = le.AppendUint64(b, e.RawLen)
	}
	return b
}

func appendFooter(b []byte, tocOffset, tocLength uint64, tocCRC uint32) []byte {
	start := len(b)
	b = le.AppendUint64(b, tocOffset)
	b = le.AppendUint64(b, tocLength)
	b = le.AppendUint32(b, tocCRC)
	b = le.AppendUint32(b, FormatVersion)
	b = le.AppendUint32(b, 0) // flags
	b = le.AppendUint32(b, crc(b[start:]))
	return append(b, footerMagic...)
}
