package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/store"
)

// TestMigrateAppliesOnce: rastro migrate applies the schema's steps once
// and lists them; a second run applies none.
func TestMigrateAppliesOnce(t *testing.T) {
	url := chtest.URL(t)
	for i, want := range []string{"9 migrations applied now", "0 migrations applied now"} {
		var out, errb bytes.Buffer
		if code := Main(t.Context(), []string{"migrate", "--clickhouse-url", url}, &out, &errb); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errb.String())
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "spans and trace index") || !strings.Contains(out.String(), "7  logs") || !strings.Contains(out.String(), "9  LLM rollups with 64-bit trace sets") {
			t.Fatalf("run %d: %q, want %q and the steps", i, out.String(), want)
		}
		// The steps' times in one column, however long a name.
		col := -1
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			at := strings.Index(line, " applied ")
			if at < 0 || (col >= 0 && at != col) {
				t.Fatalf("run %d: step lines not aligned: %q", i, out.String())
			}
			col = at
		}
	}
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"migrate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--clickhouse-url") {
		t.Fatalf("migrate without a URL: exit %d %q", code, errb.String())
	}
}

func TestServeStorageFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--storage", "mysql"}, `--storage "mysql"`},
		{[]string{"--storage", "clickhouse"}, "needs --clickhouse-url"},
		{[]string{"--clickhouse-url", "clickhouse://127.0.0.1:9000/x"}, "is for --storage clickhouse"},
		{[]string{"--storage", "clickhouse", "--clickhouse-url", "mysql://x"}, "--clickhouse-url"},
		{[]string{"--storage", "clickhouse", "--clickhouse-url", "clickhouse://127.0.0.1:9000/x", "--durability", "buffered"}, "use insert"},
		{[]string{"--durability", "insert"}, `--durability "insert": use wal or buffered`},
		{[]string{"--storage", "clickhouse", "--clickhouse-url", "clickhouse://127.0.0.1:9000/x", "--durability", "wal", "--clickhouse-wal-max-bytes", "0"}, "--clickhouse-wal-max-bytes must be above zero"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", ""}, c.args...)
		if code := Main(t.Context(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestServeOnClickHouse: rastro serve --storage clickhouse migrates,
// ingests, answers a trace and the log search (logs are wired to
// ClickHouse too), answers 501 for what it lacks, and stops.
func TestServeOnClickHouse(t *testing.T) {
	url := chtest.URL(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--storage", "clickhouse", "--clickhouse-url", url, "--http-addr", addr, "--grpc-addr", "",
			"--ui=false", "--mcp=false", "--sql-max-rows", "50"}, io.Discard, &errb)
	}()
	base := "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			cancel()
			code := <-done
			t.Fatalf("not ready after 20s: %v; exit %d; log: %s", err, code, errb.String())
		}
	}
	postSpan(t, base, "5b8efff798038103d269b633813fc60c", "GET /x")
	for path, want := range map[string]int{"/api/v1/traces/5b8efff798038103d269b633813fc60c": 200, "/api/v1/stats": 501, "/api/v1/red?since=1h": 200,
		"/api/v1/logs": 200} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
	// rastro sql, and the server's --sql-max-rows.
	var out, sqlErr bytes.Buffer
	if code := Main(t.Context(), []string{"sql", "--server", base, "SELECT name, service, duration, [1, 2] AS a FROM spans"}, &out, &sqlErr); code != 0 ||
		!regexp.MustCompile(`^name +service +duration +a\nGET /x +web +5000000 +\[1,2\]\n$`).MatchString(out.String()) {
		t.Errorf("rastro sql: exit %d %q %q", code, out.String(), sqlErr.String())
	}
	out.Reset()
	sqlErr.Reset()
	if code := Main(t.Context(), []string{"sql", "--server", base, "--limit", "51", "SELECT 1"}, &out, &sqlErr); code == 0 || !strings.Contains(sqlErr.String(), "from 1 to 50") {
		t.Errorf("rastro sql --limit 51 with --sql-max-rows 50: exit %d %q", code, sqlErr.String())
	}
	out.Reset()
	sqlErr.Reset()
	if code := Main(t.Context(), []string{"sql", "--server", base, "SELECT * FROM system.one"}, &out, &sqlErr); code == 0 || !strings.Contains(sqlErr.String(), "the keyword SYSTEM") {
		t.Errorf("rastro sql of a system table: exit %d %q", code, sqlErr.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "storage=clickhouse") {
		t.Errorf("log does not name the storage: %s", errb.String())
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestServeOnClickHouseBehindAWAL: with --durability wal, rastro serve
// --storage clickhouse keeps its WAL in --data-dir, acknowledges a request
// logged there and inserts it into ClickHouse behind the answer: the trace
// is found, by this process and by another on the same database.
func TestServeOnClickHouseBehindAWAL(t *testing.T) {
	url, dir := chtest.URL(t), t.TempDir()
	base := serveOn(t, url, "", "--durability", "wal", "--data-dir", dir)
	other := serveOn(t, url, "")
	postSpan(t, base, "6b8efff798038103d269b633813fc60c", "GET /y")
	if _, err := os.Stat(filepath.Join(dir, "clickhouse-wal", "LOCK")); err != nil {
		t.Fatalf("no WAL in --data-dir: %v", err)
	}
	for _, b := range []string{base, other} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get(b + "/api/v1/traces/6b8efff798038103d269b633813fc60c")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the trace acknowledged through the WAL is not found after 30s: %d", b, resp.StatusCode)
			}
		}
	}
}

