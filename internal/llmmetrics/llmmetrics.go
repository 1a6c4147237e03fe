// Package llmmetrics reads the OpenTelemetry GenAI client metrics
// (gen_ai.client.operation.duration and gen_ai.client.token.usage, as
// internal/metricstore stores them: Prometheus names and labels) into LLM
// statistics groups, for SDKs and instrumentations that send these metrics
// instead of, or beside, spans.
//
// It works on any store.MetricBackend and knows no span storage: the caller
// (the server, above every store.Backend) says where spans already count,
// and merges the groups it returns with the backend's (docs/llm.md, "LLM
// metrics").
//
// The rule against counting a call twice: the metrics of a service and model
// count for an hour (UTC, aligned) only when no counted LLM span of that
// service and model started in that hour. Spans carry more (sessions,
// users, traces, percentiles), so where both arrive the spans are the
// figures.
//
// Counting over a window: a cumulative series' increase is the sum of its
// sample-to-sample increases, a drop being a reset after which the new value
// is all increase (as Prometheus' increase counts resets); each increase is
// dated at the later sample. The sample before the window (looked for up to
// Lookback before it) is the base; a series with no sample there is taken to
// have started inside the window, so its first sample counts whole. A delta
// series (marked otel_temporality="delta" by the metric store) adds its
// samples.
package llmmetrics

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/promql"
	"github.com/rastro-dev/rastro/internal/store"
)

// The stored names of the metrics read (metricstore.MetricName of the OTLP
// names and units: "s" gives _seconds, "{token}" nothing).
const (
	durationCount = "gen_ai_client_operation_duration_seconds_count"
	durationSum   = "gen_ai_client_operation_duration_seconds_sum"
	durationLe    = "gen_ai_client_operation_duration_seconds_bucket"
	tokensSum     = "gen_ai_client_token_usage_sum"
	// temporalityLabel is metricstore.TemporalityLabel.
	temporalityLabel = "otel_temporality"
)

// Lookback is how far before a window a cumulative series' base sample is
// looked for. SDKs export every cumulative series at each interval (60 s by
// default), so an hour holds one unless the client was down.
const Lookback = time.Hour

// Query selects the metrics of one project.
type Query struct {
	Project string
	// Start and End are the window [Start, End) in Unix nanoseconds; End 0
	// is now.
	Start, End uint64
	Service    string   // "" = every service
	GroupBy    []string // store.LLMGroupKeys; session, user and agent are "" (metrics do not have them)
	// Step > 0 groups per time bucket of Step (aligned to the Unix epoch),
	// as store.LLM.LLMTimeseries does.
	Step time.Duration
}

// SpanHour says that counted LLM spans of a service and model started in
// the hour beginning at Hour (Unix seconds).
type SpanHour struct {
	Service, Model string
	Hour           int64
}

// SpanHours returns the hours in [from, to) (Unix seconds, whole hours)
// holding counted LLM spans, per service and model. Read calls it only when
// the window has GenAI metrics.
type SpanHours func(ctx context.Context, from, to int64) (map[SpanHour]bool, error)

// Usage is what the metrics add to a window's LLM statistics.
type Usage struct {
	// Groups are keyed as q.GroupBy asks (with Bucket for a step), their
	// Measures holding only Metrics and the totals it adds to.
	Groups []store.LLMGroup
	// Series counts the GenAI metric series read; Ignored the calls of
	// the window left out because spans of their service and model cover
	// the hour.
	Series  int
	Ignored store.MetricMeasures
}

// increase is one sample's increase of one series.
type increase struct {
	t int64 // milliseconds
	v float64
}

// increases appends to out the increases of s dated in [startMs, endMs).
func increases(s *store.SeriesData, startMs, endMs int64, out []increase) []increase {
	if s.Labels.Get(temporalityLabel) == "delta" {
		for _, p := range s.Samples {
			if p.T >= startMs && p.T < endMs && p.V > 0 {
				out = append(out, increase{p.T, p.V})
			}
		}
		return out
	}
	prev, havePrev := 0.0, false
	for _, p := range s.Samples {
		if math.IsNaN(p.V) {
			continue // no value: neither an increase nor a base
		}
		inc := p.V
		if havePrev && p.V >= prev {
			inc = p.V - prev
		}
		prev, havePrev = p.V, true
		if p.T >= startMs && p.T < endMs && inc > 0 {
			out = append(out, increase{p.T, inc})
		}
	}
	return out
}

// count rounds a count's increase to an integer, at most 2^53 (where
// float64 stops counting exactly): an absurd value sent by a client cannot
// overflow the sums.
func count(v float64) int64 { return int64(math.Round(min(v, 1<<53))) }

