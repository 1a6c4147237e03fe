// Package logstore stores OpenTelemetry log records beside the span engine,
// in the same data directory (under logs/) and with the same guarantees: a
// record is in the write-ahead log (internal/wal, group commit, fsync per
// the durability mode) before its request is acknowledged, it is readable as
// soon as it is acknowledged, and a seal moves the write buffer into an
// immutable segment file, after which the WAL files it covered are removed.
//
// A segment (docs/format/logs.md) holds one project's records in blocks of up
// to BlockRecords, ordered by time. Each block stores its records by column
// (times, sequence numbers, severities, trace and span ids, services,
// resources and scopes, and the free-form rest in OTLP's protobuf encoding),
// each column compressed on its own, so that a query decodes only the columns
// it needs. The footer keeps, per block, the time and severity range, the
// services, and Bloom filters over the trace ids and the words of bodies and
// string attributes, so that most blocks are skipped without being read; a
// block's word index lists the records of each word, so that a word search
// decodes only those records of a block it reads.
//
// The write buffer (buffer.go) keeps records encoded in pointer-free rows and
// a byte arena, about 400 bytes of heap per record, and decodes one only when
// a query keeps it.
//
// Compaction (compact.go) merges runs of one project's adjacent segments,
// by the span engine's size tiers, into one, rebuilt through the seals'
// segment writer; records keep their sequence numbers. Segments are
// reference-counted, so that a query that took its view before a merge,
// an erasure's rewrite or retention still reads the files it holds.
//
// Records are ordered newest first by (time, sequence): the sequence number
// is given in WAL order when a record is acknowledged and is the same after a
// restart, so paging with a cursor is stable.
package logstore
