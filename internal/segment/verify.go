package segment

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/rastro-dev/rastro/internal/model"
)

// Problem is one defect Verify found in a segment file.
type Problem struct {
	File   string
	Offset int64 // start of the damaged part; -1 when no single place is at fault
	Msg    string
	// Derivable is set when the damaged part is an index, filter or
	// aggregate that a rewrite from the blocks (Salvage + Writer) recomputes.
	Derivable bool
	// Unsupported is set for a well-formed file of a newer format: not
	// damage, and nothing to repair.
	Unsupported bool
}

func (p Problem) String() string {
	if p.Offset < 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s at offset %d: %s", p.File, p.Offset, p.Msg)
}

// Verification is what Verify found in one segment file.
type Verification struct {
	File     string
	Problems []Problem
	// Info is the summary as far as it could be read (zero when the
	// footer, the table of contents or the summary is damaged).
	Info Info
	// Readable is set when the footer, the table of contents, the summary
	// and the block index are intact: the blocks can be located, and
	// Salvage can rewrite those that are intact.
	Readable bool
	// BlocksIntact is set when the footer, the table of contents, the
	// summary, the block index and every block verified and decoded: a
	// rewrite from the blocks (Salvage) then keeps every span.
	BlocksIntact bool
	// SpansRead counts the spans of the blocks that decoded.
	SpansRead int
	// ValueRefs lists the distinct stored-value hashes held by the blocks
	// that decoded, ascending.
	ValueRefs [][32]byte
}

// Clean reports whether no problem was found.
func (v *Verification) Clean() bool { return len(v.Problems) == 0 }

// Repairable reports whether every problem is in a derivable part and the
// blocks are intact, so that a rewrite from the blocks fixes the file.
func (v *Verification) Repairable() bool {
	if !v.BlocksIntact {
		return false
	}
	for _, p := range v.Problems {
		if !p.Derivable {
			return false
		}
	}
	return true
}

// verifier collects problems while a segment is checked.
type verifier struct {
	r        *Reader
	v        *Verification
	sections map[uint32]tocEntry
}

func (x *verifier) add(off int64, derivable bool, format string, args ...any) {
	x.v.Problems = append(x.v.Problems, Problem{File: x.r.path, Offset: off, Msg: fmt.Sprintf(format, args...), Derivable: derivable})
}

// addErr records err: a *CorruptionError keeps its offset; an unsupported
// feature is marked so. It returns a non-nil error only for I/O failures,
// which are the environment's, not the file's.
func (x *verifier) addErr(err error, derivable bool, context string) error {
	var ce *CorruptionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		msg := ce.Msg
		if context != "" {
			msg = context + ": " + msg
		}
		x.v.Problems = append(x.v.Problems, Problem{File: x.r.path, Offset: ce.Offset, Msg: msg, Derivable: derivable})
		return nil
	case errors.Is(err, ErrUnsupported):
		x.v.Problems = append(x.v.Problems, Problem{File: x.r.path, Offset: -1, Msg: err.Error(), Unsupported: true})
		return nil
	}
	return err
}

// Verify reads everything in a segment file and checks every checksum
// (footer, header, table of contents, every section as a whole and every
// part of it, every column of every block) and the cross-references between
// parts: the block index against the summary and against the rows of each
// block, the trace index against the rows it points at, the fences against
// the pages, the LLM aggregates directory, the token filter directories
// against the block count, and the value references section against the
// refs the blocks hold. It never modifies the file.
//
// Damage is reported in Verification.Problems, each with the file, the
// offset of the damaged part and what is wrong; the error is only for I/O
// failures (a failing disk is not a damaged file). Verify does not panic on
// any input.
func Verify(path string) (*Verification, error) {
	v := &Verification{File: path}
	r, sections, err := openLenient(path, v)
	if err != nil || r == nil {
		return v, err
	}
	defer r.f.Close()
	v.Readable = true
	x := &verifier{r: r, v: v, sections: sections}
	if err := x.sectionChecksums(sections); err != nil {
		return v, err
	}
	// Section 19 is checked against every block's rows as they decode.
	r.openAttrSummary(sections, func(t uint32) (string, int64, error) { return r.loadSection(sections[t]) })
	if err := x.addErr(r.attrs.err, true, "attribute value summary"); err != nil {
		return v, err
	}
	rows, err := x.blocks()
	if err != nil {
		return v, err
	}
	if rows != nil {
		x.summary(rows)
	}
	if err := x.optionalSections(sections, rows); err != nil {
		return v, err
	}
	if err := x.traceIndex(sections, rows); err != nil {
		return v, err
	}
	if err := x.valueRefs(rows); err != nil {
		return v, err
	}
	return v, nil
}

