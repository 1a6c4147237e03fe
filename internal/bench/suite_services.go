package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "services",
		Summary:      "RED, latency heatmap and error groups over the whole store: cold and warm query latency over the api and llm corpora",
		DefaultSpans: 1_000_000,
		Plan:         planServices,
		Method: `Half the spans come from the ` + "`api`" + ` corpus and half from the ` + "`llm`" + ` corpus, over 6 hours, sent to the real
` + "`rastro serve`" + ` (wal durability, fresh data directory) by 8 concurrent OTLP/HTTP protobuf clients in interleaved
eighths of the corpus (as the llm suite does), retrying a 429 after a backoff. The server is then stopped (it seals
its buffer), and for each query kind started again on the same directory: the first request is the cold figure (a
new process with empty caches; the OS page cache stays warm), then 2 warm-ups and 20 timed requests give the warm
p50/p95. Each query covers the whole corpus (` + "`since`/`until`" + ` = its first and last span start). Every answer is
checked against an answer key computed from the generated spans: calls and errors per service (RED), spans in the
heatmap, and error spans in the error groups; a wrong answer refuses the run.`,
		Columns: []Column{
			{Title: "Ingest spans/s (min-max)", Metric: "spans_per_s", Spread: true},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "Segments (at the queries)", Metric: "segments"},
			{Title: "Unsealed spans (at the queries)", Metric: "buffer_spans"},
		},
		Targets: servicesTargets,
		Detail:  servicesDetail,
	})
}

const (
	servicesScenario   = "services-after-ingest"
	servicesWarmTarget = 50.0  // ms, warm p95 of every kind
	servicesColdTarget = 200.0 // ms, first request after a restart
)

// servicesKey is the answer key: calls and errors per service, and the
// corpus's time range.
type servicesKey struct {
	calls, errors      map[string]int64
	spans, errSpans    int64
	minStart, maxStart uint64
}

func newServicesKey(spans []model.Span) *servicesKey {
	k := &servicesKey{calls: map[string]int64{}, errors: map[string]int64{}, minStart: math.MaxUint64}
	for i := range spans {
		s := &spans[i]
		k.calls[s.Service]++
		k.spans++
		if s.StatusCode == model.StatusError {
			k.errors[s.Service]++
			k.errSpans++
		}
		k.minStart = min(k.minStart, s.StartTimeUnixNano)
		k.maxStart = max(k.maxStart, s.StartTimeUnixNano)
	}
	return k
}

