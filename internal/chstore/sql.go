package chstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rastro-dev/rastro/internal/store"
)

// The SQL mode (POST /api/v1/sql; docs/clickhouse.md#sql-mode): a user's
// read-only statement over per-project views. The server enforces the
// project, never the SQL: 18.16 has no row policies and no SQL user
// management, so the statement is validated and rebuilt (sqlcheck.go), each
// view name becomes a subquery the server writes with the caller's project,
// its erased traces and its retention cutoff, and the query runs with
// readonly=1 and the limits of SQLLimits as query settings.

// Defaults of SQLLimits.
const (
	DefaultSQLMaxExecutionTime = 20 * time.Second // under the server's default query budget (30 s)
	DefaultSQLMaxRows          = 10_000
	DefaultSQLMaxMemory        = 1 << 30
	DefaultSQLMaxRowsToRead    = 50_000_000
	DefaultSQLMaxResultBytes   = 64 << 20
	// DefaultSQLLimit is the rows a statement answers when the request
	// names no limit.
	DefaultSQLLimit = 1000
)

// SQLLimits bound one statement of the SQL mode; they are sent as query
// settings, which readonly=1 keeps the statement from changing.
type SQLLimits struct {
	// MaxExecutionTime is max_execution_time (whole seconds, at least 1).
	MaxExecutionTime time.Duration
	// MaxRows is the most rows a request may ask for (its limit); the
	// statement's result is cut there (truncated), and max_result_rows
	// backs the cut up in ClickHouse.
	MaxRows int
	// MaxMemory is max_memory_usage in bytes.
	MaxMemory int64
	// MaxRowsToRead is max_rows_to_read: rows read from tables, the views'
	// subqueries included.
	MaxRowsToRead int64
	// MaxResultBytes is max_result_bytes: the answer's uncompressed size in
	// ClickHouse, which bounds what this process holds and encodes (one row
	// can be large: groupArray over a project).
	MaxResultBytes int64
}

func (l *SQLLimits) validate() error {
	if l.MaxExecutionTime == 0 {
		l.MaxExecutionTime = DefaultSQLMaxExecutionTime
	}
	if l.MaxRows == 0 {
		l.MaxRows = DefaultSQLMaxRows
	}
	if l.MaxMemory == 0 {
		l.MaxMemory = DefaultSQLMaxMemory
	}
	if l.MaxRowsToRead == 0 {
		l.MaxRowsToRead = DefaultSQLMaxRowsToRead
	}
	if l.MaxResultBytes == 0 {
		l.MaxResultBytes = DefaultSQLMaxResultBytes
	}
	if l.MaxExecutionTime < time.Second || l.MaxRows < 0 || l.MaxMemory < 0 || l.MaxRowsToRead < 0 || l.MaxResultBytes < 0 {
		return fmt.Errorf("chstore: SQL limits: execution time under 1s, or negative rows, memory, rows to read or result bytes (%+v)", *l)
	}
	return nil
}

// The views of the SQL mode, in the order the docs list them.
var sqlViewNames = []string{"spans", "llm_calls", "llm_minutes", "ops_minutes"}

