package logstore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// The write buffer keeps each record encoded, as the span buffer does
// (internal/engine/memtable_codec.go), not as the decoded request's
// model.LogRecord: the times, sequence number, severity and ids live in a
// fixed row, the rest is kept in an append-only byte arena in the encoding
// the segment's payload column takes (otlp.AppendLogPayloadProto), followed
// by the record's sorted word hashes (8 bytes each, little-endian). Rows and
// arena hold no pointers, so the collector neither scans them nor keeps the
// request alive; services, resources and scopes are kept once per distinct
// value in small tables. A record is decoded again only when a query keeps
// it; a seal copies payloads and word hashes into the segment's columns
// without decoding them. The arena's pages are never written below what is
// in use, so a query's snapshot (a copy of the projBuf taken under the
// store's lock) stays valid while records are added.

// chunkRecords is how many buffered records one chunk summary covers: the
// size of a segment block, so the buffer prunes as a segment does. Rows are
// allocated a chunk at a time.
const chunkRecords = BlockRecords

// arenaPage is the size of one page of a buffer's arena (a record larger
// than this gets a page of its own).
const arenaPage = 256 << 10

// row is one buffered record: pointer-free.
type row struct {
	time     uint64 // TimeUnixNano (0: the record has none)
	observed uint64
	seq      uint64
	traceID  model.TraceID
	spanID   model.SpanID
	severity model.SeverityNumber
	service  uint32 // index into projBuf.services
	res      uint32 // index into projBuf.resources
	scope    uint32 // index into projBuf.scopes
	page     uint32 // the arena page of its payload and word hashes
	off      uint32
	payLen   uint32
	nTok     uint32
}

const rowBytes = int64(unsafe.Sizeof(row{}))

// recTime is LogRecord.Time.
func (r *row) recTime() uint64 {
	if r.time != 0 {
		return r.time
	}
	return r.observed
}

// projBuf is one project's buffered records, in WAL order, with a summary
// of every full chunk of chunkRecords records (time and severity range,
// services, Bloom filters over trace ids and words) so that a search skips
// the chunks that cannot match instead of looking at every record.
//
// A projBuf is changed only under the store's write lock; a reader copies
// it under the read lock and uses the copy's first n rows, which no later
// change touches.
type projBuf struct {
	chunks [][]row // chunkRecords rows each
	n      int     // rows in use
	pages  [][]byte
	used   int // bytes in use in the last page
	sums   []chunkSum

	services  []string
	resources []*model.Resource // decoded from resEnc, for queries
	resEnc    [][]byte          // lp protobuf Resource, lp schema URL: a segment's resource table entry
	scopes    []*model.Scope
	scopeEnc  [][]byte

	// The writer's lookups (not read by queries).
	svcIdx, resIdx, scopeIdx map[string]uint32
	scratch                  []byte

	// bytes is the heap the buffer holds (rows, arena, tables, summaries).
	bytes int64
}

type chunkSum struct {
	minT, maxT     uint64
	minSev, maxSev model.SeverityNumber
	services       []string
	traces, tokens bloom
}

func newProjBuf() *projBuf {
	return &projBuf{svcIdx: map[string]uint32{}, resIdx: map[string]uint32{}, scopeIdx: map[string]uint32{}}
}

func (pb *projBuf) row(i int) *row { return &pb.chunks[i/chunkRecords][i%chunkRecords] }

func (pb *projBuf) payload(r *row) []byte {
	return pb.pages[r.page][r.off : r.off+r.payLen : r.off+r.payLen]
}

// tokens are the record's word hashes, sorted, 8 bytes each.
func (pb *projBuf) tokens(r *row) []byte {
	start := r.off + r.payLen
	return pb.pages[r.page][start : start+8*r.nTok : start+8*r.nTok]
}

