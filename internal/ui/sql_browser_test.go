package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/ui"
)

// startClickHouseStack is startStack over a real ClickHouse (chtest), as
// `rastro serve --storage clickhouse --ui` runs it.
func startClickHouseStack(t *testing.T) *stack {
	t.Helper()
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0", UI: ui.Handler(), Prices: llm.DefaultPrices(), SpanMetricsInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ch, err := chstore.Open(t.Context(), chstore.Options{URL: chtest.URL(t), BatchWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(ch)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		ch.Close()
	})
	return &stack{base: "http://" + srv.HTTPAddr(), srv: srv}
}

// TestBrowserSQL: the SQL page in a real browser. On the embedded engine it
// says the backend has no SQL mode and the navigation has no SQL link; on
// ClickHouse the editor runs a statement and shows the same rows as the
// API, the truncation at the row limit, a refusal's message, and values as
// text (a payload in a result stays text).
func TestBrowserSQL(t *testing.T) {
	t.Run("engine", func(t *testing.T) {
		st := startStack(t)
		b := newBrowser(t, st.base)
		b.open(t, "/sql")
		b.wait(t, `document.getElementById('sql-unsupported')`)
		if eval[bool](t, b, `!!document.getElementById('sql-text')`) {
			t.Error("the engine's SQL page shows an editor")
		}
		b.open(t, "/search")
		b.wait(t, `document.querySelector('nav.top a[href^="/search"]')`)
		// The answer to the probe is known by now (one request per load).
		b.wait(t, `performance.getEntriesByName(location.origin + '/api/v1/sql').length > 0`)
		if eval[bool](t, b, `!!document.querySelector('nav.top a[href^="/sql"]')`) {
			t.Error("the navigation links to SQL on a backend without it")
		}
		b.check(t)
	})
	t.Run("clickhouse", func(t *testing.T) {
		st := startClickHouseStack(t)
		spans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 3, Spans: 300, Start: time.Now().Add(-30 * time.Minute), Window: 20 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := bench.Prepare(bench.Batches(spans, 100), bench.ProtoOTLPProto, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pl {
			st.post(t, "/v1/traces", "application/x-protobuf", p.Body)
		}
		// What the API answers for the statement the page will run.
		const stmt = "SELECT service, count() AS n FROM spans GROUP BY service ORDER BY n DESC, service"
		body, _ := json.Marshal(map[string]any{"sql": stmt})
		resp, err := http.Post(st.base+"/api/v1/sql", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var api struct {
			Rows [][]any `json:"rows"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(raw, &api) != nil || len(api.Rows) == 0 {
			t.Fatalf("API: %d %s", resp.StatusCode, raw)
		}
		var want []string
		for _, r := range api.Rows {
			want = append(want, fmt.Sprint(r[0], "|", r[1]))
		}

		b := newBrowser(t, st.base)
		b.open(t, "/search")
		b.wait(t, `document.querySelector('nav.top a[href^="/sql"]')`)
		b.do(t, `document.querySelector('nav.top a[href^="/sql"]').click()`)
		b.wait(t, `document.getElementById('sql-text')`)
		b.do(t, `document.getElementById('sql-text').value = `+jsString(stmt))
		b.do(t, `document.getElementById('sql-run').click()`)
		b.wait(t, `document.querySelector('#sql-result tbody tr')`)
		got := eval[[]string](t, b, `[...document.querySelectorAll('#sql-result tbody tr')].map(tr => [...tr.cells].map(c => c.textContent).join('|'))`)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the page shows\n%s\nthe API answers\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if h := eval[string](t, b, `[...document.querySelectorAll('#sql-result th')].map(th => th.textContent).join(',')`); h != "serviceString,nUInt64" {
			t.Errorf("headers %q, want the column names with their types", h)
		}
		if !strings.Contains(eval[string](t, b, `location.search`), "q=") {
			t.Error("the statement is not in the URL")
		}
		// The row limit, from the form.
		b.do(t, `document.getElementById('sql-text').value = 'SELECT span_id FROM spans'`)
		b.do(t, `document.getElementById('sql-limit').value = '5'`)
		b.do(t, `document.getElementById('sql-run').click()`)
		b.wait(t, `document.getElementById('sql-status').dataset.truncated === 'true'`)
		if n := eval[int](t, b, `document.querySelectorAll('#sql-result tbody tr').length`); n != 5 {
			t.Errorf("limit 5: %d rows shown", n)
		}
		// A refused statement: the server's message.
		b.do(t, `document.getElementById('sql-text').value = 'SELECT * FROM system.tables'`)
		b.do(t, `document.getElementById('sql-run').click()`)
		b.wait(t, `document.getElementById('sql-error')`)
		if msg := eval[string](t, b, `document.getElementById('sql-error').textContent`); !strings.Contains(msg, "400") || !strings.Contains(msg, "the keyword SYSTEM") {
			t.Errorf("refusal shown as %q", msg)
		}
		// Values are text.
		b.do(t, `document.getElementById('sql-text').value = `+jsString("SELECT '"+xssImg+"' AS a, '"+xssScript+"' AS b"))
		b.do(t, `document.getElementById('sql-run').click()`)
		b.wait(t, `document.querySelector('#sql-result tbody tr')`)
		b.safe(t, "SQL result", xssImg, xssScript)
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
