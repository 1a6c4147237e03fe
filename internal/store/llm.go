package store

import (
	"context"
	"slices"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// LLMGroupKeys are the dimensions LLM statistics can be grouped by. A
// group's key maps each requested dimension to its value: "hour" is the
// hour's start in RFC 3339 (UTC), "day" the date (2006-01-02, UTC).
var LLMGroupKeys = []string{"model", "provider", "service", "operation", "session", "user", "agent", "day", "hour"}

// ValidLLMGroupKey reports whether k is one of LLMGroupKeys.
func ValidLLMGroupKey(k string) bool { return slices.Contains(LLMGroupKeys, k) }

// LLMQuery selects and groups LLM spans (spans with LLM fields, model.Span.LLM).
type LLMQuery struct {
	Filter  query.Filter // window (Start, End) and any span filter
	GroupBy []string     // subset of LLMGroupKeys; empty = one group with the totals
	// Top, when > 0, asks LLMStats for only the Top first groups in the
	// order of Sort; a backend that honours it says so with
	// LLMStats.TotalGroups (one that does not returns every group).
	Top  int
	Sort string // LLMSorts key; "" = cost
}

// LLMSorts rank LLM groups, descending, for LLMQuery.Top; ties keep the
// order of LLMStats.Groups (cost, then spans, descending, then key).
var LLMSorts = map[string]func(m *Measures) int64{
	"cost":   func(m *Measures) int64 { return m.CostNanoUSD },
	"tokens": func(m *Measures) int64 { return m.InputTokens + m.OutputTokens },
	"calls":  func(m *Measures) int64 { return m.Counted + m.Metrics.Calls },
	"spans":  func(m *Measures) int64 { return m.Spans },
	"errors": func(m *Measures) int64 { return m.Errors },
}

// Quantiles are latency percentiles in nanoseconds.
type Quantiles struct {
	P50, P95, P99, Max float64
}

// Measures are the aggregated measures of a group of LLM spans.
type Measures struct {
	Spans               int64 // LLM spans
	Counted             int64 // of which counted for usage (model.LLM.Counted)
	Errors              int64 // of which with status error
	Traces              int64 // distinct traces, summed per storage part
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	ReasoningTokens     int64
	CostNanoUSD         int64
	MinStart            uint64     // earliest span start, unix ns
	MaxEnd              uint64     // latest span end, unix ns
	Latency             *Quantiles // span durations; nil when not computed
	TTFT                *Quantiles // time to first token; nil when no span reported it
	// Metrics is the part of Errors, InputTokens, OutputTokens and
	// CostNanoUSD (which include it) that came from the GenAI client
	// metrics rather than spans, with the calls they counted; a backend
	// leaves it zero, internal/llmmetrics fills it.
	Metrics MetricMeasures
}

// MetricMeasures are LLM calls known from the OpenTelemetry GenAI client
// metrics (gen_ai.client.operation.duration, gen_ai.client.token.usage)
// rather than from spans: no session, user, agent, trace or percentile.
type MetricMeasures struct {
	Calls           int64   // operations counted by gen_ai.client.operation.duration
	Errors          int64   // of which with an error.type
	InputTokens     int64   // gen_ai.client.token.usage, gen_ai.token.type=input
	OutputTokens    int64   // and output
	CostNanoUSD     int64   // of those tokens, from the price table
	DurationSeconds float64 // the calls' summed durations
	// Duration is p50, p95 and p99 of the calls' durations (ns) estimated
	// from the histogram's buckets (Max unknown: 0); nil when not
	// computed. Not additive: Add leaves it alone.
	Duration *Quantiles
}

// Add adds o into m.
func (m *MetricMeasures) Add(o *MetricMeasures) {
	m.Calls += o.Calls
	m.Errors += o.Errors
	m.InputTokens += o.InputTokens
	m.OutputTokens += o.OutputTokens
	m.CostNanoUSD += o.CostNanoUSD
	m.DurationSeconds += o.DurationSeconds
}

// AddCounts adds the additive measures of o into m (counts, tokens, cost,
// time bounds); quantiles are not additive and are left alone.
func (m *Measures) AddCounts(o *Measures) {
	if m.Spans == 0 || (o.MinStart != 0 && o.MinStart < m.MinStart) {
		m.MinStart = o.MinStart
	}
	m.MaxEnd = max(m.MaxEnd, o.MaxEnd)
	m.Spans += o.Spans
	m.Counted += o.Counted
	m.Errors += o.Errors
	m.Traces += o.Traces
	m.InputTokens += o.InputTokens
	m.OutputTokens += o.OutputTokens
	m.CacheReadTokens += o.CacheReadTokens
	m.CacheCreationTokens += o.CacheCreationTokens
	m.ReasoningTokens += o.ReasoningTokens
	m.CostNanoUSD += o.CostNanoUSD
	m.Metrics.Add(&o.Metrics)
}

// LLMGroup is one group of LLM statistics.
type LLMGroup struct {
	Key    map[string]string // group-by dimension -> value
	Bucket int64             // time series only: bucket start, Unix seconds
	M      Measures
}

// LLMStats answers an LLM statistics or time-series query.
type LLMStats struct {
	// Groups: statistics sorted by cost, then spans, descending; time
	// series sorted by bucket.
	Groups []LLMGroup
	// QuantileError is the relative error of the quantiles (0: exact).
	QuantileError float64
	// TotalGroups > 0 says the backend applied LLMQuery.Top: Groups are
	// the first Top groups in its order, TotalGroups counts every group
	// and Totals (no quantiles) adds them all up.
	TotalGroups int
	Totals      Measures
	Result
}

// SessionSummary describes one LLM session (or conversation).
type SessionSummary struct {
	ID    string
	Users []string // sorted
	M     Measures // without quantiles
}

// LLM answers LLM usage statistics and sessions.
type LLM interface {
	// LLMStats groups the LLM spans matching q by q.GroupBy.
	LLMStats(ctx context.Context, project string, q *LLMQuery) (LLMStats, error)
	// LLMTimeseries is LLMStats per time bucket of step (a whole number of
	// seconds, buckets aligned to the Unix epoch), one group per (bucket,
	// key), sorted by bucket.
	LLMTimeseries(ctx context.Context, project string, q *LLMQuery, step time.Duration) (LLMStats, error)
	// Sessions summarises every session of the LLM spans matching f, in no
	// particular order. The answer may be shared with the backend's cache:
	// callers read it and never modify it.
	Sessions(ctx context.Context, project string, f *query.Filter) ([]SessionSummary, Result, error)
	// SessionTraces returns the traces holding a span of session id (that f
	// matches), oldest first, each with all its spans ordered by start.
	SessionTraces(ctx context.Context, project, id string, f *query.Filter) ([][]model.Span, Result, error)
}
