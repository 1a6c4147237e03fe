package segment

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/rastro-dev/rastro/internal/model"
)

// memValues is a value store in memory: what StoreValue needs for tests.
type memValues struct {
	mu   sync.Mutex
	vals map[[32]byte]string
	puts int
}

func newMemValues() *memValues { return &memValues{vals: map[[32]byte]string{}} }

func (m *memValues) put(v string) ([32]byte, error) {
	h := sha256.Sum256([]byte(v))
	m.mu.Lock()
	m.vals[h] = v
	m.puts++
	m.mu.Unlock()
	return h, nil
}

// resolveValue replaces every ref in v (nested too) by its stored string,
// copying lists so that the input is left as it was.
func (m *memValues) resolveValue(t testing.TB, v model.Value) model.Value {
	switch v.Type {
	case model.ValueRef:
		var b strings.Builder
		for i := range v.RefPieces() {
			p, ok := m.vals[v.RefPiece(i)]
			if !ok {
				t.Fatalf("piece %d %x of a ref not stored", i, v.RefPiece(i))
			}
			b.WriteString(p)
		}
		if v.RefPieces() == 0 || int64(b.Len()) != v.Int {
			t.Fatalf("ref of %d pieces resolves to %d bytes, length says %d", v.RefPieces(), b.Len(), v.Int)
		}
		return model.StringValue(b.String())
	case model.ValueArray:
		var out []model.Value
		for _, e := range v.Elems() {
			out = append(out, m.resolveValue(t, e))
		}
		return model.ArrayValue(out)
	case model.ValueKvList:
		return model.KvListValue(m.resolveKVs(t, v.Fields()))
	}
	return v
}

func (m *memValues) resolveKVs(t testing.TB, kvs []model.KeyValue) []model.KeyValue {
	if kvs == nil {
		return nil
	}
	out := make([]model.KeyValue, len(kvs))
	for i := range kvs {
		out[i] = model.KeyValue{Key: kvs[i].Key, Value: m.resolveValue(t, kvs[i].Value)}
	}
	return out
}

func (m *memValues) resolveSpans(t testing.TB, spans []model.Span) []model.Span {
	out := make([]model.Span, len(spans))
	for i, s := range spans {
		s.Attributes = m.resolveKVs(t, s.Attributes)
		s.Events = append([]model.Event(nil), s.Events...)
		for j := range s.Events {
			s.Events[j].Attributes = m.resolveKVs(t, s.Events[j].Attributes)
		}
		s.Links = append([]model.Link(nil), s.Links...)
		for j := range s.Links {
			s.Links[j].Attributes = m.resolveKVs(t, s.Links[j].Attributes)
		}
		out[i] = s
	}
	return out
}

// walkValues calls fn on every value of the span's attributes, event and
// link attributes (nested too), and on resource attributes with resource set.
func walkValues(s *model.Span, fn func(v model.Value, resource bool)) {
	var val func(v model.Value, res bool)
	kvs := func(l []model.KeyValue, res bool) {
		for _, kv := range l {
			val(kv.Value, res)
		}
	}
	val = func(v model.Value, res bool) {
		fn(v, res)
		for _, e := range v.Elems() {
			val(e, res)
		}
		kvs(v.Fields(), res)
	}
	kvs(s.Attributes, false)
	for _, e := range s.Events {
		kvs(e.Attributes, false)
	}
	for _, l := range s.Links {
		kvs(l.Attributes, false)
	}
	if s.Resource != nil {
		kvs(s.Resource.Attributes, true)
	}
}

