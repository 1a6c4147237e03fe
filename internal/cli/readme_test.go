package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveFlagTable renders rastro serve's flags as the README's table.
func serveFlagTable() string {
	fs, _ := newServeFlags(&Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, LookupEnv: os.LookupEnv})
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s |\n", f.Name, EnvName(f.Name), def, f.Usage)
	})
	return b.String()
}

// TestReadmeConfigTableMatchesFlags keeps the README's configuration table
// true to `rastro serve --help`. Run with RASTRO_UPDATE_README=1 to rewrite it.
func TestReadmeConfigTableMatchesFlags(t *testing.T) {
	const path = "../../README.md"
	const begin, end = "<!-- serve-flags:begin -->\n", "<!-- serve-flags:end -->"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README lacks the %q ... %q markers", begin, end)
	}
	want := serveFlagTable()
	got := s[i+len(begin) : j]
	if got == want {
		return
	}
	if os.Getenv("RASTRO_UPDATE_README") == "1" {
		if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README configuration table is out of date; run RASTRO_UPDATE_README=1 go test ./internal/cli -run Readme\nwant:\n%s\ngot:\n%s", want, got)
}

// TestServeHelpDocumentsEveryFlag: --help prints each flag and its variable twin's flag name.
func TestServeHelpDocumentsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--help"}, &out, &errb)
	if code != 0 {
		t.Fatalf("serve --help exited %d: %s", code, errb.String())
	}
	fs, _ := newServeFlags(&Env{Stdout: &out, Stderr: &bytes.Buffer{}, LookupEnv: os.LookupEnv})
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(errb.String(), "-"+f.Name) {
			t.Errorf("--help does not mention -%s", f.Name)
		}
	})
}

func TestEnvironmentTwinsSetFlags(t *testing.T) {
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, LookupEnv: func(k string) (string, bool) {
		v, ok := map[string]string{"RASTRO_DATA_DIR": "/tmp/x", "RASTRO_SEAL_BYTES": "2MiB", "RASTRO_HTTP_ADDR": "ignored",
			"RASTRO_GRPC_ADDR": "", "RASTRO_SEAL_AGE": "", "RASTRO_LOG_LEVEL": ""}[k]
		return v, ok
	}}
	fs, c := newServeFlags(env)
	if err := parseFlags(fs, []string{"--http-addr", "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if err := envDefaults(fs, env); err != nil {
		t.Fatal(err)
	}
	if c.dataDir != "/tmp/x" || c.sealBytes != 2<<20 || c.httpAddr != "127.0.0.1:1" {
		t.Fatalf("env twins: data-dir %q seal-bytes %d http-addr %q", c.dataDir, c.sealBytes, c.httpAddr)
	}
	// Set but empty: grpc-addr takes "" (gRPC off); others keep their default.
	if c.grpcAddr != "" || c.sealAge != time.Minute || c.logLevel != "info" {
		t.Fatalf("empty twins: grpc-addr %q (want \"\"), seal-age %v, log-level %q (want the defaults)", c.grpcAddr, c.sealAge, c.logLevel)
	}
	bad := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, LookupEnv: func(k string) (string, bool) {
		if k == "RASTRO_SEAL_BYTES" {
			return "lots", true
		}
		return "", false
	}}
	fs, _ = newServeFlags(bad)
	fs.Parse(nil)
	if err := envDefaults(fs, bad); err == nil || !strings.Contains(err.Error(), "RASTRO_SEAL_BYTES") {
		t.Fatalf("bad env value not reported by name: %v", err)
	}
}

func TestFlagsAfterPositionalArguments(t *testing.T) {
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, LookupEnv: os.LookupEnv}
	fs := newFlagSet(env, "search", "")
	server := fs.String("server", "", "")
	limit := fs.Int("limit", 0, "")
	if err := parseFlags(fs, []string{"{ a = 1 }", "--server", "http://x", "more", "--limit=3", "--", "--literal"}); err != nil {
		t.Fatal(err)
	}
	if *server != "http://x" || *limit != 3 {
		t.Fatalf("flags after arguments not parsed: server %q limit %d", *server, *limit)
	}
	if got := strings.Join(fs.Args(), "|"); got != "{ a = 1 }|more|--literal" {
		t.Fatalf("positional arguments: %q", got)
	}
}

func TestServeRejectsABadPriceFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "prices.json")
	os.WriteFile(bad, []byte(`{"models": [{"model": 5}]}`), 0o644)
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", "",
		"--prices", bad}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--prices") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestServeRefusesBadSettingsBeforeListening: settings that are out of
// range are usage errors (exit 2) before any port is bound.
func TestServeRefusesBadSettingsBeforeListening(t *testing.T) {
	for _, args := range [][]string{
		{"--seal-age", "0s"}, {"--max-inflight-bytes", "0"}, {"--erase-delay", "-1s"},
		{"--compaction-fanout", "1"},
		{"--query-timeout", "0s"}, {"--max-concurrent-queries", "0"}, {"--max-header-bytes", "0"}, {"--grpc-max-streams", "-1"},
		{"--write-timeout", "10s", "--query-timeout", "30s"}, {"--read-header-timeout", "2m"},
	} {
		var out, errb bytes.Buffer
		// An address Listen refuses: reaching it would be exit 1, not 2.
		full := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:99999", "--grpc-addr", ""}, args...)
		if code := Main(t.Context(), full, &out, &errb); code != 2 || strings.Contains(errb.String(), "listen") {
			t.Errorf("serve %v: exit %d, stderr %q; want a usage error before listening", args, code, errb.String())
		}
	}
}
