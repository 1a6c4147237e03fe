package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/rastro-dev/rastro/internal/store"
)

// POST /api/v1/sql: the SQL mode for power users (docs/clickhouse.md#sql-mode).
// A read-only statement over the request's project's views, answered by a
// backend that implements store.SQLRunner (ClickHouse); every other backend
// answers 501. The backend, not the statement, decides the project.

// maxSQLBody bounds the JSON body of POST /api/v1/sql.
const maxSQLBody = 64 << 10

// sqlBody is the JSON body of POST /api/v1/sql.
type sqlBody struct {
	SQL   string `json:"sql"`
	Limit int    `json:"limit"` // rows answered at most; 0: the backend's default
}

type sqlColumnJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type sqlResultJSON struct {
	Columns   []sqlColumnJSON `json:"columns"`
	Rows      [][]any         `json:"rows"`
	Truncated bool            `json:"truncated"`
}

func (s *Server) sqlRoutes() []route {
	return []route{
		{method: "POST", pattern: "/api/v1/sql", access: accessRead, name: "sql", handler: s.withBackend(s.handleSQL), documented: true},
	}
}

func (s *Server) handleSQL(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	runner, ok := b.(store.SQLRunner)
	if !ok {
		// Before the body is read: a client (the web UI) learns whether
		// the backend has SQL from this answer alone.
		notSupported(w, "SQL (the SQL mode needs rastro serve --storage clickhouse; docs/clickhouse.md#sql-mode)")
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSQLBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v (at most %d bytes)", err, maxSQLBody))
		return
	}
	var body sqlBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `body: want JSON {"sql": "SELECT ...", "limit": 100}: `+err.Error())
		return
	}
	if body.SQL == "" {
		writeError(w, http.StatusBadRequest, `body: "sql" is empty: want JSON {"sql": "SELECT ...", "limit": 100}`)
		return
	}
	res, err := runner.SQL(r.Context(), project, store.SQLQuery{SQL: body.SQL, Limit: body.Limit})
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := sqlResultJSON{Columns: make([]sqlColumnJSON, len(res.Columns)), Rows: res.Rows, Truncated: res.Truncated}
	for i, c := range res.Columns {
		out.Columns[i] = sqlColumnJSON{Name: c.Name, Type: c.Type}
	}
	if out.Rows == nil {
		out.Rows = [][]any{}
	}
	writeJSON(w, http.StatusOK, out)
}
