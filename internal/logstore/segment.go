package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/text"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// BlockRecords is the most records one block holds.
const BlockRecords = 1024

const (
	segMagic    = "RLOG"
	segVersion  = 2 // 1: no word index (colWords), still read
	headerSize  = 8
	trailerSize = 8 + 4 + 4 + 4 // footer offset, footer length, footer CRC, magic
)

// The columns of a block, in file order.
const (
	colTime      = iota // uvarint deltas from the block's first (smallest) time
	colSeq              // uvarint
	colObserved         // uvarint
	colSeverity         // zigzag varint of sevCode
	colTraceID          // 16 bytes each
	colSpanID           // 8 bytes each
	colService          // uvarint index into the block's services
	colResScope         // uvarint resource index, uvarint scope index
	colResources        // uvarint count, then per resource: proto bytes, schema URL (both length-prefixed)
	colScopes           // the same for scopes
	colPayload          // length-prefixed AppendLogPayloadProto output (version 2: in frames, see payloadFrame)
	colWords            // the word index (wordindex.go); version 2 on
	numCols
)

// payloadFrame is how many records' payloads one zstd frame of the payload
// column holds (version 2): a query that keeps a few records of a block
// decompresses their frames, not the whole column. The column is then not
// compressed as a whole: uvarint frame count, each frame's length (uvarint),
// then the frames.
const payloadFrame = 128

// colsIn is the number of columns of a block in a segment of version v.
func colsIn(v byte) int {
	if v == 1 {
		return colWords
	}
	return numCols
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	zenc      *zstd.Encoder
	zencFrame *zstd.Encoder // the payload column's frames
	zdec      *zstd.Decoder
	zstdOnce  sync.Once
	zstdErr   error
)

// payloadLevel is the zstd level of the payload column's frames: the
// fastest, as the payload is most of a seal's compression work (the level
// is not part of the format: a reader decodes any).
const payloadLevel = zstd.SpeedFastest

func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zenc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
		if zstdErr == nil {
			zencFrame, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(payloadLevel), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
		}
		if zstdErr == nil {
			zdec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
		}
	})
	return zenc, zdec, zstdErr
}

// sevCode packs a record's severity number with a bit that says it had no
// time of its own (its time column then holds the observed time).
func sevCode(r *row) int64 {
	c := int64(r.severity) << 1
	if r.time == 0 {
		c |= 1
	}
	return c
}

// entry is one decoded record and its sequence number.
type entry struct {
	seq uint64
	rec model.LogRecord
	// toks are the record's word hashes, sorted, for a record just
	// accepted (a live tail's); nil for records read from a segment.
	toks []uint64
}

// blockMeta is what the footer keeps about one block; it stays in memory.
type blockMeta struct {
	off, length    int64
	crc            uint32
	n              int
	minT, maxT     uint64 // record times (LogRecord.Time)
	minSev, maxSev model.SeverityNumber
	cols           [numCols]uint32 // compressed length of each column (colWords: 0 in version 1)
	services       []string
	traces         bloom // trace ids (their first 8 bytes as the hash)
	tokens         bloom // text.Hash of the words of bodies and string attributes (keyed: keyHash of their keys)
	keyed          bool  // version 2 on: tokens holds keyHash(wordKey(h))
}

// segment is one immutable segment file of one project.
type segment struct {
	fs         vfs.FS
	path, name string
	version    byte
	project    string
	count      int
	minT, maxT uint64
	bytes      int64
	blocks     []blockMeta
	// refs counts the segment's holders: the store while its manifest
	// lists it, and each query or compaction reading it. The file is
	// removed when the last one lets go (Store.release), so that a query
	// that took the segment before a merge, an erasure's rewrite or
	// retention replaced it still reads it.
	refs atomic.Int32
}

// CorruptionError locates damage in a segment file.
type CorruptionError struct {
	File   string
	Reason string
}

func (e *CorruptionError) Error() string {
	return "logs segment " + e.File + ": " + e.Reason
}

// Is makes errors.Is(err, durable.ErrCorruption) hold.
func (e *CorruptionError) Is(target error) bool { return target == durable.ErrCorruption }

