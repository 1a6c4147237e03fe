package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
)

// startRastro builds ./cmd/rastro and starts `rastro serve` on free ports.
func startRastro(t *testing.T) *bench.Server {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rastro")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rastro")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rastro: %v\n%s", err, out)
	}
	srv, err := bench.StartServer(context.Background(), bench.ServerOptions{Binary: bin, DataDir: t.TempDir(), Durability: "wal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// TestPeersAgainstRastroStandIns runs the whole client against one real
// Rastro server standing in for all three stores: Rastro's own API, and its
// Jaeger- and Tempo-compatible routes (which answer in the peers' shapes) as
// Jaeger and Tempo. The corpus is loaded through each route set, every
// kind's answers must match the key, and the report and raw record are
// written. A second run with another seed must refuse: its key does not
// describe what the server holds.
func TestPeersAgainstRastroStandIns(t *testing.T) {
	srv := startRastro(t)
	u := srv.HTTPURL()
	out := filepath.Join(t.TempDir(), "peers.md")
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Minute).UTC().Format(time.RFC3339)
	args := []string{"--load", "--spans", "3000", "--samples", "20", "--warmups", "2", "--start", start, "--wait", "30s",
		"--rastro", u, "--jaeger", u, "--jaeger-otlp", u, "--tempo", u, "--tempo-otlp", u, "--out", out, "--note", "test"}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{bench.MarkerBegin, "| Rastro |", "| Jaeger |", "| Tempo |", "Every answer of every store matched the key.", "- Host: test"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("peers.md lacks %q:\n%s", w, doc)
		}
	}
	raws, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "raw", "peers-*.json"))
	if len(raws) != 1 {
		t.Fatalf("raw records: %v", raws)
	}
	b, _ := os.ReadFile(raws[0])
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Stores) != 3 {
		t.Fatalf("%d stores recorded, want 3", len(rec.Stores))
	}
	for _, s := range rec.Stores {
		if len(s.Kinds) != len(kinds) {
			t.Fatalf("%s: %d kinds", s.Store, len(s.Kinds))
		}
		for _, k := range s.Kinds {
			if k.Wrong != 0 || k.Errors != 0 || k.Latency.Samples != 20 {
				t.Errorf("%s %s: %d wrong, %d errors, %d samples: %s", s.Store, k.Kind, k.Wrong, k.Errors, k.Latency.Samples, k.First)
			}
			if k.Kind != "absent" && !(k.Results > 0) {
				t.Errorf("%s %s: empty answers", s.Store, k.Kind)
			}
		}
	}

	stderr.Reset()
	err = run(context.Background(), []string{"--seed", "2", "--spans", "3000", "--start", start, "--wait", "1s", "--rastro", u, "--out", ""}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "not queryable") {
		t.Errorf("a key of another corpus was accepted: %v", err)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"--note", "busy host; it's loaded", "--out", "", "--spans", "1000"})
	if want := `--note 'busy host; it'\''s loaded' --out '' --spans 1000`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

func TestParseRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--rastro", "http://127.0.0.1:1", "--spans", "10"},
		{"--rastro", "http://127.0.0.1:1", "--window", "10s"},
		{"--rastro", "http://127.0.0.1:1", "--start", "yesterday"},
		{"--jaeger", "http://127.0.0.1:1", "--load"},
		{"--rastro", "http://127.0.0.1:1", "extra"},
	} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
