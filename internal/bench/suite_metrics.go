package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

const (
	metricsSeries   = 1000
	metricsClients  = 4
	metricsInterval = 15 * time.Second
	metricsGauge    = "metrics-gauges-otlp-proto-wal"
	metricsCounter  = "metrics-counters-otlp-proto-wal"
)

func init() {
	RegisterSuite(&Suite{
		Name:         "metrics",
		Summary:      "OTLP metric ingest (points/s), bytes on disk per point, and PromQL range queries over 1,000 series",
		DefaultSpans: 1_000_000,
		Plan:         planMetrics,
		Method: `Two corpora (generated here, seeded; ` + "`--spans`" + ` sets the points of each): 1,000 gauge series
(` + "`bench.cpu.temp`" + `, a random walk in steps of 0.5 around 40-90) and 1,000 cumulative monotonic counter series
(` + "`bench.requests`" + `, +0 to +50 per scrape), each with labels job (20 services) and instance, scraped every 15 s up to
now (` + "`--spans`" + ` / 1,000 scrapes per series, at least 241 so that the queried hour is covered). Requests (OTLP protobuf, encoded before the clock starts) carry
` + "`--batch`" + ` points: the 4 closed-loop clients each own 250 series and send them in time order (4 scrapes x 250 series
per request of 1,000), to ` + "`POST /v1/metrics`" + ` of the real ` + "`rastro serve`" + ` (wal durability, fresh data directory),
retrying a 429 after a backoff; points/s is the corpus over the wall time from the first send to the last
acknowledgement. Then one client times range queries over the last hour at a 15 s step (241 steps) through
` + "`/prom/api/v1/query_range`" + `: the gauges' raw values (` + "`bench_cpu_temp`" + `, 1,000 series) on the gauge corpus;
` + "`rate(bench_requests_total[1m])`" + ` (1,000 series) and ` + "`sum by (job) (rate(bench_requests_total[5m]))`" + ` (20
series) on the counter corpus: 10 untimed warm-up requests and ` + "`--samples`" + ` timed ones each; end-to-end p50/p95 and
the server's own time from ` + "`Server-Timing`" + ` (p95). Every answer is checked for its series and steps (and the
gauges' last value of instance 0). Bytes per point: the metric store's directory after a clean stop (which seals the
head into a block) over the points sent.`,
		Columns: []Column{
			{Title: "Points", Param: "points"},
			{Title: "Ingest points/s (min-max)", Metric: "points_per_s", Spread: true},
			{Title: "429s retried", Metric: "retried_429"},
			{Title: "Disk B/point (min-max)", Metric: "disk_bytes_per_point", Spread: true, Digits: 2},
			{Title: "Range 1h/15s, 1,000 series p95 ms (min-max)", Metric: "range_p95_ms", Spread: true, Digits: 1},
			{Title: "... server p95 ms", Metric: "range_server_p95_ms", Digits: 1},
			{Title: "sum by job (rate) p95 ms", Metric: "sum_rate_p95_ms", Digits: 1},
			{Title: "... server p95 ms", Metric: "sum_rate_server_p95_ms", Digits: 1},
		},
		Targets: metricsTargets,
	})
}

type metricsPlan struct {
	kind     string // "gauge" or "counter"
	points   int
	payloads [][][]byte // per client, in send order
	end      time.Time  // the last scrape
	last0    float64    // the last value of instance 0
}

