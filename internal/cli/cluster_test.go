package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
)

// TestMigrateAppliesClusterSchema: migrate --clickhouse-cluster --apply
// creates the cluster schema on a real cluster of 2 shards, once: a second
// run through the other node applies nothing; --apply without a cluster is
// refused.
func TestMigrateAppliesClusterSchema(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	for i, want := range []string{"7 migrations applied now", "0 migrations applied now"} {
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
