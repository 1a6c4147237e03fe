package segment

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/sketch"
)

// AggKey is the grouping key of the partial LLM aggregates: the LLM fields
// every stats query groups or filters by, and the hour the span started.
type AggKey struct {
	Model     string // model.LLM.Model(): response model, else request model
	Provider  string
	Service   string // model.Span.Service
	Operation string
	Session   string
	User      string
	Agent     string
	Hour      int64 // span start, unix seconds, truncated to the hour
}

// clone returns k with its strings copied.
func (k AggKey) clone() AggKey {
	for _, s := range []*string{&k.Model, &k.Provider, &k.Service, &k.Operation, &k.Session, &k.User, &k.Agent} {
		*s = strings.Clone(*s)
	}
	return k
}

func compareAggKeys(a, b *AggKey) int {
	for _, c := range [...]int{cmp.Compare(a.Model, b.Model), cmp.Compare(a.Provider, b.Provider),
		cmp.Compare(a.Service, b.Service), cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Session, b.Session),
		cmp.Compare(a.User, b.User), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Hour, b.Hour)} {
		if c != 0 {
			return c
		}
	}
	return 0
}

// AggMeasures are the exact counts and sums, and the latency sketches, of
// the LLM spans of one key. Token and cost sums cover only Counted spans and
// only reported (non-negative) values, so a parent agent span that repeats
// its children's usage is not counted twice. Sums saturate at math.MaxInt64
// rather than wrap (only absurd client-sent counts can reach it).
type AggMeasures struct {
	Spans               int64 // spans with LLM fields
	Errors              int64 // of which StatusCode == model.StatusError
	Counted             int64 // of which LLM.Counted
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	ReasoningTokens     int64
	CostNanoUSD         int64
	// Traces counts distinct trace ids per block. A rollup (Merge) sums
	// them, so a trace spread over several blocks counts once per block.
	Traces   int64
	MinStart uint64         // smallest span start, unix ns
	MaxEnd   uint64         // largest span end, unix ns
	Latency  *sketch.Sketch // span durations (model.Span.Duration), ns; never nil when Spans > 0
	TTFT     *sketch.Sketch // non-zero LLM.TimeToFirstTokenNanos; nil when no span reported one
}

// Merge adds o's counts, sums and sketches to m (Traces are summed). o's
// sketches are not modified or shared.
func (m *AggMeasures) Merge(o *AggMeasures) {
	if o.Spans == 0 {
		return
	}
	if m.Spans == 0 || o.MinStart < m.MinStart {
		m.MinStart = o.MinStart
	}
	m.MaxEnd = max(m.MaxEnd, o.MaxEnd)
	m.Spans += o.Spans
	m.Errors += o.Errors
	m.Counted += o.Counted
	m.InputTokens = addSat(m.InputTokens, o.InputTokens)
	m.OutputTokens = addSat(m.OutputTokens, o.OutputTokens)
	m.CacheReadTokens = addSat(m.CacheReadTokens, o.CacheReadTokens)
	m.CacheCreationTokens = addSat(m.CacheCreationTokens, o.CacheCreationTokens)
	m.ReasoningTokens = addSat(m.ReasoningTokens, o.ReasoningTokens)
	m.CostNanoUSD = addSat(m.CostNanoUSD, o.CostNanoUSD)
	m.Traces += o.Traces
	m.Latency = mergeSketch(m.Latency, o.Latency)
	m.TTFT = mergeSketch(m.TTFT, o.TTFT)
}

func mergeSketch(dst, src *sketch.Sketch) *sketch.Sketch {
	if src == nil {
		return dst
	}
	if dst == nil {
		return src.Clone()
	}
	dst.Merge(src)
	return dst
}

// AggEntry is one key's measures.
type AggEntry struct {
	Key AggKey
	M   AggMeasures
}

// AggKeyOf returns the aggregation key of a span with LLM fields.
func AggKeyOf(s *model.Span) AggKey {
	l := s.LLM
	return AggKey{Model: l.Model(), Provider: l.Provider, Service: s.Service, Operation: l.Operation,
		Session: l.SessionID, User: l.UserID, Agent: l.AgentName,
		Hour: int64(s.StartTimeUnixNano/1e9) / 3600 * 3600}
}

type aggState struct {
	m      AggMeasures
	traces map[model.TraceID]struct{}
}

// Aggregator computes the partial LLM aggregates of a set of spans: the
// segment writer uses it for every block, and the engine can use it to
// compute the same entries from rows (its write buffer, or a block whose
// aggregates are missing or damaged). The zero value is not usable; call
// NewAggregator. Not safe for concurrent use.
type Aggregator struct {
	groups map[AggKey]*aggState
}

// NewAggregator returns an empty Aggregator.
func NewAggregator() *Aggregator { return &Aggregator{groups: make(map[AggKey]*aggState)} }