// dims are the LLM dimensions a series' labels give.
type dims struct {
	service, model, provider, operation string
}

func dimsOf(ls store.Labels) dims {
	m := ls.Get("gen_ai_response_model")
	if m == "" {
		m = ls.Get("gen_ai_request_model")
	}
	p := ls.Get("gen_ai_provider_name")
	if p == "" {
		p = ls.Get("gen_ai_system") // semantic conventions up to v1.36
	}
	svc := ls.Get("service_name")
	if svc == "" {
		svc = ls.Get("job")
	}
	return dims{service: svc, model: m, provider: llm.NormalizeProvider(p), operation: ls.Get("gen_ai_operation_name")}
}

func (d *dims) value(key string, tMs int64) string {
	switch key {
	case "model":
		return d.model
	case "provider":
		return d.provider
	case "service":
		return d.service
	case "operation":
		return d.operation
	case "hour":
		return time.UnixMilli(tMs).UTC().Truncate(time.Hour).Format(time.RFC3339)
	case "day":
		return time.UnixMilli(tMs).UTC().Truncate(24 * time.Hour).Format("2006-01-02")
	}
	return "" // session, user, agent: not in the metrics
}

// selection is the matchers of q's GenAI series and its window in whole
// milliseconds [startMs, endMs).
func selection(q *Query) (ms []*store.LabelMatcher, startMs, endMs int64, err error) {
	end := q.End
	if end == 0 {
		end = uint64(time.Now().UnixNano())
	}
	startMs = int64(q.Start / 1e6)
	if q.Start%1e6 != 0 {
		startMs++ // the first whole millisecond in the window
	}
	endMs = int64((end + 1e6 - 1) / 1e6) // samples before end: t < endMs
	name, err := store.NewLabelMatcher(store.MatchRegexp, store.MetricName, durationCount+"|"+durationSum+"|"+durationLe+"|"+tokensSum)
	if err != nil {
		return nil, 0, 0, err
	}
	ms = []*store.LabelMatcher{name}
	if q.Service != "" {
		svc, err := store.NewLabelMatcher(store.MatchEqual, "service_name", q.Service)
		if err != nil {
			return nil, 0, 0, err
		}
		ms = append(ms, svc)
	}
	return ms, startMs, endMs, nil
}

