package chstore

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// refusedSQL are statements the SQL mode must refuse before ClickHouse sees
// them, each with a part of the message that names what was refused.
var refusedSQL = []struct{ sql, want string }{
	// another statement
	{"SELECT count() FROM spans; DROP TABLE spans", "only one statement"},
	{"SELECT 1; SELECT 2", "only one statement"},
	{"SELECT 1;;", "only one statement"},
	// writes and other statements
	{"INSERT INTO spans SELECT * FROM spans", "only SELECT"},
	{"ALTER TABLE spans DELETE WHERE 1", "only SELECT"},
	{"DROP TABLE spans", "only SELECT"},
	{"CREATE TABLE x (a UInt8) ENGINE = Memory", "only SELECT"},
	{"SET readonly = 0", "only SELECT"},
	{"OPTIMIZE TABLE spans FINAL", "only SELECT"},
	{"KILL QUERY WHERE 1", "only SELECT"},
	{"TRUNCATE TABLE spans", "only SELECT"},
	{"DETACH TABLE spans", "only SELECT"},
	{"RENAME TABLE spans TO s2", "only SELECT"},
	{"SYSTEM SHUTDOWN", "only SELECT"},
	{"SHOW TABLES", "only SELECT"},
	{"DESCRIBE TABLE spans", "only SELECT"},
	{"WITH 1 AS x INSERT INTO spans SELECT * FROM spans", "the keyword INSERT"},
	// settings and output clauses
	{"SELECT count() FROM spans SETTINGS max_rows_to_read = 0", "the keyword SETTINGS"},
	{"SELECT 1 SETTINGS readonly = 0", "the keyword SETTINGS"},
	{"SELECT 1 FORMAT TabSeparated", "the keyword FORMAT"},
	{"SELECT 1 INTO OUTFILE '/tmp/rastro-sql'", "the keyword INTO"},
	// system tables, other databases, internal tables
	{"SELECT * FROM system.tables", "the keyword SYSTEM"},
	{"SELECT name FROM system.one", "the keyword SYSTEM"},
	{"SELECT 1 IN system.one", "must be followed by a subquery"},
	{"SELECT * FROM default.spans", "FROM default"},
	{"SELECT * FROM spans.spans", "only the views"},
	{"SELECT * FROM erased_traces", "the internal table ERASED_TRACES"},
	{"SELECT * FROM trace_index", "the internal table TRACE_INDEX"},
	{"SELECT * FROM spans_by_trace", "the internal table"},
	{"SELECT * FROM llm_rollup", "the internal table"},
	{"SELECT * FROM schema_migrations", "the internal table"},
	{"SELECT * FROM Spans", "only the views"},
	{"SELECT * FROM other_table", "only the views"},
	{"SELECT * FROM information_schema.tables", "the keyword INFORMATION_SCHEMA"},
	{"WITH (SELECT count() FROM trace_index) AS n SELECT n", "the internal table"},
	// a view's name where ClickHouse would read the table of that name
	{"SELECT count() FROM llm_calls WHERE trace_id IN spans", "must be followed by a subquery"},
	{"SELECT count() FROM llm_calls WHERE trace_id IN (spans)", "\"spans\" at byte 49 is neither"},
	{"SELECT in(trace_id, spans) FROM llm_calls", "takes a subquery or a list of literals"},
	{"SELECT arrayMap(x -> spans, [1]) FROM llm_calls", "the view spans is used"},
	{"SELECT count() FROM llm_calls WHERE trace_id IN (db.t)", "takes a subquery or a list of literals"},
	{"SELECT in(1, x) FROM spans", "takes a subquery or a list of literals"},
	{"SELECT count() FROM spans WHERE 1 IN x", "must be followed by"},
	{"SELECT count() FROM spans AS llm_calls", "cannot be an alias"},
	// table functions and functions that read tables by name
	{"SELECT * FROM file('/etc/passwd', 'CSV', 'a String')", "the table function FILE"},
	{"SELECT * FROM url('http://127.0.0.1/', CSV, 'a String')", "the table function URL"},
	{"SELECT * FROM remote('127.0.0.1', currentDatabase(), spans)", "the table function REMOTE"},
	{"SELECT * FROM remoteSecure('127.0.0.1', db, t)", "the table function REMOTESECURE"},
	{"SELECT * FROM mysql('h:3306', 'db', 't', 'u', 'p')", "the table function MYSQL"},
	{"SELECT * FROM jdbc('jdbc:x', 't')", "the table function JDBC"},
	{"SELECT * FROM odbc('DSN=x', 't')", "the table function ODBC"},
	{"SELECT * FROM hdfs('hdfs://h/f', 'CSV', 'a String')", "the table function HDFS"},
	{"SELECT * FROM s3('http://h/f', 'CSV', 'a String')", "the table function S3"},
	{"SELECT * FROM input('a String')", "the table function INPUT"},
	{"SELECT * FROM cluster('c', db, t)", "the table function CLUSTER"},
	{"SELECT * FROM merge(currentDatabase(), '^sp')", "the table function MERGE"},
	{"SELECT * FROM numbers(10)", "the table function NUMBERS"},
	{"SELECT * FROM spans_view(1)", "only the views"},
	{"SELECT * FROM spans(1)", "only the views"},
	{"SELECT joinGet('t', 'c', 1)", "the function JOINGET"},
	{"SELECT dictGetString('d', 'a', toUInt64(1))", "the function DICTGETSTRING"},
	{"SELECT hasColumnInTable('system', 'one', 'dummy')", "the function HASCOLUMNINTABLE"},
	{"SELECT notIn(1, otherdb.t)", "the function NOTIN"},
	{"SELECT globalIn(1, otherdb.t)", "the function GLOBALIN"},
	{"SELECT count() FROM spans WHERE globalNotIn(trace_id, otherdb.t)", "the function GLOBALNOTIN"},
	{"SELECT dictGetAll('d', 'a', toUInt64(1))", "the dictionary function dictGetAll"},
	// comma joins (a second table after a comma)
	{"SELECT count() FROM spans, llm_calls", "a comma after a table"},
	{"SELECT count() FROM spans AS a, llm_calls", "a comma after a table"},
	{"SELECT count() FROM (SELECT 1) AS a, llm_calls", "a comma after a table"},
	// comments and quotes that would hide something
	{"SELECT count() FROM spans /* */ , system.one", "a comma after a table"},
	{"SELECT count() FROM /* spans */ system.one", "the keyword SYSTEM"},
	{"SELECT count() FROM spans --\n JOIN system.one USING dummy", "the keyword SYSTEM"},
	{"SELECT count() FROM spans -- ; \n; DROP TABLE spans", "only one statement"},
	{"SELECT 'a' '; DROP TABLE spans", "not closed"},
	{"SELECT 1 /* not closed", "not closed"},
	{`SELECT * FROM "spans"`, "quoted identifiers"},
	{"SELECT * FROM `system`.`one`", "quoted identifiers"},
	{"SELECT 1 # comment", "is not allowed"},
	{"SELECT {x:String}", "is not allowed"},
	{"SELECT 1 FROM spans WHERE name = $1", "is not allowed"},
	{"SELECT 0xsystem", "not a number"},
	{"SELECT 1system", "not a number"},
	{"SELECT ( 1", "not closed"},
	{"SELECT 1 )", "closes nothing"},
	{"", "empty"},
	{"  -- nothing\n", "empty"},
	{"SELECT count() FROM", "not followed by a table"},
	{"SELECT count() FROM (spans)", "must open a subquery"},
}

