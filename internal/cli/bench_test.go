package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

func runCLI(t *testing.T, name string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }}
	err := commands[name].Run(context.Background(), env, args)
	return out.String(), errb.String(), err
}

func TestHarnessCommandsDocumentEveryFlag(t *testing.T) {
	for name, flags := range map[string][]string{
		"load":  {"endpoint", "protocol", "corpus", "concurrency", "batch", "rate", "spans", "duration", "gzip", "keepalive", "project", "seed", "window", "json", "progress", "start", "fresh-ids", "retry-429", "nice", "timeout", "hold", "acked-file"},
		"demo":  {"server", "endpoint", "hours", "spans-per-hour", "rate", "live", "live-rate", "live-for", "project", "seed"},
		"bench": {"binary", "runs", "spans", "batch", "samples", "seed", "only", "out-dir", "no-write", "json", "list", "tmp-dir", "quiet", "load-nice"},
	} {
		_, stderr, err := runCLI(t, name, "--help")
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s --help: err = %v", name, err)
		}
		for _, f := range flags {
			if !strings.Contains(stderr, "-"+f) {
				t.Errorf("%s --help does not document -%s:\n%s", name, f, stderr)
			}
		}
	}
}

func TestBenchCommandLine(t *testing.T) {
	out, _, err := runCLI(t, "bench", "--list")
	if err != nil || !strings.Contains(out, "ingest") || !strings.Contains(out, "canonical") {
		t.Fatalf("bench --list: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "bench"); !errors.Is(err, errUsage) {
		t.Errorf("bench with no suite: err = %v, want a usage error", err)
	}
	if _, _, err := runCLI(t, "bench", "nope"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("bench nope: err = %v, want a usage error naming the suite", err)
	}
	// Flags after the suite name are parsed too (and checked before anything runs).
	if _, _, err := runCLI(t, "bench", "ingest", "--runs", "0"); !errors.Is(err, errUsage) {
		t.Errorf("bench ingest --runs 0: err = %v, want a usage error", err)
	}
	if _, _, err := runCLI(t, "bench", "ingest", "--no-such-flag"); !errors.Is(err, errUsage) {
		t.Errorf("unknown flag after the suite: err = %v", err)
	}
}

func TestLoadAndDemoRefuseRemoteEndpoints(t *testing.T) {
	if _, _, err := runCLI(t, "load", "--endpoint", "http://10.0.0.1:4318", "--spans", "10"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("load to a remote endpoint: err = %v", err)
	}
	if _, _, err := runCLI(t, "demo", "--endpoint", "http://192.168.1.5:4318"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("demo to a remote endpoint: err = %v", err)
	}
	if _, _, err := runCLI(t, "load", "--protocol", "thrift"); !errors.Is(err, errUsage) {
		t.Errorf("load --protocol thrift: err = %v", err)
	}
}

func TestLoadRefusesBadGeneratorSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fresh-ids"}, "--duration"},                                                // nothing is re-sent without one
		{[]string{"--fresh-ids", "--duration", "1s", "--gzip"}, "without --gzip"},              // ids are patched in the raw body
		{[]string{"--fresh-ids", "--duration", "1s", "--protocol", "otlp-json"}, "otlp-proto"}, // and only in protobuf
		{[]string{"--nice", "-5"}, "0-19"},                                                     // a generator may not raise its priority
		{[]string{"--nice", "20"}, "0-19"},
		{[]string{"--start", "yesterday"}, "RFC 3339"},
		{[]string{"--timeout", "0s"}, "--timeout"},
	} {
		_, _, err := runCLI(t, "load", append([]string{"--spans", "10", "--progress", "0"}, c.args...)...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("load %v: err = %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
	if _, _, err := runCLI(t, "bench", "search-live", "--load-nice", "25"); !errors.Is(err, errUsage) {
		t.Errorf("bench --load-nice 25: err = %v, want a usage error", err)
	}
}
