package chstore

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

// The LLM rollup: a materialized view sums every inserted block of LLM
// spans into llm_rollup (AggregatingMergeTree), one row per project,
// minute of start, service, span name, status, model, provider, operation
// and agent, with aggregate states: counts and token and cost sums, the
// exact set of trace ids (uniqExact), min start and max end, and the
// latency and time-to-first-token histograms in the buckets of
// internal/sketch (DDSketch, 1% relative error: the engine's quantiles).
//
// A statistics query over a window reads the window's whole minutes from
// the rollup and the partial minutes at its edges from spans, as states of
// the same types, and merges both in one query (UNION ALL then -Merge):
// the answer is the one the same query over spans alone gives, exactly
// (TestRollupEqualsSpanScan). Spans alone answer what the rollup cannot:
// a group by session or user, a duration condition, a step that is not a
// whole number of minutes, a window that an erased trace overlaps (the
// rollup still counts erased spans), and a database the rollup did not see
// from its first span (see migrate).

// rollupBucket is the SQL of the sketch bucket of a uint64 column: -1 for
// 0 (counted apart, as the sketch's zeros), else ceil(log_gamma(x)), 0 for 1.
func rollupBucket(col string) string {
	gamma := (1 + sketch.Alpha) / (1 - sketch.Alpha)
	k := 1 / math.Log(gamma)
	return fmt.Sprintf("if(%[1]s = 0, toInt32(-1), if(%[1]s <= 1, toInt32(0), toInt32(ceil(log(%[1]s) * %.17g))))", col, k)
}

// llmState is one aggregate of the rollup: its column type and the state
// expression over spans.
type llmState struct{ name, typ, expr string }

// llmRollup is one generation of the LLM rollups: its minute and hour
// tables (each fed by the view named after it, with _mv), their names in
// the rollups table, and how its trace sets are kept.
type llmRollup struct {
	minutes, hours       string // tables
	minuteName, hourName string // names in rollups
	traceType, traceKey  string // uniqExact's argument: its type and SQL over spans
}

// The generations. The first (migrations 3 and 8) keeps a trace set as
// uniqExact of the 16-byte trace id, of which ClickHouse keeps a 128-bit
// hash per trace. The second (migration 9) keeps 64-bit hashes of the id,
// cityHash64(trace_id), which a statistics query merges in a little over
// half the time (about 680,000 of them per query at 10M spans:
// docs/benchmarks/clickhouse.md); two traces of a group count once when
// their hashes collide, a chance of about n^2/2^65 for n traces (3 x 10^-6
// at ten million). A database created with migration 9 has the second
// only; one that held spans before keeps the first, which saw them
// (migrateLLMRollups). Statistics from spans alone use the first kind of
// set, exact.
var (
	llmGen1 = llmRollup{"llm_rollup", "llm_rollup_hour", "llm", "llm_hour", "FixedString(16)", "trace_id"}
	llmGen2 = llmRollup{"llm_rollup2", "llm_rollup_hour2", "llm2", "llm_hour2", "UInt64", "cityHash64(trace_id)"}
)

func llmStates(g llmRollup) []llmState {
	tok := func(col string) string {
		return "sumState(if(llm_counted = 1, greatest(" + col + ", toInt64(0)), toInt64(0)))"
	}
	return []llmState{
		{"spans", "AggregateFunction(count)", "countState()"},
		{"counted", "AggregateFunction(sum, UInt64)", "sumState(toUInt64(llm_counted))"},
		{"errors", "AggregateFunction(sum, UInt64)", "sumState(toUInt64(status = 2))"},
		{"traces", "AggregateFunction(uniqExact, " + g.traceType + ")", "uniqExactState(" + g.traceKey + ")"},
		{"tin", "AggregateFunction(sum, Int64)", tok("llm_input_tokens")},
		{"tout", "AggregateFunction(sum, Int64)", tok("llm_output_tokens")},
		{"tcr", "AggregateFunction(sum, Int64)", tok("llm_cache_read_tokens")},
		{"tcc", "AggregateFunction(sum, Int64)", tok("llm_cache_creation_tokens")},
		{"trs", "AggregateFunction(sum, Int64)", tok("llm_reasoning_tokens")},
		{"cost", "AggregateFunction(sum, Int64)", tok("llm_cost_nano_usd")},
		{"smin", "AggregateFunction(min, UInt64)", "minState(start)"},
		{"emax", "AggregateFunction(max, UInt64)", "maxState(end)"},
		{"dmin", "AggregateFunction(min, UInt64)", "minState(duration)"},
		{"dmax", "AggregateFunction(max, UInt64)", "maxState(duration)"},
		{"dh", "AggregateFunction(sumMap, Array(Int32), Array(UInt64))", "sumMapState([" + rollupBucket("duration") + "], [toUInt64(1)])"},
		{"tn", "AggregateFunction(sum, UInt64)", "sumState(toUInt64(llm_ttft != 0))"},
		{"tmin", "AggregateFunction(min, UInt64)", "minState(if(llm_ttft != 0, llm_ttft, toUInt64(18446744073709551615)))"},
		{"tmax", "AggregateFunction(max, UInt64)", "maxState(llm_ttft)"},
		{"th", "AggregateFunction(sumMap, Array(Int32), Array(UInt64))",
			"sumMapState(if(llm_ttft != 0, [" + rollupBucket("llm_ttft") + "], emptyArrayInt32()), if(llm_ttft != 0, [toUInt64(1)], emptyArrayUInt64()))"},
	}
}

