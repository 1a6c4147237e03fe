package segment_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// llmCorpus returns n spans of the bench "llm" corpus (about 20% carry a
// prompt and a completion of about 60 words).
func llmCorpus(tb testing.TB, n int) []model.Span {
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 1, Spans: n,
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Window: 6 * time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	return corpus
}

// sectionBytes sums the stored lengths of the given section types, found
// through the footer and the table of contents.
func sectionBytes(tb testing.TB, path string, types ...uint32) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	foot := data[len(data)-40:]
	toc := data[binary.LittleEndian.Uint64(foot):]
	var total uint64
	for i := 0; i < int(binary.LittleEndian.Uint32(toc)); i++ {
		e := toc[4+40*i:]
		for _, t := range types {
			if binary.LittleEndian.Uint32(e) == t {
				total += binary.LittleEndian.Uint64(e[24:])
			}
		}
	}
	return total
}

// BenchmarkWriteTokens seals 50,000 spans of the bench "llm" corpus without
// and with token filters (the stand-in tokeniser of the tests). It reports
// the write cost per span, the token sections' share of the file, and the
// summary's bits per token and estimated false-positive rate. The
// "pretokenised" run emits hashes computed beforehand (looked up by span
// id), so that its difference from "none" is the cost of the filters
// themselves; "tokenise-only" is the stand-in tokeniser alone.
func BenchmarkWriteTokens(b *testing.B) {
	corpus := llmCorpus(b, 50_000)
	pre := make(map[model.SpanID][]uint64, len(corpus))
	for i := range corpus {
		segment.StandInTokens(&corpus[i], func(h uint64) { pre[corpus[i].SpanID] = append(pre[corpus[i].SpanID], h) })
	}
	pretokenised := func(s *model.Span, emit func(uint64)) {
		for _, h := range pre[s.SpanID] {
			emit(h)
		}
	}
	b.Run("tokenise-only", func(b *testing.B) {
		var sink uint64
		for b.Loop() {
			for i := range corpus {
				segment.StandInTokens(&corpus[i], func(h uint64) { sink ^= h })
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(corpus)), "ns/span")
	})
	for _, tc := range []struct {
		fp  float64
		pre bool
	}{{0, false}, {0.01, false}, {0.01, true}, {0.05, true}} {
		fp := tc.fp
		name := "none"
		opts := segment.WriterOptions{BlockSpans: 1024}
		if fp > 0 {
			name = fmt.Sprintf("fp=%v", fp)
			opts.ContentTokens, opts.TokenFilterFP = segment.StandInTokens, fp
			if tc.pre {
				name += ",pretokenised"
				opts.ContentTokens = pretokenised
			}
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			buf := make([]model.Span, len(corpus))
			var info segment.Info
			var tokBytes uint64
			var cpu time.Duration
			var err error
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				copy(buf, corpus)
				name := fmt.Sprintf("s%d", i)
				b.StartTimer()
				c0 := cpuTime()
				info, err = segment.Write(dir, name, map[string][]model.Span{"default": buf}, opts)
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				b.StopTimer()
				tokBytes = sectionBytes(b, filepath.Join(dir, name), 7, 8)
				os.Remove(filepath.Join(dir, name))
				b.StartTimer()
			}
			n := float64(len(corpus))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/span")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/n, "cpu-ns/span")
			b.ReportMetric(float64(info.Bytes)/n, "B/span-disk")
			b.ReportMetric(100*float64(tokBytes)/float64(info.Bytes), "%-token-sections")
			if fp > 0 {
				b.ReportMetric(float64(info.Tokens.DistinctTokens), "distinct-tokens")
				b.ReportMetric(info.Tokens.SummaryBitsPerToken, "summary-bits/token")
				b.ReportMetric(info.Tokens.SummaryFP, "summary-fp")
			}
		})
	}
}

