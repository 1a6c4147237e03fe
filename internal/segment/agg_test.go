package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/sketch"
)

// bruteAggregate recomputes the aggregates of spans the simplest way, with
// arbitrary-precision sums clamped at the end, independently of Aggregator.
func bruteAggregate(spans []model.Span) map[AggKey]AggMeasures {
	type acc struct {
		m      AggMeasures
		sums   [6]big.Int
		traces map[model.TraceID]bool
		lat    []uint64
		ttft   []uint64
	}
	groups := map[AggKey]*acc{}
	for i := range spans {
		s := &spans[i]
		l := s.LLM
		if l == nil {
			continue
		}
		k := AggKey{l.Model(), l.Provider, s.Service, l.Operation, l.SessionID, l.UserID, l.AgentName,
			time.Unix(0, int64(s.StartTimeUnixNano)).Truncate(time.Hour).Unix()}
		if s.StartTimeUnixNano > math.MaxInt64 {
			k.Hour = int64(s.StartTimeUnixNano/3600e9) * 3600
		}
		g := groups[k]
		if g == nil {
			g = &acc{traces: map[model.TraceID]bool{}}
			g.m.MinStart = math.MaxUint64
			groups[k] = g
		}
		g.m.Spans++
		if s.StatusCode == model.StatusError {
			g.m.Errors++
		}
		if l.Counted {
			g.m.Counted++
			for j, v := range []int64{l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheCreationTokens, l.ReasoningTokens, l.CostNanoUSD} {
				if v >= 0 {
					g.sums[j].Add(&g.sums[j], big.NewInt(v))
				}
			}
		}
		g.traces[s.TraceID] = true
		g.m.MinStart = min(g.m.MinStart, s.StartTimeUnixNano)
		g.m.MaxEnd = max(g.m.MaxEnd, s.EndTimeUnixNano)
		g.lat = append(g.lat, s.EndTimeUnixNano-s.StartTimeUnixNano)
		if s.EndTimeUnixNano < s.StartTimeUnixNano {
			g.lat[len(g.lat)-1] = 0
		}
		if l.TimeToFirstTokenNanos > 0 {
			g.ttft = append(g.ttft, l.TimeToFirstTokenNanos)
		}
	}
	out := map[AggKey]AggMeasures{}
	maxI := big.NewInt(math.MaxInt64)
	for k, g := range groups {
		m := g.m
		for j, p := range []*int64{&m.InputTokens, &m.OutputTokens, &m.CacheReadTokens, &m.CacheCreationTokens, &m.ReasoningTokens, &m.CostNanoUSD} {
			if g.sums[j].Cmp(maxI) > 0 {
				*p = math.MaxInt64
			} else {
				*p = g.sums[j].Int64()
			}
		}
		m.Traces = int64(len(g.traces))
		m.Latency = sketch.New()
		for i := len(g.lat) - 1; i >= 0; i-- { // another order: sketches do not depend on it
			m.Latency.Add(g.lat[i])
		}
		if len(g.ttft) > 0 {
			m.TTFT = sketch.New()
			for _, v := range g.ttft {
				m.TTFT.Add(v)
			}
		}
		out[k] = m
	}
	return out
}

func sketchBytes(s *sketch.Sketch) []byte {
	if s == nil {
		return nil
	}
	return s.AppendBinary(nil)
}

// measuresDiff compares measures; ignoreTraces skips Traces (for a rollup
// compared with a brute-force count over the whole project).
func measuresDiff(a, b *AggMeasures, ignoreTraces bool) string {
	x, y := *a, *b
	if ignoreTraces {
		x.Traces, y.Traces = 0, 0
	}
	if !bytes.Equal(sketchBytes(x.Latency), sketchBytes(y.Latency)) {
		return "latency sketch"
	}
	if (x.TTFT == nil) != (y.TTFT == nil) || !bytes.Equal(sketchBytes(x.TTFT), sketchBytes(y.TTFT)) {
		return "TTFT sketch"
	}
	x.Latency, y.Latency, x.TTFT, y.TTFT = nil, nil, nil, nil
	if x != y {
		return fmt.Sprintf("%+v vs %+v", x, y)
	}
	return ""
}

