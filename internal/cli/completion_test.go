package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBashCompletion sources `rastro completion bash` in a real bash and
// completes a command name and a command's flags.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed for this test: %v", err)
	}
	var out, errb strings.Builder
	if code := Main(context.Background(), []string{"completion", "bash"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	script := filepath.Join(t.TempDir(), "rastro.bash")
	os.WriteFile(script, []byte(out.String()), 0o644)
	complete := func(words ...string) string {
		t.Helper()
		line := "source " + script + "; COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" +
			string(rune('0'+len(words)-1)) + "; _rastro; echo \"${COMPREPLY[*]}\""
		b, err := exec.Command(bash, "-c", line).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v: %s", err, b)
		}
		return strings.TrimSpace(string(b))
	}
	if got := complete("rastro", "se"); got != "search serve services sessions" {
		t.Errorf("rastro se<TAB>: %q", got)
	}
	if got := complete("rastro", "search", "--si"); got != "--since" {
		t.Errorf("rastro search --si<TAB>: %q", got)
	}
	if got := complete("rastro", "status", "--w"); got != "--watch" {
		t.Errorf("rastro status --w<TAB>: %q", got)
	}
	for _, shell := range []string{"zsh", "fish"} {
		out.Reset()
		if code := Main(context.Background(), []string{"completion", shell}, &out, &errb); code != 0 || !strings.Contains(out.String(), "search") || !strings.Contains(out.String(), "since") {
			t.Errorf("completion %s: exit %d: %.200s", shell, code, out.String())
		}
	}
	if code := Main(context.Background(), []string{"completion", "tcsh"}, &out, &errb); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2 (usage)", code)
	}
}

// TestEveryCommandTakesJSON: --json on every command but the server and
// the completion scripts.
func TestEveryCommandTakesJSON(t *testing.T) {
	for _, c := range completionTable(context.Background()) {
		if c.name == "serve" || c.name == "completion" {
			continue
		}
		found := false
		for _, f := range c.flags {
			found = found || f == "json"
		}
		if !found {
			t.Errorf("rastro %s has no --json", c.name)
		}
	}
}