// tokenReader writes the corpus with token filters and opens it.
func tokenReader(b *testing.B, corpus []model.Span) *segment.Reader {
	dir := b.TempDir()
	buf := append([]model.Span(nil), corpus...)
	if _, err := segment.Write(dir, "s", map[string][]model.Span{"default": buf},
		segment.WriterOptions{ContentTokens: segment.StandInTokens}); err != nil {
		b.Fatal(err)
	}
	r, err := segment.Open(filepath.Join(dir, "s"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// BenchmarkTokenLookup measures the lookups on a 50,000-span "llm"
// segment: the resident summary rejecting an absent word, the token map
// rejecting one the summary passes, and one block's
// filter read from disk (pread, checksum, probes) for an absent and a
// present word. It also reports the measured rates at which random absent
// hashes pass the summary and the block filters, and the resident bytes.
func BenchmarkTokenLookup(b *testing.B) {
	corpus := llmCorpus(b, 50_000)
	r := tokenReader(b, corpus)
	var present []uint64
	segment.StandInTokens(&corpus[len(corpus)/2], func(h uint64) { present = append(present, h) })
	rng := rand.New(rand.NewPCG(3, 4))
	absent := make([][]uint64, 1024)
	for i := range absent {
		absent[i] = []uint64{rng.Uint64()}
	}
	nb := len(r.Blocks())
	b.Run("segment-absent", func(b *testing.B) {
		passed := 0
		for i := 0; b.Loop(); i++ {
			if r.SegmentMayContainTokens(absent[i%len(absent)]) {
				passed++
			}
		}
		b.ReportMetric(float64(passed)/float64(b.N), "pass-rate")
		b.ReportMetric(float64(r.TokenStats().ResidentBytes), "token-resident-B")
		b.ReportMetric(float64(r.TokenStats().SummaryBytes), "summary-B")
	})
	b.Run("block-absent", func(b *testing.B) {
		passed := 0
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ok, err := r.BlockMayContainTokens(i%nb, absent[i%len(absent)])
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				passed++
			}
		}
		b.ReportMetric(float64(passed)/float64(b.N), "pass-rate")
		b.ReportMetric(float64(r.TokenStats().BlockFilterBytes)/float64(nb), "B/filter")
	})
	b.Run("map-absent", func(b *testing.B) {
		// The token map of a word no span holds but the resident summary
		// passes: what such a word costs per segment.
		var passing [][]uint64
		for len(passing) < 1024 {
			if h := []uint64{rng.Uint64()}; r.SegmentMayContainTokens(h) {
				passing = append(passing, h)
			}
		}
		located := 0
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			loc, err := r.LocateTokens(passing[i%len(passing)])
			if err != nil {
				b.Fatal(err)
			}
			if !loc.Absent {
				located++
			}
		}
		b.ReportMetric(float64(located)/float64(b.N), "pass-rate")
	})
	b.Run("block-present", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := r.BlockMayContainTokens(i%nb, present); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("all-blocks-present", func(b *testing.B) {
		// What a query for a present word pays per segment without a cache.
		for b.Loop() {
			for i := 0; i < nb; i++ {
				if _, err := r.BlockMayContainTokens(i, present[:1]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(nb), "blocks")
	})
}

// BenchmarkTokenSegmentLarge streams spans of the bench "llm" corpus
// (BENCH_TOKEN_SPANS, default 1,000,000, in chunks of 100,000 with their own
// seeds and time windows) into one segment of 1024-span blocks, as the
// engine seals them, with one rare word added to one span. It reports the
// token index's share of the file, the summary's load and measured
// false-positive rate, how many blocks a rare word reads, and times the
// two queries: a word in no span (summary only) and the rare word (summary,
// then every block's filter).
func BenchmarkTokenSegmentLarge(b *testing.B) {
	total := 1_000_000
	if s := os.Getenv("BENCH_TOKEN_SPANS"); s != "" {
		fmt.Sscan(s, &total)
	}
	const chunk = 100_000
	dir := b.TempDir()
	w, err := segment.NewWriter(dir, "large", segment.WriterOptions{BlockSpans: 1024, ContentTokens: segment.StandInTokens})
	if err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var cpu time.Duration
	for c := 0; c*chunk < total; c++ {
		n := min(chunk, total-c*chunk)
		spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: uint64(c + 1), Spans: n,
			Start: base.Add(time.Duration(c) * time.Hour), Window: 50 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if c == total/chunk/2 {
			s := &spans[n/2]
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "note", Value: model.StringValue("the zyxwvutsrare word")})
		}
		segment.SortSpans(spans)
		c0 := cpuTime()
		if err := w.Append("default", spans); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	c0 := cpuTime()
	info, err := w.Close()
	if err != nil {
		b.Fatal(err)
	}
	cpu += cpuTime() - c0
	path := filepath.Join(dir, "large")
	r, err := segment.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	hashOf := func(text string) []uint64 {
		var hs []uint64
		segment.StandInTokens(&model.Span{Name: text}, func(h uint64) { hs = append(hs, h) })
		return hs
	}
	rare, absent := hashOf("zyxwvutsrare"), hashOf("qqqnotaword")
	query := func(hs []uint64) (read, passed int) {
		if !r.SegmentMayContainTokens(hs) {
			return 0, 0
		}
		for i := range r.Blocks() {
			ok, err := r.BlockMayContainTokens(i, hs)
			if err != nil {
				b.Fatal(err)
			}
			read++
			if ok {
				passed++
			}
		}
		return read, passed
	}
	_, rarePassed := query(rare)
	rng := rand.New(rand.NewPCG(5, 6))
	sumPass := 0
	for i := 0; i < 100_000; i++ {
		if r.SegmentMayContainTokens([]uint64{rng.Uint64()}) {
			sumPass++
		}
	}
	st := r.TokenStats()
	b.Logf("%d spans, %d blocks, %.1f B/span, write %.0f cpu-ns/span; token sections %.2f%% of the file; "+
		"%d distinct tokens, summary %d B (%.2f bits/token, estimated fp %.4f, measured %.4f), token index resident %d B (reader total %d B); "+
		"rare word passes %d of %d block filters",
		info.Spans, info.Blocks, float64(info.Bytes)/float64(info.Spans), float64(cpu.Nanoseconds())/float64(info.Spans),
		100*float64(sectionBytes(b, path, 7, 8))/float64(info.Bytes),
		st.DistinctTokens, st.SummaryBytes, st.SummaryBitsPerToken, st.SummaryFP, float64(sumPass)/100_000,
		st.ResidentBytes, r.ResidentBytes(), rarePassed, info.Blocks)
	b.Run("absent-word", func(b *testing.B) {
		for b.Loop() {
			query(absent)
		}
	})
	b.Run("rare-word", func(b *testing.B) {
		for b.Loop() {
			query(rare)
		}
	})
	b.Run("rare-word-batch", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.BlocksMayContainTokens(rare); err != nil {
				b.Fatal(err)
			}
		}
	})
}
