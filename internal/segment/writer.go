package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/vfs"

	"github.com/klauspost/compress/zstd"

	"github.com/rastro-dev/rastro/internal/model"
)

// Info summarises a segment.
type Info struct {
	Name     string
	Bytes    int64 // file size
	Spans    int
	Traces   int // distinct (project, trace id) pairs
	Blocks   int
	MinStart uint64 // span start times, unix ns (0 when empty)
	MaxStart uint64
	Projects []ProjectInfo // sorted by name
	// Tokens describes the full-text token filters (zero when the segment
	// has none). It is not part of section 1: the reader derives it from
	// section 8.
	Tokens TokenStats
	// ValueRefs is the number of distinct stored values the segment
	// references (section 9). Not part of section 1: the reader derives it
	// from section 9's length.
	ValueRefs int
}

// ProjectInfo summarises one project's spans in a segment.
type ProjectInfo struct {
	Name     string
	Spans    int
	Traces   int
	MinStart uint64
	MaxStart uint64
}

// Writer streams spans, already in segment order, into a new segment file.
// Nothing is visible under the final name until Close succeeds: the file is
// written as "<name>.tmp", fsynced, renamed to name, and the directory is
// fsynced. A Writer is not safe for concurrent use.
//
// Append keeps references to the spans' attribute, event and link slices
// (not to the Span structs) until their block is written; callers must not
// modify them until Close returns.
type Writer struct {
	dir, name, tmp string
	fs             vfs.FS
	f              vfs.File
	off            int64
	opts           WriterOptions
	enc            *blockEncoder
	err            error // sticky: once set, Close aborts
	done           bool

	project     string
	haveProject bool
	projects    []ProjectInfo

	// current trace, and the order key of the previous span
	haveTrace  bool
	traceID    model.TraceID
	traceMin   uint64
	prevStart  uint64
	prevSpanID model.SpanID

	block   []model.Span // spans of the block being filled
	trace   []model.Span // spans of the current trace, not yet placed in a block
	blocks  []blockEntry
	blooms  [][]byte
	entries []traceEntry
	aggs    *aggWriter
	ops     *opsWriter
	tokens  *tokenWriter // nil without WriterOptions.ContentTokens
	attrs   *attrSummaryWriter
	strs    map[string]string // interned block-index strings

	// The source of AppendRows when it is a RowReleaser, the number of
	// spans taken from it and how many of those it was told it may reuse.
	rel      RowReleaser
	relCalls uint64
	relDone  uint64
	// fetched is 1 while appendSpans holds a span it has taken but not
	// yet placed in trace (ending the previous trace may flush a block).
	fetched int
}

// intern replaces each string of ss by the writer's own copy of it.
func (w *Writer) intern(ss []string) {
	if w.strs == nil {
		w.strs = make(map[string]string)
	}
	for i, s := range ss {
		c, ok := w.strs[s]
		if !ok {
			c = strings.Clone(s)
			w.strs[c] = c
		}
		ss[i] = c
	}
}

// NewWriter creates dir/name.tmp and returns a Writer for it.
func NewWriter(dir, name string, opts WriterOptions) (*Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if name == "" || filepath.Base(name) != name {
		return nil, fmt.Errorf("create segment %q: name must be a plain file name", name)
	}
	enc, err := encoderFor(zstd.EncoderLevel(opts.ZstdLevel))
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", name, err)
	}
	tmp := filepath.Join(dir, name+".tmp")
	fsys := vfs.Or(opts.FS)
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", name, err)
	}
	w := &Writer{dir: dir, name: name, tmp: tmp, fs: fsys, f: f, opts: opts, enc: newBlockEncoder(enc), aggs: newAggWriter(), ops: newOpsWriter(),
		tokens: newTokenWriter(opts), attrs: newAttrSummaryWriter()}
	w.enc.kv.store, w.enc.kv.threshold = opts.StoreValue, opts.ValueThreshold
	w.enc.kv.content, w.enc.kv.contentThreshold = opts.IsContent, opts.ContentThreshold
	if err := w.write(appendHeader(nil)); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

