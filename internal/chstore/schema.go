package chstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Features are what a ClickHouse server supports, found with
// `SELECT version()` at start. The schema uses none of the optional ones
// yet: the tables below are the same on every version from 18.16 on, so a
// store moves between versions without a rewrite. They are reported (log,
// docs/clickhouse.md) and are the switch later migrations will test.
type Features struct {
	Version      string
	Major, Minor int
	// LowCardinality without allow_experimental_low_cardinality_type (19.1+).
	LowCardinality bool
	// TTL on tables and columns (19.6+).
	TTL bool
	// Data-skipping indexes (bloom_filter, tokenbf_v1) without the
	// experimental setting (20.1+).
	SkipIndexes bool
	// The mutations_sync setting: ALTER ... DELETE that waits (19.10+).
	MutationsSync bool
	// Lightweight DELETE FROM (23.3+).
	LightweightDelete bool
}

// at reports whether the version is major.minor or later.
func (f Features) at(major, minor int) bool {
	return f.Major > major || f.Major == major && f.Minor >= minor
}

// parseVersion reads "18.16.1" or "24.3.2.23".
func parseVersion(v string) (Features, error) {
	f := Features{Version: v}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return f, fmt.Errorf("ClickHouse version %q: not major.minor", v)
	}
	var err1, err2 error
	f.Major, err1 = strconv.Atoi(parts[0])
	f.Minor, err2 = strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return f, fmt.Errorf("ClickHouse version %q: not major.minor", v)
	}
	f.LowCardinality = f.at(19, 1)
	f.TTL = f.at(19, 6)
	f.SkipIndexes = f.at(20, 1)
	f.MutationsSync = f.at(19, 10)
	f.LightweightDelete = f.at(23, 3)
	return f, nil
}

// MinVersion is the oldest server the schema and queries were tested on.
const MinVersion = "18.16"

// Detect asks the server its version.
func Detect(ctx context.Context, conn driver.Conn) (Features, error) {
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return Features{}, fmt.Errorf("ask ClickHouse its version: %w", err)
	}
	f, err := parseVersion(v)
	if err != nil {
		return f, err
	}
	if !f.at(18, 16) {
		return f, fmt.Errorf("ClickHouse %s is older than %s, the oldest this backend supports", v, MinVersion)
	}
	return f, nil
}

// migration is one versioned step of the schema. Its statements are
// idempotent (IF NOT EXISTS), so a step interrupted half way, or run by two
// processes at once, is simply run again.
type migration struct {
	version    uint32
	name       string
	statements func(f Features) []string
	// after, when set, runs once the statements have (again, when a step
	// is run twice: it must be safe to repeat); its DDL is for sc, its
	// inserts run under quorum (withQuorum), the URL's insert_quorum.
	after func(ctx context.Context, conn driver.Conn, sc schemaTarget, quorum int) error
}

// Table of the spans. One row per span copy; ReplacingMergeTree keeps the
// newest copy (by ingested) of a re-sent span when parts merge, and queries
// collapse the copies not merged yet. The sorting key puts a project's spans
// in minute order with a trace's spans together inside each minute: a
// search reads the window's minutes, a trace lookup the minutes the trace
// index names, and within them one trace id's granules.
//
// Attributes are parallel arrays per scope (span, resource): key, type
// (model.ValueType; typeLong for a value too long for the hot column), the
// value as text (model.Value.AsString, up to maxHotValue bytes), and typed
// int and float columns. body is the whole span (OTLP protobuf, resource and
// scope included): read only for spans a result returns or a filter must
// test in Go, never by a filter or an aggregate.
const spansTable = `CREATE TABLE IF NOT EXISTS spans (
	project String,
	trace_id FixedString(16),
	span_id FixedString(8),
	parent_span_id FixedString(8),
	start UInt64,
	end UInt64,
	duration UInt64,
	ingested UInt64,
	service String,
	name String,
	kind Int32,
	status Int32,
	status_message String,
	span_attr_keys Array(String),
	span_attr_types Array(UInt8),
	span_attr_str Array(String),
	span_attr_int Array(Int64),
	span_attr_float Array(Float64),
	res_attr_keys Array(String),
	res_attr_types Array(UInt8),
	res_attr_str Array(String),
	res_attr_int Array(Int64),
	res_attr_float Array(Float64),
	llm UInt8,
	llm_provider String,
	llm_request_model String,
	llm_response_model String,
	llm_operation String,
	llm_session String,
	llm_user String,
	llm_agent String,
	llm_tool String,
	llm_input_tokens Int64,
	llm_output_tokens Int64,
	llm_cache_read_tokens Int64,
	llm_cache_creation_tokens Int64,
	llm_reasoning_tokens Int64,
	llm_cost_nano_usd Int64,
	llm_cost_source UInt8,
	llm_ttft UInt64,
	llm_counted UInt8,
	body String
) ENGINE = ReplacingMergeTree(ingested)
PARTITION BY toDate(toDateTime(intDiv(start, 1000000000)))
ORDER BY (project, intDiv(start, 60000000000), trace_id, span_id)`

