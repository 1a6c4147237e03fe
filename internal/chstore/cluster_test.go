package chstore

import (
	"regexp"
	"strings"
	"testing"
)

// TestClusterSchema checks the generated cluster DDL as text (the tests of
// cluster_run_test.go apply it to a real cluster): every
// single-node table has a replicated local table and a Distributed table of
// its name over it (bookkeeping tables are replicated to every node
// instead), every statement runs ON CLUSTER, the views read and write local
// tables, a trace's rows shard together, and the local tables keep the
// single-node columns, partitioning and sorting keys.
func TestClusterSchema(t *testing.T) {
	stmts, err := ClusterSchema("obs", "rastro")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(stmts, ";\n")
	for _, s := range stmts {
		if !strings.Contains(s, " ON CLUSTER obs ") {
			t.Errorf("not ON CLUSTER: %.100s", s)
		}
	}
	var tables, views []string
	for _, s := range append([]string{migrationsTable}, allStatements()...) {
		if m := createTableRE.FindStringSubmatch(strings.TrimSpace(s)); m != nil {
			tables = append(tables, m[1])
		} else if m := createViewRE.FindStringSubmatch(strings.TrimSpace(s)); m != nil {
			views = append(views, m[1])
		}
	}
	if len(tables) < 8 || len(views) < 3 {
		t.Fatalf("found tables %v and views %v in the single-node schema", tables, views)
	}
	for _, table := range tables {
		if replicatedEverywhere[table] {
			if !regexp.MustCompile(`CREATE TABLE IF NOT EXISTS rastro\.` + table + ` ON CLUSTER obs \((?s:.*)ENGINE = Replicated\w*MergeTree\('/clickhouse/tables/all/rastro/` + table + `', '\{replica\}'`).MatchString(joined) {
				t.Errorf("%s: no table replicated to every node", table)
			}
			continue
		}
		local := regexp.MustCompile(`CREATE TABLE IF NOT EXISTS rastro\.` + table + `_local ON CLUSTER obs \((?s:[^;]*?)ENGINE = Replicated\w*MergeTree\('/clickhouse/tables/\{shard\}/rastro/` + table + `_local', '\{replica\}'`)
		if !local.MatchString(joined) {
			t.Errorf("%s: no replicated local table", table)
		}
		dist := regexp.MustCompile(`CREATE TABLE IF NOT EXISTS rastro\.` + table + ` ON CLUSTER obs AS rastro\.` + table + `_local ENGINE = Distributed\(obs, rastro, ` + table + `_local, ([^;]*)\)(;|$)`)
		m := dist.FindStringSubmatch(joined)
		if m == nil {
			t.Errorf("%s: no Distributed table over its local one", table)
			continue
		}
		if key, ok := shardKeys[table]; ok && m[1] != key || !ok && m[1] != "rand()" {
			t.Errorf("%s: sharded by %s", table, m[1])
		}
	}
	for _, table := range []string{"spans", "trace_index", "attr_index"} {
		if shardKeys[table] != "cityHash64(trace_id)" {
			t.Errorf("%s is not sharded by trace id: a trace's rows would spread over shards", table)
		}
	}
	for _, s := range stmts {
		if !strings.HasPrefix(s, "CREATE MATERIALIZED VIEW") {
			continue
		}
		if !regexp.MustCompile(`TO rastro\.\w+_local AS`).MatchString(s) || !regexp.MustCompile(`FROM rastro\.spans_local\b`).MatchString(s) ||
			regexp.MustCompile(`FROM spans\b`).MatchString(s) {
			t.Errorf("a view not on local tables: %s", s)
		}
	}
	// The local spans table keeps the single-node definition.
	for _, want := range []string{"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rastro/spans_local', '{replica}', ingested)",
		"PARTITION BY toDate(toDateTime(intDiv(start, 1000000000)))", "ORDER BY (project, intDiv(start, 60000000000), trace_id, span_id)", "body String"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q", want)
		}
	}
	for _, bad := range [][2]string{{"obs; DROP", "rastro"}, {"obs", "rastro`x"}, {"", "rastro"}} {
		if _, err := ClusterSchema(bad[0], bad[1]); err == nil {
			t.Errorf("cluster %q database %q accepted", bad[0], bad[1])
		}
	}
}
