package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "traceql",
		Summary:      "TraceQL beyond one filter: a structural query, a count() pipeline, rate() and quantiles by attribute, cold and warm, over the canonical corpus",
		DefaultSpans: 1_000_000,
		Plan:         planTraceQL,
		Method: `The canonical corpus (8 services, traces of 6 to 14 spans, about 2% errors) over 6 hours is sent to the real
` + "`rastro serve`" + ` (wal durability, fresh data directory) by 8 concurrent OTLP/HTTP protobuf clients, retrying a 429
after a backoff. The server is then stopped (it seals its buffer), and for each query kind started again on the same
directory: the first request is the cold figure, then 2 warm-ups and 20 timed requests give the warm p50/p95. Every
answer is checked against the generated spans: the structural and count() queries' traces must be traces the same
query matches when evaluated on the generated trace (and there must be 20 of them), rate() must add up to every span
of each service, and the quantiles must have one series per span name and quantile.`,
		Columns: []Column{
			{Title: "Ingest spans/s (min-max)", Metric: "spans_per_s", Spread: true},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "Segments (at the queries)", Metric: "segments"},
		},
		Targets: traceqlTargets,
		Detail:  func(rec *Record) string { return kindsDetail(rec, traceqlScenario, traceqlKinds(&traceqlKey{})) },
	})
}

const traceqlScenario = "traceql-after-ingest"

// The queries measured, on the canonical corpus.
const (
	traceqlStructural = `{ resource.service.name = "frontend" } >> { resource.service.name = "payment" && status = error }`
	traceqlCount      = `{ } | count() > 12`
	traceqlRate       = `{ } | rate() by (resource.service.name)`
	traceqlQuantiles  = `{ } | quantile_over_time(duration, .5, .95, .99) by (name)`
)

// traceqlKey is the answer key.
type traceqlKey struct {
	minStart, maxStart uint64
	structural, count  map[string]bool // trace ids the queries match (count: in the last hour)
	perService         map[string]int64
	names              int
}

func traceqlKinds(key *traceqlKey) []llmKind {
	whole := fmt.Sprintf("since=%d&until=%d", key.minStart, key.maxStart+1)
	hour := fmt.Sprintf("since=%d&until=%d", key.maxStart+1-uint64(time.Hour), key.maxStart+1)
	traces := func(want map[string]bool) func([]byte, bool) (int64, error) {
		return func(b []byte, _ bool) (int64, error) {
			var r struct {
				Traces []struct {
					TraceID string `json:"trace_id"`
				} `json:"traces"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return 0, fmt.Errorf("bad JSON: %v", err)
			}
			if len(r.Traces) != min(20, len(want)) {
				return 0, fmt.Errorf("%d traces, want %d", len(r.Traces), min(20, len(want)))
			}
			for _, t := range r.Traces {
				if !want[t.TraceID] {
					return 0, fmt.Errorf("trace %s does not match the query on the generated data", t.TraceID)
				}
			}
			return int64(len(r.Traces)), nil
		}
	}
	metrics := func(check func(series []metricsSeriesJSON, path string) error) func([]byte, bool) (int64, error) {
		return func(b []byte, _ bool) (int64, error) {
			var r struct {
				Path   string              `json:"path"`
				Series []metricsSeriesJSON `json:"series"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return 0, fmt.Errorf("bad JSON: %v", err)
			}
			return int64(len(r.Series)), check(r.Series, r.Path)
		}
	}
	q := func(s string) string { return "q=" + url.QueryEscape(s) }
	// Titles go into markdown tables: their pipes are escaped.
	md := func(s string) string { return "`" + strings.ReplaceAll(s, "|", "\\|") + "`" }
	return []llmKind{
		{name: "structural", title: md(traceqlStructural) + ", whole corpus, 20 traces", path: "/api/v1/traces?limit=20&" + whole + "&" + q(traceqlStructural), check: traces(key.structural)},
		{name: "count", title: md(traceqlCount) + ", last hour, 20 traces", path: "/api/v1/traces?limit=20&" + hour + "&" + q(traceqlCount), check: traces(key.count)},
		{name: "rate", title: md(traceqlRate) + ", whole corpus, step 1m", path: "/api/v1/traceql/metrics?step=1m&" + whole + "&" + q(traceqlRate),
			check: metrics(func(series []metricsSeriesJSON, path string) error {
				got := map[string]float64{}
				for _, s := range series {
					for _, p := range s.Samples {
						got[fmt.Sprint(s.Labels["resource.service.name"])] += p.Value * 60
					}
				}
				for svc, n := range key.perService {
					if math.Abs(got[svc]-float64(n)) > 0.5 {
						return fmt.Errorf("service %s: rate adds up to %.1f spans, the corpus has %d", svc, got[svc], n)
					}
				}
				if path != "aggregates" {
					return fmt.Errorf("answered from %s, not stored aggregates", path)
				}
				return nil
			})},
		{name: "quantiles", title: md(traceqlQuantiles) + ", whole corpus, step 5m", path: "/api/v1/traceql/metrics?step=5m&" + whole + "&" + q(traceqlQuantiles),
			check: metrics(func(series []metricsSeriesJSON, path string) error {
				if len(series) != 3*key.names {
					return fmt.Errorf("%d series, want 3 quantiles x %d names", len(series), key.names)
				}
				if path != "aggregates" {
					return fmt.Errorf("answered from %s, not stored aggregates", path)
				}
				return nil
			})},
	}
}