func (w *Writer) write(b []byte) error {
	n, err := w.f.WriteAt(b, w.off)
	w.off += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write segment %s: %w", w.tmp, err)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Append adds spans of one project, in segment order, continuing where the
// previous call stopped. Projects must come in increasing name order; a call
// for an earlier project, or spans out of segment order, returns an error and
// the Writer can then only be aborted. Spans of one trace may be spread over
// several calls.
func (w *Writer) Append(project string, spans []model.Span) error {
	return w.appendSpans(project, len(spans), func(i int) *model.Span { return &spans[i] })
}

// AppendPtrs is Append for spans held elsewhere (a write buffer's rows): the
// spans are read, not copied in bulk.
func (w *Writer) AppendPtrs(project string, spans []*model.Span) error {
	return w.appendSpans(project, len(spans), func(i int) *model.Span { return spans[i] })
}

// AppendRefs is AppendPtrs for span references (SortSpanRefs).
func (w *Writer) AppendRefs(project string, refs []SpanRef) error {
	return w.appendSpans(project, len(refs), func(i int) *model.Span { return refs[i].Span })
}

// AppendRows is Append for spans a RowSource materialises one at a time,
// in the order of refs (sorted with SortRowRefs).
func (w *Writer) AppendRows(project string, refs []RowRef, src RowSource) error {
	if rel, _ := src.(RowReleaser); rel != w.rel {
		w.rel, w.relCalls, w.relDone = rel, 0, 0
	}
	return w.appendSpans(project, len(refs), func(i int) *model.Span {
		w.relCalls++
		return src.Span(refs[i].Row)
	})
}

// noteReleased tells the RowReleaser of AppendRows how many of the spans
// taken from it the writer no longer holds. The spans held (the current
// block's and trace's, and one taken but not yet placed) are always the
// last ones taken, so every span taken before them is released.
func (w *Writer) noteReleased() {
	if w.rel == nil {
		return
	}
	held := uint64(len(w.block) + len(w.trace) + w.fetched)
	if n := w.relCalls - min(held, w.relCalls); n > w.relDone {
		w.relDone = n
		w.rel.Released(n)
	}
}

func (w *Writer) appendSpans(project string, n int, span func(int) *model.Span) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return fmt.Errorf("append to segment %s: writer is closed", w.name)
	}
	if n == 0 {
		return nil
	}
	if !w.haveProject || project != w.project {
		if w.haveProject && project < w.project {
			return w.fail(fmt.Errorf("append to segment %s: project %q after %q: projects must be in increasing order",
				w.name, project, w.project))
		}
		if err := w.endTrace(); err != nil {
			return err
		}
		if err := w.flushBlock(); err != nil {
			return err
		}
		if w.haveProject {
			w.aggs.endProject(w)
			w.ops.endProject(w)
		}
		w.project, w.haveProject, w.haveTrace = project, true, false
		w.projects = append(w.projects, ProjectInfo{Name: project, MinStart: math.MaxUint64})
	}
	p := &w.projects[len(w.projects)-1]
	for i := range n {
		s := span(i)
		w.fetched = 1
		if w.haveTrace && s.TraceID == w.traceID {
			if s.StartTimeUnixNano < w.prevStart ||
				(s.StartTimeUnixNano == w.prevStart && string(s.SpanID[:]) < string(w.prevSpanID[:])) {
				return w.fail(fmt.Errorf("append to segment %s: span %s of trace %s out of order (start, span id)",
					w.name, s.SpanID, s.TraceID))
			}
		} else {
			if w.haveTrace && !w.opts.AnyTraceOrder && (s.StartTimeUnixNano < w.traceMin ||
				(s.StartTimeUnixNano == w.traceMin && string(s.TraceID[:]) <= string(w.traceID[:]))) {
				return w.fail(fmt.Errorf("append to segment %s: trace %s out of order (trace start %d, trace id) after trace %s",
					w.name, s.TraceID, s.StartTimeUnixNano, w.traceID))
			}
			if err := w.endTrace(); err != nil {
				return err
			}
			w.haveTrace, w.traceID, w.traceMin = true, s.TraceID, s.StartTimeUnixNano
			p.Traces++
		}
		w.prevStart, w.prevSpanID = s.StartTimeUnixNano, s.SpanID
		p.Spans++
		p.MinStart = min(p.MinStart, s.StartTimeUnixNano)
		p.MaxStart = max(p.MaxStart, s.StartTimeUnixNano)
		w.trace = append(w.trace, *s)
		w.fetched = 0
		if len(w.trace) > w.opts.BlockSpans {
			// The trace alone is larger than a block: it is split, so
			// close the current block and emit full blocks of it.
			if err := w.flushBlock(); err != nil {
				return err
			}
			n := w.opts.BlockSpans
			w.block = append(w.block, w.trace[:n]...)
			if err := w.flushBlock(); err != nil {
				return err
			}
			rest := copy(w.trace, w.trace[n:])
			clear(w.trace[rest:])
			w.trace = w.trace[:rest]
		}
	}
	return nil
}

