package chstore

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chcluster"
)

// openCluster opens a Store in a fresh database of the shared test cluster
// (2 shards) through node i.
func openCluster(t *testing.T, c *chcluster.Cluster, db string, node int) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{URL: c.URL(node, db), Cluster: c.Name, BatchWindow: time.Millisecond})
	if err != nil {
		t.Fatalf("open on cluster through node %d: %v\n%s", node+1, err, c.Logs())
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestClusterMigrations: migrate --clickhouse-cluster creates every step's
// tables ON CLUSTER, records the steps once, and a second run (through the
// other node) applies nothing.
func TestClusterMigrations(t *testing.T) {
	c := chcluster.Shared(t)
	db := c.Database(t)
	feat, steps, ran, err := Migrate(t.Context(), c.URL(0, db), c.Name)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	if ran != len(migrations) || len(steps) != len(migrations) || feat.Version == "" {
		t.Fatalf("first run: %d applied, steps %+v, version %q", ran, steps, feat.Version)
	}
	if _, _, ran, err := Migrate(t.Context(), c.URL(1, db), c.Name); err != nil || ran != 0 {
		t.Fatalf("second run through node 2: %d applied, %v", ran, err)
	}
	want, err := ClusterSchema(c.Name, db)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		got, err := n.QueryUint(t.Context(), "SELECT count() FROM system.tables WHERE database = '"+db+"'")
		if err != nil {
			t.Fatal(err)
		}
		if got != uint64(len(want)) {
			t.Errorf("node %d has %d tables and views, want %d (one per statement)", i+1, got, len(want))
		}
	}
}