func servicesKinds(key *servicesKey) []llmKind {
	win := fmt.Sprintf("since=%d&until=%d", key.minStart, key.maxStart+1)
	red := func(b []byte, _ bool) (int64, error) {
		var r struct {
			Series []struct {
				Service string `json:"service"`
				Calls   int64  `json:"calls"`
				Errors  int64  `json:"errors"`
			} `json:"series"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, fmt.Errorf("bad JSON: %v", err)
		}
		calls, errs := map[string]int64{}, map[string]int64{}
		var n int64
		for _, s := range r.Series {
			calls[s.Service] += s.Calls
			errs[s.Service] += s.Errors
			n += s.Calls
		}
		for svc, c := range key.calls {
			if calls[svc] != c || errs[svc] != key.errors[svc] {
				return 0, fmt.Errorf("service %q: %d calls, %d errors; the corpus has %d, %d", svc, calls[svc], errs[svc], c, key.errors[svc])
			}
		}
		if n != key.spans {
			return 0, fmt.Errorf("%d calls in all, the corpus has %d spans", n, key.spans)
		}
		return n, nil
	}
	return []llmKind{
		{name: "red_service", title: "RED by service, whole corpus, step 5m", path: "/api/v1/red?step=5m&" + win, check: red},
		{name: "red_operation", title: "RED by service and operation, whole corpus, step 5m", path: "/api/v1/red?group=operation&step=5m&" + win, check: red},
		{name: "heatmap", title: "heatmap, whole corpus, step 5m", path: "/api/v1/heatmap?step=5m&" + win,
			check: func(b []byte, _ bool) (int64, error) {
				var r struct {
					Cells []struct {
						Count int64 `json:"count"`
					} `json:"cells"`
				}
				if err := json.Unmarshal(b, &r); err != nil {
					return 0, fmt.Errorf("bad JSON: %v", err)
				}
				var n int64
				for _, c := range r.Cells {
					n += c.Count
				}
				if n != key.spans {
					return 0, fmt.Errorf("heatmap counts %d spans, the corpus has %d", n, key.spans)
				}
				return n, nil
			}},
		{name: "errors", title: "error groups (limit 10000), whole corpus", path: "/api/v1/errors?limit=10000&" + win,
			check: func(b []byte, _ bool) (int64, error) {
				var r struct {
					Groups []struct {
						Count int64 `json:"count"`
					} `json:"groups"`
				}
				if err := json.Unmarshal(b, &r); err != nil {
					return 0, fmt.Errorf("bad JSON: %v", err)
				}
				var n int64
				for _, g := range r.Groups {
					n += g.Count
				}
				if n != key.errSpans {
					return 0, fmt.Errorf("error groups count %d spans, the corpus has %d error spans", n, key.errSpans)
				}
				return n, nil
			}},
	}
}

type servicesPlan struct {
	llm llmPlan // payloads and kinds; its key is unused
	key *servicesKey
}

func planServices(ctx context.Context, cfg Config) ([]Scenario, error) {
	start := time.Now().Add(-llmCorpusWindow - 10*time.Minute).Truncate(time.Minute)
	var spans []model.Span
	for _, c := range []string{CorpusAPI, CorpusLLM} {
		s, err := Generate(c, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans / 2, Start: start, Window: llmCorpusWindow})
		if err != nil {
			return nil, err
		}
		spans = append(spans, s...)
	}
	key := newServicesKey(spans)
	pl, err := Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false)
	if err != nil {
		return nil, err
	}
	p := &servicesPlan{llm: llmPlan{spans: len(spans), payloads: interleave(pl, llmClients), kinds: servicesKinds(key)}, key: key}
	params := map[string]string{"spans": fmt.Sprint(len(spans)), "services": fmt.Sprint(len(key.calls)), "error_spans": fmt.Sprint(key.errSpans)}
	return []Scenario{{Name: servicesScenario, Params: params,
		Run: func(ctx context.Context, env *RunEnv) Result { return runServicesAfterIngest(ctx, env, p) }}}, nil
}

func runServicesAfterIngest(ctx context.Context, env *RunEnv, p *servicesPlan) Result {
	return runAfterIngest(ctx, env, &p.llm, nil)
}

func servicesTargets(rec *Record) []Target {
	var out []Target
	for _, k := range servicesKinds(&servicesKey{}) {
		out = append(out,
			msTarget(rec, servicesScenario, k.name+"_warm_p95_ms", "Warm p95, "+k.title, servicesWarmTarget),
			msTarget(rec, servicesScenario, k.name+"_cold_ms", "Cold, "+k.title, servicesColdTarget))
	}
	return out
}

// msTarget is the target "the median of metric across runs is below
// target ms" of a scenario.
func msTarget(rec *Record, scenario, metric, what string, target float64) Target {
	sr, ran := rec.Scenario(scenario)
	t := Target{Name: what + " (median of runs)", Want: fmt.Sprintf("< %g ms", target)}
	v := rec.median(scenario, metric)
	switch {
	case !ran:
		t.Got, t.Status = "not run", "NOT RUN"
	case sr.Status != "ok":
		t.Got, t.Status = sr.Status, "FAIL"
	case v < target:
		t.Got, t.Status = num(v, 2)+" ms", "PASS"
	default:
		t.Got, t.Status = num(v, 2)+" ms", "FAIL"
	}
	return withBusyNote(rec, t)
}

func servicesDetail(rec *Record) string {
	return kindsDetail(rec, servicesScenario, servicesKinds(&servicesKey{}))
}

// kindsDetail tabulates the cold and warm latency of each query kind of
// an after-ingest scenario.
func kindsDetail(rec *Record, scenario string, kinds []llmKind) string {
	var b strings.Builder
	b.WriteString("Per query kind, medians across runs (ms); min-max across runs in parentheses.\n\n")
	b.WriteString("| Query | Cold | Warm p50 | Warm p95 |\n|---|---:|---:|---:|\n")
	get := func(metric string) string {
		sr, ok := rec.Scenario(scenario)
		if !ok || sr.Status != "ok" {
			return "n/a"
		}
		sp, ok := sr.Summary[metric]
		if !ok {
			return "n/a"
		}
		return fmt.Sprintf("%s (%s-%s)", num(sp.Median, 2), num(sp.Min, 2), num(sp.Max, 2))
	}
	for _, k := range kinds {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.title, get(k.name+"_cold_ms"), get(k.name+"_warm_p50_ms"), get(k.name+"_warm_p95_ms"))
	}
	return b.String()
}
