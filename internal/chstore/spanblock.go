package chstore

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// spanBlock is the block of one insert into spans, built column by column:
// the scalar columns as typed slices handed to the driver whole (no value
// boxed per row), the attribute arrays appended row by row from scratch
// slices reused for every span, and the bodies encoded into one buffer.
// Row by row through batch.Append, each span cost 42 boxed values, ten
// attribute slices and an otlp.EncodeProto call of its own (which groups
// one span by resource and scope through maps): most of the Go side's
// processor time of an insert (BenchmarkIngest's profile).
type spanBlock struct {
	strs    [spanStringCols][]string // project, ids, service, ... in spanStringCols order
	u64s    [4][]uint64              // start, end, duration, ingested
	i32s    [2][]int32               // kind, status
	i64s    [6][]int64               // the five token counts, the cost
	u8s     [3][]uint8               // llm, llm_cost_source, llm_counted
	ttft    []uint64
	bodies  []byte // every body, back to back
	ends    []int  // the end of each row's body in bodies
	scratch attrCols
	arrays  [2][5]driver.BatchColumn // each scope's attribute array columns (batch.Column allocates)
	bodyEnc bodyEncoder
}

// Indexes of the string columns in spanBlock.strs.
const (
	strProject = iota
	strTraceID
	strSpanID
	strParentID
	strService
	strName
	strStatusMessage
	strLLMProvider // the eight LLM strings follow in spanColumns order
	spanStringCols = strLLMProvider + 8
)

// Column positions in spanColumns of each group of spanBlock.
var (
	spanStrPos  = [spanStringCols]int{0, 1, 2, 3, 8, 9, 12, 24, 25, 26, 27, 28, 29, 30, 31}
	spanU64Pos  = [4]int{4, 5, 6, 7}
	spanI32Pos  = [2]int{10, 11}
	spanI64Pos  = [6]int{32, 33, 34, 35, 36, 37}
	spanU8Pos   = [3]int{23, 38, 40}
	spanTTFTPos = 39
	spanAttrPos = [2]int{13, 18} // the first of each scope's five arrays
	spanBodyPos = 41
)

var noLLM model.LLM

// spanBlocks keeps spanBlocks between inserts, so that their slices and
// body buffer are not grown again from nothing for every insert.
var spanBlocks = sync.Pool{New: func() any { return new(spanBlock) }}

// reset empties b for the next insert, keeping its capacity but no
// reference to the spans, resources or batch of the last one.
func (b *spanBlock) reset() {
	for i := range b.strs {
		clear(b.strs[i])
		b.strs[i] = b.strs[i][:0]
	}
	for i := range b.u64s {
		b.u64s[i] = b.u64s[i][:0]
	}
	for i := range b.i32s {
		b.i32s[i] = b.i32s[i][:0]
	}
	for i := range b.i64s {
		b.i64s[i] = b.i64s[i][:0]
	}
	for i := range b.u8s {
		b.u8s[i] = b.u8s[i][:0]
	}
	b.ttft, b.bodies, b.ends = b.ttft[:0], b.bodies[:0], b.ends[:0]
	clear(b.scratch.keys[:cap(b.scratch.keys)])
	clear(b.scratch.str[:cap(b.scratch.str)])
	b.arrays = [2][5]driver.BatchColumn{}
	clear(b.bodyEnc.res)
	clear(b.bodyEnc.scopes)
}

// add appends sp's row: its scalars and body to b, its attribute arrays to
// the batch's columns at once.
func (b *spanBlock) add(sb driver.Batch, project string, sp *model.Span, ingested uint64) error {
	l, has, counted := sp.LLM, uint8(0), uint8(0)
	if l != nil {
		has = 1
		if l.Counted {
			counted = 1
		}
	} else {
		l = &noLLM
	}
	for i, v := range [spanStringCols]string{project, idString(sp.TraceID[:]), idString(sp.SpanID[:]), idString(sp.ParentSpanID[:]),
		sp.Service, sp.Name, sp.StatusMessage,
		l.Provider, l.RequestModel, l.ResponseModel, l.Operation, l.SessionID, l.UserID, l.AgentName, l.ToolName} {
		b.strs[i] = append(b.strs[i], v)
	}
	for i, v := range [4]uint64{sp.StartTimeUnixNano, sp.EndTimeUnixNano, sp.Duration(), ingested} {
		b.u64s[i] = append(b.u64s[i], v)
	}
	b.i32s[0] = append(b.i32s[0], int32(sp.Kind))
	b.i32s[1] = append(b.i32s[1], int32(sp.StatusCode))
	for i, v := range [6]int64{l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheCreationTokens, l.ReasoningTokens, l.CostNanoUSD} {
		b.i64s[i] = append(b.i64s[i], v)
	}
	b.u8s[0] = append(b.u8s[0], has)
	b.u8s[1] = append(b.u8s[1], uint8(l.CostSource))
	b.u8s[2] = append(b.u8s[2], counted)
	b.ttft = append(b.ttft, l.TimeToFirstTokenNanos)
	var res []model.KeyValue
	if sp.Resource != nil {
		res = sp.Resource.Attributes
	}
	if b.arrays[0][0] == nil {
		for scope, at := range spanAttrPos {
			for i := range b.arrays[scope] {
				b.arrays[scope][i] = sb.Column(at + i)
			}
		}
	}
	for scope, kvs := range [2][]model.KeyValue{sp.Attributes, res} {
		b.scratch.fill(kvs)
		for i, v := range [5]any{b.scratch.keys, b.scratch.types, b.scratch.str, b.scratch.ints, b.scratch.floats} {
			if err := b.arrays[scope][i].AppendRow(v); err != nil {
				return fmt.Errorf("column %d: %w", spanAttrPos[scope]+i, err)
			}
		}
	}
	b.bodies = b.bodyEnc.append(b.bodies, sp)
	b.ends = append(b.ends, len(b.bodies))
	return nil
}

