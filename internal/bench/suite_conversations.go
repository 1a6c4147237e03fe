package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "conversations",
		Summary:      "conversations that resend their history (the llm-sessions corpus): bytes on disk with values stored apart and deduplicated vs inline, and a session's trace read",
		DefaultSpans: conversationsTargetSpans,
		Plan:         planConversations,
		Method: `The ` + "`llm-sessions`" + ` corpus (generated here, seeded; docs/benchmarks/README.md): conversations as chat and
agent applications record them, about 1,000 open at once and interleaved, of 5-30 turns; every model call carries
the session's system prompt and tool schema (2-8 KiB, one of 12 shared by many sessions) and every earlier message,
spelled as OpenAI-style message arrays or one attribute per message, so a session of N turns carries O(N^2) message
bytes. A million of its spans are about 8 GB of attribute text, more than the harness holds, so each run generates
the corpus as it sends it, in chunks of ` + fmt.Sprint(conversationsChunk) + ` spans (the same spans in every run and scenario),
over OTLP/HTTP protobuf from 4 clients (a 429 is retried after a backoff) into the real ` + "`rastro serve`" + ` (wal
durability, fresh data directory, ` + "`--compaction=false`" + ` so that what is measured is what was asked for).
Two scenarios: ` + "`values-apart`" + ` (the default: values of 1 KiB and more, and the messages of message arrays and of
per-message attributes, stored once in the value store) and ` + "`values-inline`" + ` (` + "`--value-threshold 0`" + `: every
value in its column, compressed with its block). Each run checks the stored count, stops the server (sealing
everything) and measures the data directory as sealed; restarts it and reads whole traces, one turn of a session each, by id
(` + "`GET /api/v1/traces/{id}`" + `): about 1,000 traces spread over the corpus, one pass to warm the caches as a user browsing
sessions does, then the same traces timed. Every answer must hold the trace's spans and, where the trace has its
model call, the session's system prompt, so a value that was not resolved fails the run. Ingest speed is not a
figure here: the generator runs between the sends. Percentiles are exact nearest-rank; tables show medians across
runs. Not measured here: the data compacted (a merge at this size takes many minutes: it resolves every value and
tokenises the text again; docs/benchmarks/conversations.md).`,
		Columns: []Column{
			{Title: "Values", Param: "values"},
			{Title: "Attribute text B/span", Metric: "raw_attr_bytes_per_span"},
			{Title: "Disk B/span as sealed (min-max)", Metric: "sealed_disk_bytes_per_span", Spread: true, Digits: 1},
			{Title: "of which segments", Metric: "sealed_segment_bytes_per_span", Digits: 1},
			{Title: "of which value store", Metric: "sealed_value_bytes_per_span", Digits: 1},
			{Title: "Segments", Metric: "segments"},
			{Title: "Trace read p50 ms", Metric: "trace_p50_ms", Digits: 3},
			{Title: "Trace read p95 ms (min-max)", Metric: "trace_p95_ms", Spread: true, Digits: 3},
			{Title: "In the server p95 ms", Metric: "trace_server_p95_ms", Digits: 3},
			{Title: "Traces read", Metric: "traces_read"},
		},
		Targets: conversationsTargets,
	})
}

const (
	// conversationsTargetSpans is the corpus size issue 17's targets are
	// set at.
	conversationsTargetSpans = 1_000_000
	// conversationsChunk is how many spans are generated, encoded and sent
	// at a time (about 80 MB of attribute text).
	conversationsChunk = 10_000
	// conversationsReads is about how many traces are read by id.
	conversationsReads = 1000
	// ConversationsMinRatio: bytes on disk per span, inline / stored apart.
	ConversationsMinRatio = 3.0
	// ConversationsMaxReadRatio: a session's trace read p95, stored apart /
	// inline.
	ConversationsMaxReadRatio = 1.5

	conversationsApartScenario  = "values-apart"
	conversationsInlineScenario = "values-inline"
	// conversationsPrompt begins every session's system prompt
	// (sessionSystemPrompts).
	conversationsPrompt = "You are a careful assistant for team "
)

type conversationsPlan struct {
	opts  CorpusOptions
	batch int
}