// sqlViews are the subqueries that stand for the views for one project.
// The project and the cutoff are written as literals (quoteString; the
// project is the server's, never the statement's).
func (s *Store) sqlViews(project string) map[string]string {
	p := quoteString(project)
	cutoff := s.cutoff(project)
	// Every column the filters name is qualified with its table, so that no
	// alias of the statement can stand for it (ClickHouse 18.16 does not
	// carry a statement's aliases into a subquery in FROM, checked; later
	// releases can carry WITH aliases: enable_global_with_statement).
	visible := "spans.project = " + p + " AND spans.start >= " + strconv.FormatUint(cutoff, 10) +
		" AND spans.trace_id " + s.target.global() + "NOT IN (SELECT erased_traces.trace_id FROM erased_traces WHERE erased_traces.project = " + p + ")"
	// The ids are shown as hex text: the outer query renames the inner
	// one's columns (an alias named like a column would replace the column
	// in the inner WHERE). No FINAL: on 18.16 a FINAL read does not check
	// max_rows_to_read (checked), so a re-sent span shows once per copy
	// until ClickHouse merges its parts, as in discovery counts; ingested
	// lets a statement keep the newest copy (LIMIT 1 BY).
	ids := "lower(hex(tid)) AS trace_id, lower(hex(sid)) AS span_id, "
	raw := func(where string) string {
		return "(SELECT spans.trace_id AS tid, spans.span_id AS sid, spans.parent_span_id AS pid, * FROM spans WHERE " + where + ")"
	}
	spans := "(SELECT " + ids +
		"if(pid = unhex('0000000000000000'), '', lower(hex(pid))) AS parent_span_id, " +
		"start, end, duration, ingested, service, name, kind, status, status_message, " +
		"span_attr_keys AS attr_keys, span_attr_str AS attr_values, res_attr_keys AS resource_keys, res_attr_str AS resource_values, " +
		"llm, llm_provider, llm_request_model, llm_response_model, llm_operation, llm_session, llm_user, llm_agent, llm_tool, " +
		"llm_input_tokens, llm_output_tokens, llm_cache_read_tokens, llm_cache_creation_tokens, llm_reasoning_tokens, " +
		"llm_cost_nano_usd, llm_ttft, llm_counted " +
		"FROM " + raw(visible) + ")"
	llmCalls := "(SELECT " + ids + "start, end, duration, service, name, status, " +
		"llm_provider AS provider, llm_request_model AS request_model, llm_response_model AS response_model, " +
		"if(llm_response_model != '', llm_response_model, llm_request_model) AS model, llm_operation AS operation, " +
		"llm_session AS session, llm_user AS user, llm_agent AS agent, llm_tool AS tool, " +
		"llm_input_tokens AS input_tokens, llm_output_tokens AS output_tokens, llm_cache_read_tokens AS cache_read_tokens, " +
		"llm_cache_creation_tokens AS cache_creation_tokens, llm_reasoning_tokens AS reasoning_tokens, " +
		"llm_cost_nano_usd AS cost_nano_usd, llm_cost_nano_usd / 1e9 AS cost_usd, llm_ttft AS ttft, llm_counted AS counted " +
		"FROM " + raw("spans.llm = 1 AND "+visible) + ")"
	minute := func(table string) string {
		return table + ".project = " + p + " AND " + table + ".minute >= " + strconv.FormatUint(cutoff/60e9, 10)
	}
	// llm_minutes reads the LLM rollup that is fed: the generation that saw
	// every span, else the first (llmRollupGen; the second's views are
	// dropped where it did not).
	gen, _ := s.llmRollupGen()
	llmMinutesTable := gen.minutes
	llmMinutes := "(SELECT minute, toDateTime(minute * 60) AS time, service, name, status, model, provider, operation, agent, " +
		"countMerge(spans) AS calls, sumMerge(counted) AS counted, sumMerge(errors) AS errors, uniqExactMerge(traces) AS traces, " +
		"sumMerge(tin) AS input_tokens, sumMerge(tout) AS output_tokens, sumMerge(tcr) AS cache_read_tokens, " +
		"sumMerge(tcc) AS cache_creation_tokens, sumMerge(trs) AS reasoning_tokens, sumMerge(cost) AS cost_nano_usd, " +
		"minMerge(dmin) AS min_duration, maxMerge(dmax) AS max_duration " +
		"FROM " + llmMinutesTable + " WHERE " + minute(llmMinutesTable) + " GROUP BY minute, service, name, status, model, provider, operation, agent)"
	opsMinutes := "(SELECT minute, toDateTime(minute * 60) AS time, service, name, " +
		"countMerge(spans) AS calls, sumMerge(errors) AS errors, minMerge(dmin) AS min_duration, maxMerge(dmax) AS max_duration " +
		"FROM ops_rollup WHERE " + minute("ops_rollup") + " GROUP BY minute, service, name)"
	return map[string]string{"spans": spans, "llm_calls": llmCalls, "llm_minutes": llmMinutes, "ops_minutes": opsMinutes}
}

