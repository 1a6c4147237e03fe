package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// fsckStore makes a closed store with two segments.
func fsckStore(t *testing.T) (dir string, segs []string) {
	t.Helper()
	dir = t.TempDir()
	e, err := engine.Open(engine.Options{Dir: dir, BlockSpans: 8})
	if err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		spans := make([]model.Span, 20)
		for i := range spans {
			s := &spans[i]
			s.TraceID = model.TraceID{1, byte(b), byte(i / 4)}
			s.SpanID = model.SpanID{2, byte(b), byte(i)}
			s.Name, s.Service = "op", "svc"
			s.StartTimeUnixNano = 1_700_000_000_000_000_000 + uint64(i)
			s.EndTimeUnixNano = s.StartTimeUnixNano + 10
		}
		if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(spans), Spans: spans}); err != nil {
			t.Fatal(err)
		}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ = filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 2 {
		t.Fatalf("segments: %v", segs)
	}
	return dir, segs
}

func runFsckCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(t.Context(), append([]string{"fsck"}, args...), &out, &errb)
	return code, out.String() + errb.String()
}

func TestFsckExitCodes(t *testing.T) {
	dir, segs := fsckStore(t)
	if code, out := runFsckCLI(t, dir); code != 0 || !strings.Contains(out, "checked 2 segments") || !strings.Contains(out, "40 spans") {
		t.Fatalf("clean store: exit %d\n%s", code, out)
	}
	b, _ := os.ReadFile(segs[0])
	b[len(b)-20] ^= 1 // footer
	os.WriteFile(segs[0], b, 0o644)
	code, out := runFsckCLI(t, dir)
	if code != 1 || !strings.Contains(out, "PROBLEM "+segs[0]+" at offset "+strconv.Itoa(len(b)-40)) {
		t.Fatalf("damaged store: exit %d\n%s", code, out)
	}
	code, out = runFsckCLI(t, "--json", dir)
	var rep engine.FsckReport
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rep); code != 1 || err != nil || len(rep.Problems) != 1 || rep.Problems[0].File != segs[0] {
		t.Fatalf("json: exit %d, %v\n%s", code, err, out)
	}
	if code, out := runFsckCLI(t, dir, "--repair"); code != 0 || !strings.Contains(out, "quarantined") {
		t.Fatalf("repair: exit %d\n%s", code, out)
	}
	if code, out := runFsckCLI(t, dir); code != 0 {
		t.Fatalf("after repair: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", filepath.Base(segs[0]))); err != nil {
		t.Fatalf("quarantined file: %v", err)
	}
	if code, _ := runFsckCLI(t); code != 2 {
		t.Fatalf("no DATA_DIR: exit %d", code)
	}
}