// endTrace places the pending trace in the current block, closing the block
// first if the trace does not fit.
func (w *Writer) endTrace() error {
	if len(w.trace) == 0 {
		return nil
	}
	if len(w.block) > 0 && len(w.block)+len(w.trace) > w.opts.BlockSpans {
		if err := w.flushBlock(); err != nil {
			return err
		}
	}
	w.block = append(w.block, w.trace...)
	clear(w.trace)
	w.trace = w.trace[:0]
	if len(w.block) >= w.opts.BlockSpans {
		return w.flushBlock()
	}
	return nil
}

// flushBlock encodes and writes the current block.
func (w *Writer) flushBlock() error {
	if len(w.block) == 0 {
		return nil
	}
	w.enc.bloomSalt = nil
	if !writeUnsaltedBlooms && !writeTokenMapWithoutPlaces { // files of that older format predate section 20
		w.enc.bloomSalt = le.AppendUint32(w.enc.bloomSalt[:0], uint32(len(w.blocks)))
	}
	eb, err := w.enc.encode(w.block)
	if err != nil {
		return w.fail(fmt.Errorf("write segment %s block %d: %w", w.name, len(w.blocks), err))
	}
	if int64(len(eb.out)) > maxBlockBytes {
		return w.fail(fmt.Errorf("write segment %s block %d: %d bytes exceeds the block size limit", w.name, len(w.blocks), len(eb.out)))
	}
	blockNo := uint32(len(w.blocks))
	projIdx := len(w.projects) - 1
	eb.meta.Project = w.project
	// The block index is held until Close; its strings must not point into
	// the spans' memory (a merge's decoded input blocks).
	w.intern(eb.meta.Names)
	w.intern(eb.meta.Services)
	w.blocks = append(w.blocks, blockEntry{
		Offset: uint64(w.off), Length: uint64(len(eb.out)), ProjectIdx: projIdx,
		Meta: eb.meta, Cols: slices.Clone(eb.cols),
	})
	w.blooms = append(w.blooms, eb.bloom)
	w.attrs.addBlock(w.enc.bloom)
	w.aggs.addBlock(w)
	w.ops.addBlock(w)
	if w.tokens != nil {
		w.tokens.addBlock(w.block)
	}
	for i := 0; i < len(w.block); {
		j := i + 1
		for j < len(w.block) && w.block[j].TraceID == w.block[i].TraceID {
			j++
		}
		w.entries = append(w.entries, traceEntry{Project: uint32(projIdx), TraceID: w.block[i].TraceID,
			Block: blockNo, Row: uint32(i), Count: uint32(j - i)})
		i = j
	}
	clear(w.block)
	w.block = w.block[:0]
	w.noteReleased()
	if err := w.write(eb.out); err != nil {
		return w.fail(err)
	}
	return nil
}

// Close writes the index sections, the table of contents and the footer,
// then publishes the file under its final name. On any failure the
// temporary file is removed and nothing appears under the final name.
func (w *Writer) Close() (Info, error) {
	if w.done {
		return Info{}, fmt.Errorf("close segment %s: writer already closed", w.name)
	}
	info, err := w.close()
	if err != nil {
		w.Abort()
		return Info{}, err
	}
	w.done = true
	return info, nil
}

