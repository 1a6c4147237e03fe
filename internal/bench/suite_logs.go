package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

const (
	logsScenario   = "logs-otlp-proto-wal"
	logsClients    = 4
	logsRareWord   = "quixoticlogword"
	logsAbsentWord = "nowhereinthelogs"
	logsTraceSize  = 12
)

func init() {
	RegisterSuite(&Suite{
		Name:         "logs",
		Summary:      "OTLP log ingest (records/s) and log search: a rare word, an absent word, the logs of one trace",
		DefaultSpans: 1_000_000,
		Plan:         planLogs,
		Method: `A log corpus (generated here, seeded; ` + "`--spans`" + ` sets the record count) of 20 services, severities
INFO 70%, DEBUG 10%, WARN 10%, ERROR 9%, FATAL 1%, bodies of 6-14 Zipf-distributed words of the corpora's vocabulary
with request and order ids, 2-6 attributes, and trace and span ids on 60% of the records (traces of 1-12 records
close in time), spread over one hour ending now. One record carries a word that occurs nowhere else, and one trace has
exactly 12 records. The batches (` + "`--batch`" + ` records, OTLP protobuf, encoded before the clock starts) are sent by 4
closed-loop clients to ` + "`POST /v1/logs`" + ` of the real ` + "`rastro serve`" + ` (wal durability, fresh data directory),
each retrying a 429 after a backoff as an exporter does; records/s is the corpus over the wall time from the first
send to the last acknowledgement. Then, on the same server, one client times ` + "`GET /api/v1/logs?content=WORD`" + ` for
the rare word, the same for a word in no record, and ` + "`GET /api/v1/traces/ID/logs`" + `: 10 untimed warm-up requests and
` + "`--samples`" + ` timed ones per kind; end-to-end p50/p95 and the server's own time from ` + "`Server-Timing`" + ` (p95). Every answer
is checked: the rare word's one record, no record for the absent word, the trace's 12 records. A wrong answer or a
non-200 response refuses the run.`,
		Columns: []Column{
			{Title: "Records", Param: "records"},
			{Title: "Ingest records/s (min-max)", Metric: "records_per_s", Spread: true},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "Rare word p95 ms", Metric: "rare_word_p95_ms", Digits: 3},
			{Title: "Rare word server p95 ms (min-max)", Metric: "rare_word_server_p95_ms", Spread: true, Digits: 3},
			{Title: "Absent word p95 ms", Metric: "absent_word_p95_ms", Digits: 3},
			{Title: "Absent word server p95 ms", Metric: "absent_word_server_p95_ms", Digits: 3},
			{Title: "Trace's logs p95 ms (min-max)", Metric: "trace_logs_p95_ms", Spread: true, Digits: 3},
			{Title: "Trace's logs server p95 ms", Metric: "trace_logs_server_p95_ms", Digits: 3},
			{Title: "Disk B/record", Metric: "disk_bytes_per_record", Digits: 1},
		},
		Targets: logsTargets,
	})
}

type logsPlan struct {
	records  int
	payloads [][]byte
	trace    model.TraceID
}

// LogsRareWord is the word one record of GenLogs's corpus carries and no
// other; LogsAbsentWord is in none.
const (
	LogsRareWord   = logsRareWord
	LogsAbsentWord = logsAbsentWord
)

// GenLogs makes the logs suite's corpus (its method describes it) for
// in-process benchmarks: n records in batches of batch, the last one near
// end, and the trace that has exactly 12 records.
func GenLogs(seed uint64, n, batch int, end time.Time) ([][]model.LogRecord, model.TraceID) {
	return genLogs(seed, n, batch, end)
}

