package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/server"
)

// TestLoadProject: rastro load --project writes into that project, over
// HTTP and over gRPC, and --acked-file lists every acknowledged request.
func TestLoadProject(t *testing.T) {
	srv, _ := startEngineServer(t, server.Options{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	start := time.Now().Add(-time.Hour).Truncate(time.Minute)
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 3, Spans: 300, Start: start, Window: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	trace := spans[len(spans)/2].TraceID
	// spansIn counts the trace's spans stored in project ("" = the default).
	spansIn := func(project string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.HTTPAddr()+"/api/v1/traces/"+trace.String(), nil)
		if project != "" {
			req.Header.Set("X-Scope-OrgID", project)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return 0
		}
		var body struct {
			Spans []json.RawMessage `json:"spans"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
			t.Fatalf("GET trace in project %q: status %d", project, resp.StatusCode)
		}
		return len(body.Spans)
	}
	want := 0
	for _, s := range spans {
		if s.TraceID == trace {
			want++
		}
	}
	for _, c := range []struct{ protocol, endpoint, project string }{
		{"otlp-proto", "http://" + srv.HTTPAddr(), "team-http"},
		{"otlp-grpc", srv.GRPCAddr(), "team-grpc"},
	} {
		acked := filepath.Join(t.TempDir(), "acked")
		var out, errb bytes.Buffer
		code := Main(t.Context(), []string{"load", "--protocol", c.protocol, "--endpoint", c.endpoint, "--project", c.project,
			"--spans", "300", "--batch", "100", "--seed", "3", "--start", start.Format(time.RFC3339), "--window", "30m",
			"--timeout", "10s", "--acked-file", acked, "--progress", "0", "--json"}, &out, &errb)
		var res bench.LoadResult
		if code != 0 || json.Unmarshal(out.Bytes(), &res) != nil || res.AcceptedSpans != 300 {
			t.Fatalf("load %s --project %s: exit %d, %s %s", c.protocol, c.project, code, out.String(), errb.String())
		}
		if got := spansIn(c.project); got != want {
			t.Errorf("%s: project %s holds %d spans of trace %s, want %d", c.protocol, c.project, got, trace, want)
		}
		b, err := os.ReadFile(acked)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(b)); strings.Join(got, ",") != "0,1,2" {
			t.Errorf("%s: acknowledged requests %q, want the 3 batches 0,1,2", c.protocol, got)
		}
	}
	if n := spansIn(""); n != 0 {
		t.Errorf("the default project holds %d spans of the trace sent to other projects", n)
	}
	if n := spansIn("team-other"); n != 0 {
		t.Errorf("an unrelated project holds %d spans of the trace", n)
	}
}
