package bench

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

func TestParseProcStatus(t *testing.T) {
	const status = "Name:\trastro\nVmPeak:\t  900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n"
	m, err := parseProcStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 100<<20 || m.HWM != 200<<20 {
		t.Errorf("got RSS %d HWM %d, want %d and %d", m.RSS, m.HWM, 100<<20, 200<<20)
	}
	for name, bad := range map[string]string{
		"no VmRSS (kernel thread)": "Name:\tkthreadd\nVmHWM:\t1 kB\n",
		"no VmHWM":                 "VmRSS:\t1 kB\n",
		"empty":                    "",
		"unit":                     "VmRSS:\t1 MB\nVmHWM:\t1 kB\n",
		"number":                   "VmRSS:\tx kB\nVmHWM:\t1 kB\n",
		"negative":                 "VmRSS:\t-4 kB\nVmHWM:\t1 kB\n",
	} {
		if _, err := parseProcStatus(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted %q", name, bad)
		}
	}
}

// touch allocates n bytes and writes every page, so they are resident.
func touch(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// TestReadProcMemorySeesAllocationAndPeakReset reads this test process's
// own memory: a touched 64 MiB allocation shows in VmRSS, VmHWM is never
// below VmRSS, and a peak reset brings VmHWM back down once memory is freed.
func TestReadProcMemorySeesAllocationAndPeakReset(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := readProcMemory(os.Getpid()); err == nil {
			t.Fatal("readProcMemory claims to work without /proc")
		}
		return
	}
	pid := os.Getpid()
	// Return the heap's free pages first: earlier tests in this process
	// leave freed memory resident, which the allocation below would reuse
	// without raising RSS.
	runtime.GC()
	debug.FreeOSMemory()
	before, err := readProcMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 || before.HWM < before.RSS {
		t.Fatalf("implausible %+v", before)
	}
	b := touch(64 << 20)
	during, err := readProcMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if during.RSS-before.RSS < 48<<20 || during.HWM < during.RSS {
		t.Fatalf("after touching 64 MiB: before %+v, during %+v", before, during)
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
	debug.FreeOSMemory()
	if err := resetPeakRSS(pid); err != nil {
		t.Fatal(err)
	}
	after, err := readProcMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after.HWM > during.HWM-32<<20 {
		t.Errorf("peak not reset: VmHWM %d MiB after freeing and reset, %d MiB at the allocation", after.HWM>>20, during.HWM>>20)
	}
	if _, err := readProcMemory(1 << 30); err == nil {
		t.Error("reading a process that does not exist succeeded")
	}
}

func TestRSSSamplerSummarises(t *testing.T) {
	vals := []int64{30, 10, 50, 20, 40}
	i := 0
	read := func() (int64, error) {
		if i >= len(vals) {
			return 0, errors.New("process exited")
		}
		i++
		return vals[i-1], nil
	}
	// A period far longer than the test: only the start and stop samples.
	s := startRSSSampler(read, time.Hour)
	r := s.stop()
	if r.Samples != 2 || r.Peak != 30 || r.Min != 10 || r.Errors != 0 {
		t.Fatalf("two samples: %+v", r)
	}
	// Sampling until the reads fail: every value is seen, errors counted.
	i = 0
	s = startRSSSampler(read, time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		errs := s.errs
		s.mu.Unlock()
		if errs > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r = s.stop()
	if r.Samples != 5 || r.Peak != 50 || r.Min != 10 || r.P50 != 30 || r.P95 != 50 || r.Mean != 30 {
		t.Errorf("five samples: %+v", r)
	}
	if r.Errors == 0 || r.FirstErr == nil || !strings.Contains(r.FirstErr.Error(), "exited") {
		t.Errorf("read errors not reported: %+v", r)
	}
	if r.MaxGap <= 0 || r.Duration < r.MaxGap {
		t.Errorf("gap %v, duration %v", r.MaxGap, r.Duration)
	}
}

// TestProcessSamplerSeesGrowth samples this process while it grows: the
// stop sample must see what the start sample did not.
func TestProcessSamplerSeesGrowth(t *testing.T) {
	if runtime.GOOS != "linux" {
		return
	}
	s := startProcessSampler(os.Getpid(), memorySamplePeriod)
	b := touch(64 << 20)
	r := s.stop()
	runtime.KeepAlive(b)
	if r.Samples < 2 || r.Errors != 0 || r.Peak-r.Min < 48<<20 {
		t.Errorf("sampler missed a 64 MiB growth: %+v", r)
	}
}

func TestMemorySealBytes(t *testing.T) {
	if got := memorySealBytes(MemoryTargetSpans); got != 0 {
		t.Errorf("10M spans: seal bytes %d, want the server default (0)", got)
	}
	for _, n := range []int{20_000, 100_000, 1_000_000} {
		sb := memorySealBytes(n)
		if sb < 256<<10 || sb >= memoryDefaultSeal {
			t.Errorf("%d spans: seal bytes %d", n, sb)
		}
		if segs := int64(n) * memorySpanEstimate / sb; n >= 100_000 && segs < memoryMinSegments {
			t.Errorf("%d spans: about %d segments, want >= %d", n, segs, memoryMinSegments)
		}
	}
}

func TestCheckCompaction(t *testing.T) {
	ok := compactResult{Merges: 3, SegmentsBefore: 20, SegmentsAfter: 3, BytesWritten: 1 << 20}
	if err := checkCompaction(ok, 20, 3); err != nil {
		t.Errorf("a good answer refused: %v", err)
	}
	if err := checkCompaction(compactResult{SegmentsBefore: 1, SegmentsAfter: 1}, 1, 1); err != nil {
		t.Errorf("one segment, nothing to merge, refused: %v", err)
	}
	for name, tc := range map[string]struct {
		cr            compactResult
		before, after int64
	}{
		"before disagrees":  {ok, 21, 3},
		"after disagrees":   {ok, 20, 4},
		"nothing merged":    {compactResult{SegmentsBefore: 20, SegmentsAfter: 20}, 20, 20},
		"merges, no output": {compactResult{Merges: 2, SegmentsBefore: 20, SegmentsAfter: 5}, 20, 5},
	} {
		if err := checkCompaction(tc.cr, tc.before, tc.after); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckFilterAnswer(t *testing.T) {
	tid := model.TraceID{1}
	p := &memoryPlan{perTrace: map[model.TraceID]int{tid: 30}, userSpans: map[string]int{"u-001": 25, "u-002": 3}}
	type sp struct{ tr, id, user string }
	page := func(n int, user string) []sp {
		out := make([]sp, n)
		for i := range out {
			out[i] = sp{tid.String(), fmt.Sprintf("%016x", i+1), user}
		}
		return out
	}
	f := func(s sp) (string, string, any) { return s.tr, s.id, s.user }
	if err := checkFilterAnswer(p, "u-001", page(20, "u-001"), f); err != nil {
		t.Errorf("a full page refused: %v", err)
	}
	if err := checkFilterAnswer(p, "u-002", page(3, "u-002"), f); err != nil {
		t.Errorf("every match refused: %v", err)
	}
	dup := page(20, "u-001")
	dup[7] = dup[3]
	other := page(20, "u-001")
	other[0].tr = model.TraceID{2}.String()
	for name, tc := range map[string]struct {
		user string
		page []sp
	}{
		"short page":    {"u-001", page(19, "u-001")},
		"too many":      {"u-002", page(4, "u-002")},
		"wrong user":    {"u-001", page(20, "u-002")},
		"duplicate":     {"u-001", dup},
		"foreign trace": {"u-001", other},
	} {
		if err := checkFilterAnswer(p, tc.user, tc.page, f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPostCompact(t *testing.T) {
	var status int
	var body string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != memoryCompactPath {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	defer ts.Close()
	srv := &Server{HTTPAddr: strings.TrimPrefix(ts.URL, "http://")}
	status, body = 200, `{"merges":2,"segments_before":17,"segments_after":2,"bytes_written":12345,"took_ms":812.5}`
	cr, err := postCompact(t.Context(), srv)
	if err != nil || cr != (compactResult{Merges: 2, SegmentsBefore: 17, SegmentsAfter: 2, BytesWritten: 12345, TookMS: 812.5}) {
		t.Errorf("got %+v, %v", cr, err)
	}
	status, body = 404, "404 page not found"
	if _, err := postCompact(t.Context(), srv); err == nil || !strings.Contains(err.Error(), "no compaction endpoint") {
		t.Errorf("a 404 must say the endpoint is missing, got %v", err)
	}
	status, body = 500, `{"error":"merge: disk full"}`
	if _, err := postCompact(t.Context(), srv); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("a 500 must carry the server's error, got %v", err)
	}
	status, body = 200, `not json`
	if _, err := postCompact(t.Context(), srv); err == nil {
		t.Error("a bad JSON answer was accepted")
	}
}

func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	files := map[string]string{"MANIFEST": "m", "segments/000001.seg": "segment bytes", "wal/empty": ""}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != content {
			t.Errorf("%s: %q, %v", name, b, err)
		}
	}
	if err := copyTree(src, dst); err == nil {
		t.Error("copying over an existing copy succeeded: files would be mixed")
	}
}

func TestMemoryTargets(t *testing.T) {
	metrics := map[string]float64{
		"rss_open_mib": 90, "compact_peak_rss_mib": 180, "compact_hwm_mib": 310, "filter_after_p95_ms": 4,
		"trace_after_p95_ms": 2.5, "ingest_ratio": 0.8, "ingest_during_spans_per_s": 80, "ingest_without_spans_per_s": 100,
		"filter_before_p95_ms": 9, "trace_before_p95_ms": 3, "disk_bytes_per_span_before": 40, "disk_bytes_per_span_after": 33,
	}
	rec := &Record{Spans: 1_000_000, Machine: Machine{CPUs: 2}, Scenarios: []ScenarioRecord{{Name: memoryScenario, Status: "ok", Summary: map[string]Spread{}}}}
	for k, v := range metrics {
		rec.Scenarios[0].Summary[k] = Spread{Median: v, Min: v, Max: v, N: 1}
	}
	got := map[string]Target{}
	for _, tg := range memoryTargets(rec) {
		got[strings.Fields(tg.Name)[0]+" "+strings.Fields(tg.Name)[1]] = tg
	}
	want := map[string]string{"RSS on": "PASS", "Peak RSS": "FAIL", "Attribute filter": "PASS", "Trace by": "FAIL", "Ingest during": "PASS", "Uncompacted: filter": "REPORT", "Bytes on": "REPORT"}
	for k, status := range want {
		tg, ok := got[k]
		if !ok || tg.Status != status {
			t.Errorf("target %q: %+v, want %s", k, tg, status)
		}
		if ok && !strings.Contains(tg.Got, "at 1,000,000 spans (target set at 10,000,000)") {
			t.Errorf("target %q does not say it was taken at another size: %q", k, tg.Got)
		}
	}
	if tg := got["Peak RSS"]; !strings.Contains(tg.Got, "310.0") {
		t.Errorf("peak target must judge the larger of the samples and VmHWM: %q", tg.Got)
	}
	rec.Scenarios[0] = ScenarioRecord{Name: memoryScenario, Status: "refused"}
	for _, tg := range memoryTargets(rec) {
		if tg.Status != "FAIL" {
			t.Errorf("refused scenario: target %q is %s", tg.Name, tg.Status)
		}
	}
	rec.Scenarios = nil
	for _, tg := range memoryTargets(rec) {
		if tg.Status != "NOT RUN" {
			t.Errorf("absent scenario: target %q is %s", tg.Name, tg.Status)
		}
	}
}

// TestBenchMemoryEndToEnd runs `rastro bench memory` for real, small: the
// real server builds, reopens, compacts and reopens a store while the
// harness samples its memory. It asserts that every step produced a checked
// figure, never how fast or how small anything is.
func TestBenchMemoryEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "memory", "--runs", "1", "--spans", "20000", "--samples", "100", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench memory: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "memory")
	sc, ok := rec.Scenario(memoryScenario)
	if !ok || sc.Status != "ok" {
		t.Fatalf("%s not ok: %+v", memoryScenario, sc)
	}
	for _, m := range []string{"rss_open_mib", "hwm_open_mib", "compact_peak_rss_mib", "compact_hwm_mib", "rss_after_mib",
		"trace_before_p95_ms", "filter_before_p95_ms", "trace_after_p95_ms", "filter_after_p95_ms", "merges",
		"disk_bytes_per_span_before", "disk_bytes_per_span_after", "ingest_without_spans_per_s", "ingest_during_spans_per_s", "ingest_ratio"} {
		if !(sc.Summary[m].Median > 0) {
			t.Errorf("metric %s missing or zero: %+v", m, sc.Summary[m])
		}
	}
	if b, a := sc.Summary["segments_before"].Median, sc.Summary["segments_after"].Median; !(b >= 2) || !(a < b) {
		t.Errorf("segments before %v, after %v: the store was not uncompacted, or compaction left as many", b, a)
	}
	if s := sc.Summary["compact_rss_samples"].Median; s < 2 {
		t.Errorf("%v RSS samples during compaction", s)
	}
	if len(rec.Targets) != 7 {
		t.Fatalf("targets = %+v", rec.Targets)
	}
	for _, tg := range rec.Targets {
		if tg.Status == "NOT RUN" || strings.Contains(tg.Got, "n/a") || strings.Contains(tg.Got, "not measured") {
			t.Errorf("target %q: %s %q", tg.Name, tg.Status, tg.Got)
		}
	}
	doc, err := os.ReadFile(filepath.Join(out, "memory.md"))
	if err != nil || !strings.Contains(string(doc), "| "+memoryScenario+" |") || !strings.Contains(string(doc), "Compaction VmRSS samples") {
		t.Errorf("memory.md lacks the scenario row or the detail table (%v):\n%s", err, doc)
	}
}

func TestPrepareChunkedMatchesPrepare(t *testing.T) {
	spans, err := Generate(CorpusCanonical, CorpusOptions{Seed: 5, Spans: 3*256*7 + 5, Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Prepare(Batches(spans, 7), ProtoOTLPProto, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := prepareChunked(spans, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d payloads, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i].Body) != string(want[i].Body) || got[i].Spans != want[i].Spans {
			t.Fatalf("payload %d differs", i)
		}
	}
}
