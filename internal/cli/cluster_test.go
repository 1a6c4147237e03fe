package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// TestMigrateAppliesClusterSchema: migrate --clickhouse-cluster --apply
// creates the cluster schema on a real cluster of 2 shards, once: a second
// run through the other node applies nothing; --apply without a cluster is
// refused.
func TestMigrateAppliesClusterSchema(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	for i, want := range []string{"9 migrations applied now", "0 migrations applied now"} {
		var out, errb bytes.Buffer
		args := []string{"migrate", "--clickhouse-url", c.URL(i, db), "--clickhouse-cluster", c.Name, "--apply"}
		if code := Main(t.Context(), args, &out, &errb); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errb.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("run %d: %q, want %q", i, out.String(), want)
		}
	}
	for i, n := range c.Nodes {
		got, err := n.QueryUint(t.Context(), "SELECT count() FROM system.tables WHERE database = '"+db+"' AND engine = 'ReplicatedReplacingMergeTree' AND name = 'spans_local'")
		if err != nil || got != 1 {
			t.Errorf("node %d: %d replicated spans_local tables, %v", i+1, got, err)
		}
	}
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"migrate", "--clickhouse-url", c.URL(0, db), "--apply"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--apply is for --clickhouse-cluster") {
		t.Errorf("--apply without a cluster: exit %d %q", code, errb.String())
	}
}