func TestSQLRefusesBeforeClickHouse(t *testing.T) {
	views := map[string]string{"spans": "(V1)", "llm_calls": "(V2)", "llm_minutes": "(V3)", "ops_minutes": "(V4)"}
	for _, c := range refusedSQL {
		out, err := checkSQL(c.sql, views)
		var se *sqlError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %q %v, want refused with %q", c.sql, out, err, c.want)
		}
	}
}

// TestSQLRebuilds: what ClickHouse receives is rebuilt from the tokens:
// comments gone, strings quoted one way, views replaced in table positions
// (and aliased by their name unless the statement names an alias).
func TestSQLRebuilds(t *testing.T) {
	views := map[string]string{"spans": "(V1)", "llm_calls": "(V2)"}
	for _, c := range []struct{ in, want string }{
		{"SELECT count() FROM spans", "SELECT count() FROM (V1) AS spans"},
		{"select name from spans s where s.name = 'x'", "select name from (V1) s where s.name = 'x'"},
		{"SELECT * FROM spans AS a ANY INNER JOIN llm_calls AS b USING span_id", "SELECT * FROM (V1) AS a ANY INNER JOIN (V2) AS b USING span_id"},
		{"SELECT spans.name FROM spans WHERE 1 -- c\nORDER BY start DESC;", "SELECT spans.name FROM (V1) AS spans WHERE 1 ORDER BY start DESC"},
		{"SELECT 'it''s', '\\'', 'a\\nb' /* c */ FROM spans", `SELECT 'it\'s', '\'', 'a` + "\n" + `b' FROM (V1) AS spans`},
		{"SELECT 'x'' FROM system.one --'", `SELECT 'x\' FROM system.one --'`},
		{"SELECT '\\'; DROP TABLE spans; --'", `SELECT '\'; DROP TABLE spans; --'`},
		{"SELECT k FROM spans ARRAY JOIN attr_keys AS k", "SELECT k FROM (V1) AS spans ARRAY JOIN attr_keys AS k"},
		{"SELECT count() FROM (SELECT trace_id FROM spans) AS t WHERE trace_id IN (SELECT trace_id FROM llm_calls)",
			"SELECT count() FROM (SELECT trace_id FROM (V1) AS spans) AS t WHERE trace_id IN (SELECT trace_id FROM (V2) AS llm_calls)"},
		{"SELECT count() FROM spans WHERE status IN (1, 2, -3, 'a', NULL)", "SELECT count() FROM (V1) AS spans WHERE status IN (1, 2, -3, 'a', NULL)"},
		{"SELECT arrayMap(x -> x * 2, [1, 2.5e-3, 0x1F])", "SELECT arrayMap(x -> x * 2, [1, 2.5e-3, 0x1F])"},
	} {
		got, err := checkSQL(c.in, views)
		if err != nil || got != c.want {
			t.Errorf("%q:\n got %q %v\nwant %q", c.in, got, err, c.want)
		}
	}
}