// The rollup's key columns, as SQL over spans.
var llmRollupKeys = llmKeysAt("minute", "intDiv(start, 60000000000)")

// llmKeysAt are the rollup's key columns with the time column named and
// computed as given (the minute, or the hour of llm_rollup_hour).
func llmKeysAt(name, expr string) []struct{ name, typ, expr string } {
	return []struct{ name, typ, expr string }{
		{"project", "String", "project"},
		{name, "UInt64", expr},
		{"service", "String", "service"},
		{"name", "String", "name"},
		{"status", "Int32", "status"},
		{"model", "String", "if(llm_response_model != '', llm_response_model, llm_request_model)"},
		{"provider", "String", "llm_provider"},
		{"operation", "String", "llm_operation"},
		{"agent", "String", "llm_agent"},
	}
}

// llmRollupDims are the group-by dimensions the rollup can answer, as SQL
// over its columns (hour and day from the minute).
var llmRollupDims = map[string]string{
	"model":     "model",
	"provider":  "provider",
	"service":   "service",
	"operation": "operation",
	"agent":     "agent",
	"hour":      "toString(intDiv(minute, 60))",
	"day":       "toString(intDiv(minute, 1440))",
}

// llmHourDims are llmRollupDims over llm_rollup_hour.
var llmHourDims = map[string]string{
	"model":     "model",
	"provider":  "provider",
	"service":   "service",
	"operation": "operation",
	"agent":     "agent",
	"hour":      "toString(hour)",
	"day":       "toString(intDiv(hour, 24))",
}

func (g llmRollup) minuteTable() string {
	return rollupTable(g, g.minutes, llmRollupKeys, "minute * 60")
}

func (g llmRollup) minuteView() string { return rollupView(g, g.minutes, llmRollupKeys) }

// The hourly LLM rollup (migration 8): the same aggregates per hour. A
// statistics query over many minutes reads its whole hours here: at 10M
// spans (a million LLM spans) the minute rows held 294,205 latency
// histogram buckets, whose sumMap states 18.16 reads slowly (about half of
// the query), against about 40,000 per hour (docs/benchmarks/clickhouse.md).
var llmHourKeys = llmKeysAt("hour", "intDiv(start, 3600000000000)")

func (g llmRollup) hourTable() string { return rollupTable(g, g.hours, llmHourKeys, "hour * 3600") }

func (g llmRollup) hourView() string { return rollupView(g, g.hours, llmHourKeys) }

// rollupTable is the CREATE TABLE of an LLM rollup with the given keys,
// partitioned as spans (the day of the time column, in seconds as
// daySeconds gives it), so retention drops the same partition ids.
func rollupTable(g llmRollup, table string, keys []struct{ name, typ, expr string }, daySeconds string) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + table + " (\n")
	var names []string
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%s %s,\n", k.name, k.typ)
		names = append(names, k.name)
	}
	states := llmStates(g)
	for i, st := range states {
		fmt.Fprintf(&b, "\t%s %s", st.name, st.typ)
		if i < len(states)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(") ENGINE = AggregatingMergeTree PARTITION BY toDate(toDateTime(" + daySeconds + ")) ORDER BY (" + strings.Join(names, ", ") + ")")
	return b.String()
}