func requireEntries(t *testing.T, what string, got []AggEntry, want map[AggKey]AggMeasures, ignoreTraces bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		if i > 0 && compareAggKeys(&got[i-1].Key, &got[i].Key) >= 0 {
			t.Fatalf("%s: entries not sorted by key", what)
		}
		w, ok := want[got[i].Key]
		if !ok {
			t.Fatalf("%s: unexpected key %+v", what, got[i].Key)
		}
		if d := measuresDiff(&got[i].M, &w, ignoreTraces); d != "" {
			t.Fatalf("%s: key %+v: %s", what, got[i].Key, d)
		}
	}
}

// TestAggregates: every block's stored aggregates equal a brute-force
// aggregation of the block's spans (and the Aggregator's, the engine's
// path); every project rollup equals the merge of its blocks' entries and,
// Traces aside, a brute-force aggregation of the project's spans.
func TestAggregates(t *testing.T) {
	corpus := genCorpus(51, 3, 120, 60)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	if !r.HasAggregates() {
		t.Fatal("HasAggregates = false for a new segment")
	}
	byProject := map[string][][]AggEntry{}
	emptyBlocks, entries := 0, 0
	for i, m := range r.Blocks() {
		spans, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.BlockAggregates(i)
		if err != nil {
			t.Fatalf("BlockAggregates(%d): %v", i, err)
		}
		requireEntries(t, fmt.Sprintf("block %d", i), got, bruteAggregate(spans), false)
		a := NewAggregator()
		for j := range spans {
			a.Add(&spans[j])
		}
		requireEntries(t, fmt.Sprintf("Aggregator over block %d", i), a.Entries(), bruteAggregate(spans), false)
		if len(got) == 0 {
			emptyBlocks++
		}
		entries += len(got)
		byProject[m.Project] = append(byProject[m.Project], got)
	}
	if entries == 0 {
		t.Fatal("corpus has no LLM spans")
	}
	for _, p := range r.Info().Projects {
		got, err := r.SegmentAggregates(p.Name)
		if err != nil {
			t.Fatalf("SegmentAggregates(%q): %v", p.Name, err)
		}
		merged := map[AggKey]AggMeasures{}
		for _, e := range MergeEntries(byProject[p.Name]...) {
			merged[e.Key] = e.M
		}
		requireEntries(t, "rollup of "+p.Name, got, merged, false)
		_, want := expected(map[string][]model.Span{p.Name: corpus[p.Name]})
		requireEntries(t, "rollup vs brute force of "+p.Name, got, bruteAggregate(want), true)
	}
	if got, err := r.SegmentAggregates("no-such-project"); got != nil || err != nil {
		t.Fatalf("SegmentAggregates(unknown) = %v, %v", got, err)
	}
	if _, err := r.BlockAggregates(len(r.Blocks())); err == nil || IsCorruption(err) {
		t.Fatalf("BlockAggregates(out of range): %v", err)
	}

	// A segment without LLM spans has aggregates, all empty.
	plain := map[string][]model.Span{"p": realisticCorpus(2, 500)}
	r2 := openT(t, func() string { p, _ := writeCorpus(t, plain, WriterOptions{BlockSpans: 100}); return p }())
	if !r2.HasAggregates() {
		t.Fatal("HasAggregates = false for a segment without LLM spans")
	}
	for i := range r2.Blocks() {
		if got, err := r2.BlockAggregates(i); got != nil || err != nil {
			t.Fatalf("block %d of a plain segment: %v, %v", i, got, err)
		}
	}
	if got, err := r2.SegmentAggregates("p"); got != nil || err != nil {
		t.Fatalf("rollup of a plain segment: %v, %v", got, err)
	}

	// A file written before aggregates existed has none, and says so.
	old := openT(t, "testdata/v1.rseg")
	if old.HasAggregates() {
		t.Fatal("v1 fixture claims aggregates")
	}
	if got, err := old.BlockAggregates(0); got != nil || err != nil {
		t.Fatalf("BlockAggregates on the v1 fixture: %v, %v", got, err)
	}
}