// genMetrics makes one corpus as the suite's method describes.
func genMetrics(seed uint64, kind string, n, batch int, end time.Time) *metricsPlan {
	r := rand.New(rand.NewPCG(seed, seed^0x2545f491))
	scrapes := max(n/metricsSeries, int(time.Hour/metricsInterval)+1) // the queried hour is covered
	p := &metricsPlan{kind: kind, points: scrapes * metricsSeries, end: end, payloads: make([][][]byte, metricsClients)}
	vals := make([]float64, metricsSeries)
	for i := range vals {
		if kind == "gauge" {
			vals[i] = 40 + float64(r.IntN(100))/2
		}
	}
	start := end.Add(-time.Duration(scrapes-1) * metricsInterval)
	per := metricsSeries / metricsClients
	scrapesPerReq := max(batch/per, 1)
	name, unit := "bench.cpu.temp", "Cel"
	if kind == "counter" {
		name, unit = "bench.requests", "{request}"
	}
	// Resource per series: job and instance come from service.name and
	// service.instance.id, as from an SDK.
	res := make([]*resourcepb.Resource, metricsSeries)
	for i := range res {
		res[i] = &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprintf("svc-%02d", i%20)}}},
			{Key: "service.instance.id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: fmt.Sprintf("i-%04d", i)}}},
		}}
	}
	// Values are generated scrape by scrape for every series, so that
	// each client's share is a contiguous time range per request.
	type pt struct {
		t uint64
		v float64
	}
	series := make([][]pt, metricsSeries)
	for s := range scrapes {
		t := uint64(start.Add(time.Duration(s) * metricsInterval).UnixNano())
		for i := range vals {
			if kind == "gauge" {
				vals[i] = min(max(vals[i]+float64(r.IntN(3)-1)/2, 0), 120)
			} else {
				vals[i] += float64(r.IntN(51))
			}
			series[i] = append(series[i], pt{t, vals[i]})
		}
	}
	p.last0 = vals[0]
	for c := range metricsClients {
		for s0 := 0; s0 < scrapes; s0 += scrapesPerReq {
			req := &colmetrics.ExportMetricsServiceRequest{}
			for i := c * per; i < (c+1)*per; i++ {
				m := &metricspb.Metric{Name: name, Unit: unit}
				var dps []*metricspb.NumberDataPoint
				for s := s0; s < min(s0+scrapesPerReq, scrapes); s++ {
					dps = append(dps, &metricspb.NumberDataPoint{StartTimeUnixNano: uint64(start.UnixNano()), TimeUnixNano: series[i][s].t,
						Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: series[i][s].v}})
				}
				if kind == "gauge" {
					m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: dps}}
				} else {
					m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true,
						AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: dps}}
				}
				req.ResourceMetrics = append(req.ResourceMetrics, &metricspb.ResourceMetrics{Resource: res[i],
					ScopeMetrics: []*metricspb.ScopeMetrics{{Scope: &commonpb.InstrumentationScope{Name: "bench"}, Metrics: []*metricspb.Metric{m}}}})
			}
			b, err := proto.Marshal(req)
			if err != nil {
				panic(err) // generated messages always marshal
			}
			p.payloads[c] = append(p.payloads[c], b)
		}
	}
	return p
}

func planMetrics(ctx context.Context, cfg Config) ([]Scenario, error) {
	n := cfg.Spans
	if n <= 0 {
		n = 1_000_000
	}
	end := time.Now().Truncate(metricsInterval)
	var out []Scenario
	for _, kind := range []string{"gauge", "counter"} {
		p := genMetrics(cfg.Seed, kind, n, cfg.Batch, end)
		name := metricsGauge
		if kind == "counter" {
			name = metricsCounter
		}
		out = append(out, Scenario{Name: name, Params: map[string]string{"points": fmt.Sprint(p.points)},
			Run: func(ctx context.Context, env *RunEnv) Result { return runMetrics(ctx, env, p) }})
	}
	return out, nil
}

