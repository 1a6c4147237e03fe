package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rastro-dev/rastro/internal/server"
)

func init() {
	register(&Command{Name: "token", Short: "make a random access token and its auth file entry (docs/security.md)", Run: runToken})
}

func runToken(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "token", "[flags]")
	name := fs.String("name", "", "the token's name in the auth file (shown in logs and errors; required)")
	roles := fs.String("roles", "read", "comma-separated roles: ingest, read, admin")
	projects := fs.String("projects", "default", "comma-separated projects, or * for every project")
	asJSON := fs.Bool("json", false, `print {"token": ..., "entry": ...} as JSON`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *name == "" {
		return fmt.Errorf("%w: --name is required (it labels the token in logs and errors)", errUsage)
	}
	token, hash, err := server.NewToken()
	if err != nil {
		return err
	}
	entry := map[string]any{"name": *name, "secret": hash, "roles": splitList(*roles), "projects": splitList(*projects)}
	// The entry is checked as the server would check it.
	file, _ := json.Marshal(map[string]any{"tokens": []any{entry}})
	if err := server.CheckAuthFile(file); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *asJSON {
		if err := json.NewEncoder(env.Stdout).Encode(map[string]any{"token": token, "entry": entry}); err != nil {
			return err
		}
		fmt.Fprintln(env.Stderr, "The token is shown once and stored nowhere; the entry holds only its hash.")
		return nil
	}
	line, _ := json.Marshal(entry)
	fmt.Fprintf(env.Stdout, "token: %s\n", token)
	fmt.Fprintf(env.Stdout, "auth file entry (add it to the \"tokens\" list, then send the server SIGHUP):\n%s\n", line)
	fmt.Fprintln(env.Stderr, "The token is shown once and stored nowhere; the entry holds only its hash.")
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