// serveOn starts rastro serve --storage clickhouse on url (and cluster, if
// any; and extra flags) on a free port and returns its base URL; it stops
// when t ends.
func serveOn(t *testing.T, url, cluster string, extra ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errb := &syncBuffer{}
	done := make(chan int, 1)
	args := []string{"serve", "--storage", "clickhouse", "--clickhouse-url", url, "--http-addr", addr, "--grpc-addr", "", "--ui=false", "--mcp=false"}
	if cluster != "" {
		args = append(args, "--clickhouse-cluster", cluster)
	}
	args = append(args, extra...)
	go func() { done <- Main(ctx, args, io.Discard, errb) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve on %s exited %d: %s", url, code, errb.String())
		}
		http.DefaultClient.CloseIdleConnections()
	})
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve on %s not ready after 60s: %v; log: %s", url, err, errb.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the serve goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeOnClusterAgreesWithSingleNode: two rastro serve processes on a
// real 2-shard cluster (through either node, as behind a load balancer)
// and one on a single node. A corpus of many traces is ingested over OTLP
// HTTP through the first cluster process and the single node's; every
// query route answers through the second cluster process what the single
// node answers (status and body), or the same refusal.
func TestServeOnClusterAgreesWithSingleNode(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	single := serveOn(t, chtest.URL(t), "")
	a := serveOn(t, c.URL(0, db), c.Name)
	b := serveOn(t, c.URL(1, db), c.Name)
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	corpus, err := bench.Generate(bench.CorpusLLMSessions, bench.CorpusOptions{Seed: 9, Spans: 2000, Start: start, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{single, a} {
		for i := 0; i < len(corpus); i += 250 {
			body := otlp.EncodeJSON(corpus[i:min(i+250, len(corpus))])
			resp, err := http.Post(base+"/v1/traces", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("ingest into %s: %d", base, resp.StatusCode)
			}
		}
	}
	logBatches, logTrace := bench.GenLogs(3, 1500, 300, start.Add(80*time.Minute))
	for _, base := range []string{single, a} {
		for _, batch := range logBatches {
			resp, err := http.Post(base+"/v1/logs", "application/x-protobuf", bytes.NewReader(otlp.EncodeLogsProto(batch)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("ingest logs into %s: %d", base, resp.StatusCode)
			}
		}
	}
	sample := corpus[len(corpus)/3]
	w := "since=" + url.QueryEscape(start.Add(-time.Minute).Format(time.RFC3339)) + "&until=" + url.QueryEscape(start.Add(90*time.Minute).Format(time.RFC3339))
	paths := []string{
		"/api/v1/traces/" + sample.TraceID.String(),
		"/api/v1/spans?limit=40&" + w,
		"/api/v1/spans?limit=40&q=" + url.QueryEscape(`{ status = error }`) + "&" + w,
		"/api/v1/traces?limit=20&" + w,
		"/api/v1/services?" + w,
		"/api/v1/services/" + url.PathEscape(sample.Service) + "/operations?" + w,
		"/api/v1/attributes?" + w,
		"/api/v1/llm/stats?group_by=model&" + w,
		"/api/v1/llm/timeseries?step=10m&" + w,
		"/api/v1/sessions?" + w,
		"/api/v1/red?" + w,
		"/api/v1/heatmap?service=" + url.QueryEscape(sample.Service) + "&" + w,
		"/api/v1/errors?" + w,
		"/api/v1/dependencies?" + w,
		"/api/v1/stats",
		"/api/v1/logs?limit=50&" + w,
		"/api/v1/logs?limit=50&q=" + url.QueryEscape(`severity >= ERROR`) + "&" + w,
		"/api/v1/traces/" + logTrace.String() + "/logs",
		"/api/traces/" + sample.TraceID.String(),
		"/api/traces?service=" + url.QueryEscape(sample.Service) + "&limit=10&start=" + fmt.Sprint(start.Add(-time.Minute).UnixMicro()) + "&end=" + fmt.Sprint(start.Add(90*time.Minute).UnixMicro()),
		"/api/search?limit=10&start=" + fmt.Sprint(start.Add(-time.Minute).Unix()) + "&end=" + fmt.Sprint(start.Add(90*time.Minute).Unix()),
	}
	same := func(when string) {
		t.Helper()
		for _, p := range paths {
			wc, wb := get(t, single+p)
			gc, gb := get(t, b+p)
			// A log cursor holds the sequence number the ingesting process
			// gave (its clock): it differs between any two databases.
			wb, gb = logCursor.ReplaceAllString(wb, ""), logCursor.ReplaceAllString(gb, "")
			if wc != 200 && !(p == "/api/v1/stats" && wc == 501) && !(when == "after the erasure" && wc == 404) {
				t.Errorf("%s: GET %s: the single node answers %d %.200s", when, p, wc, wb)
			}
			if gc != wc || gb != wb {
				t.Errorf("%s: GET %s: the cluster answers %d %.400s\nthe single node %d %.400s", when, p, gc, gb, wc, wb)
			}
		}
		for _, q := range []string{"SELECT service, count() AS n, sum(duration) AS d FROM spans GROUP BY service ORDER BY service",
			"SELECT model, count() AS n FROM llm_calls GROUP BY model ORDER BY model",
			"SELECT trace_id, count() AS n FROM spans WHERE trace_id IN (SELECT trace_id FROM spans WHERE status = 2) GROUP BY trace_id ORDER BY trace_id"} {
			body := `{"sql":` + strconv.Quote(q) + `}`
			wc, wb := post(t, single+"/api/v1/sql", body)
			gc, gb := post(t, b+"/api/v1/sql", body)
			if wc != 200 {
				t.Errorf("%s: SQL %s: the single node answers %d %.200s", when, q, wc, wb)
			}
			if gc != wc || gb != wb {
				t.Errorf("%s: SQL %s: the cluster answers %d %.400s\nthe single node %d %.400s", when, q, gc, gb, wc, wb)
			}
		}
	}
	same("after ingest")

	// The spans are spread over both shards, each trace on one: the
	// shards' distinct trace ids add up to the corpus's.
	traces := map[string]bool{}
	for i := range corpus {
		traces[corpus[i].TraceID.String()] = true
	}
	var rows, ids uint64
	for i, n := range c.Nodes {
		r, err1 := n.QueryUint(t.Context(), "SELECT count() FROM "+db+".spans_local")
		d, err2 := n.QueryUint(t.Context(), "SELECT uniqExact(trace_id) FROM "+db+".spans_local")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if r == 0 || r == uint64(len(corpus)) {
			t.Errorf("shard %d holds %d of the %d spans: not spread", i+1, r, len(corpus))
		}
		rows, ids = rows+r, ids+d
	}
	if rows != uint64(len(corpus)) || ids != uint64(len(traces)) {
		t.Errorf("the shards hold %d spans of %d trace ids (summed per shard), want %d of %d", rows, ids, len(corpus), len(traces))
	}

	// An erasure through a is seen through b at once.
	for _, base := range []string{single, a} {
		req, err := http.NewRequest("DELETE", base+"/api/v1/traces/"+sample.TraceID.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("erase through %s: %d", base, resp.StatusCode)
		}
	}
	if code, body := get(t, b+"/api/v1/traces/"+sample.TraceID.String()); code != 404 {
		t.Errorf("a trace erased through one cluster process is served by the other: %d %.200s", code, body)
	}
	same("after the erasure")
}

var logCursor = regexp.MustCompile(`"next_cursor":"\d+\.\d+"`)

func post(t *testing.T, u, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeClusterFlags: --clickhouse-cluster is refused without
// --storage clickhouse, and a name that cannot go into DDL is refused
// before anything is connected to.
func TestServeClusterFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--clickhouse-cluster", "c1"}, "--clickhouse-cluster is for --storage clickhouse"},
		{[]string{"--storage", "clickhouse", "--clickhouse-url", "clickhouse://127.0.0.1:1/x", "--clickhouse-cluster", "c1; DROP"}, `cluster name "c1; DROP"`},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", ""}, c.args...)
		if code := Main(t.Context(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
