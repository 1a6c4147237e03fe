package segment

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/klauspost/compress/zstd"

	"github.com/rastro-dev/rastro/internal/model"
)

// bloomFalsePositive is the target false-positive rate of the per-block
// attribute filters.
const bloomFalsePositive = 0.01

// blockEncoder turns the spans of one block into stored columns. It keeps its
// scratch buffers between blocks; one Writer owns one encoder.
type blockEncoder struct {
	enc   *zstd.Encoder
	raw   []byte
	out   []byte
	idx   []uint64
	cols  []columnRef
	kv    kvEnc
	dict  map[string]uint64
	dlist []string
	ptrs  map[any]uint64
	cont  map[string]uint64
	bloom map[string]int // filter entries of the block -> length of their key
	// bloomSeen caches attributes already in bloom, direct-mapped by
	// value: most spans of a block repeat a few, and comparing them is
	// cheaper than building and hashing their entry.
	bloomSeen [strCacheSlots]seenAttr
	// dcache caches dict's lookups (dictColumn), direct-mapped.
	dcache [strCacheSlots]cachedStr
	// bloomSalt, when set, is the block number (u32 LE) the filter's
	// entries are prefixed with (section 20).
	bloomSalt []byte
	entry     []byte
	marks     [numColumns + 1][]uint64 // row marks per column, relative to the column's raw start
	cuts      []uint64                 // piece boundaries of the column being stored
	pbuf      []byte                   // stored pieces of a codec-2 column, before its header
	prefs     []pieceRef
}

// piecesOff is a test hook: set, the encoder stores every column as one
// frame (codec 0 or 1), as before codec 2, so that benchmarks can compare.
var piecesOff bool

// seenAttr is an attribute known to be in the block filter's entries.
type seenAttr struct {
	resource bool
	typ      model.ValueType // ValueString or ValueInt
	key, str string
	int      int64
	set      bool
}

// mark records the offset of row i of column id when i is a mark row.
func (e *blockEncoder) mark(id uint32, i int, off int) {
	if i > 0 && i%markRows == 0 {
		e.marks[id] = append(e.marks[id], uint64(off))
	}
}

func newBlockEncoder(enc *zstd.Encoder) *blockEncoder {
	return &blockEncoder{
		enc:   enc,
		dict:  make(map[string]uint64),
		ptrs:  make(map[any]uint64),
		cont:  make(map[string]uint64),
		bloom: make(map[string]int),
	}
}

// encodedBlock is the output of encode; out and cols alias encoder scratch
// and are valid until the next call.
type encodedBlock struct {
	out   []byte
	cols  []columnRef
	meta  BlockMeta
	bloom []byte // encoded filter, fresh memory
}