// rollupView is the CREATE MATERIALIZED VIEW that feeds table (its name
// with _mv).
func rollupView(g llmRollup, table string, keys []struct{ name, typ, expr string }) string {
	var sel, names []string
	for _, k := range keys {
		sel = append(sel, k.expr+" AS "+k.name)
		names = append(names, k.name)
	}
	for _, st := range llmStates(g) {
		sel = append(sel, st.expr+" AS "+st.name)
	}
	return "CREATE MATERIALIZED VIEW IF NOT EXISTS " + table + "_mv TO " + table + " AS SELECT " + strings.Join(sel, ", ") +
		" FROM spans WHERE llm = 1 GROUP BY " + strings.Join(names, ", ")
}

// rollupsTable records the rollups that saw every span of the database.
const rollupsTable = `CREATE TABLE IF NOT EXISTS rollups (
	name String,
	complete UInt8,
	at DateTime
) ENGINE = MergeTree ORDER BY name`

// markRollupComplete runs after the view exists: on a database without
// spans, every span from now on passes through the view, so the rollup is
// complete. On a database with spans it is not (no backfill yet): queries
// keep reading spans, and docs/clickhouse.md says so.
func markRollupComplete(name string) func(ctx context.Context, conn driver.Conn, sc schemaTarget, quorum int) error {
	return func(ctx context.Context, conn driver.Conn, _ schemaTarget, quorum int) error {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM spans").Scan(&n); err != nil {
			return err
		}
		complete := uint8(0)
		if n == 0 {
			complete = 1
		}
		return insertRow(ctx, conn, quorum, "INSERT INTO rollups (name, complete, at)", name, complete, nowSecond())
	}
}

// migrateLLMRollups runs once migration 9 has made the second generation
// of LLM rollups (llmGen2) and its views. On a database without spans the
// new views see every span from now on: the second generation is marked
// complete, and the first one's views are dropped (an LLM span feeds two
// rollups, not four) and it is marked incomplete. On a database with spans
// the first generation answers as before (when it saw every span) and the
// second's views are dropped: it would not have seen the spans before it.
// Safe to run again: the drops say IF EXISTS and the marks repeat.
func migrateLLMRollups(ctx context.Context, conn driver.Conn, sc schemaTarget, quorum int) error {
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM spans").Scan(&n); err != nil {
		return err
	}
	type mark struct {
		name     string
		complete uint8
	}
	drop := llmGen1
	marks := []mark{{llmGen2.minuteName, 1}, {llmGen2.hourName, 1}, {llmGen1.minuteName, 0}, {llmGen1.hourName, 0}}
	if n > 0 {
		drop = llmGen2
		marks = []mark{{llmGen2.minuteName, 0}, {llmGen2.hourName, 0}}
	}
	for _, table := range []string{drop.minutes, drop.hours} {
		if err := conn.Exec(ctx, sc.dropView(table+"_mv")); err != nil {
			return fmt.Errorf("drop the view of %s: %w", table, err)
		}
	}
	for _, m := range marks {
		if err := insertRow(ctx, conn, quorum, "INSERT INTO rollups (name, complete, at)", m.name, m.complete, nowSecond()); err != nil {
			return err
		}
	}
	return nil
}

// completeRollups reads the names of the complete rollups.
func completeRollups(ctx context.Context, conn driver.Conn) (map[string]bool, error) {
	rows, err := conn.Query(ctx, "SELECT name, min(complete) FROM rollups GROUP BY name")
	if err != nil {
		return nil, fmt.Errorf("read rollups: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		var c uint8
		if err := rows.Scan(&name, &c); err != nil {
			return nil, fmt.Errorf("read rollups: %w", err)
		}
		out[name] = c == 1
	}
	return out, rows.Err()
}

// quantilesOf answers P50, P95, P99 and Max from a histogram in sketch
// buckets (key -1: zeros) with the count, min and max, as
// sketch.Sketch.Quantiles does; nil when empty.
func quantilesOf(keys []int32, counts []uint64, n, lo, hi uint64) *store.Quantiles {
	if n == 0 {
		return nil
	}
	gamma := (1 + sketch.Alpha) / (1 - sketch.Alpha)
	at := func(q float64) float64 {
		rank := uint64(q * float64(n-1))
		var seen uint64
		for i, k := range keys { // sumMap returns keys ascending
			seen += counts[i]
			if seen > rank {
				if k < 0 {
					return 0
				}
				v := 2 * math.Pow(gamma, float64(k)) / (gamma + 1)
				return math.Min(math.Max(v, float64(lo)), float64(hi))
			}
		}
		return float64(hi)
	}
	return &store.Quantiles{P50: at(0.5), P95: at(0.95), P99: at(0.99), Max: float64(hi)}
}