// Add counts s when it has LLM fields (s.LLM != nil); other spans are ignored.
func (a *Aggregator) Add(s *model.Span) {
	l := s.LLM
	if l == nil {
		return
	}
	k := AggKeyOf(s)
	g := a.groups[k]
	if g == nil {
		g = &aggState{traces: make(map[model.TraceID]struct{}, 1)}
		g.m.Latency = sketch.New()
		a.groups[k] = g
	}
	m := &g.m
	if m.Spans == 0 || s.StartTimeUnixNano < m.MinStart {
		m.MinStart = s.StartTimeUnixNano
	}
	m.MaxEnd = max(m.MaxEnd, s.EndTimeUnixNano)
	m.Spans++
	if s.StatusCode == model.StatusError {
		m.Errors++
	}
	if l.Counted {
		m.Counted++
		m.InputTokens = addSat(m.InputTokens, l.InputTokens)
		m.OutputTokens = addSat(m.OutputTokens, l.OutputTokens)
		m.CacheReadTokens = addSat(m.CacheReadTokens, l.CacheReadTokens)
		m.CacheCreationTokens = addSat(m.CacheCreationTokens, l.CacheCreationTokens)
		m.ReasoningTokens = addSat(m.ReasoningTokens, l.ReasoningTokens)
		m.CostNanoUSD = addSat(m.CostNanoUSD, l.CostNanoUSD)
	}
	if _, seen := g.traces[s.TraceID]; !seen {
		g.traces[s.TraceID] = struct{}{}
		m.Traces++
	}
	m.Latency.Add(s.Duration())
	if l.TimeToFirstTokenNanos != 0 {
		if m.TTFT == nil {
			m.TTFT = sketch.New()
		}
		m.TTFT.Add(l.TimeToFirstTokenNanos)
	}
}

// Entries returns the aggregates, sorted by key. The entries own their
// sketches; the Aggregator must not be used afterwards except for Reset.
func (a *Aggregator) Entries() []AggEntry {
	out := make([]AggEntry, 0, len(a.groups))
	for k, g := range a.groups {
		out = append(out, AggEntry{Key: k, M: g.m})
	}
	slices.SortFunc(out, func(x, y AggEntry) int { return compareAggKeys(&x.Key, &y.Key) })
	return out
}

// Reset empties the Aggregator for reuse.
func (a *Aggregator) Reset() { clear(a.groups) }

// MergeEntries merges entry lists (each sorted by key, as Entries and the
// Reader return them) into one sorted list, merging the measures of equal
// keys. The inputs are not modified; the result shares no sketch with them.
func MergeEntries(lists ...[]AggEntry) []AggEntry {
	idx := map[AggKey]int{}
	var out []AggEntry
	for _, l := range lists {
		for i := range l {
			j, ok := idx[l[i].Key]
			if !ok {
				j = len(out)
				idx[l[i].Key] = j
				out = append(out, AggEntry{Key: l[i].Key})
			}
			out[j].M.Merge(&l[i].M)
		}
	}
	slices.SortFunc(out, func(x, y AggEntry) int { return compareAggKeys(&x.Key, &y.Key) })
	return out
}

// encodeAggPart encodes a sorted entry list field group by field group, so
// that similar bytes sit together for zstd:
//
//	uvarint n strings | n x str                       (part-local dictionary)
//	uvarint n entries
//	n x (7 x uvarint string index: model, provider, service, operation, session, user, agent)
//	n x varint hour
//	n x (uvarint spans | uvarint errors | uvarint counted | uvarint traces)
//	n x (varint input, output, cache read, cache creation, reasoning tokens | varint cost)
//	n x (uvarint min start - hour*1e9 (wrapping) | uvarint max end - min start (wrapping))
//	n x str latency sketch
//	n x str TTFT sketch (empty = nil)
func encodeAggPart(dst []byte, entries []AggEntry) []byte {
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
	var body []byte
	for i := range entries {
		k := &entries[i].Key
		body = appendUvarints(body, id(k.Model), id(k.Provider), id(k.Service), id(k.Operation), id(k.Session),
			id(k.User), id(k.Agent))
	}
	for i := range entries {
		body = appendVarints(body, entries[i].Key.Hour)
	}
	body = appendCountColumns(body, len(entries), func(i int) *AggMeasures { return &entries[i].M })
	for i := range entries {
		m := &entries[i].M
		body = appendUvarints(body, m.MinStart-uint64(entries[i].Key.Hour)*1e9, m.MaxEnd-m.MinStart)
	}
	body = appendSketchColumns(body, len(entries), func(i int) *AggMeasures { return &entries[i].M })
	dst = appendUvarints(dst, uint64(len(table)))
	for _, s := range table {
		dst = appendStr(dst, s)
	}
	dst = appendUvarints(dst, uint64(len(entries)))
	return append(dst, body...)
}