// The trace index: one row per trace per inserted batch, with the range of
// the trace's span starts in that batch. A trace lookup reads one key range
// here, then only the trace's minutes of spans.
const traceIndexTable = `CREATE TABLE IF NOT EXISTS trace_index (
	project String,
	trace_id FixedString(16),
	start_min UInt64,
	start_max UInt64
) ENGINE = MergeTree ORDER BY (project, trace_id)`

// Erasures: a status row per change (the newest version wins); erased
// traces: the trace ids every query leaves out at once, while
// ALTER TABLE ... DELETE removes their rows in the background.
const erasuresTable = `CREATE TABLE IF NOT EXISTS erasures (
	project String,
	id UInt64,
	query String,
	trace_id String,
	state String,
	requested_at UInt64,
	hidden_at UInt64,
	done_at UInt64,
	traces UInt64,
	spans_erased Int64,
	error String,
	version UInt64
) ENGINE = ReplacingMergeTree(version) ORDER BY (project, id)`

const erasedTracesTable = `CREATE TABLE IF NOT EXISTS erased_traces (
	project String,
	trace_id FixedString(16),
	erasure UInt64
) ENGINE = MergeTree ORDER BY (project, trace_id)`

// migrations, oldest first. Append only: a released step never changes.
var migrations = []migration{
	{1, "spans and trace index", func(Features) []string { return []string{spansTable, traceIndexTable} }, nil},
	{2, "erasures", func(Features) []string { return []string{erasuresTable, erasedTracesTable} }, nil},
	{3, "LLM rollup", func(Features) []string { return []string{llmGen1.minuteTable(), llmGen1.minuteView(), rollupsTable} }, markRollupComplete("llm")},
	{4, "attribute index", func(Features) []string {
		return []string{attrIndexTable, attrIndexView("attr_index_span_mv", 0, "span_attr"), attrIndexView("attr_index_res_mv", 1, "res_attr")}
	}, markRollupComplete("attr_index")},
	{5, "RED rollup", func(Features) []string { return []string{opsRollupTable(), opsRollupView()} }, markRollupComplete("ops")},
	{6, "spans by trace", func(Features) []string { return []string{byTraceTable, byTraceView} }, backfillByTrace},
	{7, "logs", func(Features) []string { return []string{logsTable, logErasuresTable} }, nil},
	{8, "LLM hourly rollup", func(Features) []string { return []string{llmGen1.hourTable(), llmGen1.hourView()} }, markRollupComplete("llm_hour")},
	{9, "LLM rollups with 64-bit trace sets", func(Features) []string {
		return []string{llmGen2.minuteTable(), llmGen2.minuteView(), llmGen2.hourTable(), llmGen2.hourView()}
	}, migrateLLMRollups},
}

func latestVersion() uint32 { return migrations[len(migrations)-1].version }