func traceHash(id model.TraceID) uint64 { return binary.LittleEndian.Uint64(id[:8]) }

// recordTokens emits the hashes of the words of a record's body and its
// string attribute values (nested values included).
func recordTokens(r *model.LogRecord, emit func(uint64)) {
	valueWords(r.Body, emit)
	for _, kv := range r.Attributes {
		valueWords(kv.Value, emit)
	}
}

func valueWords(v model.Value, emit func(uint64)) {
	switch v.Type {
	case model.ValueString:
		text.Tokens(v.Str, func(tok string) { emit(text.Hash(tok)) })
	case model.ValueArray:
		for _, e := range v.Elems() {
			valueWords(e, emit)
		}
	case model.ValueKvList:
		for _, f := range v.Fields() {
			valueWords(f.Value, emit)
		}
	}
}

// writeSegment writes the rows of src in order (sorted by time, then
// sequence) as a new segment file (segWriter). Payloads and word hashes are
// copied from the buffer's arena, not decoded.
func writeSegment(fsys vfs.FS, dir, name, project string, src *projBuf, order []int32) (*segment, error) {
	w, err := newSegWriter(fsys, dir, name, project)
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(order); start += BlockRecords {
		if err := w.addBlock(src, order[start:min(start+BlockRecords, len(order))]); err != nil {
			w.abort()
			return nil, err
		}
	}
	return w.finish()
}

// segWriter writes a segment file block by block, into a temporary file
// that finish fsyncs and renames into place (and syncs the directory):
// seals write the whole buffer through it, compaction (compact.go) one
// merged block at a time.
type segWriter struct {
	fs       vfs.FS
	dir      string
	seg      *segment
	f        vfs.File
	off      int64 // where the next block goes
	enc      *zstd.Encoder
	out      []byte // the block being encoded
	cols     [numCols][]byte
	pairs    []uint64
	scratch  []uint64
	payEnds  []int // where each record's payload ends in cols[colPayload]
	frameBuf []byte
	resTable []byte
	scTable  []byte
}

func newSegWriter(fsys vfs.FS, dir, name, project string) (*segWriter, error) {
	enc, _, err := codecs()
	if err != nil {
		return nil, err
	}
	w := &segWriter{fs: fsys, dir: dir, enc: enc,
		seg: &segment{fs: fsys, path: dir + "/" + name, name: name, version: segVersion, project: project}}
	w.f, err = fsys.OpenFile(w.seg.path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return nil, fmt.Errorf("create logs segment: %w", err)
	}
	hdr := make([]byte, headerSize)
	copy(hdr, segMagic)
	hdr[4] = segVersion
	if err := w.write(hdr); err != nil {
		w.abort()
		return nil, err
	}
	return w, nil
}

func (w *segWriter) write(b []byte) error {
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return fmt.Errorf("write logs segment %s: %w", w.seg.path, err)
	}
	w.off += int64(len(b))
	return nil
}

// abort closes and removes the temporary file.
func (w *segWriter) abort() {
	_ = w.f.Close()
	_ = w.fs.Remove(w.seg.path + ".tmp")
}

