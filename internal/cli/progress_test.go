package cli

import (
	"context"
	"strings"
	"testing"
)

// TestProgressLineRedrawsInPlace: each line written replaces the last on
// the terminal, and Close clears it; without a terminal there is none.
func TestProgressLineRedrawsInPlace(t *testing.T) {
	var term strings.Builder
	p := &progressLine{w: &term}
	p.Write([]byte("  1.0s  accepted 10 spans\n  2.0s  acc"))
	p.Write([]byte("epted 20 spans\n"))
	p.Close()
	if want := "\r\x1b[K1.0s  accepted 10 spans\r\x1b[K2.0s  accepted 20 spans\r\x1b[K"; term.String() != want {
		t.Errorf("terminal got %q, want %q", term.String(), want)
	}
	var pipe strings.Builder
	if newProgress(&Env{Stderr: &pipe}) != nil {
		t.Error("a progress line on a writer that is not a terminal")
	}
	stop := newProgress(&Env{Stderr: &pipe}).while("checking") // nil: shows nothing
	stop()
	if pipe.Len() != 0 {
		t.Errorf("progress written to a pipe: %q", pipe.String())
	}
}

// TestDemoEndsWithWhatToTry: after the backfill, demo names three commands
// to run (with its --server) and the UI's address, and they work on the
// demo's data.
func TestDemoEndsWithWhatToTry(t *testing.T) {
	base, _ := startTestServer(t)
	// 1,000 spans of each corpus: fewer (30 each) hold no failing span at
	// some starting times, since a corpus's content follows its hour.
	out, stderr, err := runCLI(t, "demo", "--server", base, "--hours", "0.1", "--spans-per-hour", "10000")
	if err != nil {
		t.Fatalf("demo: %v: %s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 5 || lines[len(lines)-5] != "Try:" || lines[len(lines)-1] != "or open "+base+"/ in a browser." {
		t.Fatalf("demo's end:\n%s", out)
	}
	if stderr != "" {
		t.Errorf("demo wrote to a stderr that is not a terminal: %q", stderr)
	}
	for _, l := range lines[len(lines)-4 : len(lines)-1] {
		cmd := strings.Fields(strings.TrimSpace(l))
		// The command is the words before its description (a shell comment).
		words := strings.Fields(strings.SplitN(l, " # ", 2)[0])
		if cmd[0] != "rastro" || !strings.Contains(l, "--server "+base) {
			t.Fatalf("suggestion %q", l)
		}
		var o, e strings.Builder
		if code := Main(context.Background(), words[1:], &o, &e); code != 0 || strings.HasPrefix(o.String(), "no ") {
			t.Errorf("%s: exit %d, finds nothing on the demo data: %s %s", l, code, o.String(), e.String())
		}
	}
}