// SQL runs a user's read-only statement over the project's views
// (store.SQLRunner). A statement the validator refuses, or ClickHouse
// refuses (a syntax error, an unknown column, a limit exceeded), is
// store.ErrBadRequest with the reason.
func (s *Store) SQL(ctx context.Context, project string, q store.SQLQuery) (store.SQLResult, error) {
	var res store.SQLResult
	if err := s.usable(ctx); err != nil {
		return res, err
	}
	lim := s.opts.SQL
	if q.Limit == 0 {
		q.Limit = min(DefaultSQLLimit, lim.MaxRows)
	}
	if q.Limit < 0 || q.Limit > lim.MaxRows {
		return res, fmt.Errorf("%w: limit %d: must be from 1 to %d (--sql-max-rows)", store.ErrBadRequest, q.Limit, lim.MaxRows)
	}
	checked, err := checkSQL(q.SQL, s.sqlViews(project))
	if err != nil {
		return res, fmt.Errorf("%w: SQL refused: %v", store.ErrBadRequest, err)
	}
	// One more row than asked tells whether the answer was cut.
	stmt := "SELECT * FROM (" + checked + ") LIMIT " + strconv.Itoa(q.Limit+1)
	settings := clickhouse.Settings{
		"readonly":           1,
		"max_execution_time": int(lim.MaxExecutionTime / time.Second),
		"max_result_rows":    q.Limit + 1,
		"max_memory_usage":   int(lim.MaxMemory),
		"max_rows_to_read":   int(lim.MaxRowsToRead),
		"max_result_bytes":   int(lim.MaxResultBytes),
	}
	rows, err := s.conn.Query(clickhouse.Context(ctx, clickhouse.WithSettings(settings)), stmt)
	if err != nil {
		return res, sqlFailed(err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	for _, ct := range types {
		res.Columns = append(res.Columns, store.SQLColumn{Name: ct.Name(), Type: ct.DatabaseTypeName()})
	}
	for rows.Next() {
		if len(res.Rows) == q.Limit {
			res.Truncated = true
			break
		}
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return store.SQLResult{}, fmt.Errorf("%w: SQL: read a row: %v", store.ErrBadRequest, err)
		}
		row := make([]any, len(dest))
		for i, d := range dest {
			row[i] = jsonValue(reflect.ValueOf(d).Elem())
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil && !res.Truncated {
		return store.SQLResult{}, sqlFailed(err)
	}
	return res, nil
}

// sqlFailed maps a failed statement: ClickHouse's refusal is the user's
// (400, with its code and message); anything else is the store's.
func sqlFailed(err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return fmt.Errorf("%w: ClickHouse refused the statement: code %d: %s", store.ErrBadRequest, ex.Code, ex.Message)
	}
	return fmt.Errorf("SQL: %w", err)
}

// jsonValue turns a scanned value into one encoding/json writes: NaN and
// infinities become strings, pointers (Nullable) their value or nil,
// arrays and tuples their elements (an Array(UInt8) too: String and
// FixedString scan as Go strings).
func jsonValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonValue(v.Elem())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return "nan"
		case math.IsInf(f, 1):
			return "inf"
		case math.IsInf(f, -1):
			return "-inf"
		}
		return f
	case reflect.Slice, reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[fmt.Sprint(k.Interface())] = jsonValue(v.MapIndex(k))
		}
		return out
	}
	if t, ok := v.Interface().(time.Time); ok {
		return t.UTC().Format(time.RFC3339Nano)
	}
	return v.Interface()
}
