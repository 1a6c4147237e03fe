package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/engine"
)

// migrateDataDir is `rastro migrate --from-data-dir DIR`: it opens the data
// directory with the embedded engine (which takes its lock: the server
// using it must be stopped), applies the ClickHouse schema, and copies every
// project's spans with chstore.Import (into a cluster with --clickhouse-cluster:
// one replica per shard). Interrupted (Ctrl-C, a kill, a
// failure), the same command goes on from the last acknowledged page.
func migrateDataDir(ctx context.Context, env *Env, url, cluster, dir string, batch int, asJSON bool) error {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return fmt.Errorf("%w: --from-data-dir %s: %v", errUsage, dir, err)
	}
	if !isDataDir(abs) {
		return fmt.Errorf("%w: --from-data-dir %s: not a rastro data directory (no MANIFEST, segments or wal in it)", errUsage, dir)
	}
	// No block cache: the copy reads each block about once, and a cache
	// filling up to its bound was most of the copy's heap
	// (BenchmarkImport, docs/benchmarks/clickhouse.md).
	eng, err := engine.Open(engine.Options{Dir: abs, NoCompaction: true, BlockCacheBytes: -1})
	if err != nil {
		return fmt.Errorf("open the data directory %s: %w", abs, err)
	}
	defer eng.Close()
	st, err := eng.Status(ctx)
	if err != nil {
		return fmt.Errorf("read the data directory %s: %w", abs, err)
	}
	var projects []string
	stored := map[string]int64{}
	for _, p := range st.Projects {
		projects = append(projects, p.Name)
		stored[p.Name] = p.Spans
	}
	ch, err := chstore.Open(ctx, chstore.Options{URL: url, Cluster: cluster})
	if err != nil {
		return err
	}
	defer ch.Close()

	began := time.Now()
	progress := newProgress(env)
	lastLine := time.Time{}
	report := func(p chstore.ImportProgress) {
		line := fmt.Sprintf("migrate %s: %d of about %d spans copied%s", p.Project, p.Spans, stored[p.Project], doneMark(p.Done))
		switch {
		case progress != nil:
			fmt.Fprintln(progress, line)
		case p.Done || time.Since(lastLine) >= 5*time.Second:
			fmt.Fprintln(env.Stderr, line)
			lastLine = time.Now()
		}
	}
	res, err := ch.Import(ctx, eng, chstore.ImportOptions{Source: "data-dir:" + abs, Projects: projects, BatchSpans: batch, Progress: report})
	if progress != nil {
		progress.Close()
	}
	if err != nil {
		// Interrupted: the signal cancels ctx, and what surfaces may be the
		// cancellation or the write it cut short (the client closes its
		// connection: "use of closed network connection").
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			err = errors.New("interrupted")
		}
		return fmt.Errorf("migrate %s: %w; what ClickHouse acknowledged is kept: run the same command again to go on", abs, err)
	}
	if asJSON {
		type project struct {
			Name    string `json:"project"`
			Spans   uint64 `json:"spans"`
			Skipped uint64 `json:"already_copied"`
			Resumed bool   `json:"resumed"`
		}
		out := struct {
			Source   string    `json:"source"`
			Seconds  float64   `json:"seconds"`
			Projects []project `json:"projects"`
		}{Source: abs, Seconds: time.Since(began).Seconds(), Projects: []project{}}
		for _, p := range res {
			out.Projects = append(out.Projects, project{p.Project, p.Spans, p.Skipped, p.Resumed})
		}
		return json.NewEncoder(env.Stdout).Encode(out)
	}
	var total uint64
	for _, p := range res {
		total += p.Spans
		note := ""
		if p.Resumed {
			note = " (resumed"
			if p.Skipped > 0 {
				note += fmt.Sprintf("; %s found already copied and not inserted again", plural(p.Skipped, "span"))
			}
			note += ")"
		}
		fmt.Fprintf(env.Stdout, "%-24s %s%s\n", p.Project, plural(p.Spans, "span"), note)
	}
	fmt.Fprintf(env.Stdout, "copied %s of %s from %s into ClickHouse in %s\n", plural(total, "span"), plural(len(res), "project"),
		abs, time.Since(began).Round(time.Millisecond))
	return nil
}

func doneMark(done bool) string {
	if done {
		return ", done"
	}
	return ""
}

// isDataDir reports whether dir holds what the engine writes.
func isDataDir(dir string) bool {
	for _, name := range []string{"MANIFEST", "segments", "wal"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
