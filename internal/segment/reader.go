package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
	"unsafe"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// Reader serves one segment file. Open reads only the footer, the table of
// contents and the resident sections (summary, block index, attribute
// filters, trace-index fences, the directories of the LLM aggregates and of
// the token filters, the token summary); blocks, trace-index pages,
// aggregate parts and token filters are read with ReadAt when asked for. A Reader is safe for concurrent use; Close must not
// race with other calls.
type Reader struct {
	path   string
	f      File
	info   Info
	blocks []blockEntry
	metas  []BlockMeta
	blooms []*bloom.BloomFilter
	attrs  attrSummary // section 19 (attrsummary.go)
	// bloomSalted: blooms come from section 20, over entries prefixed by
	// the block number.
	bloomSalted bool
	tix         traceIndex
	aggs        aggIndex
	ops         aggIndex // service aggregates (ops_section.go)
	rolls       aggIndex // LLM rollups and session tables (agg_rollup.go)
	tok         tokenIndex
	grp         groupIndex
	vrefs       valueRefsIndex
	resident    int
}

func (r *Reader) corrupt(off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{File: r.path, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// readAt reads n bytes at off. A short read means the file is shorter than
// its own index says, which is corruption; any other failure is an I/O error.
func (r *Reader) readAt(off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	got, err := r.f.ReadAt(buf, off)
	if got == len(buf) {
		return buf, nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, r.corrupt(off+int64(got), "file ends inside a part of %d bytes at offset %d", n, off)
	}
	return nil, fmt.Errorf("read segment %s at offset %d: %w", r.path, off, err)
}

// File is what a Reader reads a segment through: an *os.File, or a wrapper
// (tests inject read faults with one).
type File interface {
	io.ReaderAt
	io.Closer
	Stat() (os.FileInfo, error)
}

// Open opens and verifies a segment file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	return OpenFile(path, f)
}

// OpenFS is Open on a filesystem (internal/vfs; nil: the operating system's).
func OpenFS(fsys vfs.FS, path string) (*Reader, error) {
	if fsys == nil {
		return Open(path)
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	return OpenFile(path, vfsFile{f})
}

// vfsFile gives a vfs.File the Stat a Reader needs.
type vfsFile struct{ vfs.File }

func (f vfsFile) Stat() (os.FileInfo, error) {
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	return sizeInfo(n), nil
}

// sizeInfo is an os.FileInfo that knows only its size.
type sizeInfo int64

func (s sizeInfo) Name() string       { return "" }
func (s sizeInfo) Size() int64        { return int64(s) }
func (s sizeInfo) Mode() os.FileMode  { return 0 }
func (s sizeInfo) ModTime() time.Time { return time.Time{} }
func (s sizeInfo) IsDir() bool        { return false }
func (s sizeInfo) Sys() any           { return nil }

// OpenFile is Open over a file already open; path names it in errors. The
// Reader owns f: it closes f when opening fails, and on Close.
func OpenFile(path string, f File) (*Reader, error) {
	r := &Reader{path: path, f: f}
	if err := r.open(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return r, nil
}

func (r *Reader) open() error {
	st, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("open segment %s: %w", r.path, err)
	}
	size := st.Size()
	if size < headerLen+footerLen {
		return r.corrupt(0, "file of %d bytes is shorter than a header and a footer", size)
	}
	foot, err := r.readAt(size-footerLen, footerLen)
	if err != nil {
		return err
	}
	footOff := size - footerLen
	if string(foot[32:]) != footerMagic {
		return r.corrupt(footOff, "footer magic missing (truncated file or trailing garbage)")
	}
	if crc(foot[:28]) != le.Uint32(foot[28:]) {
		return r.corrupt(footOff, "footer checksum mismatch")
	}
	if v := le.Uint32(foot[20:]); v != FormatVersion {
		return fmt.Errorf("open segment %s: format version %d: %w (this reader knows %d)", r.path, v, ErrUnsupported, FormatVersion)
	}
	head, err := r.readAt(0, headerLen)
	if err != nil {
		return err
	}
	if string(head[:8]) != headerMagic || crc(head[:12]) != le.Uint32(head[12:]) {
		return r.corrupt(0, "bad header magic or checksum")
	}
	if v := le.Uint32(head[8:]); v != FormatVersion {
		return r.corrupt(0, "header version %d differs from footer version %d", v, FormatVersion)
	}
	tocOff, tocLen := le.Uint64(foot[0:]), le.Uint64(foot[8:])
	if tocOff < headerLen || tocLen < 4 || tocLen > uint64(footOff) || tocOff > uint64(footOff)-tocLen ||
		(tocLen-4)%tocEntryLen != 0 || (tocLen-4)/tocEntryLen > maxTOCEntries {
		return r.corrupt(footOff, "table of contents range [%d, +%d) invalid", tocOff, tocLen)
	}
	toc, err := r.readAt(int64(tocOff), int64(tocLen))
	if err != nil {
		return err
	}
	if crc(toc) != le.Uint32(foot[16:]) {
		return r.corrupt(int64(tocOff), "table of contents checksum mismatch")
	}
	if n := le.Uint32(toc); uint64(n) != (tocLen-4)/tocEntryLen {
		return r.corrupt(int64(tocOff), "table of contents count %d does not match its length", n)
	}
	sections := map[uint32]tocEntry{}
	dataEnd := tocOff
	for i := uint64(0); i < (tocLen-4)/tocEntryLen; i++ {
		p := toc[4+i*tocEntryLen:]
		e := tocEntry{Type: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]), Codec: le.Uint32(p[8:]), CRC: le.Uint32(p[12:]),
			Offset: le.Uint64(p[16:]), Length: le.Uint64(p[24:]), RawLen: le.Uint64(p[32:])}
		entOff := int64(tocOff + 4 + i*tocEntryLen)
		if e.Offset < headerLen || e.Length > tocOff || e.Offset > tocOff-e.Length {
			return r.corrupt(entOff, "section type %d range [%d, +%d) outside the file body", e.Type, e.Offset, e.Length)
		}
		if _, dup := sections[e.Type]; dup {
			return r.corrupt(entOff, "section type %d listed twice", e.Type)
		}
		known := e.Type <= lastKnownSection
		if !known {
			if e.Flags&sectionRequired != 0 {
				return fmt.Errorf("open segment %s: required section type %d: %w", r.path, e.Type, ErrUnsupported)
			}
			continue
		}
		sections[e.Type] = e
		dataEnd = min(dataEnd, e.Offset)
	}
	for t := uint32(sectionInfo); t <= sectionTraceFences; t++ {
		if _, ok := sections[t]; !ok {
			return r.corrupt(int64(tocOff), "required section type %d missing", t)
		}
	}
	load := func(t uint32) (string, int64, error) {
		e := sections[t]
		if e.Length > maxSectionBytes {
			return "", 0, r.corrupt(int64(e.Offset), "section type %d of %d bytes exceeds the limit", t, e.Length)
		}
		b, err := r.readAt(int64(e.Offset), int64(e.Length))
		if err != nil {
			return "", 0, err
		}
		if crc(b) != e.CRC {
			return "", 0, r.corrupt(int64(e.Offset), "section type %d checksum mismatch", t)
		}
		s, err := decompress(e.Codec, b, e.RawLen)
		if err != nil {
			return "", 0, r.corrupt(int64(e.Offset), "section type %d: %v", t, err)
		}
		r.resident += len(s)
		return s, int64(e.Offset), nil
	}

	s, off, err := load(sectionInfo)
	if err != nil {
		return err
	}
	if r.info, err = decodeInfo(s); err != nil {
		return r.corrupt(off, "summary section: %v", err)
	}
	r.info.Name = baseName(r.path)
	r.info.Bytes = size
	r.resident -= len(s) // decoded into Info; the raw bytes are not kept

	if s, off, err = load(sectionBlockIndex); err != nil {
		return err
	}
	if r.blocks, err = decodeBlockIndex(s, r.info.Projects, headerLen, dataEnd); err != nil {
		return r.corrupt(off, "block index: %v", err)
	}
	r.resident -= len(s) // decoded; strings were cloned out of it
	total := 0
	r.metas = make([]BlockMeta, len(r.blocks))
	for i := range r.blocks {
		r.metas[i] = r.blocks[i].Meta
		total += r.blocks[i].Meta.Spans
		r.resident += int(unsafe.Sizeof(blockEntry{})+unsafe.Sizeof(BlockMeta{})) +
			len(r.blocks[i].Cols)*int(unsafe.Sizeof(columnRef{})) +
			16*(len(r.blocks[i].Meta.Services)+len(r.blocks[i].Meta.Names))
	}
	if len(r.blocks) != r.info.Blocks || total != r.info.Spans {
		return r.corrupt(off, "block index lists %d blocks and %d spans, summary says %d and %d",
			len(r.blocks), total, r.info.Blocks, r.info.Spans)
	}

	if s, off, err = load(sectionAttrBlooms); err != nil {
		return err
	}
	if r.blooms, err = decodeBlooms(s, len(r.blocks)); err != nil {
		return r.corrupt(off, "attribute filters: %v", err)
	}
	r.resident -= len(s)
	if _, ok := sections[sectionAttrBloomsSalted]; ok {
		// Section 3 passes everything; these are the block filters.
		if s, off, err = load(sectionAttrBloomsSalted); err != nil {
			return err
		}
		if r.blooms, err = decodeBlooms(s, len(r.blocks)); err != nil {
			return r.corrupt(off, "salted attribute filters: %v", err)
		}
		r.resident -= len(s)
		r.bloomSalted = true
	}
	for _, b := range r.blooms {
		r.resident += int(b.Cap()/8) + 64
	}
	r.openAttrSummary(sections, load)
	if err := r.attrs.err; err != nil && !IsCorruption(err) {
		return err // a read that failed (EIO) is not damage: see below
	}

	ti := sections[sectionTraceIndex]
	r.tix.offset, r.tix.length = int64(ti.Offset), int64(ti.Length)
	if ti.Codec != codecNone || ti.RawLen != ti.Length {
		return r.corrupt(int64(ti.Offset), "trace index must be stored uncompressed")
	}
	if s, off, err = load(sectionTraceFences); err != nil {
		return err
	}
	if err := decodeFences(s, &r.tix); err != nil {
		return r.corrupt(off, "trace index fences: %v", err)
	}
	r.resident -= len(s)
	r.resident += len(r.tix.fences)*fenceLen + int(unsafe.Sizeof(*r))
	r.openAggs(sections, load)
	r.openOps(sections, load)
	r.openRollups(sections, load)
	r.openTokens(sections, load)
	if r.tok.present {
		r.openGroups(sections, load)
	}
	r.openValueRefs(sections)
	// Damage to these optional sections is kept and reported by the
	// lookups; a read that failed (EIO) is not damage: Open fails, so that
	// the segment is not served with a section that would fail every
	// lookup until restart.
	for _, err := range []error{r.aggs.err, r.ops.err, r.rolls.err, r.tok.err, r.grp.err} {
		if err != nil && !IsCorruption(err) && !errors.Is(err, ErrUnsupported) {
			return err
		}
	}
	return nil
}

