package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "agents",
		Summary:      "the agent tools: /api/v1/summary and /api/v1/anomalies over the whole store and the last hour, and MCP get_trace of a 5,000-span trace, cold and warm",
		DefaultSpans: 1_000_000,
		Plan:         planAgents,
		Method: `Half the spans come from the ` + "`api`" + ` corpus and half from the ` + "`llm`" + ` corpus, over 6 hours, plus one trace of
5,000 spans (a root, 50 handlers, 99 database calls each, 5 of them failing), sent to the real ` + "`rastro serve`" + ` (wal
durability, fresh data directory) by 8 concurrent OTLP/HTTP protobuf clients, retrying a 429 after a backoff. The
server is then stopped (it seals its buffer), and for each query kind started again on the same directory: the first
request is the cold figure (a new process with empty caches; the OS page cache stays warm), then 2 warm-ups and 20
timed requests give the warm p50/p95. The whole-store summary covers the corpus (` + "`since`/`until`" + ` = its first and
last span start); the last-hour summary and the anomalies cover its last hour against the hour before and the 4-hour
baseline. ` + "`get_trace`" + ` is a real MCP ` + "`tools/call`" + ` POSTed to ` + "`/mcp`" + ` (streamable HTTP, JSON response) with the
default budget of 8,000 tokens. Every answer is checked: the summary's span and error totals against the generated
spans, and get_trace's span count, budget and error spans; a wrong answer refuses the run.`,
		Columns: []Column{
			{Title: "Ingest spans/s (min-max)", Metric: "spans_per_s", Spread: true},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "Segments (at the queries)", Metric: "segments"},
			{Title: "get_trace tokens", Metric: "get_trace_tokens"},
		},
		Targets: agentsTargets,
		Detail:  agentsDetail,
	})
}

const (
	agentsScenario   = "agents-after-ingest"
	agentsWarmTarget = 50.0  // ms, warm p95 of the whole-store summary
	agentsColdTarget = 200.0 // ms, its first request after a restart
	agentsTraceMs    = 100.0 // ms, get_trace of 5,000 spans
	agentsBudget     = 8000  // tokens, get_trace's default budget
)

// agentsKey is the answer key: spans and errors in the whole corpus and in
// its last hour, and the wide trace.
type agentsKey struct {
	minStart, maxStart uint64
	spans, errs        int64
	hourSpans, hourErr int64
	trace              string
	traceErrs          []string
	traceTokens        *float64 // set by the check: the last get_trace answer's size
}