// postSpan sends one span of trace, a minute old, in the native JSON shape
// and fails unless it is acknowledged.
func postSpan(t *testing.T, base, trace, name string) {
	t.Helper()
	start := time.Now().Add(-time.Minute).UnixNano()
	body := fmt.Sprintf(`[{"trace_id":%q,"span_id":"eee19b7ec3c1b174","name":%q,"service":"web","start_time":%d,"end_time":%d}]`, trace, name, start, start+5e6)
	resp, err := http.Post(base+"/v1/spans", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("ingest: %d", resp.StatusCode)
	}
}

// TestMigratePrintsClusterSchema: with --clickhouse-cluster, migrate prints
// the cluster schema for the URL's database, connecting to nothing (the
// URL's port is closed), and refuses a name that cannot go into DDL.
func TestMigratePrintsClusterSchema(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"migrate", "--clickhouse-url", "clickhouse://127.0.0.1:1/obsdb", "--clickhouse-cluster", "c1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"migrate --apply, or serve --clickhouse-cluster, runs it", "CREATE TABLE IF NOT EXISTS obsdb.spans_local ON CLUSTER c1",
		"ENGINE = Distributed(c1, obsdb, spans_local, cityHash64(trace_id))"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	errb.Reset()
	if code := Main(t.Context(), []string{"migrate", "--clickhouse-url", "clickhouse://127.0.0.1:1/obsdb", "--clickhouse-cluster", "c1;DROP"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "cluster name") {
		t.Fatalf("a bad cluster name: exit %d %q", code, errb.String())
	}
}

// TestMigrateFromDataDirRefusesBadInput: a directory that is not a data
// directory, a batch size out of range, or a data directory a
// server holds are refused with the reason, before anything is copied.
func TestMigrateFromDataDirRefusesBadInput(t *testing.T) {
	url := "clickhouse://127.0.0.1:1/obsdb" // never reached: refused before
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-data-dir", empty}, "not a rastro data directory"},
		{[]string{"--from-data-dir", empty + "/absent"}, "--from-data-dir"},
		{[]string{"--from-data-dir", empty, "--batch-spans", "0"}, "--batch-spans 0"},
	} {
		var out, errb bytes.Buffer
		if code := Main(t.Context(), append([]string{"migrate", "--clickhouse-url", url}, c.args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
	// A data directory in use by a server: its lock refuses the copy.
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"migrate", "--clickhouse-url", url, "--from-data-dir", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "in use by another rastro process") {
		t.Errorf("data directory in use: exit %d %q", code, errb.String())
	}
}

// TestMigrateFromDataDirIntoCluster: migrate --from-data-dir
// --clickhouse-cluster copies a data directory's spans through node 1 of a
// real 2-shard cluster; node 2 reads every one of them, spread over both
// shards; a second run copies nothing more.
func TestMigrateFromDataDirIntoCluster(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	dir := t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 3, Spans: 1200, Start: time.Now().Add(-2 * time.Hour), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Append(t.Context(), &store.Write{Project: "p", Spans: corpus}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		var out, errb bytes.Buffer
		args := []string{"migrate", "--clickhouse-url", c.URL(0, db), "--clickhouse-cluster", c.Name, "--from-data-dir", dir, "--batch-spans", "500"}
		if code := Main(t.Context(), args, &out, &errb); code != 0 {
			t.Fatalf("run %d: exit %d: %s", run+1, code, errb.String())
		}
		n, err := c.Nodes[1].QueryUint(t.Context(), "SELECT count() FROM "+db+".spans")
		if err != nil || n != uint64(len(corpus)) {
			t.Fatalf("run %d: node 2 reads %d spans (%v), want %d", run+1, n, err, len(corpus))
		}
	}
	for i, n := range c.Nodes {
		if got, err := n.QueryUint(t.Context(), "SELECT count() FROM "+db+".spans_local"); err != nil || got == 0 || got == uint64(len(corpus)) {
			t.Errorf("shard %d holds %d of %d spans (%v): not spread", i+1, got, len(corpus), err)
		}
	}
}