const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version UInt32,
	name String,
	applied_at DateTime
) ENGINE = MergeTree ORDER BY version`

// Migrated is one step of the schema and when it was applied.
type Migrated struct {
	Version   uint32
	Name      string
	AppliedAt time.Time // zero when not applied
}

// migrate applies the steps not recorded yet and returns how many it ran.
// On a cluster (sc.cluster set) each statement becomes its cluster form
// (clusterStatements), run ON CLUSTER from this node; the steps are recorded
// in schema_migrations, replicated to every node, as for a single node.
// quorum is the URL's insert_quorum (quorumOf).
func migrate(ctx context.Context, conn driver.Conn, f Features, sc schemaTarget, quorum int) (int, error) {
	mt, err := sc.statements(migrationsTable)
	if err != nil {
		return 0, err
	}
	// On a cluster, DDL ON CLUSTER waits for every node (up to
	// distributed_ddl_task_timeout, 180 s): a schema already in place runs
	// none, so that a process starts while a node is down.
	exists := false
	if sc.cluster != "" {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'").Scan(&n); err != nil {
			return 0, fmt.Errorf("look for schema_migrations: %w", err)
		}
		exists = n > 0
	}
	for _, stmt := range mt {
		if exists {
			break
		}
		if err := conn.Exec(ctx, stmt); err != nil {
			return 0, fmt.Errorf("create schema_migrations: %w", err)
		}
	}
	done, err := applied(ctx, conn)
	if err != nil {
		return 0, err
	}
	// On a cluster a step's record is acknowledged once every node holds
	// it (a quorum of all the replicas of schema_migrations): a process
	// starting through any node afterwards reads it and runs no DDL.
	recordCtx, recordQuorum := ctx, quorum
	if sc.cluster != "" {
		var nodes uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", sc.cluster).Scan(&nodes); err != nil {
			return 0, fmt.Errorf("read the nodes of cluster %s: %w", sc.cluster, err)
		}
		recordQuorum = int(nodes)
		recordCtx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_quorum": recordQuorum}))
	}
	n := 0
	for _, m := range migrations {
		if _, ok := done[m.version]; ok {
			continue
		}
		for _, single := range m.statements(f) {
			stmts, err := sc.statements(single)
			if err != nil {
				return n, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
			}
			for _, stmt := range stmts {
				if err := conn.Exec(ctx, stmt); err != nil {
					return n, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
				}
			}
		}
		if m.after != nil {
			if err := m.after(ctx, conn, sc, quorum); err != nil {
				return n, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
			}
		}
		if err := insertRow(recordCtx, conn, recordQuorum, "INSERT INTO schema_migrations (version, name, applied_at)",
			m.version, m.name, nowSecond()); err != nil {
			return n, fmt.Errorf("record migration %d: %w", m.version, err)
		}
		n++
	}
	return n, nil
}

// applied reads the recorded steps (the first record of a step run twice).
func applied(ctx context.Context, conn driver.Conn) (map[uint32]time.Time, error) {
	rows, err := conn.Query(ctx, "SELECT version, min(applied_at) FROM schema_migrations GROUP BY version")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	out := map[uint32]time.Time{}
	for rows.Next() {
		var v uint32
		var at time.Time
		if err := rows.Scan(&v, &at); err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		out[v] = at
	}
	return out, rows.Err()
}

// Migrate connects to url, applies the migrations not recorded yet and
// returns every step with when it was applied (rastro migrate). With a
// cluster name it creates the cluster schema ON CLUSTER from url's node
// (cluster.go).
func Migrate(ctx context.Context, url, cluster string) (Features, []Migrated, int, error) {
	sc, err := targetOf(url, cluster)
	if err != nil {
		return Features{}, nil, 0, err
	}
	quorum, err := quorumOf(url)
	if err != nil {
		return Features{}, nil, 0, err
	}
	conn, err := connect(ctx, url, 1, cluster)
	if err != nil {
		return Features{}, nil, 0, err
	}
	defer conn.Close()
	f, err := Detect(ctx, conn)
	if err != nil {
		return f, nil, 0, err
	}
	n, err := migrate(ctx, conn, f, sc, quorum)
	if err != nil {
		return f, nil, n, err
	}
	done, err := applied(ctx, conn)
	if err != nil {
		return f, nil, n, err
	}
	out := make([]Migrated, 0, len(migrations))
	for _, m := range migrations {
		out = append(out, Migrated{Version: m.version, Name: m.name, AppliedAt: done[m.version]})
	}
	return f, out, n, nil
}

// nowSecond is the time as a DateTime column holds it.
func nowSecond() time.Time { return time.Now().UTC().Truncate(time.Second) }
