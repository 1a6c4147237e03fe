package metricstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// A block file (NNNNNNNNNNNNNNNN.rmet, docs/format/metrics.md) holds the
// series of one sealed head, one record each:
//
//	"RMETRIC1"                          8-byte magic and version
//	record*:
//	  u32 length of payload (LE)  u32 CRC-32C of payload (LE)  payload
//	payload:
//	  uvarint len, project | uvarint n labels, (uvarint len, name, uvarint len, value)*
//	  varint minT | varint maxT | uvarint samples | uvarint len, chunk
//	  uvarint n exemplars, (varint t, 8-byte value, 16-byte trace id, 8-byte span id)*
//
// The file is complete once the manifest lists it (it is fsynced first).

const fileMagic = "RMETRIC1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CorruptionError is damage found in a block file or the manifest.
type CorruptionError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("metrics block %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, durable.ErrCorruption) hold.
func (e *CorruptionError) Is(target error) bool { return target == durable.ErrCorruption }

// blockSeries is a series' entry in a block's in-memory index.
type blockSeries struct {
	project    string
	labels     store.Labels
	minT, maxT int64
	n          int
	off        int64 // of the chunk bytes in the file
	chunkLen   int
	exemplars  []store.MetricExemplar
}

// block is an open block file: its index in memory, chunks read on demand.
type block struct {
	name   string
	path   string
	f      vfs.File
	series []blockSeries
	minT   int64
	maxT   int64
	bytes  int64
	points int

	refs    atomic.Int64 // queries reading it, plus one while it is listed
	closeMu sync.Once
}

func (b *block) acquire() { b.refs.Add(1) }

func (b *block) release() {
	if b.refs.Add(-1) == 0 {
		b.closeMu.Do(func() { b.f.Close() })
	}
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// writeBlock writes series to dir/name, fsyncs it and its directory.
func writeBlock(fsys vfs.FS, dir, name string, ss []*memSeries) (*block, error) {
	path := dir + "/" + name
	buf := []byte(fileMagic)
	var payload []byte
	for _, s := range ss {
		payload = appendStr(payload[:0], s.project)
		payload = binary.AppendUvarint(payload, uint64(len(s.labels)))
		for _, l := range s.labels {
			payload = appendStr(payload, l.Name)
			payload = appendStr(payload, l.Value)
		}
		payload = binary.AppendVarint(payload, s.minT)
		payload = binary.AppendVarint(payload, s.app.t)
		payload = binary.AppendUvarint(payload, uint64(s.app.n))
		payload = appendStr(payload, string(s.app.bytes()))
		payload = binary.AppendUvarint(payload, uint64(len(s.exemplars)))
		for _, e := range s.exemplars {
			payload = binary.AppendVarint(payload, e.T)
			payload = binary.LittleEndian.AppendUint64(payload, math.Float64bits(e.V))
			payload = append(payload, e.TraceID[:]...)
			payload = append(payload, e.SpanID[:]...)
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(payload, castagnoli))
		buf = append(buf, payload...)
	}
	if err := vfs.WriteFileAtomic(fsys, path, buf); err != nil {
		return nil, fmt.Errorf("write metrics block %s: %w", path, err)
	}
	return openBlock(fsys, dir, name, nil)
}

// openBlock reads a block's index. A record whose checksum fails is skipped
// and reported through logf; a length that runs past the end ends the scan
// there (the rest of the file is unreadable) and is reported too.
func openBlock(fsys vfs.FS, dir, name string, logf func(string, ...any)) (*block, error) {
	path := dir + "/" + name
	f, err := fsys.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("open metrics block: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("read metrics block %s: %w", path, err)
	}
	if len(data) < len(fileMagic) || string(data[:len(fileMagic)]) != fileMagic {
		f.Close()
		return nil, &CorruptionError{File: path, Reason: "not a metrics block (bad magic)"}
	}
	b := &block{name: name, path: path, f: f, bytes: size, minT: math.MaxInt64, maxT: math.MinInt64}
	b.refs.Store(1)
	off := int64(len(fileMagic))
	for off < size {
		if size-off < 8 {
			report(logf, &CorruptionError{File: path, Offset: off, Reason: "torn record header"})
			break
		}
		n := int64(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if off+8+n > size {
			report(logf, &CorruptionError{File: path, Offset: off, Reason: fmt.Sprintf("record of %d bytes runs past the end", n)})
			break
		}
		payload := data[off+8 : off+8+n]
		if crc32.Checksum(payload, castagnoli) != sum {
			report(logf, &CorruptionError{File: path, Offset: off, Reason: "checksum mismatch: series skipped"})
			off += 8 + n
			continue
		}
		s, err := parseSeries(payload, off+8)
		if err != nil {
			report(logf, &CorruptionError{File: path, Offset: off, Reason: err.Error()})
		} else {
			b.series = append(b.series, s)
			b.minT, b.maxT = min(b.minT, s.minT), max(b.maxT, s.maxT)
			b.points += s.n
		}
		off += 8 + n
	}
	return b, nil
}

func report(logf func(string, ...any), err error) {
	if logf != nil {
		logf("metricstore: %v", err)
	}
}

var errPayload = errors.New("malformed series record")

func parseSeries(p []byte, base int64) (blockSeries, error) {
	var s blockSeries
	i := 0
	uv := func() (uint64, bool) {
		x, n := binary.Uvarint(p[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return x, true
	}
	sv := func() (int64, bool) {
		x, n := binary.Varint(p[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return x, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(p)-i) {
			return "", false
		}
		v := string(p[i : i+int(n)])
		i += int(n)
		return v, true
	}
	var ok bool
	if s.project, ok = str(); !ok {
		return s, errPayload
	}
	nl, ok := uv()
	if !ok || nl > uint64(len(p)) {
		return s, errPayload
	}
	s.labels = make(store.Labels, nl)
	for j := range s.labels {
		if s.labels[j].Name, ok = str(); !ok {
			return s, errPayload
		}
		if s.labels[j].Value, ok = str(); !ok {
			return s, errPayload
		}
	}
	if s.minT, ok = sv(); !ok {
		return s, errPayload
	}
	if s.maxT, ok = sv(); !ok {
		return s, errPayload
	}
	n, ok := uv()
	if !ok || n > uint64(len(p))*8 {
		return s, errPayload
	}
	s.n = int(n)
	cl, ok := uv()
	if !ok || cl > uint64(len(p)-i) {
		return s, errPayload
	}
	s.off, s.chunkLen = base+int64(i), int(cl)
	i += int(cl)
	ne, ok := uv()
	if !ok || ne > uint64(len(p)) {
		return s, errPayload
	}
	for range ne {
		var e store.MetricExemplar
		if e.T, ok = sv(); !ok || len(p)-i < 32 {
			return s, errPayload
		}
		e.V = math.Float64frombits(binary.LittleEndian.Uint64(p[i:]))
		copy(e.TraceID[:], p[i+8:i+24])
		copy(e.SpanID[:], p[i+24:i+32])
		i += 32
		s.exemplars = append(s.exemplars, e)
	}
	return s, nil
}

// samples reads and decodes one series' chunk.
//
// buf, when it holds the chunk's bytes, is used to read them (a query reads
// every series' chunk into one buffer); out, when not nil, receives the
// samples.
func (b *block) samples(s *blockSeries, mint, maxt int64, buf []byte, out []store.Sample) ([]store.Sample, error) {
	if cap(buf) < s.chunkLen {
		buf = make([]byte, s.chunkLen)
	}
	buf = buf[:s.chunkLen]
	if _, err := b.f.ReadAt(buf, s.off); err != nil {
		return out, fmt.Errorf("read metrics block %s: %w", b.path, err)
	}
	out, err := decodeChunk(buf, s.n, mint, maxt, out)
	if err != nil {
		return out, &CorruptionError{File: b.path, Offset: s.off, Reason: err.Error()}
	}
	return out, nil
}