// sqlCorpus stores spans for two projects ("mine" and "theirs"), some of
// them LLM calls, and erases one trace of "mine".
func sqlCorpus(t *testing.T, s *Store) (mine []model.Span, erased model.TraceID) {
	t.Helper()
	base := uint64(time.Now().Add(-time.Hour).UnixNano())
	mk := func(seed byte, n int, service string) []model.Span {
		out := make([]model.Span, n)
		for i := range out {
			attrs := []model.KeyValue{{Key: "http.route", Value: model.StringValue(fmt.Sprintf("/r/%d", i%3))}}
			if i%2 == 0 {
				attrs = append(attrs, model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue([]string{"gpt-4o", "claude"}[i%4/2])},
					model.KeyValue{Key: "gen_ai.operation.name", Value: model.StringValue("chat")},
					model.KeyValue{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(int64(10 + i))})
			}
			out[i] = model.Span{TraceID: model.TraceID{seed, byte(i / 3), 1}, SpanID: model.SpanID{seed, byte(i), 2},
				Name: fmt.Sprintf("op-%d", i%2), Service: service, Kind: model.KindServer,
				Resource:          &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(service)}}},
				StartTimeUnixNano: base + uint64(i)*1e9, EndTimeUnixNano: base + uint64(i)*1e9 + 3e6, Attributes: attrs}
		}
		return out
	}
	mine = mk(1, 30, "mine-svc")
	appendAll(t, s, "mine", mine)
	appendAll(t, s, "theirs", mk(2, 40, "theirs-svc"))
	erased = mine[0].TraceID
	e, err := s.Erase(t.Context(), store.EraseRequest{Project: "mine", TraceID: &erased})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the mutation, so that nothing changes the tables later.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err := s.Erasures(t.Context(), "mine")
		if err != nil {
			t.Fatal(err)
		}
		// Recorded done too (by the erasure pass): nothing more is written.
		if len(list) == 1 && list[0].ID == e.ID && list[0].State == store.EraseDone && recorded(t, s, "mine", e.ID).State == store.EraseDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasure not done after 30s: %+v", list)
		}
	}
	return mine, erased
}

