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
	// CorruptFiles counts files in which damage was found.
	CorruptFiles int
	// Resyncs counts the times replay resumed at an intact record found
	// after damage.
	Resyncs int
	// SkippedBytes were passed over and left on disk: from each damaged place
	// to the intact record where replay resumed, and the rest of an older file
	// after damage that no intact record follows.
	SkippedBytes int64
	// TruncatedBytes were cut from the tail of the last file: damage that no
	// intact record follows (a torn write).
	TruncatedBytes int64
	// Corruptions lists every damaged place found, in log order.
	Corruptions []*CorruptionError
}

// Replay calls fn for every intact record in log order, reading the files
// that existed when the WAL was opened with sequence >= from (0 = all).
//
// Damage does not hide the intact records after it. After a damaged record
// (or a damaged file header), Replay looks for the next offset in the same
// file where an intact record starts (a plausible length and a matching
// CRC; see docs/format/wal.md for the residual risk) and resumes there; a
// Logf warning names the file, the offset and the bytes skipped, which stay
// on disk. When no intact record follows the damage, the rest of an older
// file is skipped (and left unchanged), and the last file, the one a crash
// may have left with a torn tail, is truncated at the end of its last intact
// record (a header with nothing intact after it is rewritten). A header
// whose sequence differs from the file name makes the whole file be treated
// as damage with nothing intact after it. Everything is counted in the
// returned stats.
//
// A file of an unknown format version stops Replay with an error wrapping
// ErrUnsupportedVersion and is not modified. An error from fn aborts Replay
// and is returned wrapped.
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
	f, err := rd.w.opts.FS.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return fmt.Errorf("wal replay: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("wal replay: stat %s: %w", path, err)
	}
	rd.br.Reset(io.NewSectionReader(f, 0, size))
	rd.st.Files++

	var sc *scanner
	// off is where the intact part being read starts, or the damage begins;
	// scanFrom and hint tell the scanner where to look after damage.
	off, scanFrom, hint := int64(0), int64(0), int64(-1)
	cerr, resync, err := rd.header(path, seq, size)
	if err != nil {
		return err
	}
	if cerr == nil {
		off = fileHeaderSize
	}
	for {
		if cerr == nil {
			off, cerr, hint, err = rd.records(path, off, size)
			if err != nil {
				return err
			}
			if cerr == nil {
				return nil
			}
			scanFrom, resync = off+1, true
		}
		if len(rd.st.Corruptions) == 0 || rd.st.Corruptions[len(rd.st.Corruptions)-1].File != path {
			rd.st.CorruptFiles++
		}
		rd.st.Corruptions = append(rd.st.Corruptions, cerr)
		next := int64(-1)
		if resync {
			if sc == nil {
				sc = newScanner(f, path, size)
			}
			if next, err = sc.next(scanFrom, hint); err != nil {
				return err
			}
		}
		if next < 0 {
			break
		}
		cerr.Skipped = next - off
		rd.st.Resyncs++
		rd.st.SkippedBytes += cerr.Skipped
		rd.w.opts.Logf("%v; skipped %d bytes, replay resumes at offset %d", cerr, cerr.Skipped, next)
		rd.br.Reset(io.NewSectionReader(f, next, size-next))
		off, cerr = next, nil
	}
	// No intact record follows the damage at off.
	cerr.Skipped = size - off
	if !last {
		rd.st.SkippedBytes += cerr.Skipped
		rd.w.opts.Logf("%v; no intact record follows: skipped the remaining %d bytes of the file", cerr, cerr.Skipped)
		return nil
	}
	rd.w.opts.Logf("%v; no intact record follows: truncating the file to %d bytes (dropping %d bytes)", cerr, off, cerr.Skipped)
	if err := rd.w.repair(seq, off, size); err != nil {
		return err
	}
	rd.st.TruncatedBytes += cerr.Skipped
	return nil
}