// genLogs makes the corpus described in the suite's method.
func genLogs(seed uint64, n, batch int, end time.Time) ([][]model.LogRecord, model.TraceID) {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(words)-1))
	var resources []*model.Resource
	for i := range 20 {
		resources = append(resources, &model.Resource{Attributes: []model.KeyValue{
			{Key: "service.name", Value: model.StringValue(fmt.Sprintf("svc-%02d", i))},
			{Key: "host.name", Value: model.StringValue(fmt.Sprintf("host-%d", i%7))}}})
	}
	scope := &model.Scope{Name: "app.logger", Version: "1.0.0"}
	start := uint64(end.Add(-time.Hour).UnixNano())
	span := uint64(time.Hour)
	sev := func() model.SeverityNumber {
		switch x := r.IntN(100); {
		case x < 70:
			return 9
		case x < 80:
			return 5
		case x < 90:
			return 13
		case x < 99:
			return 17
		}
		return 21
	}
	rare, target := n/3, n/2
	var want model.TraceID
	var out [][]model.LogRecord
	var cur []model.LogRecord
	var trace model.TraceID
	left := 0
	for i := 0; i < n; i++ {
		res := resources[r.IntN(len(resources))]
		t := start + uint64(i)*span/uint64(n)
		rec := model.LogRecord{TimeUnixNano: t, ObservedTimeUnixNano: t + 2e6, SeverityNumber: sev(), Resource: res, Scope: scope}
		rec.SeverityText = rec.SeverityNumber.String()
		ws := make([]string, 6+r.IntN(9))
		for j := range ws {
			ws[j] = words[zipf.Uint64()]
		}
		ws = append(ws, fmt.Sprintf("req-%08x", r.Uint32()), fmt.Sprintf("order %d", r.IntN(1_000_000)))
		if i == rare {
			ws[len(ws)/2] = logsRareWord
		}
		rec.Body = model.StringValue(strings.Join(ws, " "))
		rec.Attributes = []model.KeyValue{{Key: "code.function", Value: model.StringValue(words[r.IntN(200)])},
			{Key: "user.id", Value: model.StringValue(fmt.Sprintf("u%d", r.IntN(5000)))}}
		for range r.IntN(5) {
			rec.Attributes = append(rec.Attributes, model.KeyValue{Key: "attr." + words[r.IntN(50)], Value: model.IntValue(int64(r.IntN(1000)))})
		}
		switch {
		case i == target:
			for k := range want {
				want[k] = byte(r.Uint32())
			}
			want[0] |= 1
			trace, left = want, logsTraceSize
		case left == 0 && r.IntN(10) < 6:
			for k := range trace {
				trace[k] = byte(r.Uint32())
			}
			trace[0] |= 1
			left = 1 + r.IntN(logsTraceSize-1) // never 12: only the target trace has 12
		}
		if left > 0 {
			rec.TraceID = trace
			rec.SpanID = model.SpanID{byte(r.Uint32()) | 1, 1, 2, 3, 4, 5, 6, 7}
			left--
			if left == 0 {
				trace = model.TraceID{}
			}
		}
		cur = append(cur, rec)
		if len(cur) == batch {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, want
}

func planLogs(ctx context.Context, cfg Config) ([]Scenario, error) {
	n := cfg.Spans
	if n <= 0 {
		n = 1_000_000
	}
	batches, trace := genLogs(cfg.Seed, n, cfg.Batch, time.Now())
	p := &logsPlan{records: n, trace: trace}
	for _, b := range batches {
		p.payloads = append(p.payloads, otlp.EncodeLogsProto(b))
	}
	return []Scenario{{Name: logsScenario, Params: map[string]string{"records": fmt.Sprint(n)},
		Run: func(ctx context.Context, env *RunEnv) Result { return runLogs(ctx, env, p) }}}, nil
}

func runLogs(ctx context.Context, env *RunEnv, p *logsPlan) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: logsClients}}
	var next, retried atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for range logsClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(p.payloads) || ctx.Err() != nil {
					return
				}
				for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
					resp, err := client.Post(srv.HTTPURL()+"/v1/logs", "application/x-protobuf", bytes.NewReader(p.payloads[i]))
					if err != nil {
						firstErr.CompareAndSwap(nil, err.Error())
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						retried.Add(1)
						time.Sleep(backoff)
						continue
					}
					if resp.StatusCode != http.StatusOK {
						firstErr.CompareAndSwap(nil, fmt.Sprintf("POST /v1/logs: %s", resp.Status))
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if e := firstErr.Load(); e != nil {
		return refused("ingest: %v", e)
	}
	m := map[string]float64{
		"records_per_s": float64(p.records) / elapsed.Seconds(),
		"retried_429":   float64(retried.Load()),
	}
	type kind struct {
		name, path string
		check      func(logs []map[string]any) error
	}
	kinds := []kind{
		{"rare_word", "/api/v1/logs?limit=20&content=" + logsRareWord, func(l []map[string]any) error {
			if len(l) != 1 || !strings.Contains(fmt.Sprint(l[0]["body"]), logsRareWord) {
				return fmt.Errorf("%d records, want the one with %q", len(l), logsRareWord)
			}
			return nil
		}},
		{"absent_word", "/api/v1/logs?limit=20&content=" + logsAbsentWord, func(l []map[string]any) error {
			if len(l) != 0 {
				return fmt.Errorf("%d records for a word in none", len(l))
			}
			return nil
		}},
		{"trace_logs", "/api/v1/traces/" + p.trace.String() + "/logs?limit=100", func(l []map[string]any) error {
			if len(l) != logsTraceSize {
				return fmt.Errorf("%d records, the trace has %d", len(l), logsTraceSize)
			}
			return nil
		}},
	}
	samples := env.Samples
	for _, k := range kinds {
		var e2e, server []float64
		for i := range 10 + samples {
			t := time.Now()
			code, body, ms, err := srv.GetTimed(ctx, k.path)
			d := float64(time.Since(t).Nanoseconds()) / 1e6
			if err != nil || code != 200 {
				return refused("GET %s: %d %v %.200s", k.path, code, err, body)
			}
			var ans struct {
				Logs []map[string]any `json:"logs"`
			}
			if err := json.Unmarshal(body, &ans); err != nil {
				return refused("GET %s: %v", k.path, err)
			}
			if err := k.check(ans.Logs); err != nil {
				return refused("GET %s: wrong answer: %v", k.path, err)
			}
			if i >= 10 {
				e2e, server = append(e2e, d), append(server, ms)
			}
		}
		m[k.name+"_p50_ms"] = Percentile(e2e, 50)
		m[k.name+"_p95_ms"] = Percentile(e2e, 95)
		m[k.name+"_server_p95_ms"] = Percentile(slices.DeleteFunc(server, math.IsNaN), 95)
	}
	if err := srv.Stop(120 * time.Second); err != nil {
		return refused("stop: %v", err)
	}
	if b, err := dirBytes(env.Dir + "/logs"); err == nil {
		m["disk_bytes_per_record"] = float64(b) / float64(p.records)
	}
	return Result{Metrics: m}
}

func logsTargets(rec *Record) []Target {
	t := Target{Name: "Log ingest over OTLP/HTTP protobuf, wal, batches of 1,000 (median of runs)", Want: ">= 200,000 records/s"}
	v := rec.median(logsScenario, "records_per_s")
	switch sr, ran := rec.Scenario(logsScenario); {
	case !ran:
		t.Got, t.Status = "not run", "NOT RUN"
	case sr.Status != "ok":
		t.Got, t.Status = sr.Status, "FAIL"
	case v >= 200_000:
		t.Got, t.Status = num(v, 0), "PASS"
	default:
		t.Got, t.Status = num(v, 0), "FAIL"
	}
	return []Target{withBusyNote(rec, t),
		msTarget(rec, logsScenario, "rare_word_server_p95_ms", "A rare word in log bodies, server time p95", 1),
		msTarget(rec, logsScenario, "trace_logs_p95_ms", "The logs of one trace, p95", 2),
	}
}
