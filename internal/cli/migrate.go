package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore"
)

func init() {
	register(&Command{Name: "migrate", Short: "apply the ClickHouse schema's migrations (serve --storage clickhouse also does at start)", Run: runMigrate})
}

func runMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "migrate", "--clickhouse-url URL")
	url := fs.String("clickhouse-url", "", "the database, clickhouse://user:password@host:9000/database (native protocol)")
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
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	feat, steps, ran, err := chstore.Migrate(ctx, *url)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "ClickHouse %s: %s applied now\n", feat.Version, plural(ran, "migration"))
	for _, m := range steps {
		at := "not applied"
		if !m.AppliedAt.IsZero() {
			at = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(env.Stdout, "%4d  %-24s %s\n", m.Version, m.Name, at)
	}
	return nil
}