// addBlock writes the rows blk of src (at most BlockRecords, in segment
// order, after those of the previous blocks) as the next block.
func (w *segWriter) addBlock(src *projBuf, blk []int32) error {
	if len(blk) == 0 || len(blk) > BlockRecords {
		panic(fmt.Sprintf("logstore: bug: a block of %d records", len(blk)))
	}
	seg, cols := w.seg, &w.cols
	first, last := src.row(int(blk[0])), src.row(int(blk[len(blk)-1]))
	m := blockMeta{off: w.off, n: len(blk), minT: first.recTime(), maxT: last.recTime(),
		minSev: first.severity, maxSev: first.severity}
	for i := range cols {
		cols[i] = cols[i][:0]
	}
	resIdx := map[uint32]uint64{}
	scIdx := map[uint32]uint64{}
	svcIdx := map[uint32]uint64{}
	resTable, scTable := w.resTable[:0], w.scTable[:0]
	var nTraces int
	pairs, payEnds := w.pairs[:0], w.payEnds[:0]
	for j, ri := range blk {
		r := src.row(int(ri))
		cols[colTime] = binary.AppendUvarint(cols[colTime], r.recTime()-m.minT)
		cols[colSeq] = binary.AppendUvarint(cols[colSeq], r.seq)
		cols[colObserved] = binary.AppendUvarint(cols[colObserved], r.observed)
		cols[colSeverity] = binary.AppendVarint(cols[colSeverity], sevCode(r))
		cols[colTraceID] = append(cols[colTraceID], r.traceID[:]...)
		cols[colSpanID] = append(cols[colSpanID], r.spanID[:]...)
		m.minSev, m.maxSev = min(m.minSev, r.severity), max(m.maxSev, r.severity)
		si, ok := svcIdx[r.service]
		if !ok {
			si = uint64(len(m.services))
			svcIdx[r.service] = si
			m.services = append(m.services, src.services[r.service])
		}
		cols[colService] = binary.AppendUvarint(cols[colService], si)
		rsi, ok := resIdx[r.res]
		if !ok {
			rsi = uint64(len(resIdx))
			resIdx[r.res] = rsi
			resTable = append(resTable, src.resEnc[r.res]...)
		}
		sci, ok := scIdx[r.scope]
		if !ok {
			sci = uint64(len(scIdx))
			scIdx[r.scope] = sci
			scTable = append(scTable, src.scopeEnc[r.scope]...)
		}
		cols[colResScope] = binary.AppendUvarint(binary.AppendUvarint(cols[colResScope], rsi), sci)
		cols[colPayload] = appendLP(cols[colPayload], src.payload(r))
		payEnds = append(payEnds, len(cols[colPayload]))
		if !r.traceID.IsZero() {
			nTraces++
		}
		toks := src.tokens(r)
		for k := 0; k < len(toks); k += 8 {
			h := binary.LittleEndian.Uint64(toks[k:])
			pairs = append(pairs, uint64(wordKey(h))<<16|uint64(j))
		}
	}
	cols[colResources] = append(binary.AppendUvarint(cols[colResources], uint64(len(resIdx))), resTable...)
	cols[colScopes] = append(binary.AppendUvarint(cols[colScopes], uint64(len(scIdx))), scTable...)
	if cap(w.scratch) < len(pairs) {
		w.scratch = make([]uint64, len(pairs))
	}
	var keys int
	cols[colWords], keys = wordIndex(cols[colWords], pairs, w.scratch)
	m.traces = newBloom(nTraces)
	for _, ri := range blk {
		if id := src.row(int(ri)).traceID; !id.IsZero() {
			m.traces.add(traceHash(id))
		}
	}
	// The word filter holds the index's keys (keyHash).
	m.tokens, m.keyed = newBloom(keys), true
	ix := &dec{b: cols[colWords]}
	ix.uvarint("word count")
	for k := range keys {
		m.tokens.add(keyHash(binary.LittleEndian.Uint32(ix.b[4*k:])))
	}
	out := w.out[:0]
	for c := range cols {
		before := len(out)
		if c == colPayload {
			out, w.frameBuf = appendFrames(zencFrame, out, cols[c], payEnds, w.frameBuf)
		} else {
			out = w.enc.EncodeAll(cols[c], out)
		}
		m.cols[c] = uint32(len(out) - before)
	}
	m.length = int64(len(out))
	m.crc = crc32.Checksum(out, castagnoli)
	w.out, w.pairs, w.payEnds, w.resTable, w.scTable = out, pairs, payEnds, resTable, scTable
	if err := w.write(out); err != nil {
		return err
	}
	if len(seg.blocks) == 0 {
		seg.minT = m.minT
	}
	seg.blocks = append(seg.blocks, m)
	seg.count += m.n
	seg.minT = min(seg.minT, m.minT)
	seg.maxT = max(seg.maxT, m.maxT)
	return nil
}