// dbState is every table of the test's database with its row count.
func dbState(t *testing.T, s *Store) string {
	t.Helper()
	rows, err := s.conn.Query(t.Context(), "SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var out []string
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		if engine != "MaterializedView" {
			names = append(names, name)
		}
		out = append(out, name+":"+engine)
	}
	rows.Close()
	for _, n := range names {
		var c uint64
		if err := s.conn.QueryRow(t.Context(), "SELECT count() FROM "+n).Scan(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%d", n, c))
	}
	return strings.Join(out, " ")
}

// TestSQLModeOnClickHouse: refused statements change nothing; allowed ones
// see exactly the caller's project's visible rows.
func TestSQLModeOnClickHouse(t *testing.T) {
	s := open(t, Options{})
	mine, erased := sqlCorpus(t, s)
	ctx := t.Context()
	before := dbState(t, s)
	for _, c := range refusedSQL {
		if _, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: c.sql}); !errors.Is(err, store.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a bad request naming %q", c.sql, err, c.want)
		}
	}
	// Statements ClickHouse itself refuses: still a bad request.
	for _, q := range []string{"SELECT project FROM spans", "SELECT nope FROM spans", "SELECT count() FROM spans FINAL"} {
		if _, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: q}); !errors.Is(err, store.ErrBadRequest) || !strings.Contains(err.Error(), "ClickHouse refused") {
			t.Errorf("%q: %v, want ClickHouse's refusal as a bad request", q, err)
		}
	}
	if after := dbState(t, s); after != before {
		t.Fatalf("the database changed:\nbefore %s\nafter  %s", before, after)
	}

	// The caller's visible spans, no more.
	var want []string
	for i := range mine {
		if mine[i].TraceID != erased {
			want = append(want, hex.EncodeToString(mine[i].TraceID[:])+"/"+hex.EncodeToString(mine[i].SpanID[:]))
		}
	}
	slices.Sort(want)
	for _, q := range []string{
		"SELECT trace_id, span_id FROM spans",
		"SELECT s.trace_id, s.span_id FROM spans AS s WHERE s.service != 'theirs-svc' OR 1 = 1",
		"SELECT trace_id, span_id FROM (SELECT * FROM spans) UNION ALL SELECT trace_id, span_id FROM spans WHERE 0",
		// quotes and comments that look like an escape are only text
		"SELECT trace_id, span_id FROM spans WHERE name != 'x'' OR project = ''theirs' /* ' OR 1 = 1 -- */",
		// aliases named like the columns the views filter on
		"WITH 'mine' AS project SELECT trace_id, span_id FROM spans",
		"WITH 'theirs' AS project SELECT trace_id, span_id FROM spans",
		"WITH 1 AS project, 0 AS start, 1 AS llm SELECT trace_id, span_id FROM spans",
		"SELECT trace_id, span_id, 'theirs' AS project, 0 AS start FROM spans",
		"SELECT trace_id, span_id FROM (SELECT 'mine' AS project, * FROM spans)",
	} {
		res, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: q, Limit: 1000})
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		var got []string
		for _, r := range res.Rows {
			got = append(got, r[0].(string)+"/"+r[1].(string))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || res.Truncated {
			t.Errorf("%q: %d rows (truncated %v), want the %d visible spans of project mine", q, len(got), res.Truncated, len(want))
		}
	}
	one := func(q string) []any {
		t.Helper()
		res, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: q})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("%q: %+v %v", q, res, err)
		}
		return res.Rows[0]
	}
	if r := one("SELECT count() FROM spans WHERE trace_id IN (SELECT trace_id FROM llm_calls) AND arrayExists(k -> k = 'http.route', attr_keys)"); r[0] != uint64(len(want)) {
		t.Errorf("spans of traces with an LLM call: %v, want %d", r[0], len(want))
	}
	// LLM calls: every even span of mine but the erased trace's (0 and 2).
	if r := one("SELECT count(), sum(input_tokens), groupUniqArray(service) FROM llm_calls"); r[0] != uint64(13) || fmt.Sprint(r[2]) != "[mine-svc]" {
		t.Errorf("llm_calls: %v, want 13 calls of mine-svc", r)
	}
	// The rollup views: the project's minutes only (the rollups count
	// erased spans: 15 LLM calls, 30 spans).
	if r := one("SELECT sum(calls), groupUniqArray(service) FROM llm_minutes"); r[0] != uint64(15) || fmt.Sprint(r[1]) != "[mine-svc]" {
		t.Errorf("llm_minutes: %v, want 15 calls of mine-svc", r)
	}
	if r := one("SELECT sum(calls), groupUniqArray(service) FROM ops_minutes"); r[0] != uint64(30) || fmt.Sprint(r[1]) != "[mine-svc]" {
		t.Errorf("ops_minutes: %v, want 30 spans of mine-svc", r)
	}
	// Columns come with their ClickHouse types.
	res, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: "SELECT start, attr_keys, trace_id, nan, 1.5, [1, 2] AS a, toFixedString('ab', 2) AS f, toDateTime(0) AS d, CAST(NULL AS Nullable(UInt8)) AS n FROM spans LIMIT 1"})
	if err != nil {
		t.Fatal(err)
	}
	types := fmt.Sprint(res.Columns)
	if types != "[{start UInt64} {attr_keys Array(String)} {trace_id String} {nan Float64} {1.5 Float64} {a Array(UInt8)} {f FixedString(2)} {d DateTime} {n Nullable(UInt8)}]" {
		t.Errorf("columns %s", types)
	}
	if b, err := json.Marshal(res.Rows[0][3:]); err != nil || string(b) != `["nan",1.5,[1,2],"ab","1970-01-01T00:00:00Z",null]` {
		t.Errorf("values as JSON: %s %v", b, err)
	}
	// The project is the caller's: theirs sees its own spans only.
	if r, err := s.SQL(ctx, "theirs", store.SQLQuery{SQL: "SELECT count(), groupUniqArray(service) FROM spans"}); err != nil || r.Rows[0][0] != uint64(40) || fmt.Sprint(r.Rows[0][1]) != "[theirs-svc]" {
		t.Errorf("project theirs: %+v %v", r, err)
	}
	if r, err := s.SQL(ctx, "nobody' OR '1", store.SQLQuery{SQL: "SELECT count() FROM spans"}); err != nil || r.Rows[0][0] != uint64(0) {
		t.Errorf("a project name with a quote: %+v %v", r, err)
	}
}

