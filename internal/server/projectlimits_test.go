package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/vfs"
)

func TestProjectRatesBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newProjectRates(1000, 2000, func() time.Time { return now })
	// A full bucket lets a large batch in; the debt then holds the project
	// back for as long as the rate needs to pay it, and no longer.
	if ok, _ := p.allow("a"); !ok {
		t.Fatal("a new project is refused")
	}
	p.take("a", 5000) // 2000 - 5000 = -3000
	ok, wait := p.allow("a")
	if ok || wait != 3001*time.Millisecond {
		t.Fatalf("in debt: allow = %v, wait %v; want refused for 3.001 s", ok, wait)
	}
	if ok, _ := p.allow("b"); !ok {
		t.Fatal("another project is held back by a's debt")
	}
	now = now.Add(3 * time.Second)
	if ok, _ := p.allow("a"); ok {
		t.Fatal("let in before the debt is paid")
	}
	now = now.Add(2 * time.Millisecond)
	if ok, _ := p.allow("a"); !ok {
		t.Fatal("refused once the debt is paid")
	}
	// The bucket holds at most the burst.
	now = now.Add(time.Hour)
	p.take("a", 2000)
	if ok, _ := p.allow("a"); ok {
		t.Fatal("an idle hour filled the bucket beyond its burst")
	}
	// Idle full buckets are forgotten; a forgotten project starts full.
	now = now.Add(2 * time.Minute)
	p.allow("c")
	if _, kept := p.buckets["b"]; kept {
		t.Fatal("an idle, full bucket was kept")
	}
	// Rate 0 is no limit.
	var off *projectRates
	if ok, _ := off.allow("a"); !ok {
		t.Fatal("a nil limiter refused")
	}
	if ok, _ := newProjectRates(0, 0, nil).allow("a"); !ok {
		t.Fatal("rate 0 refused")
	}
}

// startLimited is startServer with the engine's options too.
func startLimited(t *testing.T, opts Options, eo engine.Options) *testServer {
	t.Helper()
	opts.HTTPAddr, opts.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if eo.Dir == "" {
		eo.Dir = t.TempDir()
	}
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(eng)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		eng.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return &testServer{t: t, srv: srv, eng: eng, base: "http://" + srv.HTTPAddr()}
}

// postAs posts spans as OTLP protobuf for project and returns the status,
// Retry-After and body.
func (ts *testServer) postAs(project string, spans []model.Span) (int, string, string) {
	ts.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.base+"/v1/traces", bytes.NewReader(otlp.EncodeProto(spans)))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", project)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

