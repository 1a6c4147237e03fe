package chcluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// TestCluster: the cluster's servers read ZooKeeper, DDL ON CLUSTER reaches
// both, and a Distributed table over replicated local tables spreads its
// rows over the two shards and reads them all back from either node.
func TestCluster(t *testing.T) {
	c := Shared(t)
	if len(c.Nodes) != 2 {
		t.Fatalf("%d nodes", len(c.Nodes))
	}
	db := c.Database(t)
	ctx := t.Context()
	for _, stmt := range []string{
		fmt.Sprintf("CREATE TABLE %s.t_local ON CLUSTER %s (k UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/%s/t_local', '{replica}') ORDER BY k", db, c.Name, db),
		fmt.Sprintf("CREATE TABLE %s.t ON CLUSTER %s AS %s.t_local ENGINE = Distributed(%s, %s, t_local, k)", db, c.Name, db, c.Name, db),
	} {
		if err := c.Nodes[0].Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// Keys 0..99 sharded by k modulo 2 shards (weights 1, 1): the even
	// keys on shard 1, the odd ones on shard 2, 50 each.
	// insert_distributed_sync: the insert returns once both shards hold
	// their rows (a SETTINGS clause of INSERT ... SELECT would set it for
	// the SELECT only).
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.Nodes[1].Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1})),
		"INSERT INTO "+db+".t SELECT number FROM system.numbers LIMIT 100"); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		local, err := n.QueryUint(ctx, "SELECT count() FROM "+db+".t_local")
		if err != nil {
			t.Fatal(err)
		}
		if local != 50 {
			t.Errorf("shard %d holds %d rows, want 50", i+1, local)
		}
		odd, err := n.QueryUint(ctx, "SELECT count() FROM "+db+".t_local WHERE k % 2 = 1")
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(50 * i); odd != want {
			t.Errorf("shard %d holds %d odd keys, want %d", i+1, odd, want)
		}
		all, err := n.QueryUint(ctx, "SELECT count() FROM "+db+".t")
		if err != nil {
			t.Fatal(err)
		}
		if all != 100 {
			t.Errorf("node %d reads %d rows through the Distributed table, want 100", i+1, all)
		}
	}
}

// TestMissingJavaSaysWhatToInstall: without java on PATH, starting a
// cluster fails (it is never skipped) with what to install.
func TestMissingJavaSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(2, 1)
	if !errors.Is(err, ErrNoZooKeeper) || !strings.Contains(err.Error(), "apt-get install zookeeper") || !strings.Contains(err.Error(), "no java") {
		t.Fatalf("without java: %v", err)
	}
}