type metricsSeriesJSON struct {
	Labels  map[string]any `json:"labels"`
	Samples []struct {
		Value float64 `json:"value"`
	} `json:"samples"`
}

func planTraceQL(ctx context.Context, cfg Config) ([]Scenario, error) {
	start := time.Now().Add(-llmCorpusWindow - 10*time.Minute).Truncate(time.Minute)
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: start, Window: llmCorpusWindow})
	if err != nil {
		return nil, err
	}
	key, err := newTraceQLKey(spans)
	if err != nil {
		return nil, err
	}
	pl, err := Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false)
	if err != nil {
		return nil, err
	}
	p := &llmPlan{spans: len(spans), payloads: interleave(pl, llmClients), kinds: traceqlKinds(key)}
	params := map[string]string{"spans": fmt.Sprint(len(spans)), "structural_traces": fmt.Sprint(len(key.structural)),
		"count_traces_last_hour": fmt.Sprint(len(key.count))}
	return []Scenario{{Name: traceqlScenario, Params: params,
		Run: func(ctx context.Context, env *RunEnv) Result { return runAfterIngest(ctx, env, p, nil) }}}, nil
}

// newTraceQLKey evaluates the search queries on every generated trace.
func newTraceQLKey(spans []model.Span) (*traceqlKey, error) {
	key := &traceqlKey{minStart: math.MaxUint64, structural: map[string]bool{}, count: map[string]bool{}, perService: map[string]int64{}}
	names := map[string]bool{}
	byTrace := map[model.TraceID][]model.Span{}
	for i := range spans {
		s := &spans[i]
		key.minStart, key.maxStart = min(key.minStart, s.StartTimeUnixNano), max(key.maxStart, s.StartTimeUnixNano)
		key.perService[s.Service]++
		names[s.Name] = true
		byTrace[s.TraceID] = append(byTrace[s.TraceID], *s)
	}
	key.names = len(names)
	sq, err := query.ParseQuery(traceqlStructural)
	if err != nil {
		return nil, err
	}
	cq, err := query.ParseQuery(traceqlCount)
	if err != nil {
		return nil, err
	}
	hour := key.maxStart + 1 - uint64(time.Hour)
	for id, tr := range byTrace {
		if sets, err := sq.Eval(tr); err == nil && len(sets) > 0 {
			key.structural[id.String()] = true
		}
		// The count query's candidates are traces with a span started in
		// the last hour.
		if !slices.ContainsFunc(tr, func(s model.Span) bool { return s.StartTimeUnixNano >= hour }) {
			continue
		}
		if sets, err := cq.Eval(tr); err == nil && len(sets) > 0 {
			key.count[id.String()] = true
		}
	}
	return key, nil
}

func traceqlTargets(rec *Record) []Target {
	return []Target{
		msTarget(rec, traceqlScenario, "structural_warm_p95_ms", "Warm p95, two-level structural query", 20),
		msTarget(rec, traceqlScenario, "count_warm_p95_ms", "Warm p95, `\\| count() > N` over one hour", 20),
		msTarget(rec, traceqlScenario, "rate_warm_p95_ms", "Warm p95, `rate() by (resource.service.name)`, whole store, 1m step", 50),
		msTarget(rec, traceqlScenario, "rate_cold_ms", "Cold, `rate() by (resource.service.name)`, whole store, 1m step", 200),
		msTarget(rec, traceqlScenario, "quantiles_warm_p95_ms", "Warm p95, `quantile_over_time(duration, .5, .95, .99) by (name)`", 100),
	}
}
