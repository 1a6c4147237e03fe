package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/export"
	"github.com/rastro-dev/rastro/internal/query"
)

func init() {
	register(&Command{Name: "export", Short: "write matching spans to a Parquet file (DuckDB, Spark, pandas)", Run: runExport})
}

// exportPageSpans is the default page size of the span search requests; the
// API allows up to 10000.
const exportPageSpans = 1000

// exportSummary is what export reports when it stops (--json prints it).
type exportSummary struct {
	File  string `json:"file"`
	Spans int64  `json:"spans"`
	Since string `json:"since"`
	Until string `json:"until"`
	// Complete is false when the export stopped early (--max-spans, an
	// interruption, a failed page); NextCursor then resumes it.
	Complete   bool   `json:"complete"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// runExport pages through GET /api/v1/spans with a cursor and streams each
// page into a Parquet file, one row group every --row-group-spans spans.
func runExport(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "export", "--out FILE [flags] [TRACEQL]")
	var c clientFlags
	c.register(fs, env)
	var sf spanFilterFlags
	sf.register(fs)
	var win windowFlags
	win.register(fs)
	format := fs.String("format", "parquet", "file format: parquet (the only one so far)")
	out := fs.String("out", "", "file to write (required); it must not exist unless --force")
	force := fs.Bool("force", false, "replace --out if it exists")
	cursor := fs.String("cursor", "", "resume an export: the next_cursor an earlier export printed (give it the same filter, --since and --until)")
	maxSpans := fs.Int64("max-spans", 0, "stop after this many spans (0: all); the summary then has the cursor to resume from")
	pageSpans := fs.Int("page-spans", exportPageSpans, "spans per API request (1..10000)")
	groupSpans := fs.Int("row-group-spans", export.DefaultRowGroupSpans, "spans per Parquet row group: the memory the writer holds")
	fs.Lookup("json").Usage = "print the summary (file, spans, window, complete, next_cursor) as JSON"
	fs.Lookup("utc").Usage = "no effect: export prints its window in UTC"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *format != "parquet":
		return fmt.Errorf("%w: --format %q: the only format is parquet", errUsage, *format)
	case *out == "":
		return fmt.Errorf("%w: --out FILE is required (the Parquet file to write)", errUsage)
	case *pageSpans < 1 || *pageSpans > 10000:
		return fmt.Errorf("%w: --page-spans %d: want 1..10000", errUsage, *pageSpans)
	case *groupSpans < 1 || *groupSpans > export.MaxRowGroupSpans:
		return fmt.Errorf("%w: --row-group-spans %d: want 1..%d", errUsage, *groupSpans, export.MaxRowGroupSpans)
	case *maxSpans < 0:
		return fmt.Errorf("%w: --max-spans %d: want 0 (all) or more", errUsage, *maxSpans)
	}
	since, until, err := win.resolve(time.Now())
	if err != nil {
		return err
	}
	params := url.Values{}
	sf.set(params, fs.Args())
	params.Set("since", since)
	params.Set("until", until)
	if !*force {
		if _, err := os.Stat(*out); err == nil {
			return fmt.Errorf("%w: --out %s exists: choose another file or give --force", errUsage, *out)
		}
	}
	if st, err := os.Stat(filepath.Dir(*out)); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: --out %s: directory %s does not exist", errUsage, *out, filepath.Dir(*out))
	}

	server := c.server
	if u, err := url.Parse(c.server); err == nil && u.User != nil {
		u.User = nil // a password in --server is not written into the file
		server = u.String()
	}
	meta := map[string]string{"rastro.export.query": params.Encode(), "rastro.export.server": server}
	if *cursor != "" {
		meta["rastro.export.cursor"] = *cursor
	}
	// Write to a temporary file beside --out and rename it when the footer
	// is written: --out is never a truncated Parquet file.
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create %s: %w", *out, err)
	}
	defer os.Remove(tmp.Name())              // after the rename, a no-op
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp's 0600 would hide the export from other readers
		tmp.Close()
		return fmt.Errorf("create %s: %w", *out, err)
	}
	w, err := export.NewWriter(tmp, export.Options{RowGroupSpans: *groupSpans, Metadata: meta})
	if err != nil {
		tmp.Close()
		return err
	}
	sum := exportSummary{File: *out, Since: since, Until: until}
	next, pageErr := exportPages(ctx, &c, params, *cursor, *pageSpans, *maxSpans, w)
	sum.Spans = w.Rows()
	if pageErr != nil && sum.Spans == 0 {
		tmp.Close()
		return pageErr // nothing written: leave no file behind
	}
	// Keep what was written, even after a failed page: the file is valid
	// and the cursor says where to resume.
	if err := w.Close(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", *out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", *out, err)
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fmt.Errorf("rename to %s: %w", *out, err)
	}
	sum.Complete = next == "" && pageErr == nil
	sum.NextCursor = next
	if err := printExportSummary(env, &c, &sf, fs.Args(), &sum); err != nil {
		return err
	}
	if pageErr != nil {
		return fmt.Errorf("stopped after %d spans (%s holds them; the line above resumes): %w", sum.Spans, *out, pageErr)
	}
	return nil
}

// exportPages requests pages from cursor on and writes their spans, until
// the last page, maxSpans (0: no limit), or an error. It returns the cursor
// of the first span not written ("" when none is left).
func exportPages(ctx context.Context, c *clientFlags, params url.Values, cursor string, pageSpans int, maxSpans int64, w *export.Writer) (next string, err error) {
	next = cursor
	for {
		limit := pageSpans
		if maxSpans > 0 {
			left := maxSpans - w.Rows()
			if left == 0 {
				return next, nil
			}
			limit = int(min(int64(limit), left))
		}
		params.Set("limit", strconv.Itoa(limit))
		if next != "" {
			params.Set("cursor", next)
		}
		if err := ctx.Err(); err != nil {
			return next, fmt.Errorf("interrupted: %w", err)
		}
		body, err := c.get(ctx, "/api/v1/spans", params)
		if err != nil {
			if ctx.Err() != nil {
				return next, fmt.Errorf("interrupted: %w", ctx.Err())
			}
			return next, err
		}
		var page struct {
			Spans      []export.APISpan `json:"spans"`
			NextCursor string           `json:"next_cursor"`
			Warnings   []string         `json:"warnings"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return next, fmt.Errorf("decode server response: %w", err)
		}
		if len(page.Warnings) > 0 {
			// A damaged part was skipped: the export would be silently
			// incomplete.
			return next, fmt.Errorf("the server skipped damaged data: %s", strings.Join(page.Warnings, "; "))
		}
		rows, err := export.Rows(page.Spans)
		if err != nil {
			return next, err
		}
		if err := w.Write(rows); err != nil {
			return next, err
		}
		next = page.NextCursor
		if next == "" {
			return "", nil
		}
	}
}