// TestSQLLimits: the row limit cuts the answer (truncated), and the
// server's limits end a statement that exceeds them with a bad request
// naming the limit.
func TestSQLLimits(t *testing.T) {
	url := chtestURL(t)
	s := open(t, Options{URL: url, SQL: SQLLimits{MaxRows: 20, MaxMemory: 10 << 20, MaxExecutionTime: time.Second, MaxResultBytes: 64 << 10}})
	sqlCorpus(t, s)
	// The same database, read by a store that lets a statement read 10 rows.
	few := open(t, Options{URL: url, SQL: SQLLimits{MaxRowsToRead: 10}})
	ctx := t.Context()
	res, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: "SELECT span_id FROM spans ORDER BY start", Limit: 5})
	if err != nil || len(res.Rows) != 5 || !res.Truncated {
		t.Fatalf("limit 5 of 27: %d rows, truncated %v, %v", len(res.Rows), res.Truncated, err)
	}
	res, err = s.SQL(ctx, "mine", store.SQLQuery{SQL: "SELECT span_id FROM spans", Limit: 20})
	if err != nil || len(res.Rows) != 20 || !res.Truncated {
		t.Fatalf("limit 20 of 27: %d rows, truncated %v, %v", len(res.Rows), res.Truncated, err)
	}
	res, err = s.SQL(ctx, "mine", store.SQLQuery{SQL: "SELECT count() FROM spans", Limit: 1})
	if err != nil || len(res.Rows) != 1 || res.Truncated {
		t.Fatalf("one row of one: %d rows, truncated %v, %v", len(res.Rows), res.Truncated, err)
	}
	if _, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: "SELECT 1", Limit: 21}); !errors.Is(err, store.ErrBadRequest) || !strings.Contains(err.Error(), "from 1 to 20") {
		t.Errorf("a limit above the maximum: %v", err)
	}
	// max_rows_to_read: the view's subquery reads the project's 30 rows.
	if _, err := few.SQL(ctx, "mine", store.SQLQuery{SQL: "SELECT count() FROM spans"}); !errors.Is(err, store.ErrBadRequest) || !strings.Contains(err.Error(), "code 158") {
		t.Errorf("reading 30 rows with max_rows_to_read 10: %v, want a bad request with code 158", err)
	}
	for _, c := range []struct{ sql, want string }{
		// max_memory_usage: 2.7M numbers gathered in one array
		{"SELECT length(groupArray(x)) FROM (SELECT arrayJoin(range(100)) AS x FROM spans ARRAY JOIN range(1000) AS y)", "code 241"},
		// max_result_bytes: one row of 27 x 2,000 strings
		{"SELECT groupArray(x) FROM (SELECT toString(arrayJoin(range(2000))) AS x FROM spans)", "code 396"},
		// max_execution_time: 27 rows of 0.1 s in one block
		{"SELECT count() FROM spans WHERE sleepEachRow(0.1) = 0", "code 159"},
	} {
		if _, err := s.SQL(ctx, "mine", store.SQLQuery{SQL: c.sql}); !errors.Is(err, store.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a bad request with %s", c.sql, err, c.want)
		}
	}
}

