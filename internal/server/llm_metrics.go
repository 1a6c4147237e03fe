package server

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/llmmetrics"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// The LLM statistics merge the GenAI client metrics (internal/llmmetrics)
// into the backend's span groups here, above store.Backend, so every
// backend gets them from the one metric store (docs/llm.md, "LLM metrics").

// metricsFilterOnly reports whether f has no condition the metrics cannot
// answer: the window and the service only.
func metricsFilterOnly(f *query.Filter) bool {
	return f.Expr == nil && f.Name == "" && !f.HasStatus && f.MinDuration == 0 && f.MaxDuration == 0 && f.Content == nil
}

// llmMetrics returns what the GenAI metrics add to an LLM statistics answer
// over f grouped by gb (per step when step > 0), and warnings; nothing when
// the server has no metric store.
func (s *Server) llmMetrics(ctx context.Context, b store.Backend, project string, f *query.Filter, gb []string, step time.Duration) (llmmetrics.Usage, []string, error) {
	ms, ierr := s.currentMetrics()
	if ierr != nil {
		return llmmetrics.Usage{}, nil, nil // no metric store (ClickHouse) or not open yet: spans only
	}
	q := &llmmetrics.Query{Project: project, Start: f.Start, End: f.End, Service: f.Service, GroupBy: gb, Step: step}
	if !metricsFilterOnly(f) {
		// Metrics have no span name, status, duration or attributes to
		// match: they are left out, and the answer says so if there are any.
		has, err := llmmetrics.Present(ms, q)
		if err != nil || !has {
			return llmmetrics.Usage{}, nil, err
		}
		return llmmetrics.Usage{}, []string{"GenAI client metrics are not included: the filter has conditions metrics cannot answer (only the window and service apply to them)"}, nil
	}
	spanHours := func(ctx context.Context, from, to int64) (map[llmmetrics.SpanHour]bool, error) {
		st, err := b.LLMTimeseries(ctx, project, &store.LLMQuery{
			Filter:  query.Filter{Start: uint64(from) * 1e9, End: uint64(to) * 1e9, Service: f.Service},
			GroupBy: []string{"service", "model"},
		}, time.Hour)
		if err != nil {
			return nil, err
		}
		out := make(map[llmmetrics.SpanHour]bool, len(st.Groups))
		for _, g := range st.Groups {
			if g.M.Counted > 0 {
				out[llmmetrics.SpanHour{Service: g.Key["service"], Model: g.Key["model"], Hour: g.Bucket}] = true
			}
		}
		return out, nil
	}
	u, err := llmmetrics.Read(ctx, ms, q, s.opts.Prices, spanHours)
	return u, nil, err
}

// mergeLLMGroups adds the metric groups into the span groups of the same
// key (and bucket), appending those with none, in a new slice ordered as a
// backend orders its answer: by bucket for a time series, then (or else) by
// cost and spans, descending, then by metric calls.
func mergeLLMGroups(spans, metrics []store.LLMGroup, gb []string, series bool) []store.LLMGroup {
	out := slices.Clone(spans)
	keyOf := func(g *store.LLMGroup) string {
		var sb strings.Builder
		sb.WriteString(strconv.FormatInt(g.Bucket, 10))
		for _, k := range gb {
			sb.WriteByte(0)
			sb.WriteString(g.Key[k])
		}
		return sb.String()
	}
	at := make(map[string]int, len(out))
	for i := range out {
		at[keyOf(&out[i])] = i
	}
	for i := range metrics {
		g := &metrics[i]
		if j, ok := at[keyOf(g)]; ok {
			out[j].M.AddCounts(&g.M)
			out[j].M.Metrics.Duration = g.M.Metrics.Duration // one metric group per key: not merged
			continue
		}
		at[keyOf(g)] = len(out)
		out = append(out, *g)
	}
	slices.SortStableFunc(out, func(a, b store.LLMGroup) int {
		c := cmp.Or(cmp.Compare(b.M.CostNanoUSD, a.M.CostNanoUSD), cmp.Compare(b.M.Spans, a.M.Spans),
			cmp.Compare(b.M.Metrics.Calls, a.M.Metrics.Calls))
		if series {
			return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), c)
		}
		return c
	})
	return out
}

// metricsSummaryJSON is an answer's account of the GenAI metrics: how many
// series were read and what was left out because spans already count.
type metricsSummaryJSON struct {
	Series  int                 `json:"series"`
	Ignored *metricMeasuresJSON `json:"ignored_for_spans,omitempty"`
}

func metricsSummary(u *llmmetrics.Usage) *metricsSummaryJSON {
	if u.Series == 0 {
		return nil
	}
	return &metricsSummaryJSON{Series: u.Series, Ignored: metricMeasures(&u.Ignored)}
}

// openLLMAnswer starts an LLM statistics answer up to "group_by": with
// "from_metrics" first when the window has GenAI metrics (keys in
// encoding/json's sorted order, as llm_json.go keeps them).
func openLLMAnswer(u *llmmetrics.Usage) []byte {
	b := []byte{'{'}
	if ms := metricsSummary(u); ms != nil {
		b, _ = appendJSONValue(append(b, `"from_metrics":`...), ms) // ints and finite floats: never fails
		b = append(b, ',')
	}
	return append(b, `"group_by":`...)
}