func printExportSummary(env *Env, c *clientFlags, sf *spanFilterFlags, args []string, s *exportSummary) error {
	if c.json {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %d spans to %s (start times %s to %s)\n", s.Spans, s.File, s.Since, s.Until)
	if s.NextCursor == "" {
		return nil
	}
	// The command line that exports the rest into another file.
	cmd := []string{"rastro", "export", "--server", c.server, "--since", s.Since, "--until", s.Until, "--cursor", s.NextCursor}
	if c.project != "" {
		cmd = append(cmd, "--project", c.project)
	}
	for _, f := range []struct{ name, v string }{{"service", sf.service}, {"name", sf.name}, {"status", sf.status},
		{"min-duration", sf.minDur}, {"max-duration", sf.maxDur}, {"content", sf.content}} {
		if f.v != "" {
			cmd = append(cmd, "--"+f.name, f.v)
		}
	}
	cmd = append(cmd, "--out", "NEXT.parquet")
	if len(args) > 0 {
		cmd = append(cmd, strings.Join(args, " "))
	}
	for i, a := range cmd {
		if strings.ContainsAny(a, " \t\"'{}$*?&|;<>()\\`!") {
			cmd[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	_, err := fmt.Fprintf(env.Stdout, "more spans match; to export them: %s\n", strings.Join(cmd, " "))
	return err
}

// resolve turns --since and --until into absolute times, so that every page
// of a long export, and a resumed export, searches the same window. Without
// --since it is the listings' default, the 24h before --until.
func (w *windowFlags) resolve(now time.Time) (since, until string, err error) {
	u := now
	if w.until != "" {
		if u, err = query.ParseTime(w.until, now); err != nil {
			return "", "", fmt.Errorf("%w: --until: %v", errUsage, err)
		}
	}
	until = u.UTC().Format(time.RFC3339Nano)
	switch w.since {
	case "":
		return u.Add(-24 * time.Hour).UTC().Format(time.RFC3339Nano), until, nil
	case "all":
		return "all", until, nil
	}
	s, err := query.ParseTime(w.since, now)
	if err != nil {
		return "", "", fmt.Errorf("%w: --since: %v", errUsage, err)
	}
	if !s.Before(u) {
		return "", "", fmt.Errorf("%w: --since %s is not before --until %s", errUsage, w.since, until)
	}
	return s.UTC().Format(time.RFC3339Nano), until, nil
}
