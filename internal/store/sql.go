package store

import "context"

// SQLRunner is implemented by backends that answer read-only SQL written
// by a user (POST /api/v1/sql) over documented per-project views. The
// backend, not the SQL, decides the project: a statement can reach only
// the rows of the project it is called for, and what it cannot check it
// refuses (ErrBadRequest, naming what was refused).
type SQLRunner interface {
	SQL(ctx context.Context, project string, q SQLQuery) (SQLResult, error)
}

// SQLQuery is one statement and the most rows to answer.
type SQLQuery struct {
	SQL   string
	Limit int // rows answered at most (> 0)
}

// SQLColumn is a result column: its name and its type as the backend
// names it (a ClickHouse type such as "UInt64" or "Array(String)").
type SQLColumn struct {
	Name string
	Type string
}

// SQLResult is a statement's answer: the columns, the rows (one value per
// column, Go values as the driver scans them), and whether rows beyond
// SQLQuery.Limit were left out.
type SQLResult struct {
	Columns   []SQLColumn
	Rows      [][]any
	Truncated bool
}
