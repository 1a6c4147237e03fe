package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/server"
)

// startStatusServer is startTestServer with the engine's metrics
// registered, as `rastro serve` wires them.
func startStatusServer(t *testing.T) (base string, eng *engine.Engine) {
	t.Helper()
	var opened atomic.Pointer[engine.Engine]
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0", Collectors: []prometheus.Collector{engine.NewCollector(opened.Load)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	opened.Store(eng)
	srv.SetBackend(eng)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
	})
	return "http://" + srv.HTTPAddr(), eng
}

// scrape reads /metrics into sums by family name (histograms: _count).
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			if strings.HasPrefix(name, "rastro_ingest_requests_total") && strings.Contains(name, `code="429"`) {
				v, _ := strconv.ParseFloat(line[i+1:], 64)
				out["ingest_429"] += v
			}
			name = name[:j]
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[name] += v
	}
	return out
}

// TestStatusEqualsMetricsAndStats: on a quiet server, `rastro status
// --json` gives the figures /metrics and /api/v1/stats give at the same
// moment; the table names them.
func TestStatusEqualsMetricsAndStats(t *testing.T) {
	base, eng := startStatusServer(t)
	post := func(n, from int) {
		var spans []string
		now := time.Now().Add(-time.Minute).UnixNano()
		for i := from; i < from+n; i++ {
			spans = append(spans, fmt.Sprintf(`{"trace_id":"5b8efff798038103d269b633813fc6%02x","span_id":"eee19b7ec3c1b1%02x","name":"GET /","service":"web","start_time":%d,"duration_ns":1000}`, i/2, i, now+int64(i)))
		}
		resp, err := http.Post(base+"/v1/spans", "application/json", strings.NewReader("["+strings.Join(spans, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post(10, 0)
	if err := eng.Seal(); err != nil { // one segment, and spans in it
		t.Fatal(err)
	}
	post(6, 10)                                                       // and some in the write buffer
	if c, _, _ := httpGet(base + "/api/v1/spans?limit=1"); c != 200 { // a query
		t.Fatalf("search: %d", c)
	}

	before := scrape(t, base)
	var out, errb strings.Builder
	if code := Main(context.Background(), []string{"status", "--json", "--server", base}, &out, &errb); code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errb.String())
	}
	after := scrape(t, base)
	_, _, statsBody := httpGet(base + "/api/v1/stats")
	var st apiStatus
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, out.String())
	}
	var stats struct {
		Spans, Traces int64
		Segments      int
		DiskBytes     int64 `json:"disk_bytes"`
		SegmentBytes  int64 `json:"segment_bytes"`
		BufferSpans   int64 `json:"buffer_spans"`
		BufferBytes   int64 `json:"buffer_bytes"`
		WALBytes      int64 `json:"wal_bytes"`
		ValueBytes    int64 `json:"value_bytes"`
	}
	if err := json.Unmarshal(statsBody, &stats); err != nil {
		t.Fatal(err)
	}
	// Quiet: the two scrapes agree but for the status query itself.
	for name, v := range before {
		if name != "rastro_query_duration_seconds_count" && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") &&
			!strings.HasPrefix(name, "rastro_query_duration_seconds") && !strings.HasPrefix(name, "rastro_http_connections") && after[name] != v {
			t.Fatalf("the server was not quiet: %s went from %v to %v", name, v, after[name])
		}
	}
	m := before
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"projects[0].spans = stats.spans", float64(st.Projects[0].Spans), float64(stats.Spans)},
		{"projects[0].traces = stats.traces", float64(st.Projects[0].Traces), float64(stats.Traces)},
		{"segments.count = rastro_segments", float64(st.Segments.Count), m["rastro_segments"]},
		{"segments.count = stats.segments", float64(st.Segments.Count), float64(stats.Segments)},
		{"segments.bytes = rastro_segment_bytes", float64(st.Segments.Bytes), m["rastro_segment_bytes"]},
		{"disk_bytes = stats.disk_bytes", float64(st.DiskBytes), float64(stats.DiskBytes)},
		{"value_bytes = rastro_value_store_bytes", float64(st.ValueBytes), m["rastro_value_store_bytes"]},
		{"wal.bytes = rastro_wal_bytes", float64(st.WAL.Bytes), m["rastro_wal_bytes"]},
		{"wal.bytes = stats.wal_bytes", float64(st.WAL.Bytes), float64(stats.WALBytes)},
		{"buffer.spans = rastro_buffer_spans", float64(st.Buffer.Spans), m["rastro_buffer_spans"]},
		{"buffer.spans = stats.buffer_spans", float64(st.Buffer.Spans), float64(stats.BufferSpans)},
		{"buffer.bytes = rastro_buffer_bytes", float64(st.Buffer.Bytes), m["rastro_buffer_bytes"]},
		{"ingest.spans_total = rastro_ingest_spans_total", float64(st.Ingest.SpansTotal), m["rastro_ingest_spans_total"]},
		{"ingest.refused_429_total = rastro_ingest_requests_total{code=429}", float64(st.Ingest.Refused429), m["ingest_429"]},
		{"queries.total = rastro_query_duration_seconds_count", float64(st.Queries.Total), m["rastro_query_duration_seconds_count"]},
		{"queries.refused_429_total = rastro_queries_refused_total", float64(st.Queries.Refused429), m["rastro_queries_refused_total"]},
		{"seals.total = rastro_seals_total", float64(st.Seals.Total), m["rastro_seals_total"]},
		{"merges.total = rastro_compaction_merges_total", float64(st.Merges.Total), m["rastro_compaction_merges_total"]},
		{"warnings.corruptions_total = rastro_corruption_errors_total", float64(st.Warnings.Corruptions), m["rastro_corruption_errors_total"]},
		{"warnings.io_errors_total = rastro_io_errors_total", float64(st.Warnings.IOErrors), m["rastro_io_errors_total"]},
		{"wal.replayed_spans = rastro_wal_replayed_spans_total", float64(st.WAL.ReplayedSpans), m["rastro_wal_replayed_spans_total"]},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if st.Projects[0].Spans != 16 || st.Segments.Count != 1 || st.Buffer.Spans != 6 || st.Ingest.SpansTotal != 16 || st.Seals.Total != 1 || st.Queries.Total < 1 {
		t.Errorf("status figures do not describe what was done: %s", out.String())
	}
	if after["rastro_query_duration_seconds_count"] != before["rastro_query_duration_seconds_count"]+1 {
		t.Errorf("the status request is not counted as one query")
	}

	// The table names the same figures.
	out.Reset()
	if code := Main(context.Background(), []string{"status", "--server", base}, &out, &errb); code != 0 {
		t.Fatalf("status: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"default: 16 spans, 8 traces", "1 segment (", "6 spans, ", "16 spans in all", "1 seal since start, last ", "warnings   none", "retention  off", "erasures   0 pending"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStatusWatchRefreshes: --watch prints the report again until
// interrupted, then exits 0.
func TestStatusWatchRefreshes(t *testing.T) {
	base, _ := startStatusServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	code := make(chan int, 1)
	go func() { code <- Main(ctx, []string{"status", "--watch", "100ms", "--server", base}, &out, &errb) }()
	waitUntil(t, "three reports", func() bool {
		return strings.Count(out.String(), "rastro devel") >= 3 || strings.Count(out.String(), "  warnings ") >= 3
	})
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d after interrupt: %s", c, errb.String())
	}
	var e lockedBuffer
	if c := Main(context.Background(), []string{"status", "--watch", "-1s", "--server", base}, &out, &e); c != 2 {
		t.Errorf("--watch -1s: exit %d, want 2 (usage): %s", c, e.String())
	}
}

func httpGet(url string) (int, http.Header, []byte) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