// openAggs loads the directory of the LLM aggregates. Damage to it does not
// fail Open: it is kept in r.aggs.err and returned by the aggregate calls
// only, so the rest of the segment stays readable.
func (r *Reader) openAggs(sections map[uint32]tocEntry, load func(uint32) (string, int64, error)) {
	r.aggs = r.openPartIndex(sections, load, sectionLLMAggregates, sectionLLMAggDir, "LLM aggregates")
}

// openOps loads the directory of the service aggregates, like openAggs.
func (r *Reader) openOps(sections map[uint32]tocEntry, load func(uint32) (string, int64, error)) {
	r.ops = r.openPartIndex(sections, load, sectionOpsAggregates, sectionOpsAggDir, "service aggregates")
}

// openPartIndex loads the directory (section dirSec) of a section of
// per-block and per-project parts (section dataSec).
func (r *Reader) openPartIndex(sections map[uint32]tocEntry, load func(uint32) (string, int64, error),
	dataSec, dirSec uint32, what string) aggIndex {
	return r.openParts(sections, load, dataSec, dirSec, what, len(r.blocks), len(r.info.Projects))
}

// openParts is openPartIndex for a directory of nBlocks and nProjects parts.
func (r *Reader) openParts(sections map[uint32]tocEntry, load func(uint32) (string, int64, error),
	dataSec, dirSec uint32, what string, nBlocks, nProjects int) aggIndex {
	var x aggIndex
	data, okData := sections[dataSec]
	dir, okDir := sections[dirSec]
	if !okData && !okDir {
		return x
	}
	x.present = true
	if !okData || !okDir {
		x.err = r.corrupt(int64(data.Offset+dir.Offset), "%s: only one of sections %d and %d present", what, dataSec, dirSec)
		return x
	}
	if data.Codec != codecNone || data.RawLen != data.Length {
		x.err = r.corrupt(int64(data.Offset), "%s section must be stored uncompressed", what)
		return x
	}
	s, off, err := load(dirSec)
	if err != nil {
		x.err = err
		return x
	}
	r.resident -= len(s)
	x.offset, x.length = int64(data.Offset), data.Length
	x.blocks, x.projects, err = decodeAggDir(s, nBlocks, nProjects, data.Length)
	if err != nil {
		x.err = r.corrupt(off, "%s directory: %v", what, err)
		x.blocks, x.projects = nil, nil
		return x
	}
	r.resident += (len(x.blocks) + len(x.projects)) * int(unsafe.Sizeof(aggRef{}))
	return x
}

