package segment_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// llmFields is a crude stand-in for the ingest-time normaliser (which lives
// outside this package): it fills span.LLM from the few attribute keys the
// bench "llm" corpus uses, so the benchmark writes realistic LLM columns and
// aggregates. It is not a reference for dialect handling.
func llmFields(s *model.Span) *model.LLM {
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := s.Attr(k); ok && v.Type == model.ValueString {
				return v.Str
			}
		}
		return ""
	}
	num := func(keys ...string) int64 {
		for _, k := range keys {
			if v, ok := s.Attr(k); ok && v.Type == model.ValueInt {
				return v.Int
			}
		}
		return -1
	}
	l := &model.LLM{
		Provider:        str("gen_ai.provider.name", "gen_ai.system", "llm.provider"),
		RequestModel:    str("gen_ai.request.model"),
		ResponseModel:   str("gen_ai.response.model", "llm.model_name"),
		Operation:       str("gen_ai.operation.name", "llm.request.type"),
		InputTokens:     num("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
		OutputTokens:    num("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
		SessionID:       str("gen_ai.conversation.id", "session.id", "traceloop.association.properties.session_id"),
		UserID:          str("user.id", "traceloop.association.properties.user_id"),
		AgentName:       str("gen_ai.agent.name", "agent.name", "traceloop.workflow.name"),
		ToolName:        str("gen_ai.tool.name", "tool.name"),
		CacheReadTokens: -1, CacheCreationTokens: -1, ReasoningTokens: -1,
	}
	if l.Model() == "" && l.SessionID == "" && l.ToolName == "" {
		return nil
	}
	if l.Model() != "" {
		l.Counted = true
		l.CostNanoUSD = max(l.InputTokens, 0)*2500 + max(l.OutputTokens, 0)*10000
		l.CostSource = model.CostComputed
		l.TimeToFirstTokenNanos = s.Duration() / 5
	}
	return l
}

// BenchmarkWriteLLM seals 50,000 spans of the bench "llm" corpus with and
// without LLM fields: the difference is the cost of the LLM column and the
// LLM aggregates. It reports bytes per span on disk, and the aggregate
// sections' share (read from the table of contents, docs/format/segment.md).
func BenchmarkWriteLLM(b *testing.B) {
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 1, Spans: 50_000,
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Window: 6 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	withLLM := 0
	for i := range corpus {
		if corpus[i].LLM = llmFields(&corpus[i]); corpus[i].LLM != nil {
			withLLM++
		}
	}
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("llm-fields=%v", on), func(b *testing.B) {
			dir := b.TempDir()
			buf := make([]model.Span, len(corpus))
			var info segment.Info
			var aggBytes uint64
			var cpu time.Duration
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				copy(buf, corpus)
				if !on {
					for j := range buf {
						buf[j].LLM = nil
					}
				}
				name := fmt.Sprintf("s%d", i)
				b.StartTimer()
				c0 := cpuTime()
				info, err = segment.Write(dir, name, map[string][]model.Span{"default": buf}, segment.WriterOptions{})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				b.StopTimer()
				aggBytes = aggSectionBytes(b, filepath.Join(dir, name))
				os.Remove(filepath.Join(dir, name))
				b.StartTimer()
			}
			n := float64(len(corpus))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/span")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/n, "cpu-ns/span")
			b.ReportMetric(float64(info.Bytes)/n, "B/span-disk")
			b.ReportMetric(float64(aggBytes)/n, "B/span-aggs")
			b.ReportMetric(float64(withLLM)/n, "llm-share")
		})
	}
}

// aggSectionBytes sums the stored lengths of sections 6 and 10, found
// through the footer and the table of contents.
func aggSectionBytes(b *testing.B, path string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	foot := data[len(data)-40:]
	toc := data[binary.LittleEndian.Uint64(foot):]
	var total uint64
	for i := 0; i < int(binary.LittleEndian.Uint32(toc)); i++ {
		e := toc[4+40*i:]
		if t := binary.LittleEndian.Uint32(e); t == 6 || t == 10 {
			total += binary.LittleEndian.Uint64(e[24:])
		}
	}
	return total
}

// cpuTime returns the process's user+system CPU time (the machine is shared:
// wall time inflates with other people's load, CPU time much less).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