// finish writes the footer and the trailer, fsyncs the file, renames it
// into place and syncs the directory. On error the temporary file is
// removed.
func (w *segWriter) finish() (*segment, error) {
	seg := w.seg
	footer := w.enc.EncodeAll(encodeFooter(seg.project, seg.blocks, segVersion), nil)
	footerOff := w.off
	tr := binary.LittleEndian.AppendUint64(footer, uint64(footerOff))
	tr = binary.LittleEndian.AppendUint32(tr, uint32(len(footer)))
	tr = binary.LittleEndian.AppendUint32(tr, crc32.Checksum(footer, castagnoli))
	tr = append(tr, segMagic...)
	err := w.write(tr)
	seg.bytes = w.off
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	tmp := seg.path + ".tmp"
	if err == nil {
		err = w.fs.Rename(tmp, seg.path)
	}
	if err == nil {
		err = w.fs.SyncDir(w.dir)
	}
	if err != nil {
		_ = w.fs.Remove(tmp)
		return nil, fmt.Errorf("write logs segment %s: %w", seg.path, err)
	}
	seg.refs.Store(1)
	return seg, nil
}

// appendFrames appends the payload column in frames of payloadFrame
// records: the frame count, the frames' lengths, the frames. The frames
// are compressed into buf (returned for reuse).
func appendFrames(enc *zstd.Encoder, out, col []byte, ends []int, buf []byte) ([]byte, []byte) {
	var lens [BlockRecords/payloadFrame + 1]int
	nFrames := 0
	buf = buf[:0]
	for start := 0; start < len(ends); start += payloadFrame {
		from := 0
		if start > 0 {
			from = ends[start-1]
		}
		to := ends[min(start+payloadFrame, len(ends))-1]
		n := len(buf)
		buf = enc.EncodeAll(col[from:to], buf)
		lens[nFrames] = len(buf) - n
		nFrames++
	}
	out = binary.AppendUvarint(out, uint64(nFrames))
	for _, n := range lens[:nFrames] {
		out = binary.AppendUvarint(out, uint64(n))
	}
	return append(out, buf...), buf
}

func orEmptyRes(r *model.Resource) *model.Resource {
	if r == nil {
		return &model.Resource{}
	}
	return r
}

func orEmptyScope(s *model.Scope) *model.Scope {
	if s == nil {
		return &model.Scope{}
	}
	return s
}

func appendLP(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

// encodeFooter encodes the footer of a segment of the given version.
func encodeFooter(project string, blocks []blockMeta, version byte) []byte {
	b := appendLP(nil, []byte(project))
	b = binary.AppendUvarint(b, uint64(len(blocks)))
	for i := range blocks {
		m := &blocks[i]
		b = binary.AppendUvarint(b, uint64(m.off))
		b = binary.AppendUvarint(b, uint64(m.length))
		b = binary.LittleEndian.AppendUint32(b, m.crc)
		b = binary.AppendUvarint(b, uint64(m.n))
		b = binary.AppendUvarint(b, m.minT)
		b = binary.AppendUvarint(b, m.maxT)
		b = binary.AppendVarint(b, int64(m.minSev))
		b = binary.AppendVarint(b, int64(m.maxSev))
		for _, c := range m.cols[:colsIn(version)] {
			b = binary.AppendUvarint(b, uint64(c))
		}
		b = binary.AppendUvarint(b, uint64(len(m.services)))
		for _, s := range m.services {
			b = appendLP(b, []byte(s))
		}
		for _, f := range []bloom{m.traces, m.tokens} {
			b = binary.AppendUvarint(b, uint64(len(f)))
			for _, w := range f {
				b = binary.LittleEndian.AppendUint64(b, w)
			}
		}
	}
	return b
}

// dec reads the footer's and the columns' encodings; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = errors.New(what)
	}
}

func (d *dec) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad " + what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad " + what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes(what string, n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(what + " runs past its end")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) lp(what string) []byte { return d.bytes(what, d.uvarint(what+" length")) }