func baseName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			return path[i+1:]
		}
	}
	return path
}

// Info returns the segment summary. Name is the file's base name.
func (r *Reader) Info() Info { return r.info }

// Blocks returns the resident block metadata; index i is block number i.
// The slice is shared: callers must not modify it.
func (r *Reader) Blocks() []BlockMeta { return r.metas }

// MayContainAttr reports whether block i may hold a span whose span attribute
// (resource=false) or resource attribute (resource=true) key has the string
// value. False positives happen (about 1%); false negatives never.
func (r *Reader) MayContainAttr(i int, resource bool, key, value string) bool {
	if i < 0 || i >= len(r.blooms) {
		return false
	}
	var buf [256]byte
	return r.blooms[i].Test(appendBloomStr(r.bloomPrefix(buf[:0], i), resource, key, value))
}

// MayContainIntAttr is MayContainAttr for an int attribute value.
func (r *Reader) MayContainIntAttr(i int, resource bool, key string, value int64) bool {
	if i < 0 || i >= len(r.blooms) {
		return false
	}
	var buf [256]byte
	return r.blooms[i].Test(appendBloomInt(r.bloomPrefix(buf[:0], i), resource, key, value))
}

// bloomPrefix starts an entry of block i's filter: the block number in
// salted filters (section 20), nothing in older ones (section 3).
func (r *Reader) bloomPrefix(b []byte, i int) []byte {
	if r.bloomSalted {
		return le.AppendUint32(b, uint32(i))
	}
	return b
}

