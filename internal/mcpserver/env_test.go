package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/ui"
)

// rastroEnv is a real rastro server (engine, HTTP API, web UI, /mcp) on a
// loopback port, seeded with api and llm spans over the last six hours and
// one 5,000-span trace, plus a built rastro binary for `rastro mcp`.
type rastroEnv struct {
	Base     string // http://127.0.0.1:port
	Bin      string // the rastro binary
	Since    string // RFC 3339 window holding every seeded span
	Until    string
	BigTrace string   // the 5,000-span trace
	BigErrs  []string // its error span ids
}

func startRastro(t *testing.T) *rastroEnv {
	t.Helper()
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0", UI: ui.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(eng)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
	})
	env := &rastroEnv{Base: "http://" + srv.HTTPAddr(), Bin: rastroBinary(t)}
	start := time.Now().Add(-6 * time.Hour).Truncate(time.Minute)
	env.Since, env.Until = start.Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	api, err := bench.Generate(bench.CorpusAPI, bench.CorpusOptions{Seed: 5, Spans: 6000, Start: start, Window: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	llm, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 5, Spans: 3000, Start: start, Window: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	big := bigTrace(time.Now().Add(-30 * time.Minute))
	env.BigTrace = big[0].TraceID.String()
	for i := range big {
		if big[i].StatusCode == model.StatusError {
			env.BigErrs = append(env.BigErrs, big[i].SpanID.String())
		}
	}
	for _, spans := range [][]model.Span{api, llm, big} {
		for _, b := range bench.Batches(spans, 1000) {
			resp, err := http.Post(env.Base+"/v1/traces", "application/x-protobuf", strings.NewReader(string(otlp.EncodeProto(b))))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("ingest: %s", resp.Status)
			}
		}
	}
	return env
}

// bigTrace is one trace of 5,000 spans: a root, 50 handlers with 99
// children each (the last 98), a few of which fail.
func bigTrace(start time.Time) []model.Span {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("batch")}}}
	tid := model.TraceID{0xb1, 0x9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	t0 := uint64(start.UnixNano())
	sid := func(i int) model.SpanID { return model.SpanID{0xaa, byte(i >> 16), byte(i >> 8), byte(i), 1, 2, 3, 4} }
	spans := []model.Span{{TraceID: tid, SpanID: sid(0), Name: "run batch", Kind: model.KindServer, Resource: res, Service: "batch",
		StartTimeUnixNano: t0, EndTimeUnixNano: t0 + 60e9}}
	n := 1
	for h := range 50 {
		hs := t0 + uint64(h)*1e9
		hid := sid(n)
		spans = append(spans, model.Span{TraceID: tid, SpanID: hid, ParentSpanID: sid(0), Name: "handle item", Resource: res, Service: "batch",
			StartTimeUnixNano: hs, EndTimeUnixNano: hs + 1e9 + uint64(h)*1e6})
		n++
		for c := range 99 {
			if h == 49 && c == 98 {
				break // 5,000 spans in all
			}
			s := model.Span{TraceID: tid, SpanID: sid(n), ParentSpanID: hid, Name: fmt.Sprintf("SELECT item_%d", c%7), Kind: model.KindClient,
				Resource: res, Service: "batch", StartTimeUnixNano: hs + uint64(c)*1e7, EndTimeUnixNano: hs + uint64(c)*1e7 + 5e6,
				Attributes: []model.KeyValue{{Key: "db.statement", Value: model.StringValue(strings.Repeat("select * from items where id = ? ", 8))}}}
			if (h*99+c)%997 == 0 {
				s.StatusCode, s.StatusMessage = model.StatusError, fmt.Sprintf("deadlock detected on row %d", c)
			}
			spans = append(spans, s)
			n++
		}
	}
	return spans
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// rastroBinary builds cmd/rastro once per test binary.
func rastroBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rastro-mcp-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rastro")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/rastro").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