func decodeFooter(b []byte, fileSize int64, version byte) (string, []blockMeta, error) {
	d := &dec{b: b}
	project := string(d.lp("project"))
	nb := d.uvarint("block count")
	if nb > uint64(len(b)) {
		return "", nil, errors.New("block count larger than the footer")
	}
	blocks := make([]blockMeta, 0, nb)
	for range nb {
		var m blockMeta
		m.off, m.length = int64(d.uvarint("block offset")), int64(d.uvarint("block length"))
		crc := d.bytes("block crc", 4)
		if crc != nil {
			m.crc = binary.LittleEndian.Uint32(crc)
		}
		m.n = int(d.uvarint("block records"))
		m.minT, m.maxT = d.uvarint("min time"), d.uvarint("max time")
		m.minSev, m.maxSev = model.SeverityNumber(d.varint("min severity")), model.SeverityNumber(d.varint("max severity"))
		var sum int64
		for c := range colsIn(version) {
			m.cols[c] = uint32(d.uvarint("column length"))
			sum += int64(m.cols[c])
		}
		ns := d.uvarint("service count")
		for i := uint64(0); i < ns && d.err == nil; i++ {
			m.services = append(m.services, string(d.lp("service")))
		}
		for _, f := range []*bloom{&m.traces, &m.tokens} {
			words := d.uvarint("filter length")
			raw := d.bytes("filter", words*8)
			*f = make(bloom, len(raw)/8)
			for i := range *f {
				(*f)[i] = binary.LittleEndian.Uint64(raw[i*8:])
			}
		}
		m.keyed = version >= 2
		if d.err != nil {
			return "", nil, d.err
		}
		if m.off < headerSize || m.length != sum || m.off+m.length > fileSize || m.n <= 0 || m.n > BlockRecords {
			return "", nil, fmt.Errorf("block %d: bad bounds", len(blocks))
		}
		blocks = append(blocks, m)
	}
	if d.err != nil {
		return "", nil, d.err
	}
	return project, blocks, nil
}

