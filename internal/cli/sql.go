package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	register(&Command{Name: "sql", Short: "run a read-only SQL statement over the project's views (ClickHouse backend only; docs/clickhouse.md)", Run: runSQL})
}

func runSQL(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "sql", `[flags] 'SELECT ...'   e.g. rastro sql 'SELECT model, count() FROM llm_calls GROUP BY model'`)
	var c clientFlags
	c.register(fs, env)
	limit := fs.Int("limit", 0, "rows answered at most (0: the server's default, 1000)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: give one SQL statement, quoted as one argument", errUsage)
	}
	body, _ := json.Marshal(map[string]any{"sql": fs.Arg(0), "limit": *limit})
	resp, err := c.do(ctx, http.MethodPost, "/api/v1/sql", nil, body, 5*time.Minute)
	if err != nil {
		return err
	}
	if c.json {
		_, err := env.Stdout.Write(resp)
		return err
	}
	var res struct {
		Columns []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"columns"`
		Rows      [][]any `json:"rows"`
		Truncated bool    `json:"truncated"`
	}
	dec := json.NewDecoder(bytes.NewReader(resp))
	dec.UseNumber() // 64-bit integers print exactly
	if err := dec.Decode(&res); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	var head []string
	for _, col := range res.Columns {
		head = append(head, col.Name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range res.Rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = sqlCell(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Truncated {
		fmt.Fprintf(env.Stderr, "(%s shown: the statement has more; raise --limit)\n", plural(len(res.Rows), "row"))
	}
	return nil
}

// sqlCell prints one value on one line: strings as they are (tabs and
// line breaks escaped), everything else as JSON.
func sqlCell(v any) string {
	if s, ok := v.(string); ok {
		return strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
	}
	if v == nil {
		return "NULL"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
