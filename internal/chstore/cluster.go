package chstore

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Cluster mode (Options.Cluster, rastro serve and migrate
// --clickhouse-cluster). The schema: ClusterSchema turns the single-node
// schema (every migration, in order) into the statements of a sharded,
// replicated one: each table becomes a local table on every node
// (name_local, created ON CLUSTER, engine Replicated*MergeTree with the
// {shard} and {replica} macros) plus a Distributed table of the original
// name over the locals; the materialized views read and write the locals,
// so each shard rolls up and indexes the spans it stores; the bookkeeping
// tables (schema_migrations, rollups) are replicated to every node.
//
// The queries are the single node's: they name the Distributed tables,
// which have the single node's names. The connection's settings
// (clusterSettings) make inserts into a Distributed table return once every
// shard holds its rows (insert_distributed_sync), so an acknowledged write
// is visible to every rastro process; an IN subquery over a distributed
// table inside a distributed query is GLOBAL IN (global). Mutations
// (erasures, retention deletes) and partition drops address the local
// tables ON CLUSTER (onLocals): a Distributed table takes neither.
//
// An insert_quorum in the URL makes each insert wait for that many
// replicas of its shards (quorum.go). Import works on a cluster of one
// replica per shard (import.go, importableCluster).
//
// Tested against real clusters of 2 shards of 1 replica and of 1 shard of
// 2 replicas (package chcluster: ZooKeeper and clickhouse-server 18.16).

// clusterSettings are the session settings of a cluster mode connection.
var clusterSettings = clickhouse.Settings{"insert_distributed_sync": 1}

// schemaTarget is where the schema lives: a database, on a cluster or not.
type schemaTarget struct {
	cluster, db string
}

// targetOf is the schema target of a ClickHouse URL and cluster name.
func targetOf(url, cluster string) (schemaTarget, error) {
	o, err := clickhouse.ParseDSN(url)
	if err != nil {
		return schemaTarget{}, fmt.Errorf("ClickHouse URL: %w", err)
	}
	db := o.Auth.Database
	if db == "" {
		db = "default"
	}
	if cluster == "" {
		return schemaTarget{db: db}, nil
	}
	if !identRE.MatchString(cluster) {
		return schemaTarget{}, fmt.Errorf("cluster name %q: use letters, digits and _ (it is written into DDL)", cluster)
	}
	if !identRE.MatchString(db) {
		return schemaTarget{}, fmt.Errorf("database name %q: use letters, digits and _ (it is written into DDL)", db)
	}
	return schemaTarget{cluster: cluster, db: db}, nil
}

// statements are the statements that create what the single-node
// statement stmt creates, on the target.
func (t schemaTarget) statements(stmt string) ([]string, error) {
	if t.cluster == "" {
		return []string{stmt}, nil
	}
	return clusterStatements(stmt, t.cluster, t.db)
}

// dropView is the statement that drops the materialized view name, made by
// a migration's CREATE MATERIALIZED VIEW, on the target (where it is made
// ON CLUSTER, in the database: clusterStatements).
func (t schemaTarget) dropView(name string) string {
	if t.cluster == "" {
		return "DROP TABLE IF EXISTS " + name
	}
	return fmt.Sprintf("DROP TABLE IF EXISTS %s.%s ON CLUSTER %s", t.db, name, t.cluster)
}

// global is what precedes IN or NOT IN when the subquery reads a table
// of this package inside a query over another: "GLOBAL " on a cluster,
// so that the subquery reads every shard's rows once, on the node asked,
// and its result is sent to every shard (with plain IN, each shard would
// read the Distributed table again, which 18.16 refuses by default:
// distributed_product_mode = deny). The driver cannot set that enum
// setting on 18.16 (settings travel as numbers there), so the queries say
// GLOBAL themselves.
func (t schemaTarget) global() string {
	if t.cluster == "" {
		return ""
	}
	return "GLOBAL "
}

// zero is the bucket of an answer without time buckets, 0 as an Int64 key
// of GROUP BY: on a cluster computed from column col, as ClickHouse 18.16
// refuses a constant key in a distributed GROUP BY ("Cannot convert column
// bucket because it is non constant in source stream but must be constant
// in result").
func (t schemaTarget) zero(col string) string {
	if t.cluster == "" {
		return "toInt64(0)"
	}
	return "toInt64(0 * " + col + ")"
}

// nonConstant is key, a GROUP BY key's SQL, unless it is the empty text
// constant (two single quotes) on a cluster (see zero): then an empty text
// computed from column col.
func (t schemaTarget) nonConstant(key, col string) string {
	if t.cluster == "" || key != "''" {
		return key
	}
	return "substring(" + col + ", 1, 0)"
}

var alterRE = regexp.MustCompile(`^ALTER TABLE (\w+) `)

// onLocals is the form of an ALTER TABLE statement of this package on the
// target: on a cluster it addresses the table's local tables ON CLUSTER
// (a mutation or a partition drop runs on every shard), with the tables of
// its subqueries qualified by the database (each node runs it in its
// default database). The subqueries read the Distributed tables, whole,
// on each shard: plain IN is right there, the outer table being local.
func (t schemaTarget) onLocals(stmt string) string {
	if t.cluster == "" {
		return stmt
	}
	m := alterRE.FindStringSubmatch(stmt)
	if m == nil {
		panic("chstore: onLocals of a statement that is not ALTER TABLE: " + stmt)
	}
	rest := fromRE.ReplaceAllString(stmt[len(m[0]):], "FROM "+t.db+".${1}")
	return fmt.Sprintf("ALTER TABLE %s.%s_local ON CLUSTER %s ", t.db, m[1], t.cluster) + rest
}

// shardKeys are the sharding keys of the Distributed tables that rastro
// inserts into: a trace's spans, its index row and its attribute index rows
// on one shard. Tables written only by views, or rarely, shard at random.
var shardKeys = map[string]string{
	"spans":       "cityHash64(trace_id)",
	"trace_index": "cityHash64(trace_id)",
	"attr_index":  "cityHash64(trace_id)",
	// written by a view, but read by trace id: keyed like spans
	"spans_by_trace": "cityHash64(trace_id)",
}

// replicatedEverywhere are tables every node keeps whole (one replica set
// across the cluster).
var replicatedEverywhere = map[string]bool{"schema_migrations": true, "rollups": true}

var (
	createTableRE = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+) \(`)
	createViewRE  = regexp.MustCompile(`^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+) TO (\w+) AS`)
	engineRE      = regexp.MustCompile(`ENGINE = (\w*)MergeTree(\(([^)]*)\))?`)
	fromRE        = regexp.MustCompile(`\bFROM (\w+)\b`)
	identRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ClusterSchema returns the statements that create the schema of every
// migration on cluster in database, in order.
func ClusterSchema(cluster, database string) ([]string, error) {
	if !identRE.MatchString(cluster) {
		return nil, fmt.Errorf("cluster name %q: use letters, digits and _ (it is written into DDL)", cluster)
	}
	if !identRE.MatchString(database) {
		return nil, fmt.Errorf("database name %q: use letters, digits and _ (it is written into DDL)", database)
	}
	var out []string
	for _, stmt := range append([]string{migrationsTable}, allStatements()...) {
		s, err := clusterStatements(stmt, cluster, database)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

func allStatements() []string {
	var out []string
	for _, m := range migrations {
		out = append(out, m.statements(Features{})...)
	}
	return out
}

func clusterStatements(stmt, cluster, db string) ([]string, error) {
	stmt = strings.TrimSpace(stmt)
	if m := createViewRE.FindStringSubmatch(stmt); m != nil {
		view, to := m[1], m[2]
		body := stmt[len(m[0]):]
		body = fromRE.ReplaceAllString(body, "FROM "+db+".${1}_local")
		return []string{fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s.%s ON CLUSTER %s TO %s.%s_local AS%s", db, view, cluster, db, to, body)}, nil
	}
	m := createTableRE.FindStringSubmatch(stmt)
	if m == nil {
		return nil, fmt.Errorf("cluster schema: no rule for %.60q", stmt)
	}
	table := m[1]
	em := engineRE.FindStringSubmatch(stmt)
	if em == nil {
		return nil, fmt.Errorf("cluster schema: table %s has no MergeTree engine", table)
	}
	if replicatedEverywhere[table] {
		path := fmt.Sprintf("'/clickhouse/tables/all/%s/%s', '{replica}'", db, table)
		local := strings.Replace(stmt, m[0], fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s (", db, table, cluster), 1)
		return []string{strings.Replace(local, em[0], replicated(em, path), 1)}, nil
	}
	path := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s_local', '{replica}'", db, table)
	local := strings.Replace(stmt, m[0], fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s_local ON CLUSTER %s (", db, table, cluster), 1)
	local = strings.Replace(local, em[0], replicated(em, path), 1)
	key, ok := shardKeys[table]
	if !ok {
		key = "rand()"
	}
	dist := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s AS %s.%s_local ENGINE = Distributed(%s, %s, %s_local, %s)",
		db, table, cluster, db, table, cluster, db, table, key)
	return []string{local, dist}, nil
}

// replicated is the Replicated form of a MergeTree engine clause.
func replicated(em []string, path string) string {
	args := path
	if em[3] != "" {
		args += ", " + em[3]
	}
	return fmt.Sprintf("ENGINE = Replicated%sMergeTree(%s)", em[1], args)
}

// ClusterSchemaForURL is ClusterSchema for the database of a ClickHouse URL
// (the native protocol's DSN; nothing is connected to).
func ClusterSchemaForURL(url, cluster string) ([]string, error) {
	o, err := clickhouse.ParseDSN(url)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse URL: %w", err)
	}
	db := o.Auth.Database
	if db == "" {
		db = "default"
	}
	return ClusterSchema(cluster, db)
}
