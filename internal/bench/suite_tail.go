package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "tail",
		Summary:      "live tail: from a request to its spans on an open tail stream, idle and under ingest; what open tails cost ingest",
		DefaultSpans: 500_000,
		Plan:         planTail,
		Method: `Each run starts the real ` + "`rastro serve`" + ` (wal durability, fresh data directory, defaults otherwise) and
opens live tails with ` + "`GET /api/v1/tail`" + ` (server-sent events) from this process, over loopback.

**Probes** (scenarios ` + "`tail-idle`" + ` and ` + "`tail-under-load`" + `): one tail filtered by ` + "`service=tail-probe`" + `; the
harness posts one-span native JSON requests of that service, one at a time, 20 per second, and for each notes when it
sent the request, when the 2xx arrived and when the span's event was read off the stream. The event can arrive
before the 2xx: the server hands a batch to its tails as soon as the batch is durable, just before it answers.
Under load, 4 OTLP/HTTP protobuf clients send the ` + "`api`" + ` corpus in a loop, as fast as the server takes it (429s retried),
for as long as the probes last; a probe answered 429 (the server's write buffer is full) is sent again after 10 ms
and timed from that send.

**Ingest cost** (scenarios ` + "`ingest-no-tail`" + `, ` + "`ingest-4-tails`" + ` and ` + "`ingest-unfiltered-tail`" + `): 4 clients send the
` + "`api`" + ` corpus once; in the second scenario 4 tails filtered by ` + "`status=error`" + ` are open throughout, in the third one
tail with no filter (every span is sent to it). After the load, every tail must have received exactly the spans it
asked for, or have reported (in a ` + "`dropped`" + ` event) how many it skipped: a span missing without a report refuses the
run.`,
		Columns: []Column{
			{Title: "What", Param: "what"},
			{Title: "Ingest spans/s (min-max)", Metric: "spans_per_s", Spread: true},
			{Title: "Send to event p50 ms", Metric: "event_p50_ms", Digits: 2},
			{Title: "Send to event p95 ms (min-max)", Metric: "event_p95_ms", Spread: true, Digits: 2},
			{Title: "Send to 2xx p95 ms", Metric: "ack_p95_ms", Digits: 2},
			{Title: "2xx to event p95 ms", Metric: "ack_to_event_p95_ms", Digits: 2},
			{Title: "Spans per tail", Metric: "tail_spans"},
			{Title: "Dropped", Metric: "dropped"},
		},
		Targets: tailTargets,
	})
}

const (
	tailClients        = 4
	tailProbeService   = "tail-probe"
	tailProbeEvery     = 50 * time.Millisecond
	tailErrorTails     = 4
	TailEventTargetMS  = 2000.0 // send to event, p95, under load
	TailIngestRatioMin = 0.90   // ingest with open tails / without
)

type tailPlan struct {
	payloads []Payload
	spans    int
	errors   int64 // error spans of the corpus: what a status=error tail must receive
}

func planTail(ctx context.Context, cfg Config) ([]Scenario, error) {
	spans, err := Generate(CorpusAPI, CorpusOptions{Seed: cfg.Seed, Spans: cfg.Spans, Start: time.Now().Add(-2 * time.Hour), Window: time.Hour})
	if err != nil {
		return nil, err
	}
	p := &tailPlan{spans: len(spans)}
	for i := range spans {
		if spans[i].StatusCode == model.StatusError {
			p.errors++
		}
	}
	if p.payloads, err = Prepare(Batches(spans, cfg.Batch), ProtoOTLPProto, false); err != nil {
		return nil, err
	}
	params := func(what string) map[string]string {
		return map[string]string{"what": what, "error_spans": strconv.FormatInt(p.errors, 10), "spans": strconv.Itoa(p.spans), "clients": strconv.Itoa(tailClients)}
	}
	return []Scenario{
		{Name: "tail-idle", Params: params("probes, no other ingest"),
			Run: func(ctx context.Context, env *RunEnv) Result { return runTailProbes(ctx, env, p, false) }},
		{Name: "tail-under-load", Params: params("probes during ingest at full speed"),
			Run: func(ctx context.Context, env *RunEnv) Result { return runTailProbes(ctx, env, p, true) }},
		{Name: "ingest-no-tail", Params: params("ingest, no tail open"),
			Run: func(ctx context.Context, env *RunEnv) Result { return runTailIngest(ctx, env, p, 0, nil, 0) }},
		{Name: "ingest-4-tails", Params: params("ingest, 4 tails of status=error open"),
			Run: func(ctx context.Context, env *RunEnv) Result {
				return runTailIngest(ctx, env, p, tailErrorTails, url.Values{"status": {"error"}}, p.errors)
			}},
		{Name: "ingest-unfiltered-tail", Params: params("ingest, 1 tail of every span open"),
			Run: func(ctx context.Context, env *RunEnv) Result {
				return runTailIngest(ctx, env, p, 1, url.Values{}, int64(p.spans))
			}},
	}, nil
}