// idString is an id's bytes as a string without a copy: the span outlives
// the insert, and the driver copies the value into its column buffer.
func idString(id []byte) string { return unsafe.String(unsafe.SliceData(id), len(id)) }

// flush hands the scalar columns and the bodies to the batch.
func (b *spanBlock) flush(sb driver.Batch) error {
	bodies := make([]string, len(b.ends))
	start := 0
	for i, end := range b.ends {
		// Not copied either: the driver copies each value at Append, and
		// b.bodies does not change before.
		bodies[i] = unsafe.String(unsafe.SliceData(b.bodies[start:end]), end-start)
		start = end
	}
	var err error
	col := func(pos int, v any) {
		if err == nil {
			if err = sb.Column(pos).Append(v); err != nil {
				err = fmt.Errorf("column %d: %w", pos, err)
			}
		}
	}
	col(spanBodyPos, bodies)
	col(spanTTFTPos, b.ttft)
	for i, pos := range spanStrPos {
		col(pos, b.strs[i])
	}
	for i, pos := range spanU64Pos {
		col(pos, b.u64s[i])
	}
	for i, pos := range spanI32Pos {
		col(pos, b.i32s[i])
	}
	for i, pos := range spanI64Pos {
		col(pos, b.i64s[i])
	}
	for i, pos := range spanU8Pos {
		col(pos, b.u8s[i])
	}
	return err
}

// fill sets c to kvs's arrays, reusing c's slices.
func (c *attrCols) fill(kvs []model.KeyValue) {
	c.keys, c.types, c.str, c.ints, c.floats = c.keys[:0], c.types[:0], c.str[:0], c.ints[:0], c.floats[:0]
	for i := range kvs {
		v := &kvs[i].Value
		typ, str, n, f := uint8(v.Type), v.AsString(), int64(0), 0.0
		switch v.Type {
		case model.ValueInt, model.ValueBool:
			n = v.Int
		case model.ValueDouble:
			f = v.Double
		}
		if len(str) > maxHotValue {
			typ, str = typeLong, ""
		}
		c.keys = append(c.keys, kvs[i].Key)
		c.types = append(c.types, typ)
		c.str = append(c.str, str)
		c.ints = append(c.ints, n)
		c.floats = append(c.floats, f)
	}
}

// bodyEncoder writes a span's body: what otlp.EncodeProto writes for the
// span alone (one ResourceSpans holding one ScopeSpans holding the span),
// byte for byte (TestBodyEqualsEncodeProto). The resource's and the scope's
// parts are encoded once per distinct pointer (the spans of a request share
// them) and the span's own message is cut out of otlp.EncodeProto of a copy
// without them, which spares grouping the span by resource and scope.
type bodyEncoder struct {
	res    map[*model.Resource][2][]byte // the fields before and after the ScopeSpans
	scopes map[*model.Scope][2][]byte    // the fields before and after the span
	one    []model.Span
}

func (e *bodyEncoder) append(dst []byte, sp *model.Span) []byte {
	if e.res == nil {
		e.res, e.scopes, e.one = map[*model.Resource][2][]byte{}, map[*model.Scope][2][]byte{}, make([]model.Span, 1)
	}
	rp, ok := e.res[sp.Resource]
	if !ok {
		if r := sp.Resource; r != nil {
			if b := otlp.AppendResourceProto(nil, r); len(b) > 0 {
				rp[0] = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
			}
			rp[1] = appendStringField(nil, 3, r.SchemaURL)
		}
		e.res[sp.Resource] = rp
	}
	sc, ok := e.scopes[sp.Scope]
	if !ok {
		if s := sp.Scope; s != nil {
			if b := otlp.AppendScopeProto(nil, s); len(b) > 0 {
				sc[0] = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
			}
			sc[1] = appendStringField(nil, 3, s.SchemaURL)
		}
		e.scopes[sp.Scope] = sc
	}
	e.one[0] = *sp
	e.one[0].Resource, e.one[0].Scope = nil, nil
	msg := spanMessage(otlp.EncodeProto(e.one))
	e.one[0] = model.Span{}
	ss := len(sc[0]) + 1 + protowire.SizeBytes(len(msg)) + len(sc[1])
	rs := len(rp[0]) + 1 + protowire.SizeBytes(ss) + len(rp[1])
	dst = protowire.AppendVarint(protowire.AppendTag(dst, 1, protowire.BytesType), uint64(rs))
	dst = append(dst, rp[0]...)
	dst = protowire.AppendVarint(protowire.AppendTag(dst, 2, protowire.BytesType), uint64(ss))
	dst = append(dst, sc[0]...)
	dst = protowire.AppendBytes(protowire.AppendTag(dst, 2, protowire.BytesType), msg)
	dst = append(dst, sc[1]...)
	return append(dst, rp[1]...)
}

// spanMessage cuts the span message out of otlp.EncodeProto of one span
// without resource or scope: resource_spans (1) > scope_spans (2) > spans
// (2), each the first and only field of its parent. It panics on anything
// else: the encoder broke that invariant.
func spanMessage(b []byte) []byte {
	for _, want := range []protowire.Number{1, 2, 2} {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != want || typ != protowire.BytesType {
			panic(fmt.Sprintf("chstore: otlp.EncodeProto of one bare span does not open with field %d", want))
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 || n+m != len(b) {
			panic("chstore: otlp.EncodeProto of one bare span holds more than one message")
		}
		b = v
	}
	return b
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}