func (ts *testServer) metric(name string) string {
	ts.t.Helper()
	resp, err := http.Get(ts.base + "/metrics")
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestProjectRateLimit: a project over its rate gets 429 with a Retry-After
// that says when its bucket refills, before its body is read; other
// projects are not held back; the refusals are counted by project, and
// are not taken for the server's want of capacity (IngestRefused).
func TestProjectRateLimit(t *testing.T) {
	var refused atomic.Int32
	ts := startLimited(t, Options{ProjectRate: 100, ProjectBurst: 100, IngestRefused: func() { refused.Add(1) }}, engine.Options{})
	if code, _, body := ts.postAs("a", spansFor(150, 1)); code != 200 {
		t.Fatalf("first batch: %d %s", code, body)
	}
	code, retry, body := ts.postAs("a", spansFor(10, 2))
	if code != http.StatusTooManyRequests || retry != "1" || !strings.Contains(body, `project \"a\" is over its ingest rate of 100 spans/s`) {
		t.Fatalf("over the rate: %d, Retry-After %q, %s", code, retry, body)
	}
	if code, _, body := ts.postAs("b", spansFor(50, 3)); code != 200 {
		t.Fatalf("another project: %d %s", code, body)
	}
	if m := ts.metric("rastro_ingest_limited_total"); !strings.Contains(m, `rastro_ingest_limited_total{limit="rate",project="a"} 1`) {
		t.Fatalf("metric: %q", m)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("a project over its own rate told the process's policy of %d refusals for want of capacity; want none", n)
	}
	if _, err := New(Options{HTTPAddr: "127.0.0.1:0", ProjectBurst: 10}); err == nil || !strings.Contains(err.Error(), "--project-rate") {
		t.Fatalf("a burst without a rate: %v", err)
	}
}

// TestProjectBufferShare: while seals are behind, a project holding more
// than its share of the write buffer is refused (HTTP 429, gRPC
// RESOURCE_EXHAUSTED) and another project's requests still go in; a project
// alone in the buffer is refused only when it is full.
func TestProjectBufferShare(t *testing.T) {
	const limit = 4 << 20
	alone := startLimited(t, Options{ProjectBufferShare: 0.5}, engine.Options{SealBytes: limit, MaxBufferBytes: limit})
	pastHalf := false // accepted with more than half the buffer its own
	for i := 0; ; i++ {
		mine, _, _ := alone.eng.BufferUsage("only")
		code, _, body := alone.postAs("only", spansFor(200, byte(i)))
		if code == 200 {
			pastHalf = pastHalf || mine*2 > limit
			continue
		}
		if code != http.StatusTooManyRequests || !strings.Contains(body, "write buffer is full") || !pastHalf {
			t.Fatalf("a project alone, batch %d: %d %s (accepted past half the buffer: %v); want 429 only once the buffer is full", i, code, body, pastHalf)
		}
		break
	}

	ts := startLimited(t, Options{ProjectBufferShare: 0.5}, engine.Options{SealBytes: limit, MaxBufferBytes: limit})
	if code, _, body := ts.postAs("quiet", spansFor(20, 254)); code != 200 {
		t.Fatalf("quiet: %d %s", code, body)
	}
	var refused string
	for i := 0; i < 200 && refused == ""; i++ {
		switch code, _, body := ts.postAs("noisy", spansFor(200, byte(i))); code {
		case 200:
		case http.StatusTooManyRequests:
			refused = body
		default:
			t.Fatalf("noisy batch %d: %d %s", i, code, body)
		}
	}
	if !strings.Contains(refused, `project \"noisy\" holds`) || !strings.Contains(refused, "more than its share of 50%") {
		t.Fatalf("noisy was never refused for its share: %q", refused)
	}
	mine, total, _ := ts.eng.BufferUsage("noisy")
	if mine*2 <= limit || total >= limit {
		t.Fatalf("test premise: noisy holds %d of %d (limit %d)", mine, total, limit)
	}
	if code, _, body := ts.postAs("quiet", spansFor(100, 250)); code != 200 {
		t.Fatalf("the quiet project while noisy is held back: %d %s", code, body)
	}
	// gRPC refuses the noisy project the same way.
	cc, err := grpc.NewClient("passthrough:///"+ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "noisy")
	err = exportSpans(ctx, coltracepb.NewTraceServiceClient(cc), spansFor(10, 251))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "share") {
		t.Fatalf("noisy over gRPC: %v", err)
	}
	if m := ts.metric("rastro_ingest_limited_total"); !strings.Contains(m, `limit="buffer_share",project="noisy"`) {
		t.Fatalf("metric: %q", m)
	}
}