// tailEvent is one event read off a tail stream.
type tailEvent struct {
	at      time.Time // when its data line was read
	spanIDs []string  // unless counting only
	spans   int       // spans in the event
	dropped int64
	err     error // the stream could not be read; the last event
}

// openTailStream opens GET /api/v1/tail?params and returns its events once
// the server says the tail is open. The stream ends when ctx ends. With
// countOnly, span events are counted, not decoded: the harness shares the
// server's cores, and decoding every span of an unfiltered tail would
// charge the server for the harness's work.
func openTailStream(ctx context.Context, srv *Server, params url.Values, countOnly bool) (<-chan tailEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.HTTPURL()+"/api/v1/tail?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open tail: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("open tail: %s: %s", resp.Status, b)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	if line, err := br.ReadString('\n'); err != nil || line != ": tail open\n" {
		resp.Body.Close()
		return nil, fmt.Errorf("open tail: first line %q, %v", line, err)
	}
	events := make(chan tailEvent, 1024)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		var name string
		for {
			line, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// A long data line: keep what was read (the next read
				// reuses the buffer), then read the rest whole.
				head := bytes.Clone(line)
				rest, err2 := br.ReadBytes('\n')
				line, err = append(head, rest...), err2
			}
			if err != nil {
				return
			}
			switch {
			case bytes.HasPrefix(line, []byte("event: ")):
				name = strings.TrimSpace(string(line[len("event: "):]))
			case countOnly && name == "spans" && bytes.HasPrefix(line, []byte("data: ")):
				// Every span of the API's JSON has this key once (links
				// and events do not; inside strings quotes are escaped).
				// A miscount would refuse the run: counts must match.
				ev := tailEvent{at: time.Now(), spans: bytes.Count(line, []byte(`"start_time_unix_nano":`))}
				select {
				case events <- ev:
				case <-ctx.Done():
					return
				}
			case bytes.HasPrefix(line, []byte("data: ")):
				ev := tailEvent{at: time.Now()}
				var body struct {
					Spans []struct {
						SpanID string `json:"span_id"`
					} `json:"spans"`
					Dropped int64 `json:"dropped"`
				}
				if err := json.Unmarshal(line[len("data: "):], &body); err != nil {
					events <- tailEvent{err: fmt.Errorf("tail event %q: %w", name, err)}
					return
				}
				for _, s := range body.Spans {
					ev.spanIDs = append(ev.spanIDs, s.SpanID)
				}
				ev.spans = len(ev.spanIDs)
				if name == "dropped" {
					ev.dropped = body.Dropped
				}
				select {
				case events <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return events, nil
}

// probeBody is one native JSON span of the probe service, id n.
func probeBody(n int) (body []byte, spanID string) {
	spanID = fmt.Sprintf("%016x", uint64(n)+1)
	now := time.Now().UnixNano()
	return fmt.Appendf(nil, `[{"trace_id":"7a11%028x","span_id":"%s","name":"probe","service":%q,"start_time_unix_nano":%d,"end_time_unix_nano":%d}]`,
		n+1, spanID, tailProbeService, now, now+1000), spanID
}

func runTailProbes(ctx context.Context, env *RunEnv, p *tailPlan, withLoad bool) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	tctx, closeTail := context.WithCancel(ctx)
	defer closeTail()
	events, err := openTailStream(tctx, srv, url.Values{"service": {tailProbeService}}, false)
	if err != nil {
		return refused("%v", err)
	}
	var (
		lr       LoadResult
		lerr     error
		loadDone = make(chan struct{})
	)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	if withLoad {
		go func() {
			defer close(loadDone)
			lr, lerr = Load(lctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: tailClients,
				KeepAlive: true, Retry429: true, Loop: true, Duration: time.Hour}, p.payloads)
		}()
	} else {
		close(loadDone)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	var toEvent, toAck, ackToEvent []time.Duration
	var dropped int64
	retried := 0 // probes answered 429 and sent again
	tick := time.NewTicker(tailProbeEvery)
	defer tick.Stop()
	for n := 0; n < env.Samples; n++ {
		<-tick.C
		body, id := probeBody(n)
		var sent, acked time.Time
		for {
			sent = time.Now()
			resp, err := client.Post(srv.HTTPURL()+"/v1/spans", "application/json", bytes.NewReader(body))
			if err != nil {
				return refused("probe %d: %v", n, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			acked = time.Now()
			if resp.StatusCode == http.StatusTooManyRequests {
				// The server is at its buffer limit under the load: send
				// again, as an exporter would; the clock restarts.
				retried++
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if resp.StatusCode != http.StatusOK {
				return refused("probe %d: %s", n, resp.Status)
			}
			break
		}
		var at time.Time
		for at.IsZero() {
			select {
			case ev, ok := <-events:
				if !ok {
					return refused("probe %d: the tail stream ended", n)
				}
				if ev.err != nil {
					return refused("probe %d: %v", n, ev.err)
				}
				dropped += ev.dropped
				for _, s := range ev.spanIDs {
					if s == id {
						at = ev.at
					}
				}
			case <-time.After(30 * time.Second):
				return refused("probe %d: no event within 30 s of its 2xx", n)
			}
		}
		toEvent = append(toEvent, at.Sub(sent))
		toAck = append(toAck, acked.Sub(sent))
		ackToEvent = append(ackToEvent, max(0, at.Sub(acked)))
	}
	stopLoad()
	<-loadDone
	if lerr != nil && !errors.Is(lerr, context.Canceled) {
		return refused("load: %v", lerr)
	}
	ev, ack, a2e := SummarizeLatency(toEvent), SummarizeLatency(toAck), SummarizeLatency(ackToEvent)
	res := Result{Metrics: map[string]float64{"event_p50_ms": ev.P50, "event_p95_ms": ev.P95, "event_max_ms": ev.Max,
		"ack_p50_ms": ack.P50, "ack_p95_ms": ack.P95, "ack_to_event_p95_ms": a2e.P95, "dropped": float64(dropped),
		"tail_spans": float64(len(toEvent)), "probe_retried_429": float64(retried)}}
	if withLoad {
		res.Metrics["spans_per_s"] = lr.SpansPerSecond
		res.Metrics["retried_429"] = float64(lr.Retried429)
	}
	if err := srv.Stop(60 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	return res
}

// runTailIngest sends the corpus with tails open, each asking for params;
// each must account for want spans.
func runTailIngest(ctx context.Context, env *RunEnv, p *tailPlan, tails int, params url.Values, want int64) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	tctx, closeTails := context.WithCancel(ctx)
	defer closeTails()
	type count struct {
		spans, dropped int64
		err            error
	}
	counts := make([]chan count, tails)
	for i := range tails {
		events, err := openTailStream(tctx, srv, params, true)
		if err != nil {
			return refused("%v", err)
		}
		counts[i] = make(chan count, 1)
		go func() {
			var c count
			defer func() { counts[i] <- c }()
			for c.spans+c.dropped < want {
				ev, ok := <-events
				if !ok {
					return
				}
				if ev.err != nil {
					c.err = ev.err
					return
				}
				c.spans += int64(ev.spans)
				c.dropped += ev.dropped
			}
		}()
	}
	lr, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: tailClients, KeepAlive: true, Retry429: true}, p.payloads)
	if err != nil {
		return refused("load: %v", err)
	}
	res := Result{Metrics: map[string]float64{"spans_per_s": lr.SpansPerSecond, "retried_429": float64(lr.Retried429)}}
	// Each tail must account for every span it asked for: received, or
	// reported dropped. A dropped batch may hold spans the filter would not
	// have passed, so a tail that dropped may report more than it missed.
	deadline := time.After(60 * time.Second)
	minSpans, drops := int64(-1), int64(0)
	for i := range tails {
		var c count
		select {
		case c = <-counts[i]:
		case <-deadline:
			closeTails()
			c = <-counts[i]
		}
		if c.err != nil {
			res.Refusals = append(res.Refusals, fmt.Sprintf("tail %d: %v", i, c.err))
		} else if c.dropped == 0 && c.spans != want {
			res.Refusals = append(res.Refusals, fmt.Sprintf("tail %d received %d of %d spans and reported no drop", i, c.spans, want))
		}
		if minSpans < 0 || c.spans < minSpans {
			minSpans = c.spans
		}
		drops += c.dropped
	}
	if tails > 0 {
		res.Metrics["tail_spans"], res.Metrics["dropped"] = float64(minSpans), float64(drops)
	}
	facts := RunFacts{Load: lr, Expected: int64(p.spans), Stored: -1}
	if st, err := srv.Stats(ctx); err == nil {
		facts.Stored = st.Spans
	}
	res.Refusals = append(res.Refusals, Refusals(facts)...)
	if err := srv.Stop(120 * time.Second); err != nil {
		res.Refusals = append(res.Refusals, "stop server: "+err.Error())
	}
	return res
}

func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// tailTargets: 2xx-to-event p95 under load against trailscope's live tail
// target; ingest with tails open against ingest without; and that tails
// which keep up receive every span.
func tailTargets(rec *Record) []Target {
	var out []Target
	// The event usually arrives before the 2xx (the batch reaches the tails
	// as soon as it is durable), so the target is on send to event, which
	// includes the request itself; 2xx to event is shown too.
	t := Target{Name: "send to event p95 under ingest load (median of runs)", Want: fmt.Sprintf("< %.0f ms", TailEventTargetMS), Status: "NOT RUN"}
	if sr, ok := rec.Scenario("tail-under-load"); ok && sr.Status == "ok" {
		v := sr.Summary["event_p95_ms"].Median
		t.Got, t.Status = fmt.Sprintf("%.2f ms (2xx to event p95 %.2f ms)", v, sr.Summary["ack_to_event_p95_ms"].Median), passIf(v < TailEventTargetMS)
	}
	out = append(out, withBusyNote(rec, t))
	t = Target{Name: "ingest with 4 error tails open / with none (medians)", Want: fmt.Sprintf(">= %.2f", TailIngestRatioMin), Status: "NOT RUN"}
	no, ok1 := rec.Scenario("ingest-no-tail")
	with, ok2 := rec.Scenario("ingest-4-tails")
	if ok1 && ok2 && no.Status == "ok" && with.Status == "ok" && no.Summary["spans_per_s"].Median > 0 {
		r := with.Summary["spans_per_s"].Median / no.Summary["spans_per_s"].Median
		t.Got, t.Status = fmt.Sprintf("%.2f", r), passIf(r >= TailIngestRatioMin)
	}
	out = append(out, withBusyNote(rec, t))
	t = Target{Name: "error tails during ingest: spans dropped (max over runs)", Want: "0", Status: "NOT RUN"}
	if with != nil && ok2 && with.Status == "ok" {
		d := with.Summary["dropped"].Max
		t.Got, t.Status = fmt.Sprintf("%.0f", d), passIf(d == 0)
	}
	out = append(out, t)
	if un, ok := rec.Scenario("ingest-unfiltered-tail"); ok && un.Status == "ok" && ok1 && no.Status == "ok" && no.Summary["spans_per_s"].Median > 0 {
		out = append(out, Target{Name: "ingest with 1 unfiltered tail open / with none (medians); spans it skipped", Want: "report",
			Got: fmt.Sprintf("%.2f; %.0f of %s skipped (median)", un.Summary["spans_per_s"].Median/no.Summary["spans_per_s"].Median,
				un.Summary["dropped"].Median, un.Params["spans"]), Status: "REPORT"})
	}
	if sr, ok := rec.Scenario("tail-idle"); ok && sr.Status == "ok" {
		out = append(out, Target{Name: "send to event p95, idle (median of runs)", Want: "report",
			Got: fmt.Sprintf("%.2f ms", sr.Summary["event_p95_ms"].Median), Status: "REPORT"})
	}
	return out
}