// ReadBlock decodes every span of block i, in segment order. Spans of one
// block share *model.Resource and *model.Scope pointers where the values are
// equal. Decoded strings share memory with the block's column buffers.
func (r *Reader) ReadBlock(i int) ([]model.Span, error) {
	bd, err := r.loadBlock(i)
	if err != nil {
		return nil, err
	}
	return r.decodeRows(bd, 0, bd.entry.Meta.Spans)
}

// FindTrace returns the spans of one trace of a project in this segment, in
// segment order, or nil when the segment does not hold it. It reads one
// trace-index page (rarely two) and the blocks holding the trace, and
// decompresses (of columns stored as pieces) and materialises only the
// trace's rows.
func (r *Reader) FindTrace(project string, id model.TraceID) ([]model.Span, error) {
	found, err := r.lookupTrace(project, id, false)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	var out []model.Span
	for _, e := range found {
		// Only the trace's rows are decoded, so only their pieces are decompressed.
		bd, err := r.loadRows(int(e.Block), []RowRange{{int(e.Row), int(e.Row + e.Count)}}, allColumns)
		if err != nil {
			return nil, err
		}
		spans, err := r.decodeRows(bd, int(e.Row), int(e.Row+e.Count))
		if err != nil {
			bd.release()
			return nil, err
		}
		for i := range spans {
			if spans[i].TraceID != id {
				err := r.colErr(bd, colTraceID, fmt.Errorf("row %d holds trace %s, index says %s", int(e.Row)+i, spans[i].TraceID, id))
				bd.release()
				return nil, err
			}
		}
		bd.release()
		out = append(out, spans...)
	}
	return out, nil
}

