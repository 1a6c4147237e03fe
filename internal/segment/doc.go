// Package segment reads and writes Rastro's segment files: immutable,
// checksummed, columnar files of spans, sealed from the engine's write buffer
// and rewritten by compaction, retention and erasure merges. The byte layout
// (header, blocks, sections, table of contents, footer; version
// FormatVersion) is specified in docs/format/segment.md.
//
//	+--------+---------+-----+---------+-----+-----+--------+
//	| header | block 0 | ... | section | ... | TOC | footer |
//	+--------+---------+-----+---------+-----+-----+--------+
//
// Spans are grouped by project, then by trace, in blocks of about a thousand
// (WriterOptions.BlockSpans); each column of a block is compressed on its
// own (zstd), and large variable-width columns in pieces cut at row marks so
// that one row can be read without the block. Sections hold what prunes and
// locates: block metadata (time and duration bounds, services, names,
// statuses), attribute bloom filters, the trace index (a trace is one small
// read), LLM aggregates per block and per project, the full-text token map
// and per-block token filters, and the list of stored-value references.
//
// Writer writes a segment to a temporary file and publishes it atomically
// (fsync, rename, fsync of the directory). Open (or OpenFile) returns a
// Reader that keeps the footer, the table of contents and the small
// sections resident and reads blocks and pages with ReadAt on demand; it is
// safe for concurrent use. Verify checks every checksum and cross-reference
// (rastro fsck); Salvage reads back the spans of the intact blocks of a
// damaged file (rastro fsck --repair).
//
// Errors: damage found on disk is a *CorruptionError (file, offset, what is
// wrong), which satisfies errors.Is(err, durable.ErrCorruption); a
// well-formed file this build cannot read wraps ErrUnsupported; any other
// error (EIO, a closed file) is an I/O failure, never reported as
// corruption.
package segment