func (w *Writer) close() (Info, error) {
	if w.err != nil {
		return Info{}, w.err
	}
	if err := w.endTrace(); err != nil {
		return Info{}, err
	}
	if err := w.flushBlock(); err != nil {
		return Info{}, err
	}
	if w.haveProject {
		w.aggs.endProject(w)
		w.ops.endProject(w)
	}
	sortEntries(w.entries)
	if err := w.checkContiguous(); err != nil {
		return Info{}, w.fail(err)
	}
	info := w.info()

	// Each section is written as soon as it is encoded, so that at most one
	// (and its compressed copy) is in memory beside the writer's state.
	var toc []tocEntry
	var flags uint32
	var werr error
	var buf []byte
	section := func(typ uint32, raw []byte, compress bool) {
		if werr != nil {
			return
		}
		out, codec := raw, uint32(codecNone)
		if compress {
			buf, codec = compressInto(w.enc.enc, buf[:0], raw)
			out = buf
		}
		toc = append(toc, tocEntry{Type: typ, Flags: flags, Codec: codec, CRC: crc(out),
			Offset: uint64(w.off), Length: uint64(len(out)), RawLen: uint64(len(raw))})
		werr = w.write(out)
	}
	section(sectionInfo, encodeInfo(info), true)
	section(sectionBlockIndex, encodeBlockIndex(w.projects, w.blocks), true)
	if w.enc.bloomSalt == nil {
		section(sectionAttrBlooms, encodeBlooms(w.blooms), true)
	} else {
		pass := make([][]byte, len(w.blooms))
		for i := range pass {
			pass[i] = passAllBloom
		}
		section(sectionAttrBlooms, encodeBlooms(pass), true)
		section(sectionAttrBloomsSalted, encodeBlooms(w.blooms), true)
	}
	w.blooms = nil // written: let the collector have them
	if sum, err := w.attrs.encode(attrSummarySalt(info)); err != nil {
		werr = w.fail(fmt.Errorf("close segment %s: %w", w.name, err))
	} else if !writeNoAttrSummary && !writeTokenMapWithoutPlaces { // files of that older format predate it
		section(sectionAttrSummary, sum, true) // dictionaries compress; filter pages do not
	}
	w.attrs = nil
	// The trace index pages go straight to the file, one page at a time.
	if werr == nil {
		start, sum, raw := uint64(w.off), uint32(0), 0
		var fences []byte
		fences, werr = streamTraceIndex(w.entries, func(page []byte) error {
			sum = crc32.Update(sum, castagnoli, page)
			raw += len(page)
			return w.write(page)
		})
		toc = append(toc, tocEntry{Type: sectionTraceIndex, Flags: flags, Codec: codecNone, CRC: sum,
			Offset: start, Length: uint64(raw), RawLen: uint64(raw)})
		w.entries = nil
		section(sectionTraceFences, fences, false)
	}
	section(sectionLLMAggregates, w.aggs.data, false) // parts are compressed one by one
	section(sectionLLMAggDir, encodeAggDir(w.aggs.blocks, w.aggs.projects), true)
	section(sectionOpsAggregates, w.ops.data, false)
	section(sectionOpsAggDir, encodeAggDir(w.ops.blocks, w.ops.projects), true)
	if !writeTokenMapWithoutPlaces { // files of that older format predate the rollups
		section(sectionLLMRollups, w.aggs.rollData, false)
		section(sectionLLMRollupDir, encodeAggDir(nil, w.aggs.rolls), true)
	}
	if w.tokens != nil {
		sum, st := w.tokens.summary()
		section(sectionTokenFilters, w.tokens.data, false) // read one block's filter at a time; bloom bits do not compress
		section(sectionTokenSummary, sum, true)
		disk, dir := w.tokens.groups()
		st.DiskSummaryBytes = int64(len(disk))
		section(sectionTokenPages, disk, false)            // read one page at a time
		section(sectionTokenGroups, w.tokens.gdata, false) // read one block's part at a time
		section(sectionTokenGroupDir, dir, true)
		info.Tokens = st
	}
	if refs := w.enc.kv.sorted; len(refs) > 0 { // writeValueRefsSorted
		flags = sectionRequired
		section(sectionValueRefs, encodeValueRefs(refs), false)
		flags = 0
		info.ValueRefs = len(refs)
	}
	if table := w.enc.kv.table; len(table) > 0 {
		// Required: a reader that does not know stored-value references
		// must refuse the file rather than fail on its blocks later.
		flags = sectionRequired
		section(sectionValueRefTable, encodeValueRefTable(table), false) // hashes do not compress
		flags = 0
		info.ValueRefs = len(table)
	}
	if werr != nil {
		return Info{}, werr
	}
	tocOff := uint64(w.off)
	out := appendTOC(nil, toc)
	out = appendFooter(out, tocOff, uint64(len(out)), crc(out))
	if err := w.write(out); err != nil {
		return Info{}, err
	}
	if err := w.f.Sync(); err != nil {
		return Info{}, fmt.Errorf("sync segment %s: %w", w.tmp, err)
	}
	if err := w.f.Close(); err != nil {
		w.f = nil
		return Info{}, fmt.Errorf("close segment %s: %w", w.tmp, err)
	}
	w.f = nil
	final := filepath.Join(w.dir, w.name)
	if err := w.fs.Rename(w.tmp, final); err != nil {
		return Info{}, fmt.Errorf("publish segment %s: %w", final, err)
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		// The file is complete under its final name; only the rename's
		// durability is in doubt. Report it without removing the file.
		w.done = true
		return info, fmt.Errorf("publish segment %s: %w", final, err)
	}
	info.Bytes = w.off
	return info, nil
}

