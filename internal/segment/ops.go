package segment

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/sketch"
)

// Service aggregates summarise every span of a block (not only LLM spans)
// for the service pages: request rate, errors and latency per service, span
// name and minute (OpsEntry), and error groups (ErrEntry). Like the LLM
// aggregates they are stored per block and rolled up per project, so a
// question over a whole store reads aggregates, not spans.

// OpsKey is the grouping key of the RED aggregates.
type OpsKey struct {
	Service string
	Name    string // span name (the operation)
	Minute  int64  // span start, unix seconds, truncated to the minute
}

// OpsMeasures are the counts and the latency sketch of the spans of one key.
type OpsMeasures struct {
	Spans   int64
	Errors  int64          // spans with StatusCode == model.StatusError
	Latency *sketch.Sketch // span durations, ns; never nil when Spans > 0
}

// OpsEntry is one key's measures.
type OpsEntry struct {
	Key OpsKey
	M   OpsMeasures
}

// ErrKey groups the spans with an error status: by service, span name,
// exception type and normalised message (NormalizeErrorMessage).
type ErrKey struct {
	Service string
	Name    string
	Type    string // exception.type of the span's first exception event, else attribute error.type, else ""
	Message string // status message, else exception.message, normalised
}

// ErrMeasures count one error group and keep its latest span as a sample.
type ErrMeasures struct {
	Count       int64
	First, Last uint64 // smallest and largest span start, unix ns
	Trace       model.TraceID
	Span        model.SpanID // the span that started at Last (the smallest ids among equals)
}

// Merge adds o to m: counts add, the time range widens, and the sample is
// the later span.
func (m *ErrMeasures) Merge(o *ErrMeasures) {
	if o.Count == 0 {
		return
	}
	if m.Count == 0 {
		*m = *o
		return
	}
	m.Count += o.Count
	m.First = min(m.First, o.First)
	if o.Last > m.Last || (o.Last == m.Last && cmp.Or(slices.Compare(o.Trace[:], m.Trace[:]), slices.Compare(o.Span[:], m.Span[:])) < 0) {
		m.Last, m.Trace, m.Span = o.Last, o.Trace, o.Span
	}
}

// ErrEntry is one error group.
type ErrEntry struct {
	Key ErrKey
	M   ErrMeasures
}

// OpsAggregates are the service aggregates of a block or a project rollup,
// each list sorted by key.
type OpsAggregates struct {
	Ops    []OpsEntry
	Errors []ErrEntry
}

func compareOpsKeys(a, b *OpsKey) int {
	return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Name, b.Name), cmp.Compare(a.Minute, b.Minute))
}

func compareErrKeys(a, b *ErrKey) int {
	return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Name, b.Name),
		strings.Compare(a.Type, b.Type), strings.Compare(a.Message, b.Message))
}

// ErrKeyOf returns the error-group key of a span (whatever its status).
func ErrKeyOf(s *model.Span) ErrKey {
	typ, msg := s.ErrorGroup()
	return ErrKey{Service: s.Service, Name: s.Name, Type: typ, Message: msg}
}

// OpsAggregator computes the service aggregates of a set of spans (a block
// being written, the write buffer, or a block read row by row). The zero
// value is not usable; call NewOpsAggregator. Not safe for concurrent use.
type OpsAggregator struct {
	ops  map[OpsKey]*OpsMeasures
	errs map[ErrKey]*ErrMeasures
	free []*OpsMeasures // emptied by Recycle, with their sketches' buckets
	// recent caches ops' entries, direct-mapped by span name and minute:
	// a block holds few keys, and comparing one is cheaper than hashing it.
	recent [opsRecentSlots]struct {
		k OpsKey
		m *OpsMeasures
	}
}

// opsRecentSlots is the size of OpsAggregator.recent (a power of two).
const opsRecentSlots = 16

// NewOpsAggregator returns an empty OpsAggregator.
func NewOpsAggregator() *OpsAggregator {
	return &OpsAggregator{ops: map[OpsKey]*OpsMeasures{}, errs: map[ErrKey]*ErrMeasures{}}
}

// Add counts s.
func (a *OpsAggregator) Add(s *model.Span) {
	k := OpsKey{Service: s.Service, Name: s.Name, Minute: int64(s.StartTimeUnixNano/1e9) / 60 * 60}
	r := &a.recent[(strSlot(s.Name)+int(k.Minute/60))&(opsRecentSlots-1)]
	m := r.m
	if m == nil || r.k != k {
		m = a.ops[k]
		if m == nil {
			if n := len(a.free); n > 0 {
				m, a.free = a.free[n-1], a.free[:n-1]
			} else {
				m = &OpsMeasures{Latency: sketch.New()}
			}
			a.ops[k] = m
		}
		r.k, r.m = k, m
	}
	m.Spans++
	m.Latency.Add(s.Duration())
	if s.StatusCode != model.StatusError {
		return
	}
	m.Errors++
	ek := ErrKeyOf(s)
	em := a.errs[ek]
	if em == nil {
		em = &ErrMeasures{}
		a.errs[ek] = em
	}
	em.Merge(&ErrMeasures{Count: 1, First: s.StartTimeUnixNano, Last: s.StartTimeUnixNano, Trace: s.TraceID, Span: s.SpanID})
}