func runMetrics(ctx context.Context, env *RunEnv, p *metricsPlan) Result {
	srv, err := StartServer(ctx, ServerOptions{Binary: env.Binary, DataDir: env.Dir, Durability: "wal"})
	if err != nil {
		return refused("start server: %v", err)
	}
	defer srv.Kill()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: metricsClients}}
	var retried atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := range metricsClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, body := range p.payloads[c] {
				if ctx.Err() != nil {
					return
				}
				for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
					resp, err := client.Post(srv.HTTPURL()+"/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
					if err != nil {
						firstErr.CompareAndSwap(nil, err.Error())
						return
					}
					var rb bytes.Buffer
					rb.ReadFrom(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						retried.Add(1)
						time.Sleep(backoff)
						continue
					}
					if resp.StatusCode != http.StatusOK || rb.Len() > 0 { // a partial success has a body
						firstErr.CompareAndSwap(nil, fmt.Sprintf("POST /v1/metrics: %s %q", resp.Status, rb.Bytes()))
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
		"points_per_s": float64(p.points) / elapsed.Seconds(),
		"retried_429":  float64(retried.Load()),
	}
	rng := url.Values{"start": {fmt.Sprint(p.end.Add(-time.Hour).Unix())}, "end": {fmt.Sprint(p.end.Unix())}, "step": {"15s"}}
	type kind struct {
		name, query string
		series      int
		check       func(res []promSeries) error
	}
	var kinds []kind
	if p.kind == "gauge" {
		kinds = append(kinds, kind{"range", "bench_cpu_temp_celsius", metricsSeries, func(res []promSeries) error {
			for _, s := range res {
				if s.Metric["instance"] == "i-0000" && s.Values[len(s.Values)-1][1] != fmt.Sprint(p.last0) {
					return fmt.Errorf("instance 0 ends at %v, want %v", s.Values[len(s.Values)-1][1], p.last0)
				}
			}
			return nil
		}})
	} else {
		kinds = append(kinds, kind{"range", "rate(bench_requests_total[1m])", metricsSeries, nil},
			kind{"sum_rate", "sum by (job) (rate(bench_requests_total[5m]))", 20, nil})
	}
	steps := int(time.Hour/metricsInterval) + 1
	for _, k := range kinds {
		q := url.Values{"query": {k.query}}
		for key, v := range rng {
			q[key] = v
		}
		path := "/prom/api/v1/query_range?" + q.Encode()
		var e2e, server []float64
		for i := range 10 + env.Samples {
			t := time.Now()
			code, body, ms, err := srv.GetTimed(ctx, path)
			d := float64(time.Since(t).Nanoseconds()) / 1e6
			if err != nil || code != 200 {
				return refused("GET %s: %d %v %.200s", path, code, err, body)
			}
			if i == 0 || i == 10 { // check the answer (decoding every one would time the client)
				var ans struct {
					Data struct {
						Result []promSeries `json:"result"`
					} `json:"data"`
				}
				if err := json.Unmarshal(body, &ans); err != nil {
					return refused("GET %s: %v", path, err)
				}
				if len(ans.Data.Result) != k.series {
					return refused("GET %s: wrong answer: %d series, want %d", path, len(ans.Data.Result), k.series)
				}
				for _, s := range ans.Data.Result {
					if len(s.Values) != steps {
						return refused("GET %s: wrong answer: %v has %d steps, want %d", path, s.Metric, len(s.Values), steps)
					}
				}
				if k.check != nil {
					if err := k.check(ans.Data.Result); err != nil {
						return refused("GET %s: wrong answer: %v", path, err)
					}
				}
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
	if b, err := dirBytes(env.Dir + "/metrics"); err == nil {
		m["disk_bytes_per_point"] = float64(b) / float64(p.points)
	}
	return Result{Metrics: m}
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func metricsTargets(rec *Record) []Target {
	ingest := func(scenario string) Target {
		t := Target{Name: "Metric ingest over OTLP/HTTP protobuf, wal, batches of 1,000, " + scenario + " (median of runs)", Want: ">= 250,000 points/s"}
		v := rec.median(scenario, "points_per_s")
		switch sr, ran := rec.Scenario(scenario); {
		case !ran:
			t.Got, t.Status = "not run", "NOT RUN"
		case sr.Status != "ok":
			t.Got, t.Status = sr.Status, "FAIL"
		case v >= 250_000:
			t.Got, t.Status = num(v, 0), "PASS"
		default:
			t.Got, t.Status = num(v, 0), "FAIL"
		}
		return withBusyNote(rec, t)
	}
	disk := Target{Name: "Bytes on disk per gauge point, 15 s scrapes (median of runs)", Want: "< 2 B"}
	v := rec.median(metricsGauge, "disk_bytes_per_point")
	switch sr, ran := rec.Scenario(metricsGauge); {
	case !ran:
		disk.Got, disk.Status = "not run", "NOT RUN"
	case sr.Status != "ok":
		disk.Got, disk.Status = sr.Status, "FAIL"
	case v < 2:
		disk.Got, disk.Status = num(v, 2)+" B", "PASS"
	default:
		disk.Got, disk.Status = num(v, 2)+" B", "FAIL"
	}
	return []Target{ingest(metricsGauge), ingest(metricsCounter), disk,
		msTarget(rec, metricsGauge, "range_p95_ms", "Range query, 1 h at 15 s, 1,000 gauge series, p95", 50),
		msTarget(rec, metricsCounter, "range_p95_ms", "Range query, 1 h at 15 s, rate over 1,000 counter series, p95", 50),
	}
}