// header reads and checks the file header. It returns the damage found, if
// any, and whether intact records may still be looked for after it (not
// when the header names another sequence: the file is not where it belongs).
func (rd *replayer) header(path string, seq uint64, size int64) (cerr *CorruptionError, resync bool, err error) {
	corrupt := func(off int64, format string, args ...any) *CorruptionError {
		return &CorruptionError{File: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	if size < fileHeaderSize {
		return corrupt(0, "file is %d bytes, shorter than its %d-byte header", size, fileHeaderSize), true, nil
	}
	var hdr [fileHeaderSize]byte
	if _, err := io.ReadFull(rd.br, hdr[:]); err != nil {
		return nil, false, fmt.Errorf("wal replay: read %s at offset 0: %w", path, err)
	}
	if string(hdr[:4]) != fileMagic {
		return corrupt(0, "bad magic %q", hdr[:4]), true, nil
	}
	if hdr[4] != fileVersion {
		return nil, false, fmt.Errorf("wal replay: %s has format version %d, this build reads %d: %w", path, hdr[4], fileVersion, ErrUnsupportedVersion)
	}
	if hdr[5] != 0 || hdr[6] != 0 || hdr[7] != 0 {
		return corrupt(5, "reserved header bytes are not zero"), true, nil
	}
	if s := binary.LittleEndian.Uint64(hdr[8:]); s != seq {
		return corrupt(8, "header sequence %d does not match the file name", s), false, nil
	}
	return nil, false, nil
}

// records reads records from off, where the reader is positioned, to the
// end of the file. It returns the offset where the intact run ends and, if
// the file does not end cleanly there, the damage found and, when the
// damaged record's length is plausible, the offset where it would end (else
// -1); err is an I/O failure or fn's error.
func (rd *replayer) records(path string, off, size int64) (end int64, cerr *CorruptionError, hint int64, err error) {
	corrupt := func(format string, args ...any) *CorruptionError {
		return &CorruptionError{File: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	var rh [recordHeaderSize]byte
	for off < size {
		left := size - off
		if left < recordHeaderSize+2 {
			return off, corrupt("%d trailing bytes, too few for a record (torn write)", left), -1, nil
		}
		if _, err := io.ReadFull(rd.br, rh[:]); err != nil {
			return off, nil, -1, fmt.Errorf("wal replay: read %s at offset %d: %w", path, off, err)
		}
		n := binary.LittleEndian.Uint32(rh[0:4])
		sum := binary.LittleEndian.Uint32(rh[4:8])
		switch {
		case n == 0 && sum == 0:
			return off, corrupt("zero-filled tail"), -1, nil
		case n < 2:
			return off, corrupt("record length %d is below the minimum 2", n), -1, nil
		case n > MaxRecordBytes:
			return off, corrupt("record length %d exceeds the limit %d", n, MaxRecordBytes), -1, nil
		case int64(n) > left-recordHeaderSize:
			return off, corrupt("record length %d exceeds the %d bytes left in the file (torn write)", n, left-recordHeaderSize), -1, nil
		}
		next := off + recordHeaderSize + int64(n)
		if cap(rd.buf) < int(n) {
			rd.buf = make([]byte, n)
		}
		p := rd.buf[:n]
		if _, err := io.ReadFull(rd.br, p); err != nil {
			return off, nil, -1, fmt.Errorf("wal replay: read %s at offset %d: %w", path, off, err)
		}
		crc := crc32.Update(0, castagnoli, rh[0:4])
		if crc = crc32.Update(crc, castagnoli, p); crc != sum {
			return off, corrupt("checksum mismatch: stored %08x, computed %08x", sum, crc), next, nil
		}
		plen := int(p[1])
		if 2+plen > len(p) {
			return off, corrupt("project length %d exceeds record length %d", plen, n), next, nil
		}
		r := Record{Type: p[0], Project: string(p[2 : 2+plen]), Body: p[2+plen:]}
		if err := rd.fn(r); err != nil {
			return off, nil, -1, fmt.Errorf("wal replay %s at offset %d: %w", path, off, err)
		}
		off = next
		rd.st.Records++
		rd.st.Bytes += recordHeaderSize + int64(n)
	}
	return off, nil, -1, nil
}

// repair truncates file seq to off bytes and fsyncs it. off == 0 means
// nothing intact was found, not even the header: the file is reset to a valid
// empty file (header only). A damaged header followed by intact records is
// left as it is, so that the next replay finds the same records.
func (w *WAL) repair(seq uint64, off, size int64) error {
	path := w.path(seq)
	f, err := w.opts.FS.OpenFile(path, os.O_RDWR)
	if err != nil {
		return fmt.Errorf("wal repair: open %s: %w", path, err)
	}
	err = f.Truncate(off)
	newSize := off
	if err == nil && off == 0 {
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