// Aggregates returns what was added, each list sorted by key. The entries
// own their sketches; the OpsAggregator must not be used afterwards except
// for Reset.
func (a *OpsAggregator) Aggregates() OpsAggregates {
	var out OpsAggregates
	for k, m := range a.ops {
		out.Ops = append(out.Ops, OpsEntry{Key: k, M: *m})
	}
	for k, m := range a.errs {
		out.Errors = append(out.Errors, ErrEntry{Key: k, M: *m})
	}
	slices.SortFunc(out.Ops, func(x, y OpsEntry) int { return compareOpsKeys(&x.Key, &y.Key) })
	slices.SortFunc(out.Errors, func(x, y ErrEntry) int { return compareErrKeys(&x.Key, &y.Key) })
	return out
}

// Reset empties the OpsAggregator for reuse.
func (a *OpsAggregator) Reset() {
	clear(a.ops)
	clear(a.errs)
	clear(a.recent[:])
}

// Recycle empties the OpsAggregator and reuses its measures and sketches
// for what is added next: the entries of an earlier Aggregates call must no
// longer be in use (the segment writer encodes and clones them first).
func (a *OpsAggregator) Recycle() {
	for _, m := range a.ops {
		m.Spans, m.Errors = 0, 0
		m.Latency.Reset()
		a.free = append(a.free, m)
	}
	a.Reset()
}

// opsRollup merges the aggregates of several blocks by key.
type opsRollup struct {
	ops  map[OpsKey]int
	errs map[ErrKey]int
	agg  OpsAggregates
}

func newOpsRollup() *opsRollup { return &opsRollup{ops: map[OpsKey]int{}, errs: map[ErrKey]int{}} }

// add merges a; its sketches are cloned, and its strings are copied (they
// may point into a decoded block).
func (r *opsRollup) add(a *OpsAggregates) {
	for i := range a.Ops {
		e := &a.Ops[i]
		if j, ok := r.ops[e.Key]; ok {
			m := &r.agg.Ops[j].M
			m.Spans += e.M.Spans
			m.Errors += e.M.Errors
			m.Latency.Merge(e.M.Latency)
			continue
		}
		k := OpsKey{Service: strings.Clone(e.Key.Service), Name: strings.Clone(e.Key.Name), Minute: e.Key.Minute}
		r.ops[k] = len(r.agg.Ops)
		r.agg.Ops = append(r.agg.Ops, OpsEntry{Key: k, M: OpsMeasures{Spans: e.M.Spans, Errors: e.M.Errors, Latency: e.M.Latency.Clone()}})
	}
	for i := range a.Errors {
		e := &a.Errors[i]
		if j, ok := r.errs[e.Key]; ok {
			r.agg.Errors[j].M.Merge(&e.M)
			continue
		}
		k := ErrKey{Service: strings.Clone(e.Key.Service), Name: strings.Clone(e.Key.Name),
			Type: strings.Clone(e.Key.Type), Message: strings.Clone(e.Key.Message)}
		r.errs[k] = len(r.agg.Errors)
		r.agg.Errors = append(r.agg.Errors, ErrEntry{Key: k, M: e.M})
	}
}

// take returns the rollup, sorted, and empties r.
func (r *opsRollup) take() OpsAggregates {
	out := r.agg
	slices.SortFunc(out.Ops, func(x, y OpsEntry) int { return compareOpsKeys(&x.Key, &y.Key) })
	slices.SortFunc(out.Errors, func(x, y ErrEntry) int { return compareErrKeys(&x.Key, &y.Key) })
	r.agg = OpsAggregates{}
	clear(r.ops)
	clear(r.errs)
	return out
}

