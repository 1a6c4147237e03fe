package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/server"
)

// BenchmarkExportCommand runs `rastro export` against a real server (the
// engine behind HTTP, in this process) holding 20,000 spans (10,000 LLM,
// 10,000 canonical), all in its write buffer: the server's span search
// pages, their JSON, and the Parquet file written to disk. It reports spans/s
// and the file's bytes per span.
func BenchmarkExportCommand(b *testing.B) {
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	srv.SetBackend(eng)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
	})
	base := "http://" + srv.HTTPAddr()
	sent := exportCorpusN(b, base, time.Now().Add(-3*time.Hour).Truncate(time.Second), 10_000, 10_000)
	path := filepath.Join(b.TempDir(), "spans.parquet")
	var out, errb lockedBuffer
	b.ReportAllocs()
	for b.Loop() {
		if c := Main(context.Background(), []string{"export", "--server", base, "--since", "4h", "--out", path, "--force"}, &out, &errb); c != 0 {
			b.Fatalf("exit %d: %s", c, errb.String())
		}
	}
	b.ReportMetric(float64(len(sent))*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
	if st, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(st.Size())/float64(len(sent)), "file-B/span")
	}
}