// TestDiskFullAnswers503: on a full disk ingest answers 503 with a
// Retry-After and a message naming the full disk, queries keep answering,
// and ingest resumes when space returns.
func TestDiskFullAnswers503(t *testing.T) {
	disk := vfs.NewDisk(1 << 30)
	ts := startLimited(t, Options{}, engine.Options{Dir: "/data", FS: &vfs.Faulty{FS: vfs.NewMemFS(), Inject: disk.Inject}})
	if code, _, body := ts.postAs("p", spansFor(5, 1)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	disk.SetFree(0)
	code, retry, body := ts.postAs("p", spansFor(5, 2))
	if code != http.StatusServiceUnavailable || retry != "5" || !strings.Contains(body, "the disk is full") {
		t.Fatalf("on a full disk: %d, Retry-After %q, %s", code, retry, body)
	}
	var got spansResp
	if c := ts.get("/api/v1/spans?since=all", &got, "X-Scope-OrgID", "p"); c != 200 || len(got.Spans) != 5 {
		t.Fatalf("query on a full disk: %d, %d spans", c, len(got.Spans))
	}
	disk.SetFree(1 << 30)
	if code, _, body := ts.postAs("p", spansFor(5, 2)); code != 200 {
		t.Fatalf("once space is back: %d %s", code, body)
	}
}

// TestFsyncFailureStopsWrites: after an fsync error the store acknowledges
// nothing more (fail-stop): every later request gets 503 with a message
// that says to check the disk and restart, and queries keep answering.
func TestFsyncFailureStopsWrites(t *testing.T) {
	var broken atomic.Bool
	fs := &vfs.Faulty{FS: vfs.NewMemFS(), Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if op == vfs.OpSync && broken.Load() && strings.HasSuffix(name, ".wal") {
			return vfs.Fault{Err: vfs.Errno(op, name, syscall.EIO)}
		}
		return vfs.Fault{}
	}}
	ts := startLimited(t, Options{}, engine.Options{Dir: "/data", FS: fs})
	if code, _, body := ts.postAs("p", spansFor(5, 1)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	broken.Store(true)
	for i := range 2 {
		code, _, body := ts.postAs("p", spansFor(5, byte(2+i)))
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "check the disk") || !strings.Contains(body, "restart") {
			t.Fatalf("request %d after the fsync error: %d %s", i, code, body)
		}
	}
	broken.Store(false) // the disk is fine again; the store still refuses until restarted
	if code, _, _ := ts.postAs("p", spansFor(5, 9)); code != http.StatusServiceUnavailable {
		t.Fatalf("a write was acknowledged after the fsync error: %d", code)
	}
	var got spansResp
	if c := ts.get("/api/v1/spans?since=all", &got, "X-Scope-OrgID", "p"); c != 200 || len(got.Spans) != 5 {
		t.Fatalf("queries after the fsync error: %d, %d spans", c, len(got.Spans))
	}
}

// TestIngestCapRefusesAtOnce: beyond --max-concurrent-ingest a request is
// refused with 429 at once (HTTP and gRPC) instead of waiting behind the
// ones being stored, which are acknowledged as usual; each refusal tells
// the process's policy that ingest is short of capacity (IngestRefused).
func TestIngestCapRefusesAtOnce(t *testing.T) {
	fs, hold, held, release := holdWALSync() // the WAL's commit waits: every request in it holds its slot
	var refused atomic.Int32
	ts := startLimited(t, Options{MaxConcurrentIngest: 1, IngestRefused: func() { refused.Add(1) }}, engine.Options{Dir: "/data", FS: fs})
	unhold := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unhold) // a failure must not leave the server's shutdown waiting on the held fsync
	hold.Store(true)
	first := make(chan int, 1)
	go func() { code, _, _ := ts.postAs("p", spansFor(5, 1)); first <- code }()
	<-held
	code, retry, body := ts.postAs("p", spansFor(5, 2))
	if code != http.StatusTooManyRequests || retry != "1" || !strings.Contains(body, "--max-concurrent-ingest") {
		t.Fatalf("beyond the cap: %d, Retry-After %q, %s", code, retry, body)
	}
	cc, err := grpc.NewClient("passthrough:///"+ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	err = exportSpans(context.Background(), coltracepb.NewTraceServiceClient(cc), spansFor(5, 3))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-concurrent-ingest") {
		t.Fatalf("beyond the cap over gRPC: %v", err)
	}
	if n := refused.Load(); n != 2 {
		t.Errorf("%d refusals told to the process's policy after one over HTTP and one over gRPC; want 2", n)
	}
	unhold()
	if code := <-first; code != 200 {
		t.Fatalf("the request holding the slot: %d", code)
	}
	if code, _, body := ts.postAs("p", spansFor(5, 4)); code != 200 {
		t.Fatalf("once the slot is free: %d %s", code, body)
	}
}