// TestAggregatesCorruptionIsolated damages one block's aggregates part, and
// then the directory: only the aggregate calls fail, with a CorruptionError
// at the damaged part; blocks, traces and the other parts stay readable.
func TestAggregatesCorruptionIsolated(t *testing.T) {
	corpus := genCorpus(52, 2, 80, 40)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	orig, _ := os.ReadFile(path)
	victim := -1
	for i, ref := range r.aggs.blocks {
		if ref.Length > 0 {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no block has aggregates")
	}
	sec := func(typ uint32) tocEntry {
		foot := orig[len(orig)-footerLen:]
		tocOff := le.Uint64(foot)
		n := int(le.Uint32(orig[tocOff:]))
		for i := 0; i < n; i++ {
			p := orig[tocOff+4+uint64(i)*tocEntryLen:]
			if le.Uint32(p) == typ {
				return tocEntry{Type: typ, Offset: le.Uint64(p[16:]), Length: le.Uint64(p[24:])}
			}
		}
		t.Fatalf("no section %d", typ)
		return tocEntry{}
	}
	partOff := r.aggs.offset + int64(r.aggs.blocks[victim].Offset)
	dirOff := int64(sec(sectionLLMAggDir).Offset)
	for _, tc := range []struct {
		name    string
		at      int64
		wantOff int64
		all     bool // every aggregate call fails
	}{
		{"block part", partOff + int64(r.aggs.blocks[victim].Length)/2, partOff, false},
		{"directory", dirOff, dirOff, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := append([]byte(nil), orig...)
			data[tc.at] ^= 0x40
			bad := path + ".bad"
			if err := os.WriteFile(bad, data, 0o644); err != nil {
				t.Fatal(err)
			}
			rb, err := Open(bad)
			if err != nil {
				t.Fatalf("Open fails over damaged aggregates: %v", err)
			}
			defer rb.Close()
			if !rb.HasAggregates() {
				t.Fatal("HasAggregates = false")
			}
			requireSpansEqual(t, "blocks", readAll(t, rb), readAll(t, r))
			for i := range rb.Blocks() {
				got, err := rb.BlockAggregates(i)
				if i == victim || tc.all {
					var ce *CorruptionError
					if !errors.As(err, &ce) || ce.Offset != tc.wantOff || ce.File != bad {
						t.Fatalf("block %d: %v, want corruption at %d", i, err, tc.wantOff)
					}
					continue
				}
				want, _ := r.BlockAggregates(i)
				if err != nil || len(got) != len(want) {
					t.Fatalf("undamaged block %d: %d entries, %v; want %d", i, len(got), err, len(want))
				}
			}
			for _, p := range rb.Info().Projects {
				_, err := rb.SegmentAggregates(p.Name)
				if tc.all != IsCorruption(err) || (!tc.all && err != nil) {
					t.Fatalf("rollup of %q: %v", p.Name, err)
				}
			}
		})
	}
}

// FuzzDecodeAggPart decodes arbitrary part contents (as a hostile file with
// valid checksums would hold). Nothing may panic; what decodes re-encodes
// to an equal list.
func FuzzDecodeAggPart(f *testing.F) {
	corpus := genCorpus(53, 1, 20, 10)
	_, spans := expected(corpus)
	a := NewAggregator()
	for i := range spans {
		a.Add(&spans[i])
	}
	f.Add(encodeAggPart(nil, a.Entries()))
	f.Add(encodeAggPart(nil, nil))
	f.Add([]byte{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 0, 2, 1, 1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeAggPart(string(b))
		if err != nil {
			return
		}
		again, err := decodeAggPart(string(encodeAggPart(nil, entries)))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-encoded part does not decode: %v", err)
		}
		for i := range again {
			if again[i].Key != entries[i].Key || measuresDiff(&again[i].M, &entries[i].M, false) != "" {
				t.Fatalf("entry %d changed on re-encoding", i)
			}
		}
		_ = MergeEntries(entries, again)
	})
}
