package wal

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// ReplayStats describes what Replay read and repaired.
type ReplayStats struct {
	Files   int   // files read
	Records int   // intact records passed to fn
	Bytes   int64 // bytes of those records, headers included
	// TruncatedBytes were cut from the tail of the last file (torn write).
	TruncatedBytes int64
	// CorruptFiles counts older files whose rest was skipped after a corrupt record.
	CorruptFiles int
	// SkippedBytes were skipped in those older files (left on disk).
	SkippedBytes int64
	// Corruptions lists every damaged place found, in log order.
	Corruptions []*CorruptionError
}

// Replay calls fn for every intact record in log order, reading the files
// that existed when the WAL was opened with sequence >= from (0 = all).
//
// The last of those files is repaired: a torn or corrupt tail is truncated at
// the end of the last intact record (a Logf warning names the file and
// offset), and a damaged file header is rewritten. In an older file, a corrupt
// record is logged with its file, offset and the bytes skipped, the rest of
// that file is skipped, and replay continues with the next file. Both are
// counted in the returned stats. A file of an unknown format version stops
// Replay with an error wrapping ErrUnsupportedVersion and is not modified. An
// error from fn aborts Replay and is returned wrapped.
//
// Record.Body passed to fn is only valid until fn returns.
func (w *WAL) Replay(from uint64, fn func(r Record) error) (ReplayStats, error) {
	w.replayMu.Lock()
	defer w.replayMu.Unlock()
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return ReplayStats{}, ErrClosed
	}
	var seqs []uint64
	for _, lf := range w.files {
		if lf.seq >= from && lf.seq <= w.lastOldSeq {
			seqs = append(seqs, lf.seq)
		}
	}
	w.mu.Unlock()

	var st ReplayStats
	rd := &replayer{w: w, fn: fn, st: &st, br: bufio.NewReaderSize(nil, 1<<20)}
	prev := uint64(0)
	for _, seq := range seqs {
		if prev != 0 && seq != prev+1 {
			w.opts.Logf("wal: files %d to %d are missing from %s", prev+1, seq-1, w.opts.Dir)
		}
		prev = seq
		if err := rd.file(seq, seq == w.lastOldSeq); err != nil {
			return st, err
		}
	}
	return st, nil
}

type replayer struct {
	w   *WAL
	fn  func(Record) error
	st  *ReplayStats
	br  *bufio.Reader
	buf []byte
}

// file replays one file; last selects repair (truncate) over skip.
func (rd *replayer) file(seq uint64, last bool) error {
	path := rd.w.path(seq)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("wal replay: open %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal replay: stat %s: %w", path, err)
	}
	size := info.Size()
	rd.br.Reset(f)
	rd.st.Files++

	off, cerr, err := rd.records(path, seq, size)
	if err != nil {
		return err
	}
	if cerr == nil {
		return nil
	}
	rd.st.Corruptions = append(rd.st.Corruptions, cerr)
	if !last {
		rd.st.CorruptFiles++
		rd.st.SkippedBytes += size - off
		rd.w.opts.Logf("%v; skipped the remaining %d bytes of the file", cerr, size-off)
		return nil
	}
	rd.w.opts.Logf("%v; truncating the file to %d bytes (dropping %d bytes)", cerr, off, size-off)
	if err := rd.w.repair(seq, off, size); err != nil {
		return err
	}
	rd.st.TruncatedBytes += size - off
	return nil
}