// decodeAggPart parses and validates an entry list. Strings are copied out
// of s (callers keep entries after the part's buffer is gone).
func decodeAggPart(s string) ([]AggEntry, error) {
	d := dec{s: s}
	table := d.strs()
	n := d.count(30) // an entry takes at least 30 bytes
	if d.err != nil {
		return nil, d.err
	}
	interned := make([]string, len(table))
	for i, t := range table {
		interned[i] = string([]byte(t))
	}
	out := make([]AggEntry, n)
	for i := range out {
		k := &out[i].Key
		for _, p := range [...]*string{&k.Model, &k.Provider, &k.Service, &k.Operation, &k.Session, &k.User, &k.Agent} {
			j := d.index(len(interned))
			if d.err != nil {
				return nil, fmt.Errorf("entry %d key: %w", i, d.err)
			}
			*p = interned[j]
		}
	}
	for i := range out {
		out[i].Key.Hour = d.varint()
		if i > 0 && d.err == nil && compareAggKeys(&out[i-1].Key, &out[i].Key) >= 0 {
			return nil, fmt.Errorf("entry %d: keys not in increasing order", i)
		}
	}
	if err := decodeCountColumns(&d, len(out), func(i int) *AggMeasures { return &out[i].M }, "entry"); err != nil {
		return nil, err
	}
	for i := range out {
		m := &out[i].M
		m.MinStart = d.uvarint() + uint64(out[i].Key.Hour)*1e9
		m.MaxEnd = m.MinStart + d.uvarint()
	}
	if err := decodeSketchColumns(&d, len(out), func(i int) *AggMeasures { return &out[i].M }, "entry"); err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.remaining() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return out, nil
}

// addSat returns sum + v for v >= 0 (sum >= 0), saturating at math.MaxInt64;
// negative v ("not reported") adds nothing.
func addSat(sum, v int64) int64 {
	if v <= 0 {
		return sum
	}
	if v > math.MaxInt64-sum {
		return math.MaxInt64
	}
	return sum + v
}

func appendVarints(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
	}
	return b
}

// appendCountColumns writes the span counts of n rows, then their token and
// cost sums (read back by decodeCountColumns).
func appendCountColumns(body []byte, n int, row func(int) *AggMeasures) []byte {
	for i := range n {
		m := row(i)
		body = appendUvarints(body, uint64(m.Spans), uint64(m.Errors), uint64(m.Counted), uint64(m.Traces))
	}
	for i := range n {
		m := row(i)
		body = appendVarints(body, m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheCreationTokens,
			m.ReasoningTokens, m.CostNanoUSD)
	}
	return body
}

// appendSketchColumns writes the latency sketches of n rows, then their
// time-to-first-token sketches, empty when none (read back by
// decodeSketchColumns).
func appendSketchColumns(body []byte, n int, row func(int) *AggMeasures) []byte {
	var sk []byte
	for i := range n {
		sk = row(i).Latency.AppendBinary(sk[:0])
		body = appendStr(body, string(sk))
	}
	for i := range n {
		sk = sk[:0]
		if t := row(i).TTFT; t != nil {
			sk = t.AppendBinary(sk)
		}
		body = appendStr(body, string(sk))
	}
	return body
}

// decodeCountColumns reads the span counts of n rows, then their token and
// cost sums, checking their ranges; what names a row in errors.
func decodeCountColumns(d *dec, n int, row func(int) *AggMeasures, what string) error {
	for i := range n {
		m := row(i)
		m.Spans, m.Errors, m.Counted, m.Traces = d.i64(), d.i64(), d.i64(), d.i64()
		if d.err == nil && (m.Spans == 0 || m.Errors > m.Spans || m.Counted > m.Spans || m.Traces == 0 || m.Traces > m.Spans) {
			return fmt.Errorf("%s %d: counts out of range", what, i)
		}
	}
	for i := range n {
		m := row(i)
		m.InputTokens, m.OutputTokens = d.varint(), d.varint()
		m.CacheReadTokens, m.CacheCreationTokens, m.ReasoningTokens = d.varint(), d.varint(), d.varint()
		m.CostNanoUSD = d.varint()
		if d.err == nil && min(m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheCreationTokens, m.ReasoningTokens, m.CostNanoUSD) < 0 {
			return fmt.Errorf("%s %d: negative sum", what, i)
		}
	}
	return nil
}

// decodeSketchColumns reads the latency sketches of n rows, then their
// time-to-first-token sketches (empty when none), checking each against
// the row's span count; what names a row in errors ("entry", "session").
func decodeSketchColumns(d *dec, n int, row func(int) *AggMeasures, what string) error {
	for _, ttft := range []bool{false, true} {
		for i := range n {
			m := row(i)
			b := d.str()
			if d.err != nil {
				return fmt.Errorf("%s %d sketch: %w", what, i, d.err)
			}
			var err error
			switch {
			case !ttft:
				m.Latency, err = sketch.Decode([]byte(b))
				if err == nil && m.Latency.Count() != uint64(m.Spans) {
					err = fmt.Errorf("latency sketch counts %d values for %d spans", m.Latency.Count(), m.Spans)
				}
			case b != "":
				m.TTFT, err = sketch.Decode([]byte(b))
				if err == nil && (m.TTFT.Count() == 0 || m.TTFT.Count() > uint64(m.Spans)) {
					err = fmt.Errorf("time-to-first-token sketch counts %d values for %d spans", m.TTFT.Count(), m.Spans)
				}
			}
			if err != nil {
				return fmt.Errorf("%s %d: %w", what, i, err)
			}
		}
	}
	return nil
}
