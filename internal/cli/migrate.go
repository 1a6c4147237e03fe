package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore"
)

func init() {
	register(&Command{Name: "migrate", Short: "apply the ClickHouse schema's migrations (serve --storage clickhouse also does at start); with --from-data-dir, copy a data directory's spans into ClickHouse", Run: runMigrate})
}

func runMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "migrate", "--clickhouse-url URL")
	url := fs.String("clickhouse-url", "", "the database, clickhouse://user:password@host:9000/database (native protocol)")
	cluster := fs.String("clickhouse-cluster", "", "the schema for this cluster (remote_servers): Replicated*MergeTree local tables and Distributed tables ON CLUSTER; printed for review, applied with --apply (docs/clickhouse.md#cluster-mode); with --from-data-dir, copy into this cluster (one replica per shard)")
	apply := fs.Bool("apply", false, "with --clickhouse-cluster: create the cluster schema ON CLUSTER through the URL's node (versioned and idempotent, as serve --clickhouse-cluster does at start) instead of printing it")
	asJSON := fs.Bool("json", false, "print the ClickHouse version and the migrations (or, with --from-data-dir, what was copied) as JSON")
	fromDir := fs.String("from-data-dir", "", "copy every project's spans from this data directory of the embedded engine (its server stopped) into ClickHouse; interrupted, the same command goes on where it stopped (docs/clickhouse.md)")
	batch := fs.Int("batch-spans", chstore.DefaultImportBatchSpans, "with --from-data-dir: spans read, inserted and checkpointed at once (1..100000)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := envDefaults(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *url == "" {
		return fmt.Errorf("%w: give --clickhouse-url", errUsage)
	}
	if *fromDir != "" {
		if *batch < 1 || *batch > 100000 {
			return fmt.Errorf("%w: --batch-spans %d: give 1..100000", errUsage, *batch)
		}
		return migrateDataDir(ctx, env, *url, *cluster, *fromDir, *batch, *asJSON)
	}
	if *apply && *cluster == "" {
		return fmt.Errorf("%w: --apply is for --clickhouse-cluster (without it, migrate applies the single-node schema)", errUsage)
	}
	if *cluster != "" {
		stmts, err := chstore.ClusterSchemaForURL(*url, *cluster)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if !*apply {
			fmt.Fprintln(env.Stdout, "-- rastro's ClickHouse schema for cluster "+*cluster+" (docs/clickhouse.md#cluster-mode); migrate --apply, or serve --clickhouse-cluster, runs it")
			for _, s := range stmts {
				fmt.Fprintf(env.Stdout, "%s;\n\n", s)
			}
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	feat, steps, ran, err := chstore.Migrate(ctx, *url, *cluster)
	if err != nil {
		return err
	}
	if *asJSON {
		type step struct {
			Version   uint32 `json:"version"`
			Name      string `json:"name"`
			AppliedAt string `json:"applied_at,omitempty"`
		}
		out := struct {
			ClickHouse string `json:"clickhouse_version"`
			AppliedNow int    `json:"applied_now"`
			Migrations []step `json:"migrations"`
		}{ClickHouse: feat.Version, AppliedNow: ran, Migrations: []step{}}
		for _, m := range steps {
			s := step{Version: m.Version, Name: m.Name}
			if !m.AppliedAt.IsZero() {
				s.AppliedAt = m.AppliedAt.UTC().Format(time.RFC3339Nano)
			}
			out.Migrations = append(out.Migrations, s)
		}
		return json.NewEncoder(env.Stdout).Encode(out)
	}
	fmt.Fprintf(env.Stdout, "ClickHouse %s: %s applied now\n", feat.Version, plural(ran, "migration"))
	width := 0 // the names in one column
	for _, m := range steps {
		width = max(width, len(m.Name))
	}
	for _, m := range steps {
		at := "not applied"
		if !m.AppliedAt.IsZero() {
			at = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(env.Stdout, "%4d  %-*s  %s\n", m.Version, width, m.Name, at)
	}
	return nil
}