// addLargeValues gives some spans long strings: a shared prompt, unique
// completions, a long value nested in a kvlist, in an event and a link, and
// a long resource attribute (which stays inline).
func addLargeValues(corpus map[string][]model.Span, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	prompt := "system prompt: " + strings.Repeat("be helpful and precise ", 60)
	res := &model.Resource{Attributes: []model.KeyValue{
		{Key: "service.name", Value: model.StringValue("big")},
		{Key: "process.command_line", Value: model.StringValue(strings.Repeat("--flag ", 200))},
	}}
	for p, spans := range corpus {
		for i := range spans {
			s := &spans[i]
			switch rng.IntN(4) {
			case 0:
				continue
			case 1:
				s.Resource, s.Service = res, "big"
			}
			s.Attributes = append(s.Attributes,
				model.KeyValue{Key: "gen_ai.prompt", Value: model.StringValue(prompt)},
				model.KeyValue{Key: "gen_ai.completion", Value: model.StringValue(fmt.Sprintf("completion %s %d: %s", p, i, strings.Repeat("zebra ", 30+rng.IntN(200))))},
				model.KeyValue{Key: "nested", Value: model.KvListValue([]model.KeyValue{
					{Key: "short", Value: model.StringValue("tiny")},
					{Key: "long", Value: model.ArrayValue([]model.Value{model.StringValue(strings.Repeat("x", 300+i%3))})},
				})})
			if rng.IntN(2) == 0 {
				s.Events = append(s.Events, model.Event{TimeUnixNano: s.StartTimeUnixNano, Name: "exception",
					Attributes: []model.KeyValue{{Key: "exception.stacktrace", Value: model.StringValue(strings.Repeat("at frame\n", 50+i%7))}}})
			}
			if rng.IntN(4) == 0 {
				s.Links = append(s.Links, model.Link{TraceID: model.TraceID{9}, SpanID: model.SpanID{9},
					Attributes: []model.KeyValue{{Key: "note", Value: model.StringValue(strings.Repeat("l", 256))}}})
			}
		}
	}
}

const testThreshold = 256

func TestValueRefsRoundTrip(t *testing.T) {
	t.Run("table", func(t *testing.T) { testValueRefsRoundTrip(t) })
	// Files written before section 18 hold the hashes in the rows.
	t.Run("sorted", func(t *testing.T) {
		writeValueRefsSorted = true
		defer func() { writeValueRefsSorted = false }()
		testValueRefsRoundTrip(t)
	})
}