// TestIngestCapKeepsSlotsForOtherProjects: one project may hold at most
// three quarters of the --max-concurrent-ingest slots; beyond that its
// requests get 429 (HTTP and gRPC, counted by project) while another
// project's request still takes a slot and is stored.
func TestIngestCapKeepsSlotsForOtherProjects(t *testing.T) {
	fs, hold, held, release := holdWALSync() // the WAL's commit waits: every request in it holds its slot
	// The in-flight budget is one body: a refused request must not have
	// read its body into it (below).
	ts := startLimited(t, Options{MaxConcurrentIngest: 4, MaxBodyBytes: 1 << 20, MaxInflightBytes: 1 << 20}, engine.Options{Dir: "/data", FS: fs})
	unhold := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unhold) // a failure must not leave the server's shutdown waiting on the held fsync
	slots := func() (total, noisy int) {
		sl := ts.srv.ingestSlots
		sl.mu.Lock()
		defer sl.mu.Unlock()
		return sl.total, sl.held["noisy"]
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	hold.Store(true)
	codes3 := make(chan int, 3)
	go func() { code, _, _ := ts.postAs("noisy", spansFor(5, 1)); codes3 <- code }()
	<-held
	for i := range 2 {
		go func() { code, _, _ := ts.postAs("noisy", spansFor(5, byte(2+i))); codes3 <- code }()
	}
	waitFor("the noisy project to hold 3 slots", func() bool { _, n := slots(); return n == 3 })

	code, retry, body := ts.postAs("noisy", spansFor(5, 5))
	if code != http.StatusTooManyRequests || retry == "" || !strings.Contains(body, `project \"noisy\"`) || !strings.Contains(body, "--max-concurrent-ingest") {
		t.Fatalf("the noisy project's 4th request: %d, Retry-After %q, %s", code, retry, body)
	}
	// A request refused for want of a slot is refused before its body is
	// read: a body that, read, would not fit beside the three held ones in
	// the in-flight budget is refused for the slot, not for the budget, and
	// the connection stays usable.
	big, _ := http.NewRequest(http.MethodPost, ts.base+"/v1/traces", bytes.NewReader(make([]byte, 1<<20-100)))
	big.Header.Set("Content-Type", "application/x-protobuf")
	big.Header.Set("X-Scope-OrgID", "noisy")
	resp, err := http.DefaultClient.Do(big)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `project \"noisy\"`) || resp.Close {
		t.Fatalf("a large request of the noisy project with its slots taken: %d, connection closed %v, %s", resp.StatusCode, resp.Close, b)
	}
	// A client that waits for 100 Continue is refused without being asked
	// for its body.
	var sent atomic.Int64
	ask, _ := http.NewRequest(http.MethodPost, ts.base+"/v1/traces", &countingReader{r: bytes.NewReader(make([]byte, 1<<20-100)), n: &sent})
	ask.ContentLength = 1<<20 - 100
	ask.Header.Set("Content-Type", "application/x-protobuf")
	ask.Header.Set("X-Scope-OrgID", "noisy")
	ask.Header.Set("Expect", "100-continue")
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr}).Do(ask)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || sent.Load() != 0 {
		t.Fatalf("a noisy request waiting for 100 Continue with the slots taken: %d, %d body bytes sent", resp.StatusCode, sent.Load())
	}
	cc, err := grpc.NewClient("passthrough:///"+ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "noisy")
	if err := exportSpans(ctx, coltracepb.NewTraceServiceClient(cc), spansFor(5, 6)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), `project "noisy"`) {
		t.Fatalf("the noisy project's 4th request over gRPC: %v", err)
	}

	quiet := make(chan int, 1)
	go func() { code, _, _ := ts.postAs("quiet", spansFor(5, 7)); quiet <- code }()
	waitFor("the quiet project to take the 4th slot", func() bool { n, _ := slots(); return n == 4 })
	if code, _, body := ts.postAs("other", spansFor(5, 8)); code != http.StatusTooManyRequests || !strings.Contains(body, "this server is storing 4 requests at once") {
		t.Fatalf("a request with every slot taken: %d %s", code, body)
	}
	unhold()
	if code := <-quiet; code != 200 {
		t.Fatalf("the quiet project's request: %d", code)
	}
	for range 3 {
		if code := <-codes3; code != 200 {
			t.Fatalf("a noisy request holding a slot: %d", code)
		}
	}
	if n, _ := slots(); n != 0 {
		t.Fatalf("%d slots still held after every request was answered", n)
	}
	var got struct{ Spans []json.RawMessage }
	if c := ts.get("/api/v1/spans?since=all&limit=100", &got, "X-Scope-OrgID", "quiet"); c != 200 || len(got.Spans) != 5 {
		t.Fatalf("the quiet project's spans: %d, %d spans", c, len(got.Spans))
	}
	limited, rejected := ts.metric("rastro_ingest_limited_total"), ts.metric("rastro_ingest_rejected_total")
	if !strings.Contains(limited, `rastro_ingest_limited_total{limit="concurrency",project="noisy"} 4`) ||
		!strings.Contains(rejected, `rastro_ingest_rejected_total{reason="project_ingest_busy"} 4`) {
		t.Fatalf("the refusals are not counted by project:\n%s\n%s", limited, rejected)
	}
}

