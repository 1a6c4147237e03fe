package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

type sqlResp struct {
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows      [][]any `json:"rows"`
	Truncated bool    `json:"truncated"`
}

// sqlAs posts a statement as project and returns the status and body.
func (ts *testServer) sqlAs(project, body string) (int, []byte) {
	ts.t.Helper()
	code, _, b := ts.request("POST", "/api/v1/sql", []byte(body), "X-Scope-OrgID", project, "Content-Type", "application/json")
	return code, b
}

func sqlJSON(sql string, limit int) string {
	b, _ := json.Marshal(map[string]any{"sql": sql, "limit": limit})
	return string(b)
}

// TestSQLNotSupported: the embedded engine and memstore answer 501 with a
// message, whatever the body (the UI asks with an empty one).
func TestSQLNotSupported(t *testing.T) {
	for _, be := range apiBackends {
		if be.name == "clickhouse" {
			continue
		}
		t.Run(be.name, func(t *testing.T) {
			ts := startWith(t, be.open(t))
			for _, body := range []string{sqlJSON("SELECT 1", 0), `{"sql": ""}`, `not json`} {
				code, hdr, b := ts.request("POST", "/api/v1/sql", []byte(body))
				wantError(t, "POST /api/v1/sql "+body, code, hdr, b, 501, "this storage backend does not support SQL")
			}
		})
	}
}

// llmSpansFor makes n recent spans in traces of 3, every other one an LLM
// call of one of two models.
func llmSpansFor(n int, seed byte, service string) []model.Span {
	spans := recentSpans(n, seed)
	for i := range spans {
		spans[i].Service = service
		spans[i].Resource = &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(service)}}}
		if i%2 == 0 {
			spans[i].Attributes = append(spans[i].Attributes,
				model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue([]string{"gpt-4o", "claude-sonnet-4"}[i%4/2])},
				model.KeyValue{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(int64(100 + i))})
		}
	}
	return spans
}