func testValueRefsRoundTrip(t *testing.T) {
	corpus := genCorpus(31, 2, 40, 20)
	addLargeValues(corpus, 31)
	_, want := expected(corpus)
	mv := newMemValues()
	path, info := writeCorpus(t, corpus, WriterOptions{BlockSpans: 64, StoreValue: mv.put, ValueThreshold: testThreshold,
		ContentTokens: StandInTokens})
	r := openT(t, path)
	got := readAll(t, r)

	// Long span, event and link attribute strings come back as refs, short
	// ones and resource attributes inline; resolved, the spans are the input.
	inBlocks := map[[32]byte]bool{}
	for i := range got {
		walkValues(&got[i], func(v model.Value, resource bool) {
			switch {
			case v.IsRef():
				if resource {
					t.Fatalf("span %d: resource attribute stored apart", i)
				}
				if v.Int < testThreshold {
					t.Fatalf("span %d: a %d-byte value stored apart", i, v.Int)
				}
				for j := range v.RefPieces() {
					inBlocks[v.RefPiece(j)] = true
				}
			case v.Type == model.ValueString && len(v.Str) >= testThreshold && !resource:
				t.Fatalf("span %d: %d-byte string kept inline", i, len(v.Str))
			}
		})
	}
	if len(inBlocks) < 10 {
		t.Fatalf("only %d distinct refs in the blocks: corpus has too few large values", len(inBlocks))
	}
	requireSpansEqual(t, "resolved blocks", mv.resolveSpans(t, got), want)
	if mv.puts <= len(mv.vals) {
		t.Errorf("the shared prompt was put %d times for %d values: expected repeats", mv.puts, len(mv.vals))
	}

	// The section lists exactly the refs of the blocks, once each (section
	// 9 sorted, section 18 in the order of first use).
	var listed [][32]byte
	if err := r.ValueRefs(func(h [32]byte) bool { listed = append(listed, h); return true }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(inBlocks) || info.ValueRefs != len(listed) || r.Info().ValueRefs != len(listed) || !r.HasValueRefs() {
		t.Fatalf("the section lists %d refs (info %d, reader %d), blocks hold %d", len(listed), info.ValueRefs, r.Info().ValueRefs, len(inBlocks))
	}
	seen := map[[32]byte]bool{}
	for i, h := range listed {
		if !inBlocks[h] {
			t.Fatalf("the section lists %x, which no block references", h)
		}
		if seen[h] {
			t.Fatalf("the section lists %x twice", h)
		}
		seen[h] = true
		if writeValueRefsSorted && i > 0 && string(listed[i-1][:]) >= string(h[:]) {
			t.Fatalf("section 9 not strictly ascending at %d", i)
		}
	}
	n := 0
	if err := r.ValueRefs(func([32]byte) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Fatalf("ValueRefs did not stop when yield returned false: %d calls, %v", n, err)
	}

	// FindTrace returns refs too, equal to the full read.
	refsSeen := 0
	for _, s := range got[:20] {
		tr, err := r.FindTrace(projectOf(t, r, &s), s.TraceID)
		if err != nil || len(tr) == 0 {
			t.Fatalf("FindTrace: %d spans, %v", len(tr), err)
		}
		for i := range tr {
			walkValues(&tr[i], func(v model.Value, _ bool) {
				if v.IsRef() {
					refsSeen++
				}
			})
			for j := range got {
				if got[j].SpanID == tr[i].SpanID && got[j].TraceID == tr[i].TraceID {
					if d := spanDiff(&tr[i], &got[j]); d != "" {
						t.Fatalf("FindTrace span differs from ReadBlock in %s", d)
					}
				}
			}
		}
	}
	if refsSeen == 0 {
		t.Fatalf("FindTrace returned no refs")
	}

	// Filters are built from the full values: the attribute bloom knows the
	// long completion, the token filter a word found only in long values.
	for i := range r.Blocks() {
		spans, _ := r.ReadBlock(i)
		for _, s := range mv.resolveSpans(t, spans) {
			if v, ok := s.Attr("gen_ai.completion"); ok && !r.MayContainAttr(i, false, "gen_ai.completion", v.Str) {
				t.Fatalf("block %d: bloom misses a long value", i)
			}
		}
	}
	zebra := xxhash.Sum64String("zebra")
	if !r.SegmentMayContainTokens([]uint64{zebra}) {
		t.Fatalf("token summary misses a word that only long values hold")
	}
}

// projectOf returns the project of the block holding span s.
func projectOf(t *testing.T, r *Reader, s *model.Span) string {
	for i, b := range r.Blocks() {
		spans, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		for j := range spans {
			if spans[j].SpanID == s.SpanID && spans[j].TraceID == s.TraceID {
				return b.Project
			}
		}
	}
	t.Fatalf("span %s not found", s.SpanID)
	return ""
}

func TestValueRefsRewriteKeepsRefs(t *testing.T) {
	// A rewrite (compaction) feeds spans holding refs back to a writer: the
	// refs are kept as they are and listed again.
	corpus := genCorpus(32, 1, 20, 10)
	addLargeValues(corpus, 32)
	mv := newMemValues()
	path, _ := writeCorpus(t, corpus, WriterOptions{StoreValue: mv.put, ValueThreshold: testThreshold})
	r := openT(t, path)
	first := readAll(t, r)
	names := r.Info().Projects
	path2, info2 := writeCorpus(t, map[string][]model.Span{names[0].Name: first}, WriterOptions{})
	r2 := openT(t, path2)
	second := readAll(t, r2)
	requireSpansEqual(t, "rewritten", second, first)
	if info2.ValueRefs != r.Info().ValueRefs {
		t.Fatalf("rewrite lists %d refs, original %d", info2.ValueRefs, r.Info().ValueRefs)
	}
}

func TestValueRefsAbsentWithoutLargeValues(t *testing.T) {
	mv := newMemValues()
	path, info := writeCorpus(t, genCorpus(33, 1, 10, 5), WriterOptions{StoreValue: mv.put})
	r := openT(t, path)
	if r.HasValueRefs() || info.ValueRefs != 0 || mv.puts != 0 {
		t.Fatalf("small values stored apart: %d puts, section 9 present %v", mv.puts, r.HasValueRefs())
	}
	if err := r.ValueRefs(func([32]byte) bool { t.Fatal("yielded"); return false }); err != nil {
		t.Fatal(err)
	}
}

func TestStoreValueErrorFailsWrite(t *testing.T) {
	corpus := genCorpus(34, 1, 10, 5)
	addLargeValues(corpus, 34)
	dir := t.TempDir()
	boom := errors.New("disk full")
	_, err := Write(dir, "s.rseg", corpus, WriterOptions{StoreValue: func(string) ([32]byte, error) { return [32]byte{}, boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("Write with a failing StoreValue: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("failed write left %d files", len(ents))
	}
	if err := (WriterOptions{ValueThreshold: -1}).Validate(); err == nil {
		t.Fatalf("negative ValueThreshold accepted")
	}
}

func TestValueRefsSectionDamageIsIsolated(t *testing.T) {
	// Section 9 (files written before section 18) is a list for garbage
	// collection only: damage to it leaves the blocks readable.
	writeValueRefsSorted = true
	defer func() { writeValueRefsSorted = false }()
	corpus := genCorpus(35, 1, 30, 10)
	addLargeValues(corpus, 35)
	mv := newMemValues()
	path, _ := writeCorpus(t, corpus, WriterOptions{StoreValue: mv.put, ValueThreshold: testThreshold})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := tocEntryOf(t, orig, sectionValueRefs)
	if e.Flags&sectionRequired == 0 {
		t.Fatalf("section 9 is not marked required: an older reader would skip it and fail on the blocks")
	}
	for _, at := range []uint64{e.Offset, e.Offset + e.Length/2, e.Offset + e.Length - 1} {
		data := append([]byte(nil), orig...)
		data[at] ^= 0x01
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatalf("damage to section 9 fails Open: %v", err)
		}
		if spans := readAll(t, r); len(spans) != r.Info().Spans {
			t.Fatalf("blocks unreadable after damage to section 9")
		}
		err = r.ValueRefs(func([32]byte) bool { t.Fatal("yielded from a damaged section"); return false })
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Offset < int64(e.Offset) || ce.Offset >= int64(e.Offset+e.Length) {
			t.Fatalf("flip at %d: ValueRefs error %v", at, err)
		}
		r.Close()
	}
}

// TestValueRefTableDamage: the blocks name stored values by their position
// in section 18, so damage to a page of it is reported, naming the page, by
// the reads of the blocks that use the page, and by ValueRefs; Open still
// succeeds (the trace index and aggregates stay usable).
func TestValueRefTableDamage(t *testing.T) {
	corpus := genCorpus(36, 1, 30, 10)
	addLargeValues(corpus, 36)
	mv := newMemValues()
	path, _ := writeCorpus(t, corpus, WriterOptions{StoreValue: mv.put, ValueThreshold: testThreshold})
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := tocEntryOf(t, orig, sectionValueRefTable)
	if e.Flags&sectionRequired == 0 {
		t.Fatalf("section 18 is not marked required: an older reader would skip it and fail on the blocks")
	}
	for _, at := range []uint64{e.Offset, e.Offset + e.Length - 1} {
		data := append([]byte(nil), orig...)
		data[at] ^= 0x01
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatalf("damage to section 18 fails Open: %v", err)
		}
		_, err = r.ReadBlock(0)
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Offset < int64(e.Offset) || ce.Offset >= int64(e.Offset+e.Length) {
			t.Fatalf("flip at %d: block read error %v", at, err)
		}
		err = r.ValueRefs(func([32]byte) bool { t.Fatal("yielded from a damaged section"); return false })
		if !errors.As(err, &ce) {
			t.Fatalf("flip at %d: ValueRefs error %v", at, err)
		}
		r.Close()
	}
}

// tocEntryOf returns the table-of-contents entry of a section type.
func tocEntryOf(t *testing.T, data []byte, typ uint32) tocEntry {
	t.Helper()
	foot := data[len(data)-footerLen:]
	tocOff := le.Uint64(foot[0:])
	n := int(le.Uint32(data[tocOff:]))
	for i := 0; i < n; i++ {
		p := data[tocOff+4+uint64(i)*tocEntryLen:]
		if le.Uint32(p) == typ {
			return tocEntry{Type: typ, Flags: le.Uint32(p[4:]), Codec: le.Uint32(p[8:]), CRC: le.Uint32(p[12:]),
				Offset: le.Uint64(p[16:]), Length: le.Uint64(p[24:]), RawLen: le.Uint64(p[32:])}
		}
	}
	t.Fatalf("section %d not in the table of contents", typ)
	return tocEntry{}
}
