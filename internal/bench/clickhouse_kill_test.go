package bench

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chserver"
)

// TestClickHouseWALSurvivesKill: the real rastro binary on a real
// clickhouse-server with --durability wal acknowledges spans while
// ClickHouse is down, is killed with SIGKILL, and started again on the same
// data directory once ClickHouse is back: every acknowledged span reaches
// ClickHouse, each span id once.
func TestClickHouseWALSurvivesKill(t *testing.T) {
	ctx := t.Context()
	ch, err := chserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Stop()
	const db = "walkill"
	if err := ch.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	opts := ServerOptions{Binary: builtRastro(t), DataDir: t.TempDir(), Durability: "wal",
		ExtraArgs: []string{"--storage", "clickhouse", "--clickhouse-url", ch.URL(db) + "?dial_timeout=500ms"}}
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: 7, Spans: 3000, Start: time.Now().Add(-30 * time.Minute), Window: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	send := func(srv *Server, from, to int) {
		t.Helper()
		payloads, err := Prepare(Batches(spans[from:to], 100), ProtoOTLPProto, false)
		if err != nil {
			t.Fatal(err)
		}
		lr, err := Load(ctx, LoadOptions{Endpoint: srv.HTTPURL(), Protocol: ProtoOTLPProto, Concurrency: 2, KeepAlive: true}, payloads)
		if err != nil {
			t.Fatal(err)
		}
		if lr.AcceptedSpans != int64(to-from) {
			t.Fatalf("%d of %d spans acknowledged (%d errors, %d 429s)", lr.AcceptedSpans, to-from, lr.Errors, lr.Status429)
		}
	}
	distinct := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			n, err := ch.QueryUint(ctx, "SELECT uniqExact(span_id) FROM "+db+".spans")
			if err == nil && n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ClickHouse holds %d distinct spans (err %v), want %d", n, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	srv, err := StartServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	send(srv, 0, 1000)
	distinct(1000)
	if err := ch.Down(); err != nil {
		srv.Kill()
		t.Fatal(err)
	}
	send(srv, 1000, 3000) // acknowledged from the WAL alone
	srv.Kill()
	if err := ch.Up(); err != nil {
		t.Fatal(err)
	}
	srv, err = StartServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Kill()
	distinct(3000)
	// The spans are counted once their part of spans is written; the
	// trace's rows in spans_by_trace (what a lookup reads) follow within the
	// same insert.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		code, body, err := srv.Get(ctx, "/api/v1/traces/"+spans[2999].TraceID.String())
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a trace acknowledged during the outage: %d %v %.200s", code, err, body)
		}
	}
	if err := srv.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
}
