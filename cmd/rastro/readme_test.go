package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The executable README: every shell example of README.md and docs/*.md
// that runs rastro is run, as written, against a real `rastro serve`, in
// document order (the README's Quickstart first), and its output checked.
// Three things differ from a reader's terminal, all in runExample:
//   - lines that start the server (`go run ./cmd/rastro serve`) are left out:
//     the test's server, started the same way on free ports, stands in;
//   - 127.0.0.1:4318 and localhost:4318 become the test server's address
//     (the machine's port 4318 may be in use), and RASTRO_SERVER names it;
//   - `go run ./cmd/rastro` runs the binary built once for the tests.

// docExample is one fenced shell block that runs rastro.
type docExample struct {
	file   string
	line   int    // of the block's first line
	script string // the block
	output string // the plain block right after it (the output shown), if any
	// transcript: the block is "$ command" followed by its output.
	transcript bool
}

func (e docExample) String() string { return fmt.Sprintf("%s:%d", e.file, e.line) }

// key names an example in skipExamples and wantOutput by its file and its
// first command line (trailing comment and spaces removed), so that an edit
// elsewhere in the file does not move it.
func (e docExample) key() string {
	for _, l := range strings.Split(e.script, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.Index(l, "  #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		return e.file + ": " + l
	}
	return e.String()
}

// skipExamples are examples that cannot run here, by key, and why. An
// entry that matches no example fails the test (so that it cannot go
// stale).
var skipExamples = map[string]string{
	"docs/clickhouse.md: apt-get install clickhouse-server": "needs a ClickHouse server (internal/chstore's tests run these steps against one)",
	"docs/clickhouse.md: rastro serve --storage clickhouse --clickhouse-cluster rastro_cluster \\": "needs a ClickHouse cluster with replicas " +
		"(internal/chstore's TestClusterReplicasQuorum runs insert_quorum=2 against one)",
	"docs/clickhouse.md: rastro migrate --clickhouse-url clickhouse://127.0.0.1:9000/rastro --from-data-dir /var/lib/rastro": "needs a ClickHouse server and a stopped server's " +
		"data directory (TestMigrateFromDataDirKilledAndResumed runs this command against both)",
	"docs/grafana.md: rastro serve --zipkin-addr 127.0.0.1:9411": "starts a second server on Zipkin's fixed port 9411",
	"docs/operations.md: rastro fsck /var/lib/rastro": "checks a stopped server's data directory, /var/lib/rastro " +
		"(internal/cli's fsck tests run these commands on a real store)",
}

// wantOutput are substrings an example's output must hold, beyond the
// general checks.
var wantOutput = map[string][]string{
	// The Quickstart: the trace, found by search and services without --since.
	"README.md: now=$(date +%s)": {
		"trace 5b8efff798038103d269b633813fc60c: 1 span, started ", "POST /checkout  checkout", "error: payment provider timed out",
		"checkout  POST /checkout", "OPERATION       SPANS\nPOST /checkout  1\n", `"service":"checkout"`,
	},
	"docs/agents.md: go run ./cmd/rastro serve &": {"backfill: ", "Try:", "rastro llm stats --by model", "window"},
	"docs/operations.md: rastro erase '{ span.user.id = \"u_42\" }' --wait": {
		"erasure 1 done: ", "erasure 2: 1 trace hidden from every query"},
	"docs/traceql.md: rastro search --traces --since 6h '{ span.gen_ai.operation.name = \"chat\" } | count() > 8'": {
		"summarizer: summarizer run"},
}

var fenceRE = regexp.MustCompile("^```([a-z]*)\\s*$")

// docExamples reads the shell blocks that run rastro from one file.
func docExamples(t *testing.T, path string) []docExample {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out             []docExample
		in, isShell     bool
		start, lastEnd  int
		block           []string
		lastWasExample  bool
		sinceLastBlockN int
	)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		m := fenceRE.FindStringSubmatch(strings.TrimSpace(line))
		switch {
		case !in && m != nil:
			in, isShell, start, block = true, m[1] == "sh" || m[1] == "", n, nil
			sinceLastBlockN = n - lastEnd
		case in && m != nil && m[1] == "":
			in = false
			lastEnd = n
			text := strings.Join(block, "\n")
			plain := isShell && !strings.Contains(strings.TrimSpace(line), "sh")
			if lastWasExample && plain && sinceLastBlockN <= 2 && !runsRastro(text) {
				out[len(out)-1].output = text
				lastWasExample = false
				continue
			}
			lastWasExample = false
			if isShell && runsRastro(text) {
				ex := docExample{file: path, line: start, script: text}
				if strings.HasPrefix(strings.TrimSpace(block[0]), "$ ") {
					ex.transcript = true
					ex.script = strings.TrimPrefix(strings.TrimSpace(block[0]), "$ ")
					ex.output = strings.Join(block[1:], "\n")
				}
				out = append(out, ex)
				lastWasExample = !ex.transcript
			}
		case in:
			block = append(block, line)
		}
	}
	return out
}

// runsRastro: a line of the block starts with rastro (or $ rastro, or go
// run ./cmd/rastro).
func runsRastro(block string) bool {
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
		if strings.HasPrefix(l, "rastro ") || strings.HasPrefix(l, "go run ./cmd/rastro ") {
			return true
		}
	}
	return false
}

func TestDocumentationExamplesRun(t *testing.T) {
	files := []string{"README.md"}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, strings.TrimPrefix(d, "../../"))
	}
	var examples []docExample
	for _, f := range files {
		examples = append(examples, docExamples(t, f)...)
	}
	if len(examples) < 8 {
		t.Fatalf("found only %d examples: %v", len(examples), examples)
	}
	used := map[string]bool{}
	keys := map[string]docExample{}
	for _, ex := range examples {
		if other, ok := keys[ex.key()]; ok {
			_, skip := skipExamples[ex.key()]
			if _, want := wantOutput[ex.key()]; skip || want {
				t.Fatalf("%s and %s share the key %q: make their first lines differ", other, ex, ex.key())
			}
		}
		keys[ex.key()] = ex
	}
	// Erasure in 1 s, so that erase --wait finishes quickly.
	srv := startChild(t, t.TempDir(), "--erase-delay", "1s", "--lifecycle-interval", "1s")
	defer srv.stop(t)
	bin := filepath.Dir(binary)
	for _, ex := range examples {
		if reason, ok := skipExamples[ex.key()]; ok {
			used[ex.key()] = true
			t.Logf("%s: not run: %s", ex, reason)
			continue
		}
		t.Run(ex.String(), func(t *testing.T) {
			if cmd := otherCommand(ex); cmd != "" {
				t.Fatalf("%s runs %q: only rastro, go run ./cmd/rastro, curl and variable assignments are run here; add the example to skipExamples with the reason, or keep to those", ex, cmd)
			}
			out, code := runExample(t, ex, srv.base, bin)
			if ex.transcript {
				// A transcript shows the output, wrapped at 120
				// columns, with example secrets: compare word by
				// word, secrets aside.
				if got, want := transcriptWords(out), transcriptWords(ex.output); !strings.Contains(got, want) {
					t.Errorf("%s: $ %s\ngot (exit %d):\n%s\nthe documentation shows:\n%s", ex, ex.script, code, out, ex.output)
				}
				return
			}
			if code != 0 {
				t.Fatalf("%s: exit %d:\n%s\nscript:\n%s", ex, code, out, ex.script)
			}
			if strings.Contains(out, "; try --since") {
				t.Errorf("%s: an example that finds nothing:\n%s", ex, out)
			}
			for _, w := range wantOutput[ex.key()] {
				used["want "+ex.key()] = true
				if !strings.Contains(out, w) {
					t.Errorf("%s: output lacks %q:\n%s", ex, w, out)
				}
			}
			// The output shown: its first line (a table header or
			// the query) is what the command prints first.
			if ex.output != "" {
				want := strings.Fields(strings.SplitN(ex.output, "\n", 2)[0])
				got := strings.Fields(strings.SplitN(out, "\n", 2)[0])
				if !regexp.MustCompile(`\d`).MatchString(strings.Join(want, " ")) && strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s: the output starts %q; the documentation shows %q", ex, got, want)
				}
			}
		})
	}
	for k := range skipExamples {
		if !used[k] {
			t.Errorf("skipExamples names %s, which is no longer an example", k)
		}
	}
	for k := range wantOutput {
		if !used["want "+k] {
			t.Errorf("wantOutput names %s, which is no longer an example (or was not run)", k)
		}
	}
}

// otherCommand returns the first command of an example that is not
// rastro, go run, curl or an assignment ("" when there is none): the test
// runs nothing else (no package installs, no services started).
func otherCommand(ex docExample) string {
	for _, l := range strings.Split(ex.script, "\n") {
		if l == "" || strings.ContainsAny(l[:1], " \t{}\"'#])") {
			continue // a continuation line, a comment
		}
		w := strings.Fields(l)[0]
		if w == "rastro" || w == "go" || w == "curl" || regexp.MustCompile(`^[a-z_]+=`).MatchString(w) {
			continue
		}
		return w
	}
	return ""
}

// secretRE matches the parts of a transcript that differ on every run:
// tokens and their hashes.
var secretRE = regexp.MustCompile(`rst_[A-Za-z0-9_-]+|sha256:[0-9a-f.]+`)

// transcriptWords is a transcript's words, secrets replaced by "SECRET".
func transcriptWords(s string) string {
	return strings.Join(strings.Fields(secretRE.ReplaceAllString(s, "SECRET")), " ")
}

// runExample runs one example's script with bash from the repository's
// root and returns its combined output and exit code.
func runExample(t *testing.T, ex docExample, base, bin string) (string, int) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(ex.script, "\n") {
		if s := strings.TrimSpace(l); strings.HasPrefix(s, "go run ./cmd/rastro serve") || strings.HasPrefix(s, "rastro serve") && !ex.transcript {
			continue // the test's server stands in
		}
		lines = append(lines, l)
	}
	host := strings.TrimPrefix(base, "http://")
	script := strings.NewReplacer("127.0.0.1:4318", host, "localhost:4318", host).Replace(strings.Join(lines, "\n"))
	script = "set -e -o pipefail\ngo() { if [ \"$1\" = run ] && [ \"$2\" = ./cmd/rastro ]; then shift 2; rastro \"$@\"; else command go \"$@\"; fi; }\n" + script
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "RASTRO_SERVER="+base, "RASTRO_PROJECT=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: run bash: %v", ex, err)
	}
	return string(out), code
}

// stop ends the server with SIGTERM (a graceful shutdown) and waits.
func (c *child) stop(t *testing.T) {
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("server exit: %v", err)
	}
}