func planConversations(_ context.Context, cfg Config) ([]Scenario, error) {
	p := &conversationsPlan{
		opts:  CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: time.Now().Add(-contentWindow - 10*time.Minute).Truncate(time.Minute), Window: contentWindow},
		batch: cfg.Batch,
	}
	if err := p.opts.Validate(); err != nil {
		return nil, err
	}
	return []Scenario{
		{
			Name:   conversationsApartScenario,
			Params: map[string]string{"values": "stored apart (default)"},
			Run:    func(ctx context.Context, env *RunEnv) Result { return runConversations(ctx, env, p, true) },
		},
		{
			Name:   conversationsInlineScenario,
			Params: map[string]string{"values": "inline (--value-threshold 0)"},
			Run:    func(ctx context.Context, env *RunEnv) Result { return runConversations(ctx, env, p, false) },
		},
	}, nil
}

// sumLoads adds b's counts to a (the chunks of one streamed load).
func sumLoads(a *LoadResult, b LoadResult) {
	a.Elapsed += b.Elapsed
	a.Requests += b.Requests
	a.AckedRequests += b.AckedRequests
	a.SentSpans += b.SentSpans
	a.AcceptedSpans += b.AcceptedSpans
	a.RejectedSpans += b.RejectedSpans
	a.Status429 += b.Status429
	a.Retried429 += b.Retried429
	a.Errors += b.Errors
	a.Shed += b.Shed
	a.WireBytes += b.WireBytes
	if a.FirstError == "" {
		a.FirstError = b.FirstError
	}
}

func runConversations(ctx context.Context, env *RunEnv, p *conversationsPlan, apart bool) Result {
	args := []string{"--compaction=false"}
	if !apart {
		args = append(args, "--value-threshold", "0")
	}
	opts := ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal", ExtraArgs: args}
	srv, err := StartServer(ctx, opts)
	if err != nil {
		return refused("start server: %v", err)
	}
	defer func() { srv.Kill() }()

	// The traces read back: every k-th root, with their span counts.
	every := max(1, p.opts.Spans/(2*conversationsReads))
	perTrace := map[model.TraceID]int{}
	var ids []model.TraceID
	var lr LoadResult
	var raw int64
	roots := 0
	err = StreamLLMSessions(p.opts, conversationsChunk, func(spans []model.Span) error {
		for i := range spans {
			s := &spans[i]
			if s.IsRoot() {
				if roots%every == 0 {
					ids = append(ids, s.TraceID)
					perTrace[s.TraceID] = 0
				}
				roots++
			}
			if _, ok := perTrace[s.TraceID]; ok {
				perTrace[s.TraceID]++
			}
			for _, kv := range s.Attributes {
				raw += int64(len(kv.Key) + len(kv.Value.Str))
			}
		}
		pl, err := Prepare(Batches(spans, p.batch), ProtoOTLPProto, false)
		if err != nil {
			return err
		}
		r, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: contentClients, KeepAlive: true, Retry429: true}, pl)
		if err != nil {
			return err
		}
		sumLoads(&lr, r)
		if r.FailedRequests() > 0 {
			return fmt.Errorf("%d of %d batches failed: %s", r.FailedRequests(), r.Requests, r.FirstError)
		}
		return nil
	})
	if err != nil {
		return refused("generate and send: %v", err)
	}
	facts := RunFacts{Load: lr, Expected: int64(p.opts.Spans), Stored: -1}
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
	}
	if err := srv.Stop(10 * time.Minute); err != nil {
		return refused("stop server after ingest: %v", err)
	}
	n := float64(p.opts.Spans)
	res := Result{Metrics: map[string]float64{"raw_attr_bytes_per_span": float64(raw) / n}}
	if res.Refusals = Refusals(facts); len(res.Refusals) > 0 {
		return res
	}
	all, segs, vals, err := storeBytes(env.Dir)
	if err != nil {
		return refused("%v", err)
	}
	res.Metrics["sealed_disk_bytes_per_span"], res.Metrics["sealed_segment_bytes_per_span"], res.Metrics["sealed_value_bytes_per_span"] = float64(all)/n, float64(segs)/n, float64(vals)/n

	if srv, err = StartServer(ctx, opts); err != nil {
		return refused("restart server to read: %v", err)
	}
	st, err := srv.Stats(ctx)
	if err != nil || st.Spans != int64(p.opts.Spans) {
		return refused("after the restart the server holds %d spans, want %d (%v)", st.Spans, p.opts.Spans, err)
	}
	res.Metrics["segments"] = float64(st.Segments)
	var lat, inServer []float64
	for pass := range 2 {
		for _, id := range ids {
			t0 := time.Now()
			code, body, ms, err := srv.GetTimed(ctx, "/api/v1/traces/"+id.String())
			d := time.Since(t0)
			if err != nil || code != http.StatusOK {
				return refused("trace %s: status %d, err %v: %.200s", id, code, err, body)
			}
			if err := checkConversationTrace(body, perTrace[id]); err != nil {
				return refused("trace %s: %v", id, err)
			}
			if pass == 1 {
				lat = append(lat, float64(d)/1e6)
				inServer = append(inServer, ms)
			}
		}
	}
	res.Metrics["traces_read"] = float64(len(lat))
	res.Metrics["trace_p50_ms"] = Percentile(lat, 50)
	res.Metrics["trace_p95_ms"] = Percentile(lat, 95)
	res.Metrics["trace_server_p95_ms"] = Percentile(inServer, 95)
	return res
}