// openLenient reads what a rewrite needs: footer, header, table of contents,
// summary and block index, recording problems in v instead of failing. It
// returns a nil Reader when the blocks cannot be located.
func openLenient(path string, v *Verification) (*Reader, map[uint32]tocEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	r := &Reader{path: path, f: f}
	x := &verifier{r: r, v: v}
	fail := func(err error) (*Reader, map[uint32]tocEntry, error) {
		_ = f.Close()
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("open segment %s: %w", path, err))
	}
	size := st.Size()
	if size < headerLen+footerLen {
		x.add(0, false, "file of %d bytes is shorter than a header and a footer (truncated)", size)
		return fail(nil)
	}
	footOff := size - footerLen
	foot, err := r.readAt(footOff, footerLen)
	if err != nil {
		return fail(x.addErr(err, false, "footer"))
	}
	switch {
	case string(foot[32:]) != footerMagic:
		x.add(footOff, false, "footer magic missing (truncated file or trailing garbage)")
		return fail(nil)
	case crc(foot[:28]) != le.Uint32(foot[28:]):
		x.add(footOff, false, "footer checksum mismatch")
		return fail(nil)
	case le.Uint32(foot[20:]) != FormatVersion:
		v.Problems = append(v.Problems, Problem{File: path, Offset: footOff + 20, Unsupported: true,
			Msg: fmt.Sprintf("format version %d: %v (this reader knows %d)", le.Uint32(foot[20:]), ErrUnsupported, FormatVersion)})
		return fail(nil)
	}
	head, err := r.readAt(0, headerLen)
	if err != nil {
		return fail(x.addErr(err, false, "header"))
	}
	if string(head[:8]) != headerMagic || crc(head[:12]) != le.Uint32(head[12:]) || le.Uint32(head[8:]) != FormatVersion {
		// Nothing else depends on the header: a rewrite writes a new one.
		x.add(0, true, "bad header magic, version or checksum")
	}
	tocOff, tocLen := le.Uint64(foot[0:]), le.Uint64(foot[8:])
	if tocOff < headerLen || tocLen < 4 || tocLen > uint64(footOff) || tocOff > uint64(footOff)-tocLen ||
		(tocLen-4)%tocEntryLen != 0 || (tocLen-4)/tocEntryLen > maxTOCEntries {
		x.add(footOff, false, "table of contents range [%d, +%d) invalid", tocOff, tocLen)
		return fail(nil)
	}
	toc, err := r.readAt(int64(tocOff), int64(tocLen))
	if err != nil {
		return fail(x.addErr(err, false, "table of contents"))
	}
	if crc(toc) != le.Uint32(foot[16:]) {
		x.add(int64(tocOff), false, "table of contents checksum mismatch")
		return fail(nil)
	}
	if n := le.Uint32(toc); uint64(n) != (tocLen-4)/tocEntryLen {
		x.add(int64(tocOff), false, "table of contents count %d does not match its length", n)
		return fail(nil)
	}
	sections := map[uint32]tocEntry{}
	dataEnd := tocOff
	for i := uint64(0); i < (tocLen-4)/tocEntryLen; i++ {
		p := toc[4+i*tocEntryLen:]
		e := tocEntry{Type: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]), Codec: le.Uint32(p[8:]), CRC: le.Uint32(p[12:]),
			Offset: le.Uint64(p[16:]), Length: le.Uint64(p[24:]), RawLen: le.Uint64(p[32:])}
		entOff := int64(tocOff + 4 + i*tocEntryLen)
		// Everything but the summary, the block index and the table that the
		// blocks' stored-value references index is rebuilt.
		derivable := e.Type > sectionBlockIndex && e.Type != sectionValueRefTable
		if e.Offset < headerLen || e.Length > tocOff || e.Offset > tocOff-e.Length {
			x.add(entOff, derivable, "section type %d range [%d, +%d) outside the file body", e.Type, e.Offset, e.Length)
			continue
		}
		if _, dup := sections[e.Type]; dup {
			x.add(entOff, derivable, "section type %d listed twice", e.Type)
			continue
		}
		if e.Type > lastKnownSection {
			if e.Flags&sectionRequired != 0 {
				v.Problems = append(v.Problems, Problem{File: path, Offset: entOff, Unsupported: true,
					Msg: fmt.Sprintf("required section type %d: %v", e.Type, ErrUnsupported)})
				return fail(nil)
			}
			continue
		}
		sections[e.Type] = e
		dataEnd = min(dataEnd, e.Offset)
	}
	for t := uint32(sectionInfo); t <= sectionTraceFences; t++ {
		if _, ok := sections[t]; !ok {
			x.add(int64(tocOff), t > sectionBlockIndex, "required section type %d missing", t)
			if t <= sectionBlockIndex {
				return fail(nil)
			}
		}
	}
	s, off, err := r.loadSection(sections[sectionInfo])
	if err != nil {
		return fail(x.addErr(err, false, "summary section"))
	}
	if r.info, err = decodeInfo(s); err != nil {
		x.add(off, false, "summary section: %v", err)
		return fail(nil)
	}
	r.info.Name = baseName(path)
	r.info.Bytes = size
	v.Info = r.info
	if s, off, err = r.loadSection(sections[sectionBlockIndex]); err != nil {
		return fail(x.addErr(err, false, "block index"))
	}
	if r.blocks, err = decodeBlockIndex(s, r.info.Projects, headerLen, dataEnd); err != nil {
		x.add(off, false, "block index: %v", err)
		return fail(nil)
	}
	r.metas = make([]BlockMeta, len(r.blocks))
	for i := range r.blocks {
		r.metas[i] = r.blocks[i].Meta
	}
	r.openValueRefs(sections) // the blocks need section 18
	return r, sections, nil
}