// checkContiguous verifies that every trace forms one run in segment order:
// a trace that came back after another trace violates the order that Append
// cannot check without remembering every trace id.
func (w *Writer) checkContiguous() error {
	for i := 1; i < len(w.entries); i++ {
		a, b := w.entries[i-1], w.entries[i]
		if a.Project != b.Project || a.TraceID != b.TraceID {
			continue
		}
		if b.Block != a.Block+1 || b.Row != 0 || a.Row+a.Count != uint32(w.blocks[a.Block].Meta.Spans) {
			return fmt.Errorf("close segment %s: spans of trace %s in project %q are not contiguous: input was not in segment order",
				w.name, a.TraceID, w.projects[a.Project].Name)
		}
	}
	return nil
}

func (w *Writer) info() Info {
	info := Info{Name: w.name, Blocks: len(w.blocks), Projects: slices.Clone(w.projects)}
	for i, p := range w.projects {
		if p.Spans == 0 {
			info.Projects[i].MinStart = 0
			continue
		}
		if info.Spans == 0 || p.MinStart < info.MinStart {
			info.MinStart = p.MinStart
		}
		info.MaxStart = max(info.MaxStart, p.MaxStart)
		info.Spans += p.Spans
		info.Traces += p.Traces
	}
	return info
}

// Abort stops writing and removes the temporary file. It is safe to call
// after a failed Close and does nothing after a successful one.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
	_ = w.fs.Remove(w.tmp)
	w.block, w.trace, w.entries, w.blooms, w.aggs, w.ops, w.tokens, w.attrs = nil, nil, nil, nil, nil, nil, nil, nil
}

// Write writes spans grouped by project as one segment: it sorts each
// project's spans in place with SortSpans, appends the projects in name
// order and closes the Writer.
func Write(dir, name string, byProject map[string][]model.Span, opts WriterOptions) (Info, error) {
	ptrs := make(map[string][]*model.Span, len(byProject))
	for p, spans := range byProject {
		SortSpans(spans)
		ps := make([]*model.Span, len(spans))
		for i := range spans {
			ps[i] = &spans[i]
		}
		ptrs[p] = ps
	}
	return WritePtrs(dir, name, ptrs, opts)
}

// WritePtrs is Write for spans held elsewhere (a write buffer's rows): it
// sorts each project's pointers with SortSpanPtrs; the spans do not move.
func WritePtrs(dir, name string, byProject map[string][]*model.Span, opts WriterOptions) (Info, error) {
	return writeProjects(dir, name, byProject, opts, func(w *Writer, p string, spans []*model.Span) error {
		SortSpanPtrs(spans)
		return w.AppendPtrs(p, spans)
	})
}

// WriteRefs is WritePtrs for span references whose trace minimums the
// caller knows (a write buffer groups its rows by trace): it sorts each
// project's references with SortSpanRefs.
func WriteRefs(dir, name string, byProject map[string][]SpanRef, opts WriterOptions) (Info, error) {
	return writeProjects(dir, name, byProject, opts, func(w *Writer, p string, refs []SpanRef) error {
		SortSpanRefs(refs)
		return w.AppendRefs(p, refs)
	})
}

// WriteRows writes one segment from spans a RowSource holds (a write
// buffer's encoded rows), grouped by project: it sorts each project's
// references with SortRowRefs and has the source materialise the spans one
// at a time as the writer takes them, so no more than a block of them is
// decoded at once.
func WriteRows(dir, name string, byProject map[string][]RowRef, src RowSource, opts WriterOptions) (Info, error) {
	return writeProjects(dir, name, byProject, opts, func(w *Writer, p string, refs []RowRef) error {
		SortRowRefs(refs, src)
		// Size the trace index's entries once: a trace's rows are
		// contiguous and share its minimum, so the changes of minimum
		// count the traces (traces that share one count once; a block
		// boundary inside a trace adds an entry).
		traces := 0
		for i := range refs {
			if i == 0 || refs[i].TraceMin != refs[i-1].TraceMin {
				traces++
			}
		}
		w.entries = slices.Grow(w.entries, traces+len(refs)/w.opts.BlockSpans+1)
		return w.AppendRows(p, refs, src)
	})
}

// writeProjects writes one segment from the projects' spans, in project
// name order, each appended by add.
func writeProjects[S any](dir, name string, byProject map[string]S, opts WriterOptions, add func(w *Writer, project string, spans S) error) (Info, error) {
	w, err := NewWriter(dir, name, opts)
	if err != nil {
		return Info{}, err
	}
	for _, p := range slices.Sorted(maps.Keys(byProject)) {
		if err := add(w, p, byProject[p]); err != nil {
			w.Abort()
			return Info{}, err
		}
	}
	return w.Close()
}

func appendUvarints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}