// Read returns the LLM usage the GenAI metrics of q's window add where no
// span of the same service and model counts. A window without GenAI metrics
// costs one series selection and no span query.
func Read(ctx context.Context, mb store.MetricBackend, q *Query, prices *llm.Prices, spans SpanHours) (Usage, error) {
	ms, startMs, endMs, err := selection(q)
	if err != nil {
		return Usage{}, err
	}
	series, err := mb.SelectSeries(q.Project, max(startMs-Lookback.Milliseconds(), 0), endMs-1, ms)
	if err != nil || len(series) == 0 {
		return Usage{Series: len(series)}, err
	}
	if err := ctx.Err(); err != nil {
		return Usage{}, err
	}
	u := Usage{Series: len(series)}
	// Ask for the span hours only when the window has an increase.
	var inc []increase // reused per series
	found := false
	for i := range series {
		if inc = increases(&series[i], startMs, endMs, inc[:0]); len(inc) > 0 {
			found = true
			break
		}
	}
	if !found {
		return u, nil
	}
	hourMs := time.Hour.Milliseconds()
	covered, err := spans(ctx, startMs/hourMs*3600, (endMs+hourMs-1)/hourMs*3600)
	if err != nil {
		return Usage{}, err
	}
	byKey := map[string]int{}
	var kb []byte // the group's key: bucket and values, 0-separated
	// hists[i] is group i's duration histogram over the window: upper
	// bound -> observations at or below it.
	var hists []map[float64]float64
	// groupOf returns the index in u.Groups of the group of a series of
	// dims d at time tMs (in bucket), adding it if new.
	groupOf := func(d *dims, tMs, bucket int64) int {
		kb = strconv.AppendInt(kb[:0], bucket, 10)
		for _, k := range q.GroupBy {
			kb = append(append(kb, 0), d.value(k, tMs)...)
		}
		if i, ok := byKey[string(kb)]; ok { // no allocation for the lookup
			return i
		}
		key := make(map[string]string, len(q.GroupBy))
		for _, k := range q.GroupBy {
			key[k] = d.value(k, tMs)
		}
		byKey[string(kb)] = len(u.Groups)
		u.Groups = append(u.Groups, store.LLMGroup{Key: key, Bucket: bucket})
		hists = append(hists, nil)
		return len(u.Groups) - 1
	}
	for si := range series {
		s := &series[si]
		if inc = increases(s, startMs, endMs, inc[:0]); len(inc) == 0 {
			continue
		}
		d := dimsOf(s.Labels)
		// last caches the previous increase's hour, bucket and group (-1:
		// spans cover the hour; -2: none yet).
		last := struct {
			hour, bucket int64
			group        int
		}{group: -2}
		name := s.Labels.Get(store.MetricName)
		le := math.NaN()
		if name == durationLe {
			if le, err = strconv.ParseFloat(s.Labels.Get("le"), 64); err != nil {
				continue // no bound: Prometheus ignores such a series too
			}
		}
		// A bucket's observations are added up per group and put in the
		// group's histogram when the group changes.
		pendGroup, pend := -1, 0.0
		flush := func() {
			if pendGroup >= 0 {
				if hists[pendGroup] == nil {
					hists[pendGroup] = map[float64]float64{}
				}
				hists[pendGroup][le] += pend
			}
			pendGroup, pend = -1, 0
		}
		tokenType := s.Labels.Get("gen_ai_token_type")
		isErr := s.Labels.Get("error_type") != ""
		for _, in := range inc {
			var add store.MetricMeasures
			switch name {
			case durationCount:
				add.Calls = count(in.v)
				if isErr {
					add.Errors = add.Calls
				}
			case durationSum:
				add.DurationSeconds = in.v
			case tokensSum:
				n := count(in.v)
				var c int64
				switch tokenType {
				case "input":
					add.InputTokens = n
					c, _ = prices.Cost(d.provider, d.model, time.UnixMilli(in.t), n, 0, 0, 0)
				case "output":
					add.OutputTokens = n
					c, _ = prices.Cost(d.provider, d.model, time.UnixMilli(in.t), 0, n, 0, 0)
				default:
					continue // a token type the conventions do not define
				}
				add.CostNanoUSD = c
			}
			// A series' increases come in time order: the hour (and so the
			// day) and bucket of the previous one are usually this one's.
			hour := in.t / hourMs
			var bucket int64
			if q.Step > 0 {
				step := q.Step.Milliseconds()
				bucket = in.t / step * step / 1000
			}
			if hour != last.hour || bucket != last.bucket || last.group == -2 {
				last.hour, last.bucket, last.group = hour, bucket, -1
				if !covered[SpanHour{Service: d.service, Model: d.model, Hour: hour * 3600}] {
					last.group = groupOf(&d, in.t, bucket)
				}
			}
			if last.group < 0 {
				u.Ignored.Add(&add)
				continue
			}
			i := last.group
			if name == durationLe {
				if i != pendGroup {
					flush()
					pendGroup = i
				}
				pend += in.v
				continue
			}
			m := &u.Groups[i].M
			m.Metrics.Add(&add)
		}
		flush()
	}
	for i, h := range hists {
		u.Groups[i].M.Metrics.Duration = quantiles(h)
	}
	for i := range u.Groups {
		m := &u.Groups[i].M
		m.Errors, m.InputTokens, m.OutputTokens, m.CostNanoUSD = m.Metrics.Errors, m.Metrics.InputTokens, m.Metrics.OutputTokens, m.Metrics.CostNanoUSD
	}
	return u, nil
}

// quantiles estimates p50, p95 and p99 (ns) from a duration histogram
// (seconds), as histogram_quantile does; nil without observations.
func quantiles(h map[float64]float64) *store.Quantiles {
	if len(h) == 0 {
		return nil
	}
	uppers := make([]float64, 0, len(h))
	counts := make([]float64, 0, len(h))
	for le, n := range h {
		uppers = append(uppers, le)
		counts = append(counts, n)
	}
	q := func(p float64) float64 { return promql.BucketQuantile(p, uppers, counts) * 1e9 }
	out := &store.Quantiles{P50: q(0.5), P95: q(0.95), P99: q(0.99)}
	if math.IsNaN(out.P50) || math.IsNaN(out.P95) || math.IsNaN(out.P99) {
		return nil
	}
	return out
}

// Present reports whether the project has GenAI metric series with samples
// in q's window (of q.Service, when set).
func Present(mb store.MetricBackend, q *Query) (bool, error) {
	ms, startMs, endMs, err := selection(q)
	if err != nil {
		return false, err
	}
	ls, err := mb.SeriesLabels(q.Project, startMs, endMs-1, ms)
	return len(ls) > 0, err
}
