package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeLoad writes an executable script standing in for `rastro load`.
func fakeLoad(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rastro")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeLoadProcess(bin string) LoadProcess {
	return LoadProcess{Binary: bin, Corpus: CorpusCanonical, Batch: 10,
		Options: CorpusOptions{Seed: 1, Spans: 10, Start: time.Now(), Window: time.Minute},
		Load:    LoadOptions{Endpoint: "http://127.0.0.1:1", Protocol: ProtoOTLPProto}}
}

// TestLoadProcessThatEndsQuickly: a load that starts sending and ends at
// once is a load that ran (its result is read), not one that "ended before
// sending"; one that ends without the start line is reported with its
// stderr.
func TestLoadProcessThatEndsQuickly(t *testing.T) {
	ok := fakeLoad(t, `echo "`+LoadStartLine+` 10 spans in 1 requests" >&2; echo '{"accepted_spans": 10, "requests": 1}'`)
	r, err := StartLoadProcess(t.Context(), fakeLoadProcess(ok))
	if err != nil {
		t.Fatalf("a load that sent and ended: %v", err)
	}
	res, err := r.Wait()
	if err != nil || res.AcceptedSpans != 10 {
		t.Fatalf("result %+v, %v; want 10 accepted spans", res, err)
	}
	bad := fakeLoad(t, `echo "usage: no such flag" >&2; exit 2`)
	if _, err := StartLoadProcess(t.Context(), fakeLoadProcess(bad)); err == nil || !strings.Contains(err.Error(), "ended before sending") || !strings.Contains(err.Error(), "no such flag") {
		t.Fatalf("a load that failed at once: %v, want an error naming it and its stderr", err)
	}
}

// TestLoadProcessHeld: a held load reports its batches when ready, sends
// nothing until released (its standard input closed), and passes the
// project, timeout and acknowledgement file to rastro load.
func TestLoadProcessHeld(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "released")
	bin := fakeLoad(t, `echo "$@" > "`+marker+`.args"
echo "`+LoadReadyLine+` 10 spans in 3 requests; sending when standard input closes" >&2
cat >/dev/null
touch "`+marker+`"
echo "`+LoadStartLine+` 10 spans in 3 requests" >&2
echo '{"accepted_spans": 10, "acked_requests": 3}'`)
	p := fakeLoadProcess(bin)
	p.Hold, p.AckedFile = true, "/tmp/x.acked"
	p.Load.Project, p.Load.Timeout = "quiet", 7*time.Second
	r, err := StartLoadProcess(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Batches != 3 {
		t.Errorf("batches %d, want 3 from the ready line", r.Batches)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the held process went on before it was released")
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("released, but the process did not go on: %v", err)
	}
	res, err := r.Wait()
	if err != nil || res.AcceptedSpans != 10 {
		t.Fatalf("result %+v, %v", res, err)
	}
	args, _ := os.ReadFile(marker + ".args")
	for _, w := range []string{"--hold", "--project quiet", "--timeout 7s", "--acked-file /tmp/x.acked"} {
		if !strings.Contains(string(args), w) {
			t.Errorf("rastro load args %q lack %q", args, w)
		}
	}
	if _, err := StartLoadProcess(t.Context(), LoadProcess{Load: LoadOptions{OnAck: func(int) {}}}); err == nil {
		t.Error("a callback was accepted for a process it cannot reach")
	}
}

func TestAckedFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acked")
	if err := WriteAckedFile(path, []int{12, 0, 7}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAckedFile(path)
	if err != nil || len(got) != 3 || got[0] != 0 || got[1] != 7 || got[2] != 12 {
		t.Fatalf("read back %v, %v; want [0 7 12]", got, err)
	}
	if err := os.WriteFile(path, []byte("3\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAckedFile(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line: %v, want an error naming line 2", err)
	}
	if err := WriteAckedFile(path, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadAckedFile(path); err != nil || len(got) != 0 {
		t.Errorf("empty file: %v, %v", got, err)
	}
}