// hasToken reports whether the sorted hashes toks (tokens) hold h.
func hasToken(toks []byte, h uint64) bool {
	lo, hi := 0, len(toks)/8
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch v := binary.LittleEndian.Uint64(toks[8*mid:]); {
		case v == h:
			return true
		case v < h:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return false
}

// alloc reserves n bytes of arena.
func (pb *projBuf) alloc(n int) (page, off uint32, b []byte) {
	if len(pb.pages) == 0 || pb.used+n > len(pb.pages[len(pb.pages)-1]) {
		pb.pages = append(pb.pages, make([]byte, max(arenaPage, n)))
		pb.bytes += int64(max(arenaPage, n)) + 24
		pb.used = 0
	}
	p := len(pb.pages) - 1
	b = pb.pages[p][pb.used : pb.used+n : pb.used+n]
	off = uint32(pb.used)
	pb.used += n
	return uint32(p), off, b
}

// tableEntry is the heap one entry of a lookup table and its map key hold.
const tableEntry = 96

func (pb *projBuf) serviceIndex(s string) uint32 {
	if i, ok := pb.svcIdx[s]; ok {
		return i
	}
	s = strings.Clone(s) // not the request's memory
	i := uint32(len(pb.services))
	pb.svcIdx[s] = i
	pb.services = append(pb.services, s)
	pb.bytes += int64(len(s)) + tableEntry
	return i
}

// resourceIndex numbers a resource by its encoding (lp protobuf, lp schema
// URL), decoding it once from that encoding for queries.
func (pb *projBuf) resourceIndex(enc []byte) (uint32, error) {
	if i, ok := pb.resIdx[string(enc)]; ok {
		return i, nil
	}
	d := &dec{b: enc}
	proto, url := d.lp("resource"), d.lp("resource schema URL")
	if d.err != nil {
		return 0, d.err
	}
	r, err := otlp.DecodeResourceProto(slices.Clone(proto))
	if err != nil {
		return 0, err
	}
	r.SchemaURL = string(url)
	i := uint32(len(pb.resEnc))
	pb.resIdx[string(enc)] = i
	pb.resEnc = append(pb.resEnc, slices.Clone(enc))
	pb.resources = append(pb.resources, r)
	pb.bytes += 3*int64(len(enc)) + 4*tableEntry
	return i, nil
}

func (pb *projBuf) scopeIndex(enc []byte) (uint32, error) {
	if i, ok := pb.scopeIdx[string(enc)]; ok {
		return i, nil
	}
	d := &dec{b: enc}
	proto, url := d.lp("scope"), d.lp("scope schema URL")
	if d.err != nil {
		return 0, d.err
	}
	sc, err := otlp.DecodeScopeProto(slices.Clone(proto))
	if err != nil {
		return 0, err
	}
	sc.SchemaURL = string(url)
	i := uint32(len(pb.scopeEnc))
	pb.scopeIdx[string(enc)] = i
	pb.scopeEnc = append(pb.scopeEnc, slices.Clone(enc))
	pb.scopes = append(pb.scopes, sc)
	pb.bytes += 3*int64(len(enc)) + 4*tableEntry
	return i, nil
}

// encodeResource appends r's table entry (lp protobuf Resource, lp schema
// URL) to b, encoding the message in msg (returned for reuse).
func encodeResource(b, msg []byte, r *model.Resource) ([]byte, []byte) {
	r = orEmptyRes(r)
	msg = otlp.AppendResourceProto(msg[:0], r)
	return appendLPString(appendLP(b, msg), r.SchemaURL), msg
}

func encodeScope(b, msg []byte, s *model.Scope) ([]byte, []byte) {
	s = orEmptyScope(s)
	msg = otlp.AppendScopeProto(msg[:0], s)
	return appendLPString(appendLP(b, msg), s.SchemaURL), msg
}

func appendLPString(b []byte, v string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// tables numbers the resources and scopes of one request in a buffer: by
// pointer, as its decoder shares them, and else by encoding (a request may
// repeat a resource in several ResourceLogs), which is looked up without
// copying it.
type tables struct {
	pb           *projBuf
	res          map[*model.Resource]uint32
	scopes       map[*model.Scope]uint32
	scratch, msg []byte
}

func (pb *projBuf) tables() *tables {
	return &tables{pb: pb, res: map[*model.Resource]uint32{}, scopes: map[*model.Scope]uint32{}}
}

func (t *tables) of(r *model.LogRecord) (res, scope uint32, err error) {
	res, ok := t.res[r.Resource]
	if !ok {
		t.scratch, t.msg = encodeResource(t.scratch[:0], t.msg, r.Resource)
		if res, err = t.pb.resourceIndex(t.scratch); err != nil {
			return 0, 0, err
		}
		t.res[r.Resource] = res
	}
	scope, ok = t.scopes[r.Scope]
	if !ok {
		t.scratch, t.msg = encodeScope(t.scratch[:0], t.msg, r.Scope)
		if scope, err = t.pb.scopeIndex(t.scratch); err != nil {
			return 0, 0, err
		}
		t.scopes[r.Scope] = scope
	}
	return res, scope, nil
}

// push appends a decoded record, its sequence number and its sorted word
// hashes (nil: computed here).
func (pb *projBuf) push(t *tables, r *model.LogRecord, seq uint64, toks []uint64) error {
	res, scope, err := t.of(r)
	if err != nil {
		return err
	}
	if toks == nil {
		toks = recordHashes(r)
	}
	pb.scratch = otlp.AppendLogPayloadProto(pb.scratch[:0], r)
	rw := row{time: r.TimeUnixNano, observed: r.ObservedTimeUnixNano, seq: seq, traceID: r.TraceID, spanID: r.SpanID,
		severity: r.SeverityNumber, service: pb.serviceIndex(r.Service), res: res, scope: scope}
	pb.place(&rw, pb.scratch, toks, nil)
	return nil
}

// place copies a record's payload and word hashes (toks, or tokBytes when
// toks is nil) into the arena and appends its row.
func (pb *projBuf) place(rw *row, payload []byte, toks []uint64, tokBytes []byte) {
	nTok := len(toks)
	if toks == nil {
		nTok = len(tokBytes) / 8
	}
	page, off, b := pb.alloc(len(payload) + 8*nTok)
	n := copy(b, payload)
	if toks != nil {
		for _, h := range toks {
			binary.LittleEndian.PutUint64(b[n:], h)
			n += 8
		}
	} else {
		copy(b[n:], tokBytes)
	}
	rw.page, rw.off, rw.payLen, rw.nTok = page, off, uint32(len(payload)), uint32(nTok)
	if pb.n == len(pb.chunks)*chunkRecords {
		pb.chunks = append(pb.chunks, make([]row, chunkRecords))
		pb.bytes += chunkRecords*rowBytes + 24
	}
	*pb.row(pb.n) = *rw
	pb.n++
	if pb.n%chunkRecords == 0 {
		pb.summarise()
	}
}

// copyRow appends row i of src (another buffer) to pb.
func (pb *projBuf) copyRow(src *projBuf, i int) error {
	rw := *src.row(i)
	var err error
	rw.service = pb.serviceIndex(src.services[rw.service])
	if rw.res, err = pb.resourceIndex(src.resEnc[rw.res]); err != nil {
		return err
	}
	if rw.scope, err = pb.scopeIndex(src.scopeEnc[rw.scope]); err != nil {
		return err
	}
	pb.place(&rw, src.payload(src.row(i)), nil, src.tokens(src.row(i)))
	return nil
}

// keep is a new buffer with the rows of pb that keep accepts (a filter over
// the row and its record's sequence number), in order.
func (pb *projBuf) keep(accept func(r *row) bool) (*projBuf, error) {
	out := newProjBuf()
	for i := range pb.n {
		if accept(pb.row(i)) {
			if err := out.copyRow(pb, i); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// record decodes buffered row r.
func (pb *projBuf) record(r *row) (model.LogRecord, error) {
	rec := model.LogRecord{TimeUnixNano: r.time, ObservedTimeUnixNano: r.observed, SeverityNumber: r.severity,
		TraceID: r.traceID, SpanID: r.spanID, Resource: pb.resources[r.res], Scope: pb.scopes[r.scope],
		Service: pb.services[r.service]}
	if err := otlp.DecodeLogPayloadProto(pb.payload(r), &rec); err != nil {
		// The buffer encoded it: this is a bug, not damage on disk.
		return model.LogRecord{}, fmt.Errorf("logstore: a buffered record no longer decodes (a bug): %w", err)
	}
	return rec, nil
}

// order is the rows accept keeps (nil: all), by time then sequence number:
// the order of a segment.
func (pb *projBuf) order(accept func(r *row) bool) []int32 {
	out := make([]int32, 0, pb.n)
	for i := range pb.n {
		if accept == nil || accept(pb.row(i)) {
			out = append(out, int32(i))
		}
	}
	slices.SortFunc(out, func(a, b int32) int {
		ra, rb := pb.row(int(a)), pb.row(int(b))
		if c := cmp.Compare(ra.recTime(), rb.recTime()); c != 0 {
			return c
		}
		return cmp.Compare(ra.seq, rb.seq)
	})
	return out
}

// summarise adds the summary of the next full chunk.
func (pb *projBuf) summarise() {
	rows := pb.chunks[len(pb.sums)]
	sum := chunkSum{minT: rows[0].recTime(), minSev: rows[0].severity, maxSev: rows[0].severity}
	nTok, nTrace := 0, 0
	for j := range rows {
		nTok += int(rows[j].nTok)
		if !rows[j].traceID.IsZero() {
			nTrace++
		}
	}
	sum.tokens, sum.traces = newBloom(nTok), newBloom(nTrace)
	for j := range rows {
		r := &rows[j]
		t := r.recTime()
		sum.minT, sum.maxT = min(sum.minT, t), max(sum.maxT, t)
		sum.minSev, sum.maxSev = min(sum.minSev, r.severity), max(sum.maxSev, r.severity)
		if svc := pb.services[r.service]; !slices.Contains(sum.services, svc) {
			sum.services = append(sum.services, svc)
		}
		if !r.traceID.IsZero() {
			sum.traces.add(traceHash(r.traceID))
		}
		toks := pb.tokens(r)
		for k := 0; k < len(toks); k += 8 {
			sum.tokens.add(binary.LittleEndian.Uint64(toks[k:]))
		}
	}
	pb.sums = append(pb.sums, sum)
	pb.bytes += 8*int64(len(sum.tokens)+len(sum.traces)) + 16*int64(len(sum.services)) + 160
}

// chunkMayMatch prunes a chunk by its summary, as blockMayMatch a block.
func (c *compiled) chunkMayMatch(m *chunkSum) bool {
	return c.blockMayMatch(&blockMeta{minT: m.minT, maxT: m.maxT, minSev: m.minSev, maxSev: m.maxSev,
		services: m.services, traces: m.traces, tokens: m.tokens})
}