// ContainsTrace reports whether the segment holds spans of the trace in the
// project. It answers from the trace index alone: the resident fences, then
// one checksummed index page read (rarely two); no block is read. Ids outside
// the index's key range, and unknown projects, cost no I/O.
func (r *Reader) ContainsTrace(project string, id model.TraceID) (bool, error) {
	found, err := r.lookupTrace(project, id, true)
	return len(found) > 0, err
}

// lookupTrace returns the trace-index entries of (project, id), in block
// order, after checking that each points inside a block of that project.
// With first set it stops at the first entry.
func (r *Reader) lookupTrace(project string, id model.TraceID, first bool) ([]traceEntry, error) {
	pi := sort.Search(len(r.info.Projects), func(i int) bool { return r.info.Projects[i].Name >= project })
	if pi == len(r.info.Projects) || r.info.Projects[pi].Name != project || len(r.tix.fences) == 0 {
		return nil, nil
	}
	proj := uint32(pi)
	fs := r.tix.fences
	if compareKey(proj, &id, fs[0].Project, &fs[0].First) < 0 || compareKey(proj, &id, r.tix.lastProj, &r.tix.last) > 0 {
		return nil, nil
	}
	p := sort.Search(len(fs), func(i int) bool { return compareKey(fs[i].Project, &fs[i].First, proj, &id) >= 0 }) - 1
	p = max(p, 0)
	var found []traceEntry
	for ; p < len(fs); p++ {
		if compareKey(fs[p].Project, &fs[p].First, proj, &id) > 0 {
			break
		}
		off, n := r.tix.pageBounds(p)
		page, err := r.readAt(off, int64(n)*traceEntryLen)
		if err != nil {
			return nil, err
		}
		if crc(page) != fs[p].CRC {
			return nil, r.corrupt(off, "trace index page %d checksum mismatch", p)
		}
		k := sort.Search(n, func(k int) bool {
			e := parseTraceEntry(page[k*traceEntryLen:])
			return compareKey(e.Project, &e.TraceID, proj, &id) >= 0
		})
		for ; k < n; k++ {
			e := parseTraceEntry(page[k*traceEntryLen:])
			if compareKey(e.Project, &e.TraceID, proj, &id) != 0 {
				return found, nil
			}
			entOff := off + int64(k)*traceEntryLen
			if int(e.Block) >= len(r.blocks) || r.blocks[e.Block].ProjectIdx != pi || e.Count == 0 ||
				uint64(e.Row)+uint64(e.Count) > uint64(r.blocks[e.Block].Meta.Spans) {
				return nil, r.corrupt(entOff, "trace index entry points outside its block")
			}
			found = append(found, e)
			if first {
				return found, nil
			}
		}
	}
	return found, nil
}

// ResidentBytes approximates the memory this Reader keeps between calls.
func (r *Reader) ResidentBytes() int { return r.resident }

// Close closes the file. Later reads fail.
func (r *Reader) Close() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("close segment %s: %w", r.path, err)
	}
	return nil
}