// loadSection reads, checks and decompresses one resident section.
func (r *Reader) loadSection(e tocEntry) (string, int64, error) {
	if e.Length > maxSectionBytes {
		return "", 0, r.corrupt(int64(e.Offset), "section type %d of %d bytes exceeds the limit", e.Type, e.Length)
	}
	b, err := r.readAt(int64(e.Offset), int64(e.Length))
	if err != nil {
		return "", 0, err
	}
	if crc(b) != e.CRC {
		return "", 0, r.corrupt(int64(e.Offset), "section type %d checksum mismatch", e.Type)
	}
	s, err := decompress(e.Codec, b, e.RawLen)
	if err != nil {
		return "", 0, r.corrupt(int64(e.Offset), "section type %d: %v", e.Type, err)
	}
	return s, int64(e.Offset), nil
}

// sectionChecksums checks the TOC checksum of every known section past the
// summary and the block index (already loaded), reading in chunks.
func (x *verifier) sectionChecksums(sections map[uint32]tocEntry) error {
	types := make([]uint32, 0, len(sections))
	for t := range sections {
		if t > sectionBlockIndex {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	buf := make([]byte, 1<<20)
	for _, t := range types {
		e := sections[t]
		var sum uint32
		for done := uint64(0); done < e.Length; {
			n := min(uint64(len(buf)), e.Length-done)
			got, err := x.r.f.ReadAt(buf[:n], int64(e.Offset+done))
			if uint64(got) < n {
				if err == nil || errors.Is(err, io.EOF) {
					x.add(int64(e.Offset+done)+int64(got), true, "file ends inside section type %d", t)
					break
				}
				return fmt.Errorf("read segment %s at offset %d: %w", x.r.path, e.Offset+done, err)
			}
			sum = crcUpdate(sum, buf[:n])
			done += n
		}
		if sum != e.CRC {
			x.add(int64(e.Offset), true, "section type %d (%s) checksum mismatch", t, sectionName(t))
		}
	}
	return nil
}

func crcUpdate(sum uint32, b []byte) uint32 { return crc32.Update(sum, castagnoli, b) }

func sectionName(t uint32) string {
	names := map[uint32]string{sectionAttrBlooms: "attribute filters", sectionTraceIndex: "trace index",
		sectionTraceFences: "trace fences", sectionLLMAggregates: "LLM aggregates", sectionTokenFilters: "token filters",
		sectionTokenSummary: "token summary", sectionValueRefs: "value references", sectionLLMAggDir: "LLM aggregates directory",
		sectionTokenPages: "token disk summary", sectionTokenGroups: "row-group token filters", sectionTokenGroupDir: "token group directory",
		sectionOpsAggregates: "service aggregates", sectionOpsAggDir: "service aggregates directory",
		sectionLLMRollups: "LLM rollups", sectionLLMRollupDir: "LLM rollups directory",
		sectionValueRefTable: "value reference table", sectionAttrSummary: "attribute value summary",
		sectionAttrBloomsSalted: "salted attribute filters"}
	if n, ok := names[t]; ok {
		return n
	}
	return "unknown"
}

// blockRows is what the blocks hold, gathered for the cross-references.
type blockRows struct {
	runs     []traceEntry                 // (project, trace, block, row, count), in block order
	refs     map[[32]byte]struct{}        // stored-value references
	projects []ProjectInfo                // recomputed per project of the summary
	aggKeys  [][]AggKey                   // per block: keys of the block's LLM aggregates
	aggSpans [][]int                      // per block: spans per key
	traces   []map[model.TraceID]struct{} // per project: distinct traces
}

// blocks reads, verifies and decodes every block and compares each with its
// block-index entry. It returns the rows' facts when every block decoded.
func (x *verifier) blocks() (*blockRows, error) {
	r := x.r
	rows := &blockRows{refs: map[[32]byte]struct{}{}, projects: make([]ProjectInfo, len(r.info.Projects)),
		traces: make([]map[model.TraceID]struct{}, len(r.info.Projects))}
	for i := range rows.traces {
		rows.traces[i] = map[model.TraceID]struct{}{}
		rows.projects[i] = ProjectInfo{Name: r.info.Projects[i].Name, MinStart: math.MaxUint64}
	}
	intact := true
	agg := NewAggregator()
	for i := range r.blocks {
		b := &r.blocks[i]
		spans, err := x.readBlock(i)
		if err != nil {
			if err := x.addErr(err, false, fmt.Sprintf("block %d", i)); err != nil {
				return nil, err
			}
			intact = false
			continue
		}
		x.v.SpansRead += len(spans)
		x.checkMeta(i, b, spans)
		if r.HasAttrSummary() {
			if e, bad := r.attrs.missing(attrEntries(spans, r.attrs.doubles)); bad {
				x.add(int64(x.sections[sectionAttrSummary].Offset), true,
					"attribute value summary rejects the entry %q that block %d holds", e, i)
			}
		}
		if err := x.pieceMarks(i, spans); err != nil {
			return nil, err
		}
		pi := b.ProjectIdx
		p := &rows.projects[pi]
		agg.Reset()
		for j := 0; j < len(spans); {
			k := j + 1
			for k < len(spans) && spans[k].TraceID == spans[j].TraceID {
				k++
			}
			rows.runs = append(rows.runs, traceEntry{Project: uint32(pi), TraceID: spans[j].TraceID, Block: uint32(i),
				Row: uint32(j), Count: uint32(k - j)})
			j = k
		}
		for j := range spans {
			s := &spans[j]
			p.Spans++
			p.MinStart = min(p.MinStart, s.StartTimeUnixNano)
			p.MaxStart = max(p.MaxStart, s.StartTimeUnixNano)
			rows.traces[pi][s.TraceID] = struct{}{}
			spanRefs(s, rows.refs)
			agg.Add(s)
		}
		entries := agg.Entries()
		keys := make([]AggKey, len(entries))
		counts := make([]int, len(entries))
		for k := range entries {
			keys[k], counts[k] = entries[k].Key, int(entries[k].M.Spans)
		}
		for len(rows.aggKeys) < i {
			rows.aggKeys, rows.aggSpans = append(rows.aggKeys, nil), append(rows.aggSpans, nil)
		}
		rows.aggKeys, rows.aggSpans = append(rows.aggKeys, keys), append(rows.aggSpans, counts)
	}
	for h := range rows.refs {
		x.v.ValueRefs = append(x.v.ValueRefs, h)
	}
	slices.SortFunc(x.v.ValueRefs, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	x.v.BlocksIntact = intact
	if !intact {
		return nil, nil
	}
	for i := range rows.projects {
		rows.projects[i].Traces = len(rows.traces[i])
		if rows.projects[i].Spans == 0 {
			rows.projects[i].MinStart = 0
		}
	}
	return rows, nil
}

// readBlock decodes block i, turning any panic of the decoder on hostile
// bytes into a corruption (the decoders are fuzzed, but a verifier must
// report, never crash).
func (x *verifier) readBlock(i int) (spans []model.Span, err error) {
	defer func() {
		if p := recover(); p != nil {
			spans, err = nil, x.r.corrupt(int64(x.r.blocks[i].Offset), "block %d: decoder failed: %v", i, p)
		}
	}()
	return x.r.ReadBlock(i)
}

// pieceMarks checks, for a block with a column stored as pieces (codec 2),
// what partial reads rely on beyond the checksums ReadBlock verified: that
// each row mark is its row's start. It decodes the first row of every mark
// group with one ReadBlockRows (which starts each at its mark and, as the
// groups cover every piece, decompresses the block once) and compares it
// with the full read. The rows themselves are intact then, and a rewrite
// recomputes the marks: the problem is derivable. Only I/O errors are
// returned.
func (x *verifier) pieceMarks(i int, spans []model.Span) (err error) {
	b := &x.r.blocks[i]
	if !slices.ContainsFunc(b.Cols, func(c columnRef) bool { return c.Codec == codecPieces }) {
		return nil
	}
	var ranges []RowRange
	for lo := markRows; lo < len(spans); lo += markRows {
		ranges = append(ranges, RowRange{lo, lo + 1})
	}
	if len(ranges) == 0 {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			x.add(int64(b.Offset), true, "block %d: decoding rows from their row marks failed: %v", i, p)
		}
	}()
	got, err := x.r.ReadBlockRows(i, ranges)
	if err != nil {
		return x.addErr(err, true, fmt.Sprintf("block %d, rows read from their row marks", i))
	}
	for k, rg := range ranges {
		if !sameSpan(&got[k], &spans[rg.Lo]) {
			x.add(int64(b.Offset), true, "block %d: row %d read from its row mark differs from the full read", i, rg.Lo)
			return nil
		}
	}
	return nil
}

// sameSpan reports whether two decodings of one row are equal, field by
// field (resources and scopes by content: two reads do not share pointers).
func sameSpan(a, b *model.Span) bool {
	if a.TraceID != b.TraceID || a.SpanID != b.SpanID || a.ParentSpanID != b.ParentSpanID ||
		a.TraceState != b.TraceState || a.Flags != b.Flags || a.Name != b.Name || a.Kind != b.Kind ||
		a.StartTimeUnixNano != b.StartTimeUnixNano || a.EndTimeUnixNano != b.EndTimeUnixNano ||
		a.DroppedAttributesCount != b.DroppedAttributesCount || a.DroppedEventsCount != b.DroppedEventsCount ||
		a.DroppedLinksCount != b.DroppedLinksCount || a.StatusCode != b.StatusCode ||
		a.StatusMessage != b.StatusMessage || a.Service != b.Service || !model.EqualKeyValues(a.Attributes, b.Attributes) ||
		len(a.Events) != len(b.Events) || len(a.Links) != len(b.Links) ||
		(a.LLM == nil) != (b.LLM == nil) || (a.LLM != nil && *a.LLM != *b.LLM) ||
		(a.Resource == nil) != (b.Resource == nil) || (a.Scope == nil) != (b.Scope == nil) {
		return false
	}
	for k := range a.Events {
		x, y := &a.Events[k], &b.Events[k]
		if x.TimeUnixNano != y.TimeUnixNano || x.Name != y.Name || x.DroppedAttributesCount != y.DroppedAttributesCount ||
			!model.EqualKeyValues(x.Attributes, y.Attributes) {
			return false
		}
	}
	for k := range a.Links {
		x, y := &a.Links[k], &b.Links[k]
		if x.TraceID != y.TraceID || x.SpanID != y.SpanID || x.TraceState != y.TraceState || x.Flags != y.Flags ||
			x.DroppedAttributesCount != y.DroppedAttributesCount || !model.EqualKeyValues(x.Attributes, y.Attributes) {
			return false
		}
	}
	if x, y := a.Resource, b.Resource; x != nil && (!model.EqualKeyValues(x.Attributes, y.Attributes) ||
		x.DroppedAttributesCount != y.DroppedAttributesCount || x.SchemaURL != y.SchemaURL) {
		return false
	}
	if x, y := a.Scope, b.Scope; x != nil && (x.Name != y.Name || x.Version != y.Version ||
		!model.EqualKeyValues(x.Attributes, y.Attributes) || x.DroppedAttributesCount != y.DroppedAttributesCount ||
		x.SchemaURL != y.SchemaURL) {
		return false
	}
	return true
}

// checkMeta compares block i's index entry with its rows.
func (x *verifier) checkMeta(i int, b *blockEntry, spans []model.Span) {
	m := BlockMeta{Spans: len(spans), MinStart: math.MaxUint64, MinDuration: math.MaxUint64}
	services, names := map[string]struct{}{}, map[string]struct{}{}
	for j := range spans {
		s := &spans[j]
		m.MinStart = min(m.MinStart, s.StartTimeUnixNano)
		m.MaxStart = max(m.MaxStart, s.StartTimeUnixNano)
		d := s.Duration()
		m.MinDuration = min(m.MinDuration, d)
		m.MaxDuration = max(m.MaxDuration, d)
		if s.StatusCode == model.StatusError {
			m.Errors++
		}
		m.Kinds |= kindBit(s.Kind)
		services[s.Service] = struct{}{}
		names[s.Name] = struct{}{}
	}
	got := b.Meta
	var what []string
	if got.Errors != m.Errors {
		what = append(what, fmt.Sprintf("errors %d, rows %d", got.Errors, m.Errors))
	}
	if got.MinStart != m.MinStart || got.MaxStart != m.MaxStart {
		what = append(what, fmt.Sprintf("start range [%d, %d], rows [%d, %d]", got.MinStart, got.MaxStart, m.MinStart, m.MaxStart))
	}
	if got.MinDuration != m.MinDuration || got.MaxDuration != m.MaxDuration {
		what = append(what, "duration range differs from the rows")
	}
	if got.Kinds != m.Kinds {
		what = append(what, fmt.Sprintf("kinds %#x, rows %#x", got.Kinds, m.Kinds))
	}
	if !sameSet(got.Services, services) {
		what = append(what, "services differ from the rows")
	}
	if !sameSet(got.Names, names) {
		what = append(what, "span names differ from the rows")
	}
	if len(what) > 0 {
		x.add(int64(b.Offset), true, "block index entry of block %d disagrees with its rows: %v", i, what)
	}
}

func sameSet(list []string, set map[string]struct{}) bool {
	if len(list) != len(set) {
		return false
	}
	for _, s := range list {
		if _, ok := set[s]; !ok {
			return false
		}
	}
	return true
}

// spanRefs adds the stored-value references a span holds to refs.
func spanRefs(s *model.Span, refs map[[32]byte]struct{}) {
	var value func(v *model.Value)
	kvs := func(list []model.KeyValue) {
		for i := range list {
			value(&list[i].Value)
		}
	}
	value = func(v *model.Value) {
		switch v.Type {
		case model.ValueRef:
			for i := range v.RefPieces() {
				refs[v.RefPiece(i)] = struct{}{}
			}
		case model.ValueArray:
			for _, e := range v.Elems() {
				value(&e)
			}
		case model.ValueKvList:
			kvs(v.Fields())
		}
	}
	kvs(s.Attributes)
	for i := range s.Events {
		kvs(s.Events[i].Attributes)
	}
	for i := range s.Links {
		kvs(s.Links[i].Attributes)
	}
}

// summary compares the summary section with what the blocks hold.
func (x *verifier) summary(rows *blockRows) {
	r := x.r
	info := r.info
	total, traces := 0, 0
	var minStart, maxStart uint64
	for i, p := range rows.projects {
		ip := info.Projects[i]
		if p.Spans != ip.Spans || p.Traces != ip.Traces || p.MinStart != ip.MinStart || p.MaxStart != ip.MaxStart {
			x.add(-1, true, "summary of project %q (spans %d, traces %d, start [%d, %d]) disagrees with its blocks (%d, %d, [%d, %d])",
				ip.Name, ip.Spans, ip.Traces, ip.MinStart, ip.MaxStart, p.Spans, p.Traces, p.MinStart, p.MaxStart)
		}
		if p.Spans > 0 {
			if total == 0 || p.MinStart < minStart {
				minStart = p.MinStart
			}
			maxStart = max(maxStart, p.MaxStart)
		}
		total += p.Spans
		traces += p.Traces
	}
	if info.Blocks != len(r.blocks) || info.Spans != total || info.Traces != traces ||
		info.MinStart != minStart || info.MaxStart != maxStart {
		x.add(-1, true, "summary (blocks %d, spans %d, traces %d, start [%d, %d]) disagrees with the blocks (%d, %d, %d, [%d, %d])",
			info.Blocks, info.Spans, info.Traces, info.MinStart, info.MaxStart, len(r.blocks), total, traces, minStart, maxStart)
	}
}

// optionalSections checks the attribute filters, the LLM aggregates and
// the token filters part by part.
func (x *verifier) optionalSections(sections map[uint32]tocEntry, rows *blockRows) error {
	r := x.r
	load := func(t uint32) (string, int64, error) { return r.loadSection(sections[t]) }
	if _, ok := sections[sectionAttrBlooms]; ok {
		s, off, err := load(sectionAttrBlooms)
		if err != nil {
			if err := x.addErr(err, true, "attribute filters"); err != nil {
				return err
			}
		} else if _, err := decodeBlooms(s, len(r.blocks)); err != nil {
			x.add(off, true, "attribute filters: %v", err)
		}
	}
	if _, ok := sections[sectionAttrBloomsSalted]; ok {
		s, off, err := load(sectionAttrBloomsSalted)
		if err != nil {
			if err := x.addErr(err, true, "salted attribute filters"); err != nil {
				return err
			}
		} else if _, err := decodeBlooms(s, len(r.blocks)); err != nil {
			x.add(off, true, "salted attribute filters: %v", err)
		}
	}

	r.openAggs(sections, load)
	if r.aggs.err != nil {
		if err := x.addErr(r.aggs.err, true, ""); err != nil {
			return err
		}
	} else if r.aggs.present {
		for i := range r.blocks {
			entries, err := r.BlockAggregates(i)
			if err != nil {
				if err := x.addErr(err, true, ""); err != nil {
					return err
				}
				continue
			}
			if rows != nil && !sameAggs(entries, rows.aggKeys[i], rows.aggSpans[i]) {
				x.add(r.aggs.offset+int64(r.aggs.blocks[i].Offset), true,
					"LLM aggregates of block %d disagree with its rows (%d entries, rows give %d)", i, len(entries), len(rows.aggKeys[i]))
			}
		}
		for _, p := range r.info.Projects {
			if _, err := r.SegmentAggregates(p.Name); err != nil {
				if err := x.addErr(err, true, ""); err != nil {
					return err
				}
			}
		}
	}

	r.openRollups(sections, load)
	if r.rolls.err != nil {
		if err := x.addErr(r.rolls.err, true, ""); err != nil {
			return err
		}
	} else if r.rolls.present {
		add := func(off int64, format string, args ...any) { x.add(off, true, format, args...) }
		if err := x.addErr(r.verifyRollups(add), true, ""); err != nil {
			return err
		}
	}

	r.openOps(sections, load)
	if r.ops.err != nil {
		if err := x.addErr(r.ops.err, true, ""); err != nil {
			return err
		}
	} else if r.ops.present {
		for i := range r.blocks {
			a, err := r.BlockOps(i)
			if err != nil {
				if err := x.addErr(err, true, ""); err != nil {
					return err
				}
				continue
			}
			var spans int64
			for j := range a.Ops {
				spans += a.Ops[j].M.Spans
			}
			if spans != int64(r.blocks[i].Meta.Spans) {
				x.add(r.ops.offset+int64(r.ops.blocks[i].Offset), true,
					"service aggregates of block %d count %d spans, the block has %d", i, spans, r.blocks[i].Meta.Spans)
			}
		}
		for _, p := range r.info.Projects {
			if _, err := r.SegmentOps(p.Name); err != nil {
				if err := x.addErr(err, true, ""); err != nil {
					return err
				}
			}
		}
	}

	r.openTokens(sections, load)
	if r.tok.present {
		r.openGroups(sections, load)
	}
	if r.tok.err != nil {
		if err := x.addErr(r.tok.err, true, ""); err != nil {
			return err
		}
	} else if r.tok.present {
		probe := []uint64{0}
		for i := range r.blocks {
			if _, err := r.BlockMayContainTokens(i, probe); err != nil {
				if err := x.addErr(err, true, ""); err != nil {
					return err
				}
			}
		}
	}
	if r.grp.err != nil {
		if err := x.addErr(r.grp.err, true, ""); err != nil {
			return err
		}
	} else if r.grp.present {
		if err := x.addErr(r.verifyDiskPages(), true, ""); err != nil {
			return err
		}
		probe := []uint64{0}
		for i := range r.blocks {
			if _, err := r.BlockRowsMayContainTokens(i, probe); err != nil {
				if err := x.addErr(err, true, ""); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sameAggs(entries []AggEntry, keys []AggKey, spans []int) bool {
	if len(entries) != len(keys) {
		return false
	}
	for i := range entries {
		if entries[i].Key != keys[i] || int(entries[i].M.Spans) != spans[i] {
			return false
		}
	}
	return true
}

// traceIndex reads the whole trace index, checks every page against its
// fence and every entry against the blocks, and, when every block decoded,
// compares the index with the trace runs the rows hold.
func (x *verifier) traceIndex(sections map[uint32]tocEntry, rows *blockRows) error {
	r := x.r
	ti, okIdx := sections[sectionTraceIndex]
	fe, okFe := sections[sectionTraceFences]
	if !okIdx || !okFe {
		return nil // reported as a missing required section
	}
	if ti.Codec != codecNone || ti.RawLen != ti.Length {
		x.add(int64(ti.Offset), true, "trace index must be stored uncompressed")
		return nil
	}
	r.tix.offset, r.tix.length = int64(ti.Offset), int64(ti.Length)
	s, off, err := r.loadSection(fe)
	if err != nil {
		return x.addErr(err, true, "trace index fences")
	}
	if err := decodeFences(s, &r.tix); err != nil {
		x.add(off, true, "trace index fences: %v", err)
		return nil
	}
	if ti.Length > maxSectionBytes {
		x.add(int64(ti.Offset), true, "trace index of %d bytes exceeds the limit", ti.Length)
		return nil
	}
	idx, err := r.readAt(int64(ti.Offset), int64(ti.Length))
	if err != nil {
		return x.addErr(err, true, "trace index")
	}
	var entries []traceEntry
	var prev traceEntry
	for p := range r.tix.fences {
		pOff, n := r.tix.pageBounds(p)
		page := idx[pOff-int64(ti.Offset) : pOff-int64(ti.Offset)+int64(n)*traceEntryLen]
		fc := r.tix.fences[p]
		if crc(page) != fc.CRC {
			x.add(pOff, true, "trace index page %d checksum mismatch", p)
			return nil
		}
		if first := parseTraceEntry(page); first.Project != fc.Project || first.TraceID != fc.First {
			x.add(pOff, true, "trace index page %d starts at a key other than its fence", p)
			return nil
		}
		for k := 0; k < n; k++ {
			e := parseTraceEntry(page[k*traceEntryLen:])
			entOff := pOff + int64(k)*traceEntryLen
			if len(entries) > 0 && compareEntries(prev, e) >= 0 {
				x.add(entOff, true, "trace index entries out of order")
				return nil
			}
			if int(e.Block) >= len(r.blocks) || int(e.Project) >= len(r.info.Projects) || r.blocks[e.Block].ProjectIdx != int(e.Project) ||
				e.Count == 0 || uint64(e.Row)+uint64(e.Count) > uint64(r.blocks[e.Block].Meta.Spans) {
				x.add(entOff, true, "trace index entry points outside its block")
				return nil
			}
			entries = append(entries, e)
			prev = e
		}
	}
	if len(entries) > 0 && (prev.Project != r.tix.lastProj || prev.TraceID != r.tix.last) {
		x.add(off, true, "trace index fences: last key differs from the last entry")
		return nil
	}
	if rows == nil {
		return nil
	}
	runs := slices.Clone(rows.runs)
	sort.Slice(runs, func(i, j int) bool { return compareEntries(runs[i], runs[j]) < 0 })
	if len(runs) != len(entries) {
		x.add(int64(ti.Offset), true, "trace index has %d entries, the blocks hold %d trace runs", len(entries), len(runs))
		return nil
	}
	for i := range runs {
		if runs[i] != entries[i] {
			e := entries[i]
			x.add(int64(ti.Offset)+int64(i)*traceEntryLen, true,
				"trace index entry (trace %s, block %d, rows %d+%d) does not match the rows of the block", e.TraceID, e.Block, e.Row, e.Count)
			return nil
		}
	}
	return nil
}

// valueRefs checks section 9 and, when every block decoded, that it lists
// exactly the refs the blocks hold.
func (x *verifier) valueRefs(rows *blockRows) error {
	r := x.r
	var listed [][32]byte
	err := r.ValueRefs(func(h [32]byte) bool { listed = append(listed, h); return true })
	if err != nil {
		return x.addErr(err, !r.vrefs.table, "")
	}
	if r.vrefs.table {
		slices.SortFunc(listed, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
		for i := 1; i < len(listed); i++ {
			if listed[i] == listed[i-1] {
				x.add(int64(r.vrefs.entry.Offset), false, "value reference table lists a hash twice")
				break
			}
		}
	}
	if rows == nil {
		return nil
	}
	if !slices.Equal(listed, x.v.ValueRefs) {
		x.add(int64(r.vrefs.entry.Offset), true, "value references section lists %d refs, the blocks hold %d distinct refs",
			len(listed), len(x.v.ValueRefs))
	}
	return nil
}

// Salvaged counts what Salvage read and skipped.
type Salvaged struct {
	Blocks, Spans         int // intact blocks passed to fn, and their spans
	LostBlocks, LostSpans int // damaged blocks skipped (spans as the block index counts them)
}

// Salvage reads every intact block of a segment file whose footer, table of
// contents, summary and block index are intact, and calls fn with each
// block's project and spans, in segment order: what a rewrite with a Writer
// needs (Append accepts them as they come). Damaged blocks are skipped and
// counted; index, filter and aggregate sections are not read. The error is
// a *CorruptionError when the blocks cannot be located, an I/O error, or
// fn's error.
func Salvage(path string, fn func(project string, spans []model.Span) error) (Salvaged, error) {
	var st Salvaged
	v := &Verification{File: path}
	r, _, err := openLenient(path, v)
	if err != nil {
		return st, err
	}
	if r == nil {
		if len(v.Problems) > 0 {
			p := v.Problems[len(v.Problems)-1]
			return st, &CorruptionError{File: p.File, Offset: p.Offset, Msg: p.Msg}
		}
		return st, fmt.Errorf("salvage segment %s: unreadable", path)
	}
	defer r.f.Close()
	x := &verifier{r: r, v: v}
	for i := range r.blocks {
		spans, err := x.readBlock(i)
		if err != nil {
			if !IsCorruption(err) && !errors.Is(err, ErrUnsupported) {
				return st, err
			}
			st.LostBlocks++
			st.LostSpans += r.blocks[i].Meta.Spans
			continue
		}
		if err := fn(r.blocks[i].Meta.Project, spans); err != nil {
			return st, err
		}
		st.Blocks++
		st.Spans += len(spans)
	}
	return st, nil
}