// checkConversationTrace checks an answer of GET /api/v1/traces/{id}: want
// spans, and a trace of more than one span (the agent span and its model
// call) holds the session's system prompt, resolved.
func checkConversationTrace(body []byte, want int) error {
	var tr struct {
		Spans []json.RawMessage `json:"spans"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return fmt.Errorf("bad JSON: %v", err)
	}
	if len(tr.Spans) != want {
		return fmt.Errorf("%d spans, want %d", len(tr.Spans), want)
	}
	if want > 1 && !strings.Contains(string(body), conversationsPrompt) {
		return fmt.Errorf("the model call's system prompt is not in the answer: %.300s", body)
	}
	return nil
}

// conversationsTargets reads issue 17's conversation targets off a record.
func conversationsTargets(rec *Record) []Target {
	note := ""
	if rec.Spans != conversationsTargetSpans {
		note = fmt.Sprintf(" at %s spans (targets are set at %s)", num(float64(rec.Spans), 0), num(conversationsTargetSpans, 0))
	}
	both := func(t Target) (Target, bool) {
		for _, n := range []string{conversationsApartScenario, conversationsInlineScenario} {
			sr, ran := rec.Scenario(n)
			switch {
			case !ran:
				t.Got, t.Status = n+" not run", "NOT RUN"
				return t, false
			case sr.Status != "ok":
				t.Got, t.Status = n+" "+sr.Status, "FAIL"
				return t, false
			}
		}
		return t, true
	}
	judge := func(t Target, got string, v float64, ok func(float64) bool) Target {
		t.Got = got + note
		switch {
		case math.IsNaN(v):
			t.Got, t.Status = "n/a"+note, "FAIL"
		case ok(v):
			t.Status = "PASS"
		default:
			t.Status = "FAIL"
		}
		return withBusyNote(rec, t)
	}
	var out []Target
	t, ok := both(Target{Name: "Bytes on disk per span, values inline / stored apart, as sealed (medians of runs)", Want: fmt.Sprintf(">= %gx", ConversationsMinRatio)})
	if ok {
		a, b := rec.median(conversationsApartScenario, "sealed_disk_bytes_per_span"), rec.median(conversationsInlineScenario, "sealed_disk_bytes_per_span")
		r := b / a
		t = judge(t, fmt.Sprintf("%sx (%s B/span inline vs %s apart: %s in segments, %s in the value store)", num(r, 2), num(b, 1), num(a, 1),
			num(rec.median(conversationsApartScenario, "sealed_segment_bytes_per_span"), 1), num(rec.median(conversationsApartScenario, "sealed_value_bytes_per_span"), 1)),
			r, func(x float64) bool { return x >= ConversationsMinRatio })
	}
	out = append(out, t)
	t, ok = both(Target{Name: "A session's trace read p95, values stored apart / inline (median of runs)", Want: fmt.Sprintf("<= %gx", ConversationsMaxReadRatio)})
	if ok {
		a, b := rec.median(conversationsApartScenario, "trace_p95_ms"), rec.median(conversationsInlineScenario, "trace_p95_ms")
		r := a / b
		t = judge(t, fmt.Sprintf("%sx (%s ms apart vs %s ms inline)", num(r, 2), num(a, 3), num(b, 3)), r, func(x float64) bool { return x <= ConversationsMaxReadRatio })
	}
	return append(out, t)
}
