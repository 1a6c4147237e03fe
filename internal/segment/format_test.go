package segment

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/rastro-dev/rastro/internal/model"
)

var update = flag.Bool("update", false, "rewrite testdata/v1.rseg (only when FormatVersion changes)")

// TestBloomHashStable pins the filter library's hashing: stored filters stay
// valid only as long as the same element sets the same bits.
func TestBloomHashStable(t *testing.T) {
	f := bloom.NewWithEstimates(100, bloomFalsePositive)
	for _, e := range [][]byte{appendBloomStr(nil, false, "http.route", "/api"), appendBloomInt(nil, true, "port", 8080)} {
		f.Add(e)
	}
	var b []byte
	for _, w := range f.BitSet().Words() {
		b = le.AppendUint64(b, w)
	}
	if got, want := crc(b), uint32(0xd81e3ac5); got != want || f.Cap() != 959 || f.K() != 7 {
		t.Fatalf("bloom hashing changed: crc %#x m %d k %d; existing segments would give false negatives", got, f.Cap(), f.K())
	}
}

// TestFormatFixture reads a committed version-1 file: the reader must keep
// reading what earlier writers wrote.
func TestFormatFixture(t *testing.T) {
	corpus := genCorpus(31, 2, 6, 12)
	path := filepath.Join("testdata", "v1.rseg")
	if *update {
		tmp, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 16})
		data, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := openT(t, path)
	_, want := expected(corpus)
	for i := range want {
		want[i].LLM = nil // written before LLM columns existed: the reader returns no LLM fields
	}
	requireSpansEqual(t, "fixture", readAll(t, r), want)
	if ok, err := r.BlockMayContainTokens(0, []uint64{1}); r.HasTokenFilters() || !ok || err != nil ||
		!r.SegmentMayContainTokens([]uint64{1}) || r.Info().Tokens.Indexed {
		t.Fatalf("fixture without token filters: has %v, block %v %v", r.HasTokenFilters(), ok, err)
	}
	for i, m := range r.Blocks() {
		spans, _ := r.ReadBlock(i)
		for _, s := range spans {
			for _, kv := range s.Attributes {
				checkFilter(t, r, i, false, kv)
			}
			got, err := r.FindTrace(m.Project, s.TraceID)
			if err != nil || len(got) == 0 {
				t.Fatalf("FindTrace in fixture: %d spans, %v", len(got), err)
			}
		}
	}
}

// TestLLMFormatFixture reads a committed file with LLM columns and LLM
// aggregates (sections 6 and 10): a change to their layout that would make
// existing files read differently fails here.
func TestLLMFormatFixture(t *testing.T) {
	corpus := genCorpus(32, 2, 8, 12)
	path := filepath.Join("testdata", "v1-llm.rseg")
	if *update {
		tmp, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 16})
		data, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := openT(t, path)
	names, want := expected(corpus)
	withLLM := 0
	for i := range want {
		if want[i].LLM != nil {
			withLLM++
		}
	}
	if withLLM == 0 || !r.HasAggregates() || r.HasTokenFilters() {
		t.Fatalf("fixture has %d LLM spans, aggregates %v", withLLM, r.HasAggregates())
	}
	requireSpansEqual(t, "fixture", readAll(t, r), want)
	for i := range r.Blocks() {
		spans, _ := r.ReadBlock(i)
		got, err := r.BlockAggregates(i)
		if err != nil {
			t.Fatal(err)
		}
		requireEntries(t, fmt.Sprintf("fixture block %d", i), got, bruteAggregate(spans), false)
	}
	for _, p := range names {
		got, err := r.SegmentAggregates(p)
		if err != nil {
			t.Fatal(err)
		}
		_, ps := expected(map[string][]model.Span{p: corpus[p]})
		requireEntries(t, "fixture rollup "+p, got, bruteAggregate(ps), true)
	}
}
