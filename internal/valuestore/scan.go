package valuestore

import (
	"errors"
	"fmt"
	"io"
)

// window reads a file through a reusable buffer, so that a sequential scan
// costs one read per window rather than two per record.
type window struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	off  int64 // file offset of buf[0]
	n    int   // valid bytes in buf
}

const windowBytes = 1 << 20

// read returns the n bytes at off (valid until the next call), or an error if
// they lie beyond the end of the file or cannot be read.
func (w *window) read(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > w.size {
		return nil, io.ErrUnexpectedEOF
	}
	if off >= w.off && off+int64(n) <= w.off+int64(w.n) {
		return w.buf[off-w.off : off-w.off+int64(n)], nil
	}
	want := max(n, windowBytes)
	if int64(want) > w.size-off {
		want = int(w.size - off)
	}
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	m, err := w.r.ReadAt(w.buf, off)
	if m < n {
		w.n = 0
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	w.off, w.n = off, m
	return w.buf[:n], nil
}

// scanResult describes one scan of a pack region.
type scanResult struct {
	end     int64        // end of the last intact record (or start when none)
	damaged []scanDamage // damaged ranges followed by an intact record
	tail    int64        // bytes after end that hold no intact record (0 if none)
}

type scanDamage struct {
	off, skipped int64
	msg          string
}

// member is one value of a record: its hash and its place in the record's
// raw bytes (0 and the raw length for a version-1 record).
type member struct {
	ref            Ref
	rawOff, rawLen uint32
	share          uint32 // the record bytes accounted to this value
}

// record is a record found intact by a scan.
type record struct {
	size int64
	vals []member
}

// recordAt validates the record at off of a pack of the given version. For
// version 1: header checksum, fit in the file, body checksum. For version 2
// also decompression, and the hash of each value is computed. It returns the
// record, or an error describing the damage (a read error other than running
// past the end is returned wrapped in ioError).
func recordAt(w *window, off int64, version uint8) (record, error) {
	if version == 1 {
		return recordAtV1(w, off)
	}
	b, err := w.read(off, int(min(maxFrameHeader, w.size-off)))
	if err != nil {
		return record{}, ioError{err}
	}
	h, err := parseFrameHeader(b)
	if err != nil {
		return record{}, err
	}
	if off+h.size() > w.size {
		return record{}, fmt.Errorf("record of %d bytes extends past the end of the file", h.size())
	}
	body, err := w.read(off+int64(h.hdrLen), int(h.storedLen))
	if err != nil {
		return record{}, ioError{err}
	}
	if crc(body) != h.bodyCRC {
		return record{}, errors.New("record body checksum mismatch")
	}
	raw, err := decodeFrame(h, body)
	if err != nil {
		return record{}, err
	}
	rec := record{size: h.size()}
	sh := shares(h.size(), h.lens)
	i := 0
	h.members(func(rawOff, rawLen uint32) {
		rec.vals = append(rec.vals, member{ref: RefOf(raw[rawOff : rawOff+rawLen]), rawOff: rawOff, rawLen: rawLen, share: sh[i]})
		i++
	})
	return rec, nil
}

func recordAtV1(w *window, off int64) (record, error) {
	b, err := w.read(off, recordHeaderSize)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return record{}, errors.New("truncated record header")
		}
		return record{}, ioError{err}
	}
	h, err := parseRecordHeader(b)
	if err != nil {
		return record{}, err
	}
	if off+h.size() > w.size {
		return record{}, fmt.Errorf("record of %d bytes extends past the end of the file", h.size())
	}
	body, err := w.read(off+recordHeaderSize, int(h.storedLen))
	if err != nil {
		return record{}, ioError{err}
	}
	if crc(body) != h.bodyCRC {
		return record{}, errors.New("record body checksum mismatch")
	}
	return record{size: h.size(), vals: []member{{ref: h.ref, rawLen: h.rawLen, share: uint32(h.size())}}}, nil
}

// ioError marks an environment failure met during a scan.
type ioError struct{ err error }

func (e ioError) Error() string { return e.err.Error() }
func (e ioError) Unwrap() error { return e.err }

// scanPack walks the records of r in [start, size), calling fn for each intact
// one. After a damaged record it looks for the next offset where an intact
// record starts (header checksum, then body checksum) and resumes there; the
// skipped range is reported in damaged. Bytes after the last intact record
// from which no intact record can be found are reported as tail.
func scanPack(r io.ReaderAt, start, size int64, version uint8, fn func(off int64, rec record)) (scanResult, error) {
	w := &window{r: r, size: size}
	res := scanResult{end: start}
	off := start
	for off < size {
		rec, err := recordAt(w, off, version)
		if err == nil {
			fn(off, rec)
			off += rec.size
			res.end = off
			continue
		}
		var ioe ioError
		if errors.As(err, &ioe) {
			return res, fmt.Errorf("read at offset %d: %w", off, ioe.err)
		}
		next, ferr := resync(w, off+1, version)
		if ferr != nil {
			return res, ferr
		}
		if next < 0 {
			res.tail = size - off
			return res, nil
		}
		res.damaged = append(res.damaged, scanDamage{off: off, skipped: next - off, msg: err.Error()})
		off = next
	}
	return res, nil
}

// resync returns the first offset >= from where an intact record starts, or
// -1. A candidate offset is first tested by its header checksum alone.
func resync(w *window, from int64, version uint8) (int64, error) {
	minHeader := int64(recordHeaderSize)
	if version != 1 {
		minHeader = frameFixedSize + 3
	}
	for p := from; p+minHeader <= w.size; p++ {
		if version == 1 {
			b, err := w.read(p, recordHeaderSize)
			if err != nil {
				return 0, fmt.Errorf("read at offset %d: %w", p, err)
			}
			if crc(b[:48]) != le.Uint32(b[48:]) {
				continue
			}
		} else {
			b, err := w.read(p, int(min(maxFrameHeader, w.size-p)))
			if err != nil {
				return 0, fmt.Errorf("read at offset %d: %w", p, err)
			}
			if _, err := parseFrameHeader(b); err != nil {
				continue
			}
		}
		if _, err := recordAt(w, p, version); err == nil {
			return p, nil
		} else if ioe := (ioError{}); errors.As(err, &ioe) {
			return 0, fmt.Errorf("read at offset %d: %w", p, ioe.err)
		}
	}
	return -1, nil
}