// openSegment reads and checks a segment file's footer.
func openSegment(fsys vfs.FS, dir, name string) (*segment, error) {
	path := dir + "/" + name
	f, err := fsys.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("open logs segment: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	corrupt := func(reason string) error { return &CorruptionError{File: path, Reason: reason} }
	if size < headerSize+trailerSize {
		return nil, corrupt("shorter than a header and a trailer")
	}
	var hdr [headerSize]byte
	var tr [trailerSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, err
	}
	if _, err := f.ReadAt(tr[:], size-trailerSize); err != nil {
		return nil, err
	}
	if string(hdr[:4]) != segMagic || string(tr[16:]) != segMagic {
		return nil, corrupt("not a logs segment (bad magic)")
	}
	if hdr[4] != 1 && hdr[4] != segVersion {
		return nil, corrupt(fmt.Sprintf("unsupported version %d", hdr[4]))
	}
	footerOff, footerLen := int64(binary.LittleEndian.Uint64(tr[0:])), int64(binary.LittleEndian.Uint32(tr[8:]))
	if footerOff < headerSize || footerOff+footerLen != size-trailerSize {
		return nil, corrupt("footer bounds do not match the file size")
	}
	raw := make([]byte, footerLen)
	if _, err := f.ReadAt(raw, footerOff); err != nil {
		return nil, err
	}
	if crc32.Checksum(raw, castagnoli) != binary.LittleEndian.Uint32(tr[12:]) {
		return nil, corrupt("footer checksum mismatch")
	}
	_, zd, err := codecs()
	if err != nil {
		return nil, err
	}
	plain, err := zd.DecodeAll(raw, nil)
	if err != nil {
		return nil, corrupt("footer: " + err.Error())
	}
	project, blocks, err := decodeFooter(plain, footerOff, hdr[4])
	if err != nil {
		return nil, corrupt("footer: " + err.Error())
	}
	seg := &segment{fs: fsys, path: path, name: name, version: hdr[4], project: project, blocks: blocks, bytes: size}
	seg.refs.Store(1)
	for i, m := range blocks {
		seg.count += m.n
		if i == 0 || m.minT < seg.minT {
			seg.minT = m.minT
		}
		seg.maxT = max(seg.maxT, m.maxT)
	}
	return seg, nil
}

// block is one read block: its compressed bytes, decoded column by column.
type block struct {
	seg  *segment
	meta *blockMeta
	raw  []byte
	cols [numCols][]byte
	done [numCols]bool
}

func (s *segment) readBlock(i int) (*block, error) {
	m := &s.blocks[i]
	f, err := s.fs.OpenFile(s.path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("open logs segment: %w", err)
	}
	defer f.Close()
	raw := make([]byte, m.length)
	if _, err := f.ReadAt(raw, m.off); err != nil {
		return nil, fmt.Errorf("read logs segment %s: %w", s.path, err)
	}
	if crc32.Checksum(raw, castagnoli) != m.crc {
		return nil, &CorruptionError{File: s.path, Reason: fmt.Sprintf("block %d at offset %d: checksum mismatch", i, m.off)}
	}
	return &block{seg: s, meta: m, raw: raw}, nil
}

func (b *block) col(c int) ([]byte, error) {
	if b.done[c] {
		return b.cols[c], nil
	}
	var off uint32
	for i := range c {
		off += b.meta.cols[i]
	}
	_, zd, err := codecs()
	if err != nil {
		return nil, err
	}
	plain, err := zd.DecodeAll(b.raw[off:off+b.meta.cols[c]], nil)
	if err != nil {
		return nil, &CorruptionError{File: b.seg.path, Reason: fmt.Sprintf("block at offset %d, column %d: %v", b.meta.off, c, err)}
	}
	b.cols[c], b.done[c] = plain, true
	return plain, nil
}

// header is the part of a record a filter reads before deciding whether to
// decode the rest.
type header struct {
	time, seq uint64
	severity  model.SeverityNumber
	noTime    bool // the record had no time: time is its observed time
	traceID   model.TraceID
	spanID    model.SpanID
	service   string
}

// headers decodes the columns every query reads.
func (b *block) headers() ([]header, error) {
	n := b.meta.n
	hs := make([]header, n)
	var cs [colService + 1][]byte
	for _, c := range []int{colTime, colSeq, colSeverity, colTraceID, colSpanID, colService} {
		v, err := b.col(c)
		if err != nil {
			return nil, err
		}
		cs[c] = v
	}
	if len(cs[colTraceID]) != 16*n || len(cs[colSpanID]) != 8*n {
		return nil, b.corrupt("id columns have the wrong length")
	}
	dt, ds, dv, dsvc := &dec{b: cs[colTime]}, &dec{b: cs[colSeq]}, &dec{b: cs[colSeverity]}, &dec{b: cs[colService]}
	for i := range hs {
		h := &hs[i]
		h.time = b.meta.minT + dt.uvarint("time")
		h.seq = ds.uvarint("sequence")
		code := dv.varint("severity")
		h.severity, h.noTime = model.SeverityNumber(code>>1), code&1 == 1
		copy(h.traceID[:], cs[colTraceID][16*i:])
		copy(h.spanID[:], cs[colSpanID][8*i:])
		si := dsvc.uvarint("service")
		if si >= uint64(len(b.meta.services)) {
			return nil, b.corrupt("service index out of range")
		}
		h.service = b.meta.services[si]
	}
	for _, d := range []*dec{dt, ds, dv, dsvc} {
		if d.err != nil {
			return nil, b.corrupt(d.err.Error())
		}
	}
	return hs, nil
}

// payloads returns the payloads of the records at the given indexes
// (ascending), decompressing only the frames that hold them (version 2) or
// the whole column (version 1).
func (b *block) payloads(idx []int) ([][]byte, error) {
	out := make([][]byte, 0, len(idx))
	if b.seg.version == 1 {
		col, err := b.col(colPayload)
		if err != nil {
			return nil, err
		}
		d := &dec{b: col}
		next := 0
		for i := 0; i < b.meta.n && next < len(idx); i++ {
			p := d.lp("payload")
			if d.err != nil {
				return nil, b.corrupt(d.err.Error())
			}
			if idx[next] == i {
				out = append(out, p)
				next++
			}
		}
		return out, nil
	}
	var off uint32
	for i := range colPayload {
		off += b.meta.cols[i]
	}
	d := &dec{b: b.raw[off : off+b.meta.cols[colPayload]]}
	nf := d.uvarint("payload frame count")
	if d.err == nil && nf != uint64((b.meta.n+payloadFrame-1)/payloadFrame) {
		return nil, b.corrupt(fmt.Sprintf("%d payload frames for %d records", nf, b.meta.n))
	}
	lens := make([]uint64, nf)
	for i := range lens {
		lens[i] = d.uvarint("payload frame length")
	}
	if d.err != nil {
		return nil, b.corrupt(d.err.Error())
	}
	_, zd, err := codecs()
	if err != nil {
		return nil, err
	}
	frames := d.b
	frame := -1
	var pd *dec
	pos := 0 // the record pd reads next
	for _, i := range idx {
		if f := i / payloadFrame; f != frame {
			var start uint64
			for _, l := range lens[:f] {
				start += l
			}
			if start+lens[f] > uint64(len(frames)) {
				return nil, b.corrupt("payload frame runs past the column")
			}
			plain, err := zd.DecodeAll(frames[start:start+lens[f]], nil)
			if err != nil {
				return nil, b.corrupt(fmt.Sprintf("payload frame %d: %v", f, err))
			}
			frame, pd, pos = f, &dec{b: plain}, f*payloadFrame
		}
		var p []byte
		for ; pos <= i; pos++ {
			p = pd.lp("payload")
		}
		if pd.err != nil {
			return nil, b.corrupt(pd.err.Error())
		}
		out = append(out, p)
	}
	return out, nil
}

func (b *block) corrupt(reason string) error {
	return &CorruptionError{File: b.seg.path, Reason: fmt.Sprintf("block at offset %d: %s", b.meta.off, reason)}
}

// records decodes the whole records at the given indexes (ascending).
func (b *block) records(hs []header, idx []int) ([]entry, error) {
	var cs [numCols][]byte
	for _, c := range []int{colObserved, colResScope, colResources, colScopes} {
		v, err := b.col(c)
		if err != nil {
			return nil, err
		}
		cs[c] = v
	}
	pays, err := b.payloads(idx)
	if err != nil {
		return nil, err
	}
	readTable := func(raw []byte, what string, decode func(p []byte, url string) error) error {
		d := &dec{b: raw}
		n := d.uvarint(what + " count")
		for i := uint64(0); i < n && d.err == nil; i++ {
			p, url := d.lp(what), d.lp(what+" schema URL")
			if d.err == nil {
				if err := decode(p, string(url)); err != nil {
					return err
				}
			}
		}
		return d.err
	}
	var ress []*model.Resource
	var scs []*model.Scope
	err = readTable(cs[colResources], "resource", func(p []byte, url string) error {
		r, err := otlp.DecodeResourceProto(p)
		if err == nil {
			r.SchemaURL = url
			ress = append(ress, r)
		}
		return err
	})
	if err == nil {
		err = readTable(cs[colScopes], "scope", func(p []byte, url string) error {
			s, err := otlp.DecodeScopeProto(p)
			if err == nil {
				s.SchemaURL = url
				scs = append(scs, s)
			}
			return err
		})
	}
	if err != nil {
		return nil, b.corrupt(err.Error())
	}
	out := make([]entry, 0, len(idx))
	dObs, dRS := &dec{b: cs[colObserved]}, &dec{b: cs[colResScope]}
	next := 0
	for i := range hs {
		obs := dObs.uvarint("observed time")
		ri, si := dRS.uvarint("resource index"), dRS.uvarint("scope index")
		if next >= len(idx) || idx[next] != i {
			continue
		}
		payload := pays[next]
		next++
		if dObs.err != nil || dRS.err != nil {
			return nil, b.corrupt(errors.Join(dObs.err, dRS.err).Error())
		}
		if ri >= uint64(len(ress)) || si >= uint64(len(scs)) {
			return nil, b.corrupt("resource or scope index out of range")
		}
		h := &hs[i]
		r := model.LogRecord{ObservedTimeUnixNano: obs, SeverityNumber: h.severity, TraceID: h.traceID, SpanID: h.spanID,
			Resource: ress[ri], Scope: scs[si], Service: h.service}
		if err := otlp.DecodeLogPayloadProto(payload, &r); err != nil {
			return nil, b.corrupt("payload: " + err.Error())
		}
		if !h.noTime {
			r.TimeUnixNano = h.time
		}
		out = append(out, entry{seq: h.seq, rec: r})
	}
	return out, nil
}
