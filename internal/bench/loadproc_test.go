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