// encodeOpsPart encodes block or rollup aggregates:
//
//	uvarint n strings | n x str                          (part-local dictionary)
//	uvarint n ops | n x (uvarint service, name) | n x varint minute |
//	n x (uvarint spans | uvarint errors) | n x str latency sketch
//	uvarint n errors | n x (uvarint service, name, type, message) |
//	n x (uvarint count | uvarint first | uvarint last - first) | n x (16-byte trace id | 8-byte span id)
func encodeOpsPart(dst []byte, a *OpsAggregates) []byte {
	ids := map[string]uint64{}
	var table []string
	id := func(s string) uint64 {
		i, ok := ids[s]
		if !ok {
			i = uint64(len(table))
			ids[s] = i
			table = append(table, s)
		}
		return i
	}
	body := appendUvarints(nil, uint64(len(a.Ops)))
	for i := range a.Ops {
		body = appendUvarints(body, id(a.Ops[i].Key.Service), id(a.Ops[i].Key.Name))
	}
	for i := range a.Ops {
		body = appendVarints(body, a.Ops[i].Key.Minute)
	}
	for i := range a.Ops {
		body = appendUvarints(body, uint64(a.Ops[i].M.Spans), uint64(a.Ops[i].M.Errors))
	}
	var sk []byte
	for i := range a.Ops {
		sk = a.Ops[i].M.Latency.AppendBinary(sk[:0])
		body = appendStr(body, string(sk))
	}
	body = appendUvarints(body, uint64(len(a.Errors)))
	for i := range a.Errors {
		k := &a.Errors[i].Key
		body = appendUvarints(body, id(k.Service), id(k.Name), id(k.Type), id(k.Message))
	}
	for i := range a.Errors {
		m := &a.Errors[i].M
		body = appendUvarints(body, uint64(m.Count), m.First, m.Last-m.First)
	}
	for i := range a.Errors {
		body = append(body, a.Errors[i].M.Trace[:]...)
		body = append(body, a.Errors[i].M.Span[:]...)
	}
	dst = appendUvarints(dst, uint64(len(table)))
	for _, s := range table {
		dst = appendStr(dst, s)
	}
	return append(dst, body...)
}

// decodeOpsPart parses and validates a part. Strings are copied out of s.
func decodeOpsPart(s string) (OpsAggregates, error) {
	d := dec{s: s}
	table := d.strs()
	if d.err != nil {
		return OpsAggregates{}, d.err
	}
	interned := make([]string, len(table))
	for i, t := range table {
		interned[i] = strings.Clone(t)
	}
	str := func() string {
		j := d.index(len(interned))
		if d.err != nil {
			return ""
		}
		return interned[j]
	}
	var a OpsAggregates
	a.Ops = make([]OpsEntry, d.count(5))
	for i := range a.Ops {
		a.Ops[i].Key.Service, a.Ops[i].Key.Name = str(), str()
	}
	for i := range a.Ops {
		a.Ops[i].Key.Minute = d.varint()
		if d.err == nil && a.Ops[i].Key.Minute%60 != 0 {
			return OpsAggregates{}, fmt.Errorf("ops entry %d: minute %d is not a whole minute", i, a.Ops[i].Key.Minute)
		}
		if i > 0 && d.err == nil && compareOpsKeys(&a.Ops[i-1].Key, &a.Ops[i].Key) >= 0 {
			return OpsAggregates{}, fmt.Errorf("ops entry %d: keys not in increasing order", i)
		}
	}
	for i := range a.Ops {
		m := &a.Ops[i].M
		m.Spans, m.Errors = d.i64(), d.i64()
		if d.err == nil && (m.Spans == 0 || m.Errors > m.Spans) {
			return OpsAggregates{}, fmt.Errorf("ops entry %d: counts out of range", i)
		}
	}
	for i := range a.Ops {
		b := d.str()
		if d.err != nil {
			return OpsAggregates{}, fmt.Errorf("ops entry %d sketch: %w", i, d.err)
		}
		sk, err := sketch.Decode([]byte(b))
		if err == nil && sk.Count() != uint64(a.Ops[i].M.Spans) {
			err = fmt.Errorf("latency sketch counts %d values for %d spans", sk.Count(), a.Ops[i].M.Spans)
		}
		if err != nil {
			return OpsAggregates{}, fmt.Errorf("ops entry %d: %w", i, err)
		}
		a.Ops[i].M.Latency = sk
	}
	a.Errors = make([]ErrEntry, d.count(28))
	for i := range a.Errors {
		k := &a.Errors[i].Key
		k.Service, k.Name, k.Type, k.Message = str(), str(), str(), str()
		if i > 0 && d.err == nil && compareErrKeys(&a.Errors[i-1].Key, k) >= 0 {
			return OpsAggregates{}, fmt.Errorf("error group %d: keys not in increasing order", i)
		}
	}
	for i := range a.Errors {
		m := &a.Errors[i].M
		m.Count = d.i64()
		m.First = d.uvarint()
		m.Last = m.First + d.uvarint()
		if d.err == nil && (m.Count == 0 || m.Last < m.First) {
			return OpsAggregates{}, fmt.Errorf("error group %d: count or times out of range", i)
		}
	}
	for i := range a.Errors {
		m := &a.Errors[i].M
		copy(m.Trace[:], d.fixed(16))
		copy(m.Span[:], d.fixed(8))
	}
	if d.err != nil {
		return OpsAggregates{}, d.err
	}
	if d.remaining() != 0 {
		return OpsAggregates{}, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return a, nil
}