// TestSQLRetention: the views leave out what the project's retention hides,
// as the API does: the SQL mode counts the spans a search finds.
func TestSQLRetention(t *testing.T) {
	s := open(t, Options{Retention: time.Hour, ProjectRetention: map[string]time.Duration{"forever": 0}})
	base := uint64(time.Now().Add(-time.Hour - 5*time.Minute).UnixNano())
	var spans []model.Span
	for i := range 30 {
		start := base + uint64(i)*20e9
		spans = append(spans, model.Span{TraceID: model.TraceID{7, byte(i)}, SpanID: model.SpanID{7, byte(i)}, Name: "op", Service: "svc",
			Resource:          &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("svc")}}},
			StartTimeUnixNano: start, EndTimeUnixNano: start + 1e6})
	}
	appendAll(t, s, "short", spans)
	appendAll(t, s, "forever", spans)
	for _, p := range []string{"short", "forever"} {
		found, _, _, err := s.SearchSpans(t.Context(), p, &query.Filter{}, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.SQL(t.Context(), p, store.SQLQuery{SQL: "SELECT count(), min(start) FROM spans"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows[0][0] != uint64(len(found)) {
			t.Errorf("project %s: SQL counts %v spans, the search finds %d", p, res.Rows[0][0], len(found))
		}
		if p == "short" && (len(found) == 0 || len(found) >= 30) || p == "forever" && len(found) != 30 {
			t.Errorf("project %s: %d spans visible, want some of 30 hidden by a 1h retention (none when kept forever)", p, len(found))
		}
	}
}