func (e *blockEncoder) encode(spans []model.Span) (encodedBlock, error) {
	e.out = e.out[:0]
	e.cols = e.cols[:0]
	for i := range e.marks {
		e.marks[i] = e.marks[i][:0]
	}
	meta := BlockMeta{Spans: len(spans), MinStart: math.MaxUint64, MinDuration: math.MaxUint64}
	for i := range spans {
		s := &spans[i]
		meta.MinStart = min(meta.MinStart, s.StartTimeUnixNano)
		meta.MaxStart = max(meta.MaxStart, s.StartTimeUnixNano)
		d := s.Duration()
		meta.MinDuration = min(meta.MinDuration, d)
		meta.MaxDuration = max(meta.MaxDuration, d)
		if s.StatusCode == model.StatusError {
			meta.Errors++
		}
		meta.Kinds |= kindBit(s.Kind)
	}

	raw := e.raw[:0]
	for i := range spans {
		raw = append(raw, spans[i].TraceID[:]...)
	}
	e.putIDs(colTraceID, raw, len(model.TraceID{}))
	raw = raw[:0]
	for i := range spans {
		raw = append(raw, spans[i].SpanID[:]...)
	}
	e.putIDs(colSpanID, raw, len(model.SpanID{}))
	raw = raw[:0]
	for i := range spans {
		raw = append(raw, spans[i].ParentSpanID[:]...)
	}
	e.putIDs(colParentID, raw, len(model.SpanID{}))
	raw = raw[:0]
	for i := range spans {
		e.mark(colStart, i, len(raw))
		raw = binary.AppendUvarint(raw, spans[i].StartTimeUnixNano-meta.MinStart)
	}
	e.put(colStart, raw)
	raw = raw[:0]
	for i := range spans {
		e.mark(colDuration, i, len(raw))
		// Wrapping difference: exact even for an end before the start.
		raw = binary.AppendVarint(raw, int64(spans[i].EndTimeUnixNano-spans[i].StartTimeUnixNano))
	}
	e.put(colDuration, raw)
	raw, meta.Names = e.dictColumn(colName, raw[:0], spans, func(s *model.Span) string { return s.Name })
	e.put(colName, raw)
	raw, meta.Services = e.dictColumn(colService, raw[:0], spans, func(s *model.Span) string { return s.Service })
	e.put(colService, raw)
	raw = raw[:0]
	for i := range spans {
		e.mark(colKindStatus, i, len(raw))
		raw = binary.AppendVarint(raw, int64(spans[i].Kind))
		raw = binary.AppendVarint(raw, int64(spans[i].StatusCode))
		raw = binary.AppendUvarint(raw, uint64(spans[i].Flags))
	}
	e.put(colKindStatus, raw)
	raw = raw[:0]
	for i := range spans {
		e.mark(colStatusMessage, i, len(raw))
		raw = appendStr(raw, spans[i].StatusMessage)
	}
	e.put(colStatusMessage, raw)
	raw = raw[:0]
	for i := range spans {
		e.mark(colTraceState, i, len(raw))
		raw = appendStr(raw, spans[i].TraceState)
	}
	e.put(colTraceState, raw)
	e.raw = raw

	clear(e.bloom)
	e.bloomSeen = [strCacheSlots]seenAttr{}
	if err := e.resourceColumn(spans); err != nil {
		return encodedBlock{}, err
	}
	if err := e.scopeColumn(spans); err != nil {
		return encodedBlock{}, err
	}

	e.kv.reset()
	e.kv.apart = true
	for i := range spans {
		e.mark(colAttrs, i, len(e.kv.body))
		e.kv.kvs(spans[i].Attributes, 0)
		for _, kv := range spans[i].Attributes {
			e.addBloom(false, kv)
		}
	}
	if err := e.putKV(colAttrs); err != nil {
		return encodedBlock{}, err
	}

	raw = e.raw[:0]
	for i := range spans {
		e.mark(colDropped, i, len(raw))
		raw = binary.AppendUvarint(raw, uint64(spans[i].DroppedAttributesCount))
		raw = binary.AppendUvarint(raw, uint64(spans[i].DroppedEventsCount))
		raw = binary.AppendUvarint(raw, uint64(spans[i].DroppedLinksCount))
	}
	e.put(colDropped, raw)
	e.raw = raw

	e.kv.reset()
	e.kv.apart = true
	for i := range spans {
		s := &spans[i]
		e.mark(colEvents, i, len(e.kv.body))
		e.kv.uvarint(uint64(len(s.Events)))
		for j := range s.Events {
			ev := &s.Events[j]
			e.kv.varint(int64(ev.TimeUnixNano - s.StartTimeUnixNano))
			e.kv.str(ev.Name)
			e.kv.kvs(ev.Attributes, 0)
			e.kv.uvarint(uint64(ev.DroppedAttributesCount))
		}
	}
	if err := e.putKV(colEvents); err != nil {
		return encodedBlock{}, err
	}

	e.kv.reset()
	e.kv.apart = true
	for i := range spans {
		s := &spans[i]
		e.mark(colLinks, i, len(e.kv.body))
		e.kv.uvarint(uint64(len(s.Links)))
		for j := range s.Links {
			l := &s.Links[j]
			e.kv.body = append(e.kv.body, l.TraceID[:]...)
			e.kv.body = append(e.kv.body, l.SpanID[:]...)
			e.kv.str(l.TraceState)
			e.kv.kvs(l.Attributes, 0)
			e.kv.uvarint(uint64(l.DroppedAttributesCount))
			e.kv.uvarint(uint64(l.Flags))
		}
	}
	if err := e.putKV(colLinks); err != nil {
		return encodedBlock{}, err
	}

	e.llmColumn(spans)
	e.putMarks()
	return encodedBlock{out: e.out, cols: e.cols, meta: meta, bloom: e.encodeBloom()}, nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// put compresses one column's raw bytes onto the block.
func (e *blockEncoder) put(id uint32, raw []byte) { e.putDict(id, raw, 0) }

// putDict is put for a column whose first dictLen raw bytes are a
// dictionary every row needs (0: none). A large column with row marks is
// stored as pieces (codec 2) cut at the dictionary's end and at every mark,
// so that reading some rows decompresses only the dictionary and their
// pieces; any other column as one frame.
func (e *blockEncoder) putDict(id uint32, raw []byte, dictLen uint64) {
	start := len(e.out)
	var codec uint32
	if len(e.marks[id]) > 0 && len(raw) >= pieceMinRaw && !piecesOff {
		e.cuts = append(e.cuts[:0], dictLen)
		e.cuts = append(e.cuts, e.marks[id]...)
		e.out, e.pbuf, e.prefs = appendPieces(e.enc, e.out, e.pbuf, raw, e.cuts, e.prefs)
		codec = codecPieces
	} else {
		e.out, codec = compressInto(e.enc, e.out, raw)
	}
	e.cols = append(e.cols, columnRef{
		ID: id, Codec: codec, Offset: uint64(start), Length: uint64(len(e.out) - start),
		RawLen: uint64(len(raw)), CRC: crc(e.out[start:]),
	})
}

// putIDs stores a column of fixed-width ids in codec 3 (ids.go) when that
// takes at most 5/8 of its raw bytes, else as put does. Under 5/8 most
// records are zeros or repeats and the rest random ids, which zstd stores
// in about as many bytes (a trace id column: 0.1 B/span more on the
// canonical corpus, a telemetrygen parent id column 0.4 B/span less) after
// a match search over every byte. Above it the column is left to zstd:
// parents that repeat apart (siblings), ids with a structure of their own
// (a timestamp prefix); random ids fail its compression at once.
func (e *blockEncoder) putIDs(id uint32, raw []byte, width int) {
	if writeTokenMapWithoutPlaces { // files of that older format predate codec 3
		e.put(id, raw)
		return
	}
	start := len(e.out)
	out, ok := appendIDs(e.out, raw, width, len(raw)*5/8)
	if !ok {
		e.put(id, raw)
		return
	}
	e.out = out
	e.cols = append(e.cols, columnRef{
		ID: id, Codec: codecIDs, Offset: uint64(start), Length: uint64(len(e.out) - start),
		RawLen: uint64(len(raw)), CRC: crc(e.out[start:]),
	})
}

func (e *blockEncoder) putKV(id uint32) error {
	if e.kv.err != nil {
		return fmt.Errorf("encode %s column: %w", columnNames[id], e.kv.err)
	}
	e.raw = e.kv.finish(e.raw[:0])
	dictLen := uint64(len(e.raw) - len(e.kv.body))
	for i := range e.marks[id] {
		e.marks[id][i] += dictLen
	}
	e.putDict(id, e.raw, dictLen)
	return nil
}

// dictColumn writes a block-local dictionary of a string field followed by
// one index per span, and returns the sorted distinct values.
func (e *blockEncoder) dictColumn(id uint32, raw []byte, spans []model.Span, field func(*model.Span) string) ([]byte, []string) {
	clear(e.dict)
	e.dlist = e.dlist[:0]
	e.idx = e.idx[:0]
	e.dcache = [strCacheSlots]cachedStr{}
	for i := range spans {
		v := field(&spans[i])
		c := &e.dcache[strSlot(v)]
		if c.set && c.s == v { // the few values of a block skip the map
			e.idx = append(e.idx, c.i)
			continue
		}
		j, ok := e.dict[v]
		if !ok {
			j = uint64(len(e.dlist))
			e.dict[v] = j
			e.dlist = append(e.dlist, v)
		}
		e.idx = append(e.idx, j)
		*c = cachedStr{s: v, i: j, set: true}
	}
	raw = binary.AppendUvarint(raw, uint64(len(e.dlist)))
	for _, v := range e.dlist {
		raw = appendStr(raw, v)
	}
	for i, j := range e.idx {
		e.mark(id, i, len(raw))
		raw = binary.AppendUvarint(raw, j)
	}
	sorted := slices.Clone(e.dlist)
	slices.Sort(sorted)
	return raw, sorted
}

// tableColumn writes a table of distinct entries (deduplicated by pointer,
// then by encoded content) followed by one index per span: 0 for nil, else
// 1 + the table position.
func (e *blockEncoder) tableColumn(id uint32, spans []model.Span, ptr func(*model.Span) any,
	enc func(e *kvEnc, p any)) error {
	e.kv.reset()
	e.kv.apart = false // resources and scopes are shared and stay inline (docs/format/segment.md)
	clear(e.ptrs)
	clear(e.cont)
	e.idx = e.idx[:0]
	n := uint64(0)
	var last any
	var lastJ uint64
	for i := range spans {
		p := ptr(&spans[i])
		if p == nil {
			e.idx = append(e.idx, 0)
			continue
		}
		if p == last { // spans of one request share one resource and scope
			e.idx = append(e.idx, lastJ)
			continue
		}
		j, ok := e.ptrs[p]
		if !ok {
			start := len(e.kv.body)
			enc(&e.kv, p)
			if k, dup := e.cont[string(e.kv.body[start:])]; dup {
				e.kv.body = e.kv.body[:start]
				j = k
			} else {
				n++
				j = n
				e.cont[string(e.kv.body[start:])] = j
			}
			e.ptrs[p] = j
		}
		e.idx = append(e.idx, j)
		last, lastJ = p, j
	}
	if e.kv.err != nil {
		return fmt.Errorf("encode %s column: %w", columnNames[id], e.kv.err)
	}
	raw := binary.AppendUvarint(e.raw[:0], uint64(len(e.kv.keys)))
	for _, k := range e.kv.keys {
		raw = appendStr(raw, k)
	}
	raw = binary.AppendUvarint(raw, n)
	raw = append(raw, e.kv.body...)
	for i, j := range e.idx {
		e.mark(id, i, len(raw))
		raw = binary.AppendUvarint(raw, j)
	}
	e.raw = raw
	e.put(id, raw)
	return nil
}

func (e *blockEncoder) resourceColumn(spans []model.Span) error {
	return e.tableColumn(colResource, spans, func(s *model.Span) any {
		if s.Resource == nil {
			return nil
		}
		return s.Resource
	}, func(kv *kvEnc, p any) {
		r := p.(*model.Resource)
		kv.kvs(r.Attributes, 0)
		kv.uvarint(uint64(r.DroppedAttributesCount))
		kv.str(r.SchemaURL)
		for _, a := range r.Attributes {
			e.addBloom(true, a)
		}
	})
}

func (e *blockEncoder) scopeColumn(spans []model.Span) error {
	return e.tableColumn(colScope, spans, func(s *model.Span) any {
		if s.Scope == nil {
			return nil
		}
		return s.Scope
	}, func(kv *kvEnc, p any) {
		sc := p.(*model.Scope)
		kv.str(sc.Name)
		kv.str(sc.Version)
		kv.kvs(sc.Attributes, 0)
		kv.uvarint(uint64(sc.DroppedAttributesCount))
		kv.str(sc.SchemaURL)
	})
}

// addBloom records a top-level string or int attribute for the block
// filter, and a double that equals an integer as that int (appendBloomEntry).
func (e *blockEncoder) addBloom(resource bool, kv model.KeyValue) {
	typ, str, n := kv.Value.Type, "", int64(0)
	switch typ {
	case model.ValueString:
		str = kv.Value.Str
	case model.ValueInt:
		n = kv.Value.Int
	case model.ValueDouble:
		// Entered as the int it equals (appendBloomEntry); the test hooks
		// write an older format, which entered no doubles.
		i, ok := exactIntOf(kv.Value.Double)
		if !ok || writeNoAttrSummary || writeTokenMapWithoutPlaces {
			return
		}
		typ, n = model.ValueInt, i
	default:
		return
	}
	var slot int
	if typ == model.ValueString {
		slot = strSlot(str)
	} else {
		slot = int(uint64(n)*0x9e3779b97f4a7c15>>59) & (strCacheSlots - 1)
	}
	c := &e.bloomSeen[slot]
	if c.set && c.resource == resource && c.typ == typ && c.str == str && c.int == n && c.key == kv.Key {
		return
	}
	*c = seenAttr{resource: resource, typ: typ, key: kv.Key, str: str, int: n, set: true}
	if typ == model.ValueString {
		e.entry = appendBloomStr(e.entry[:0], resource, kv.Key, str)
	} else {
		e.entry = appendBloomInt(e.entry[:0], resource, kv.Key, n)
	}
	if _, ok := e.bloom[string(e.entry)]; !ok {
		e.bloom[string(e.entry)] = len(kv.Key)
	}
}

func bloomPrefix(b []byte, resource bool, key string, tag byte) []byte {
	if resource {
		b = append(b, 'r')
	} else {
		b = append(b, 's')
	}
	b = append(b, key...)
	return append(b, 0, tag)
}

func appendBloomStr(b []byte, resource bool, key, value string) []byte {
	return append(bloomPrefix(b, resource, key, tagString), value...)
}

func appendBloomInt(b []byte, resource bool, key string, value int64) []byte {
	return le.AppendUint64(bloomPrefix(b, resource, key, tagInt), uint64(value))
}

// appendBloomEntry appends the filter entry of an attribute, if it has
// one: a string, an int, or a double that equals an integer of magnitude at
// most 2^53, entered as that int. TraceQL's `.a = 200` matches the int 200
// and the double 200.0 alike, so a search for it may ask the int entry only
// (a segment whose summary says it enters doubles so:
// Reader.IntEntriesCoverDoubles).
func appendBloomEntry(b []byte, resource bool, kv model.KeyValue) ([]byte, bool) {
	switch kv.Value.Type {
	case model.ValueString:
		return appendBloomStr(b, resource, kv.Key, kv.Value.Str), true
	case model.ValueInt:
		return appendBloomInt(b, resource, kv.Key, kv.Value.Int), true
	case model.ValueDouble:
		if i, ok := exactIntOf(kv.Value.Double); ok {
			return appendBloomInt(b, resource, kv.Key, i), true
		}
	}
	return b, false
}

// exactIntOf returns the integer d equals, if its magnitude is at most
// 2^53 (the integers a double holds exactly).
func exactIntOf(d float64) (int64, bool) {
	if d != math.Trunc(d) || math.Abs(d) > 1<<53 {
		return 0, false
	}
	return int64(d), true
}

// passAllBloom is an encoded filter that passes every entry: one word of
// ones, one probe. Section 3 holds one per block when section 20 holds the
// real filters.
var passAllBloom = []byte{64, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// encodeBloom builds the block's filter: m uvarint | k uvarint | words uvarint | words x u64 LE.
func (e *blockEncoder) encodeBloom() []byte {
	n := uint(len(e.bloom))
	if n == 0 {
		n = 1
	}
	f := bloom.NewWithEstimates(n, bloomFalsePositive)
	for k := range e.bloom {
		if e.bloomSalt != nil {
			e.entry = append(append(e.entry[:0], e.bloomSalt...), k...)
			f.Add(e.entry)
			continue
		}
		f.AddString(k)
	}
	words := f.BitSet().Words()
	out := make([]byte, 0, 3*binary.MaxVarintLen64+8*len(words))
	out = binary.AppendUvarint(out, uint64(f.Cap()))
	out = binary.AppendUvarint(out, uint64(f.K()))
	out = binary.AppendUvarint(out, uint64(len(words)))
	for _, w := range words {
		out = le.AppendUint64(out, w)
	}
	return out
}

// putMarks writes the optional row-marks column: uvarint markRows | uvarint
// n columns | n x (uvarint id | uvarint count | count x uvarint delta from
// the previous mark). FindTrace uses it to start decoding a variable-width
// column near the wanted row instead of at row 0.
func (e *blockEncoder) putMarks() {
	raw := binary.AppendUvarint(e.raw[:0], markRows)
	n := 0
	for _, m := range e.marks {
		if len(m) > 0 {
			n++
		}
	}
	if n == 0 {
		return
	}
	raw = binary.AppendUvarint(raw, uint64(n))
	for id, m := range e.marks {
		if len(m) == 0 {
			continue
		}
		raw = appendUvarints(raw, uint64(id), uint64(len(m)))
		prev := uint64(0)
		for _, v := range m {
			raw = binary.AppendUvarint(raw, v-prev)
			prev = v
		}
	}
	e.raw = raw
	e.put(colRowMarks, raw)
}

// llmColumn writes the optional LLM column when a span of the block has
// LLM fields: a block-local string dictionary (uvarint n | n x str), then per
// span a flags byte (0 = no LLM; bit 0 present, bit 1 Counted) and, when
// present: provider, request model, response model, operation, session,
// user, agent and tool as uvarint dictionary indexes; input, output,
// cache-read, cache-creation and reasoning tokens and cost as varints; cost
// source and time to first token as uvarints.
func (e *blockEncoder) llmColumn(spans []model.Span) {
	any := false
	for i := range spans {
		if spans[i].LLM != nil {
			any = true
			break
		}
	}
	if !any {
		return
	}
	clear(e.dict)
	e.dlist = e.dlist[:0]
	id := func(s string) uint64 {
		j, ok := e.dict[s]
		if !ok {
			j = uint64(len(e.dlist))
			e.dict[s] = j
			e.dlist = append(e.dlist, s)
		}
		return j
	}
	body := e.kv.body[:0] // the kv encoder is idle after the links column
	for i := range spans {
		e.mark(colLLM, i, len(body)) // relative to the body; shifted by the dictionary below
		l := spans[i].LLM
		if l == nil {
			body = append(body, 0)
			continue
		}
		flags := byte(llmPresent)
		if l.Counted {
			flags |= llmCounted
		}
		body = append(body, flags)
		body = appendUvarints(body, id(l.Provider), id(l.RequestModel), id(l.ResponseModel), id(l.Operation),
			id(l.SessionID), id(l.UserID), id(l.AgentName), id(l.ToolName))
		for _, v := range [...]int64{l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheCreationTokens,
			l.ReasoningTokens, l.CostNanoUSD} {
			body = binary.AppendVarint(body, v)
		}
		body = appendUvarints(body, uint64(l.CostSource), l.TimeToFirstTokenNanos)
	}
	e.kv.body = body
	raw := binary.AppendUvarint(e.raw[:0], uint64(len(e.dlist)))
	for _, s := range e.dlist {
		raw = appendStr(raw, s)
	}
	for i := range e.marks[colLLM] {
		e.marks[colLLM][i] += uint64(len(raw))
	}
	raw = append(raw, body...)
	e.raw = raw
	e.put(colLLM, raw)
}
