// Package wal is Rastro's write-ahead log: every accepted ingest request's raw
// bytes are appended here, with a checksum, before the client is acknowledged,
// and replayed after a restart.
//
// Usage:
//
//	w, err := wal.Open(wal.Options{Dir: dir, Mode: wal.ModeSync})
//	stats, err := w.Replay(0, func(r wal.Record) error { return decodeAndInsert(r) })
//	err = w.Append(wal.Record{Type: 1, Project: "default", Body: raw}, func() { insert(decoded) })
//	seq, err := w.Rotate(func(seq uint64) { swapBuffer(seq) })
//	// ... after the old buffer is sealed into a segment:
//	err = w.RemoveBefore(seq)
//
// The log is a directory of files named by a zero-padded 20-digit sequence
// number (00000000000000000001.wal, ...). Each file starts with a 16-byte header
// and holds records back to back:
//
//	file header (16 bytes)
//	+--------+---------+---------+-------------+
//	| "RWAL" | version | 0 0 0   | sequence    |
//	| 4 B    | 1 B (1) | 3 B     | 8 B, LE     |
//	+--------+---------+---------+-------------+
//
//	record
//	+-----------+-----------+------+------+---------+------+
//	| length    | crc32c    | type | plen | project | body |
//	| 4 B, LE   | 4 B, LE   | 1 B  | 1 B  | plen B  |      |
//	+-----------+-----------+------+------+---------+------+
//	length = 2 + plen + len(body); crc32c (Castagnoli) covers the four
//	length bytes and the length-many bytes that follow the crc.
//
// The complete specification, including what a crash may lose in each Mode,
// is docs/format/wal.md.
//
// # Concurrency
//
// One commit goroutine, started by Open and stopped by Close (which waits for
// it), owns the active file: it writes batches, fsyncs, calls the apply
// callbacks, and performs rotations. Appenders only encode their record and
// copy it into the pending batch under WAL.mu; no I/O is done while holding mu.
package wal