// holdWALSync returns a filesystem whose next WAL fsync after hold is set
// signals held and waits until release is closed.
func holdWALSync() (fs *vfs.Faulty, hold *atomic.Bool, held chan struct{}, release chan struct{}) {
	hold = new(atomic.Bool)
	held, release = make(chan struct{}, 1), make(chan struct{})
	fs = &vfs.Faulty{FS: vfs.NewMemFS(), Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if op == vfs.OpSync && strings.HasSuffix(name, ".wal") && hold.CompareAndSwap(true, false) {
			held <- struct{}{}
			<-release
		}
		return vfs.Fault{}
	}}
	return fs, hold, held, release
}

// countingReader counts the bytes read from r into n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestFloodingProjectIsRefusedNotHeld: a project refused for its part of
// the ingest slots counts as flooding; it then holds at most a quarter of
// them, and while the write buffer is deep enough that the engine would
// hold requests back (two seals' worth, the seal stuck here), its requests
// are refused at once with 429 (HTTP and gRPC, counted by project) instead
// of held, while another project's request is stored at once.
func TestFloodingProjectIsRefusedNotHeld(t *testing.T) {
	var holdWAL, holdSeal atomic.Bool
	var walGate atomic.Pointer[chan struct{}]
	walHeld, sealHeld := make(chan struct{}, 1), make(chan struct{}, 1)
	releaseSeal := make(chan struct{})
	fs := &vfs.Faulty{FS: vfs.NewMemFS(), Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if op != vfs.OpSync {
			return vfs.Fault{}
		}
		if strings.HasSuffix(name, ".wal") && holdWAL.CompareAndSwap(true, false) {
			walHeld <- struct{}{}
			<-*walGate.Load()
		} else if !strings.HasSuffix(name, ".wal") && holdSeal.CompareAndSwap(true, false) {
			sealHeld <- struct{}{}
			<-releaseSeal
		}
		return vfs.Fault{}
	}}
	// stallWAL makes the next WAL fsync wait until the returned release:
	// every request in that group commit, and those behind it, hold their
	// ingest slots meanwhile.
	stallWAL := func() (release func()) {
		gate := make(chan struct{})
		walGate.Store(&gate)
		holdWAL.Store(true)
		release = sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release) // a failure must not leave the shutdown waiting on a held fsync
		return release
	}
	// Seals large enough that the buffer's first chunk (its estimate's
	// fixed cost) stays well below two seals: the buffer is deep only once
	// the test fills it.
	const sealBytes = 2 << 20
	ts := startLimited(t, Options{MaxConcurrentIngest: 8}, engine.Options{Dir: "/data", FS: fs, SealBytes: sealBytes, MaxBufferBytes: 16 * sealBytes, SealAge: time.Hour})
	unholdSeal := sync.OnceFunc(func() { close(releaseSeal) })
	t.Cleanup(unholdSeal)
	sl := ts.srv.ingestSlots
	sl.mu.Lock()
	sl.floodFor = time.Hour // the test, not the clock, decides when the flood ends
	sl.mu.Unlock()
	answers := make(chan int, 6)
	waitHeld := func() {
		t.Helper()
		select {
		case <-walHeld:
		case code := <-answers:
			t.Fatalf("the request meant to hold the WAL's fsync was answered %d without reaching it", code)
		case <-time.After(10 * time.Second):
			t.Fatal("no request reached the WAL's fsync")
		}
	}
	holding := func(project string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			sl.mu.Lock()
			n := sl.held[project]
			sl.mu.Unlock()
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("project %s holds %d slots, want %d", project, n, want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// The noisy project takes its 6 slots (3/4 of 8), the WAL's commit
	// holding them; its 7th request is refused and marks it flooding.
	unholdWAL := stallWAL()
	go func() { code, _, _ := ts.postAs("noisy", spansFor(5, 1)); answers <- code }()
	waitHeld()
	for i := range 5 {
		go func() { code, _, _ := ts.postAs("noisy", spansFor(5, byte(2+i))); answers <- code }()
	}
	holding("noisy", 6)
	if code, _, body := ts.postAs("noisy", spansFor(5, 9)); code != http.StatusTooManyRequests || !strings.Contains(body, "the most one project may have") {
		t.Fatalf("the noisy project's 7th request: %d %s", code, body)
	}
	unholdWAL()
	for range 6 {
		if code := <-answers; code != 200 {
			t.Fatalf("a noisy request holding a slot: %d", code)
		}
	}
	if !sl.flooding("noisy") || sl.flooding("quiet") {
		t.Fatalf("flooding: noisy %v, quiet %v; want only noisy", sl.flooding("noisy"), sl.flooding("quiet"))
	}
	// Flooding, it may hold a quarter of the slots: 2 of 8. (A slot is
	// given back just after the answer is written: wait for all six.)
	holding("noisy", 0)
	unholdWAL = stallWAL()
	go func() { code, _, _ := ts.postAs("noisy", spansFor(5, 13)); answers <- code }()
	waitHeld()
	go func() { code, _, _ := ts.postAs("noisy", spansFor(5, 14)); answers <- code }()
	holding("noisy", 2)
	if code, _, body := ts.postAs("noisy", spansFor(5, 15)); code != http.StatusTooManyRequests || !strings.Contains(body, "a quarter of --max-concurrent-ingest 8") {
		t.Fatalf("the flooding project's 3rd request at once: %d %s", code, body)
	}
	// The quiet project takes a slot beside it (and waits for the WAL).
	go func() { code, _, _ := ts.postAs("quiet", spansFor(5, 16)); answers <- code }()
	holding("quiet", 1)
	unholdWAL()
	for range 3 {
		if code := <-answers; code != 200 {
			t.Fatalf("a request holding a slot: %d", code)
		}
	}

	// The seal's segment sync is held; the noisy project's requests fill
	// the buffer until it is two seals deep, one at a time.
	holdSeal.Store(true)
	pace := ts.eng.PaceBytes()
	if pace != 2*sealBytes {
		t.Fatalf("PaceBytes %d, want two seals (%d)", pace, 2*sealBytes)
	}
	for i := 0; ; i++ {
		_, total, _ := ts.eng.BufferUsage("noisy")
		if total >= pace {
			break
		}
		if i == 1000 {
			t.Fatalf("the buffer holds %d bytes after 1000 requests, want %d", total, pace)
		}
		if code, _, body := ts.postAs("noisy", spansFor(200, byte(i))); code != 200 {
			t.Fatalf("noisy request %d with the buffer at %d of %d bytes: %d %s", i, total, pace, code, body)
		}
	}
	select {
	case <-sealHeld:
	case <-time.After(10 * time.Second):
		t.Fatal("no seal reached its sync with the buffer two seals deep")
	}
	code, retry, body := ts.postAs("noisy", spansFor(5, 10))
	if code != http.StatusTooManyRequests || retry == "" || !strings.Contains(body, `project \"noisy\" sends more requests at once`) {
		t.Fatalf("the flooding project with the buffer two seals deep: %d, Retry-After %q, %s", code, retry, body)
	}
	cc, err := grpc.NewClient("passthrough:///"+ts.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "noisy")
	if err := exportSpans(ctx, coltracepb.NewTraceServiceClient(cc), spansFor(5, 11)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "sends more requests at once") {
		t.Fatalf("the flooding project over gRPC: %v", err)
	}
	// The quiet project is stored with the seal still stuck: not refused,
	// and not held either (the engine would hold it up to a second).
	start := time.Now()
	if code, _, body := ts.postAs("quiet", spansFor(5, 12)); code != 200 {
		t.Fatalf("the quiet project while the noisy one floods: %d %s", code, body)
	}
	if c := ts.eng.Counters(); c.Paced != 0 {
		t.Fatalf("%d requests held (after %v); the quiet one should not be", c.Paced, time.Since(start))
	}
	unholdSeal()
	limited, rejected := ts.metric("rastro_ingest_limited_total"), ts.metric("rastro_ingest_rejected_total")
	if !strings.Contains(limited, `rastro_ingest_limited_total{limit="flood",project="noisy"} 2`) ||
		!strings.Contains(limited, `rastro_ingest_limited_total{limit="concurrency",project="noisy"} 2`) ||
		!strings.Contains(rejected, `rastro_ingest_rejected_total{reason="project_flood"} 2`) {
		t.Fatalf("the flood refusals are not counted by project:\n%s\n%s", limited, rejected)
	}
}