// TestSQLOverClickHouse: through the HTTP API on a real ClickHouse, the
// SQL mode answers exactly what the API answers for the caller's project,
// refuses what would reach anything else (400, naming it, nothing
// changed), and cuts answers at the limit.
func TestSQLOverClickHouse(t *testing.T) {
	ch, err := chstore.Open(t.Context(), chstore.Options{URL: chtest.URL(t), BatchWindow: time.Millisecond, SQL: chstore.SQLLimits{MaxRows: 500}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	ts := startWith(t, ch)
	ts.ingest(llmSpansFor(40, 5, "alpha-svc"), "alpha")
	ts.ingest(llmSpansFor(24, 6, "beta-svc"), "beta")

	// The API's answers for alpha: every span, and LLM calls by model.
	apiSpans := func(project string) []string {
		var page spansResp
		if code := ts.get("/api/v1/spans?limit=1000", &page, "X-Scope-OrgID", project); code != 200 || page.NextCursor != "" {
			t.Fatalf("spans of %s: %d", project, code)
		}
		var out []string
		for _, s := range page.Spans {
			out = append(out, fmt.Sprint(s["trace_id"], "/", s["span_id"]))
		}
		slices.Sort(out)
		return out
	}
	sqlSpans := func(project string) []string {
		code, body := ts.sqlAs(project, sqlJSON("SELECT trace_id, span_id FROM spans", 500))
		var res sqlResp
		if code != 200 || json.Unmarshal(body, &res) != nil || res.Truncated {
			t.Fatalf("SQL spans of %s: %d %s", project, code, body)
		}
		var out []string
		for _, r := range res.Rows {
			out = append(out, fmt.Sprint(r[0], "/", r[1]))
		}
		slices.Sort(out)
		return out
	}
	for _, p := range []string{"alpha", "beta", "nobody"} {
		api, sql := apiSpans(p), sqlSpans(p)
		if !slices.Equal(api, sql) {
			t.Errorf("project %s: SQL finds %d spans %v, the API %d %v", p, len(sql), sql, len(api), api)
		}
	}
	if n := len(apiSpans("alpha")); n != 40 {
		t.Fatalf("the API finds %d spans of alpha, want 40", n)
	}
	var stats struct {
		Groups []struct {
			Key   map[string]string `json:"key"`
			Spans int64             `json:"spans"`
			In    int64             `json:"input_tokens"`
		} `json:"groups"`
	}
	if code := ts.get("/api/v1/llm/stats?group_by=model", &stats, "X-Scope-OrgID", "alpha"); code != 200 || len(stats.Groups) != 2 {
		t.Fatalf("LLM stats of alpha: %d %+v", code, stats)
	}
	code, body := ts.sqlAs("alpha", sqlJSON("SELECT model, count(), sum(input_tokens) FROM llm_calls GROUP BY model", 0))
	var byModel sqlResp
	if code != 200 || json.Unmarshal(body, &byModel) != nil {
		t.Fatalf("SQL LLM calls by model: %d %s", code, body)
	}
	got := map[string]string{}
	for _, r := range byModel.Rows {
		got[r[0].(string)] = fmt.Sprint(r[1], " ", r[2])
	}
	for _, g := range stats.Groups {
		if want := fmt.Sprint(g.Spans, " ", g.In); got[g.Key["model"]] != want {
			t.Errorf("model %s: SQL %q, API %q", g.Key["model"], got[g.Key["model"]], want)
		}
	}
	if fmt.Sprint(byModel.Columns) != "[{model String} {count() UInt64} {sum(input_tokens) Int64}]" {
		t.Errorf("columns: %v", byModel.Columns)
	}

	// Refused: 400 naming what, and both projects' spans unchanged.
	for _, c := range []struct{ body, want string }{
		{sqlJSON("SELECT * FROM system.tables", 0), "the keyword SYSTEM"},
		{sqlJSON("SELECT count() FROM spans; DROP TABLE spans", 0), "only one statement"},
		{sqlJSON("ALTER TABLE spans DELETE WHERE 1", 0), "only SELECT"},
		{sqlJSON("INSERT INTO spans SELECT * FROM spans", 0), "only SELECT"},
		{sqlJSON("DROP TABLE spans", 0), "only SELECT"},
		{sqlJSON("SELECT count() FROM spans SETTINGS max_rows_to_read = 0", 0), "the keyword SETTINGS"},
		{sqlJSON("SELECT * FROM remote('127.0.0.1', currentDatabase(), spans)", 0), "the table function REMOTE"},
		{sqlJSON("SELECT * FROM erased_traces", 0), "the internal table"},
		{sqlJSON("SELECT count() FROM spans /* */ , llm_calls", 0), "a comma after a table"},
		{sqlJSON("SELECT project FROM spans", 0), "ClickHouse refused"},
		{sqlJSON("SELECT 1", 501), "from 1 to 500"},
		{`{"sql": "SELECT 1", "project": "beta"}`, `unknown field "project"`},
		{`{"sql": ""}`, `"sql" is empty`},
		{`SELECT 1`, "want JSON"},
	} {
		code, hdr, b := ts.request("POST", "/api/v1/sql", []byte(c.body), "X-Scope-OrgID", "alpha")
		wantError(t, c.body, code, hdr, b, 400, c.want)
	}
	if a, b := len(apiSpans("alpha")), len(apiSpans("beta")); a != 40 || b != 24 {
		t.Fatalf("after refused statements: alpha %d, beta %d spans, want 40 and 24", a, b)
	}

	// The limit cuts the answer and says so.
	code, body = ts.sqlAs("alpha", sqlJSON("SELECT span_id FROM spans ORDER BY start", 7))
	var cut sqlResp
	if code != 200 || json.Unmarshal(body, &cut) != nil || len(cut.Rows) != 7 || !cut.Truncated {
		t.Fatalf("limit 7 of 40: %d %s", code, body)
	}
	if !strings.Contains(string(body), `"truncated":true`) {
		t.Fatalf("no truncated flag: %s", body)
	}
}

var _ store.SQLRunner = (*chstore.Store)(nil)
