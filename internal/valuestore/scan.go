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

// recordAt validates the record at off: header checksum, fit in the file, body
// checksum. It returns the header, or an error describing the damage (a read
// error other than running past the end is returned wrapped in ioError).
func recordAt(w *window, off int64) (recordHeader, error) {
	b, err := w.read(off, recordHeaderSize)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return recordHeader{}, errors.New("truncated record header")
		}
		return recordHeader{}, ioError{err}
	}
	h, err := parseRecordHeader(b)
	if err != nil {
		return h, err
	}
	if off+h.size() > w.size {
		return h, fmt.Errorf("record of %d bytes extends past the end of the file", h.size())
	}
	body, err := w.read(off+recordHeaderSize, int(h.storedLen))
	if err != nil {
		return h, ioError{err}
	}
	if crc(body) != h.bodyCRC {
		return h, errors.New("record body checksum mismatch")
	}
	return h, nil
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
func scanPack(r io.ReaderAt, start, size int64, fn func(off int64, h recordHeader)) (scanResult, error) {
	w := &window{r: r, size: size}
	res := scanResult{end: start}
	off := start
	for off < size {
		h, err := recordAt(w, off)
		if err == nil {
			fn(off, h)
			off += h.size()
			res.end = off
			continue
		}
		var ioe ioError
		if errors.As(err, &ioe) {
			return res, fmt.Errorf("read at offset %d: %w", off, ioe.err)
		}
		next, ferr := resync(w, off+1)
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

// resync returns the first offset >= from where an intact record starts, or -1.
func resync(w *window, from int64) (int64, error) {
	for p := from; p+recordHeaderSize <= w.size; p++ {
		b, err := w.read(p, recordHeaderSize)
		if err != nil {
			return 0, fmt.Errorf("read at offset %d: %w", p, err)
		}
		if crc(b[:48]) != le.Uint32(b[48:]) {
			continue
		}
		if _, err := recordAt(w, p); err == nil {
			return p, nil
		} else if ioe := (ioError{}); errors.As(err, &ioe) {
			return 0, fmt.Errorf("read at offset %d: %w", p, ioe.err)
		}
	}
	return -1, nil
}