// records reads the header and the records of one file. It returns the
// offset where the intact prefix ends and, if the file does not end cleanly
// there, the corruption found; err is an I/O failure or fn's error.
func (rd *replayer) records(path string, seq uint64, size int64) (off int64, cerr *CorruptionError, err error) {
	corrupt := func(off int64, format string, args ...any) *CorruptionError {
		return &CorruptionError{File: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	readErr := func(off int64, err error) error {
		return fmt.Errorf("wal replay: read %s at offset %d: %w", path, off, err)
	}
	if size < fileHeaderSize {
		return 0, corrupt(0, "file is %d bytes, shorter than its %d-byte header", size, fileHeaderSize), nil
	}
	var hdr [fileHeaderSize]byte
	if _, err := io.ReadFull(rd.br, hdr[:]); err != nil {
		return 0, nil, readErr(0, err)
	}
	if string(hdr[:4]) != fileMagic {
		return 0, corrupt(0, "bad magic %q", hdr[:4]), nil
	}
	if hdr[4] != fileVersion {
		return 0, nil, fmt.Errorf("wal replay: %s has format version %d, this build reads %d: %w", path, hdr[4], fileVersion, ErrUnsupportedVersion)
	}
	if hdr[5] != 0 || hdr[6] != 0 || hdr[7] != 0 {
		return 0, corrupt(5, "reserved header bytes are not zero"), nil
	}
	if s := binary.LittleEndian.Uint64(hdr[8:]); s != seq {
		return 0, corrupt(8, "header sequence %d does not match the file name", s), nil
	}
	off = fileHeaderSize
	var rh [recordHeaderSize]byte
	for off < size {
		left := size - off
		if left < recordHeaderSize+2 {
			return off, corrupt(off, "%d trailing bytes, too few for a record (torn write)", left), nil
		}
		if _, err := io.ReadFull(rd.br, rh[:]); err != nil {
			return off, nil, readErr(off, err)
		}
		n := binary.LittleEndian.Uint32(rh[0:4])
		sum := binary.LittleEndian.Uint32(rh[4:8])
		switch {
		case n == 0 && sum == 0:
			return off, corrupt(off, "zero-filled tail"), nil
		case n < 2:
			return off, corrupt(off, "record length %d is below the minimum 2", n), nil
		case n > MaxRecordBytes:
			return off, corrupt(off, "record length %d exceeds the limit %d", n, MaxRecordBytes), nil
		case int64(n) > left-recordHeaderSize:
			return off, corrupt(off, "record length %d exceeds the %d bytes left in the file (torn write)", n, left-recordHeaderSize), nil
		}
		if cap(rd.buf) < int(n) {
			rd.buf = make([]byte, n)
		}
		p := rd.buf[:n]
		if _, err := io.ReadFull(rd.br, p); err != nil {
			return off, nil, readErr(off, err)
		}
		crc := crc32.Update(0, castagnoli, rh[0:4])
		if crc = crc32.Update(crc, castagnoli, p); crc != sum {
			return off, corrupt(off, "checksum mismatch: stored %08x, computed %08x", sum, crc), nil
		}
		plen := int(p[1])
		if 2+plen > len(p) {
			return off, corrupt(off, "project length %d exceeds record length %d", plen, n), nil
		}
		r := Record{Type: p[0], Project: string(p[2 : 2+plen]), Body: p[2+plen:]}
		if err := rd.fn(r); err != nil {
			return off, nil, fmt.Errorf("wal replay %s at offset %d: %w", path, off, err)
		}
		off += recordHeaderSize + int64(n)
		rd.st.Records++
		rd.st.Bytes += recordHeaderSize + int64(n)
	}
	return off, nil, nil
}

// repair truncates file seq to off bytes (rewriting the header when the
// header itself is damaged) and fsyncs it.
func (w *WAL) repair(seq uint64, off, size int64) error {
	path := w.path(seq)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal repair: open %s: %w", path, err)
	}
	err = f.Truncate(off)
	newSize := off
	if err == nil && off < fileHeaderSize {
		if err = f.Truncate(0); err == nil {
			_, err = f.WriteAt(fileHeader(seq), 0)
			newSize = fileHeaderSize
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal repair: truncate %s to %d: %w", path, off, err)
	}
	w.mu.Lock()
	for i := range w.files {
		if w.files[i].seq == seq {
			w.files[i].size = newSize
		}
	}
	w.mu.Unlock()
	w.size.Add(newSize - size)
	return nil
}