func agentsKinds(key *agentsKey) []llmKind {
	whole := fmt.Sprintf("since=%d&until=%d", key.minStart, key.maxStart+1)
	hour := fmt.Sprintf("since=%d&until=%d", key.maxStart+1-uint64(time.Hour), key.maxStart+1)
	totals := func(spans, errs int64) func([]byte, bool) (int64, error) {
		return func(b []byte, _ bool) (int64, error) {
			var r struct {
				Totals struct {
					Spans  int64 `json:"spans"`
					Errors int64 `json:"errors"`
				} `json:"totals"`
				Services []json.RawMessage `json:"services"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return 0, fmt.Errorf("bad JSON: %v", err)
			}
			if r.Totals.Spans != spans || r.Totals.Errors != errs || len(r.Services) == 0 {
				return 0, fmt.Errorf("totals %d spans %d errors; the corpus has %d, %d", r.Totals.Spans, r.Totals.Errors, spans, errs)
			}
			return r.Totals.Spans, nil
		}
	}
	call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "get_trace", "arguments": map[string]any{"trace_id": key.trace}}})
	return []llmKind{
		{name: "summary", title: "summary, whole corpus", target: agentsWarmTarget, path: "/api/v1/summary?" + whole, check: totals(key.spans, key.errs)},
		{name: "summary_hour", title: "summary, last hour against the hour before", path: "/api/v1/summary?" + hour, check: totals(key.hourSpans, key.hourErr)},
		{name: "anomalies_hour", title: "anomalies, last hour", path: "/api/v1/anomalies?" + hour, check: func(b []byte, _ bool) (int64, error) {
			var r struct {
				Anomalies []json.RawMessage `json:"anomalies"`
				Method    string            `json:"method"`
			}
			if err := json.Unmarshal(b, &r); err != nil || r.Method == "" || r.Anomalies == nil {
				return 0, fmt.Errorf("bad answer: %v %.200s", err, b)
			}
			return int64(len(r.Anomalies)), nil
		}},
		{name: "get_trace", title: "MCP get_trace, 5,000 spans, budget 8,000 tokens", target: agentsTraceMs, path: "/mcp", post: call,
			check: func(b []byte, _ bool) (int64, error) {
				var r struct {
					Result struct {
						IsError    bool `json:"isError"`
						Structured struct {
							Trace struct {
								Spans  int  `json:"spans"`
								Tokens int  `json:"tokens"`
								Over   bool `json:"over_budget"`
								Tree   []struct {
									SpanID string `json:"span_id"`
								} `json:"tree"`
							} `json:"trace"`
						} `json:"structuredContent"`
					} `json:"result"`
				}
				if err := json.Unmarshal(b, &r); err != nil || r.Result.IsError {
					return 0, fmt.Errorf("bad answer: %v %.300s", err, b)
				}
				tr := r.Result.Structured.Trace
				if tr.Spans != 5000 || tr.Tokens > agentsBudget || tr.Over || len(b)/4 > 2*agentsBudget+1000 {
					return 0, fmt.Errorf("get_trace: %d spans, %d tokens (over %v), %d bytes", tr.Spans, tr.Tokens, tr.Over, len(b))
				}
				shown := map[string]bool{}
				for _, n := range tr.Tree {
					shown[n.SpanID] = true
				}
				for _, id := range key.traceErrs {
					if !shown[id] {
						return 0, fmt.Errorf("get_trace dropped error span %s", id)
					}
				}
				if key.traceTokens != nil {
					*key.traceTokens = float64(tr.Tokens)
				}
				return int64(tr.Spans), nil
			}},
	}
}

// wideTrace is one trace of n spans (n >= 2) starting at start: a root,
// handlers of 100 spans each (the handler and 99 database calls), one call
// in 997 failing.
func wideTrace(n int, start time.Time) []model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("batch-worker")}}}
	tid := model.TraceID{0xb1, 0x9, 0xde, 0x7a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	sid := func(i int) model.SpanID { return model.SpanID{0xaa, byte(i >> 16), byte(i >> 8), byte(i), 1, 2, 3, 4} }
	t0 := uint64(start.UnixNano())
	spans := []model.Span{{TraceID: tid, SpanID: sid(0), Name: "run batch", Kind: model.KindServer, Resource: res, Service: "batch-worker",
		StartTimeUnixNano: t0, EndTimeUnixNano: t0 + 60e9}}
	var handler model.SpanID
	var hs uint64
	for i := 1; i < n; i++ {
		if (i-1)%100 == 0 {
			handler, hs = sid(i), t0+uint64((i-1)/100)*1e9
			spans = append(spans, model.Span{TraceID: tid, SpanID: handler, ParentSpanID: sid(0), Name: "handle item", Resource: res,
				Service: "batch-worker", StartTimeUnixNano: hs, EndTimeUnixNano: hs + 1e9})
			continue
		}
		c := uint64((i - 1) % 100)
		s := model.Span{TraceID: tid, SpanID: sid(i), ParentSpanID: handler, Name: fmt.Sprintf("SELECT item_%d", c%7), Kind: model.KindClient,
			Resource: res, Service: "batch-worker", StartTimeUnixNano: hs + c*1e7, EndTimeUnixNano: hs + c*1e7 + 5e6,
			Attributes: []model.KeyValue{{Key: "db.statement", Value: model.StringValue("select * from items where id = ?")}}}
		if i%997 == 0 {
			s.StatusCode, s.StatusMessage = model.StatusError, fmt.Sprintf("deadlock detected on row %d", i)
		}
		spans = append(spans, s)
	}
	return spans
}

type agentsPlan struct {
	llm    llmPlan
	key    *agentsKey
	tokens float64
}

func planAgents(ctx context.Context, cfg Config) ([]Scenario, error) {
	start := time.Now().Add(-llmCorpusWindow - 10*time.Minute).Truncate(time.Minute)
	var spans []model.Span
	for _, c := range []string{CorpusAPI, CorpusLLM} {
		s, err := Generate(c, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans / 2, Start: start, Window: llmCorpusWindow})
		if err != nil {
			return nil, err
		}
		spans = append(spans, s...)
	}
	wide := wideTrace(5000, start.Add(llmCorpusWindow/2))
	key := &agentsKey{trace: wide[0].TraceID.String(), minStart: ^uint64(0)}
	for i := range wide {
		if wide[i].StatusCode == model.StatusError {
			key.traceErrs = append(key.traceErrs, wide[i].SpanID.String())
		}
	}
	spans = append(spans, wide...)
	for i := range spans {
		key.minStart, key.maxStart = min(key.minStart, spans[i].StartTimeUnixNano), max(key.maxStart, spans[i].StartTimeUnixNano)
	}
	hourStart := key.maxStart + 1 - uint64(time.Hour)
	for i := range spans {
		s := &spans[i]
		e := int64(0)
		if s.StatusCode == model.StatusError {
			e = 1
		}
		key.spans++
		key.errs += e
		if s.StartTimeUnixNano >= hourStart {
			key.hourSpans++
			key.hourErr += e
		}
	}
	pl, err := Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false)
	if err != nil {
		return nil, err
	}
	p := &agentsPlan{key: key}
	key.traceTokens = &p.tokens
	p.llm = llmPlan{spans: len(spans), payloads: interleave(pl, llmClients), kinds: agentsKinds(key)}
	params := map[string]string{"spans": fmt.Sprint(len(spans)), "error_spans": fmt.Sprint(key.errs), "last_hour_spans": fmt.Sprint(key.hourSpans)}
	return []Scenario{{Name: agentsScenario, Params: params,
		Run: func(ctx context.Context, env *RunEnv) Result {
			r := runAfterIngest(ctx, env, &p.llm, nil)
			if r.Metrics != nil {
				r.Metrics["get_trace_tokens"] = p.tokens
			}
			return r
		}}}, nil
}

func agentsTargets(rec *Record) []Target {
	return []Target{
		msTarget(rec, agentsScenario, "summary_warm_p95_ms", "Warm p95, summary of the whole store", agentsWarmTarget),
		msTarget(rec, agentsScenario, "summary_cold_ms", "Cold (first after restart), summary of the whole store", agentsColdTarget),
		msTarget(rec, agentsScenario, "get_trace_warm_p95_ms", "Warm p95, MCP get_trace of a 5,000-span trace within 8,000 tokens", agentsTraceMs),
		msTarget(rec, agentsScenario, "get_trace_cold_ms", "Cold, MCP get_trace of a 5,000-span trace within 8,000 tokens", agentsTraceMs),
	}
}

func agentsDetail(rec *Record) string {
	return kindsDetail(rec, agentsScenario, agentsKinds(&agentsKey{}))
}
