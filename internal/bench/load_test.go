package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// fakeIngest is an httptest OTLP endpoint that decodes what it is sent and
// answers per a policy, so the load generator's counting can be checked.
type fakeIngest struct {
	mu       sync.Mutex
	spans    int
	requests int
	gzipped  int
	policy   func(n int) (status int, rejected int64) // n = request number from 1
	seen     atomic.Int64
	ids      map[string]int // trace id + span id -> times received (when not nil)
	traces   map[string]int // trace id -> spans received (when ids is not nil)
	received []*tracepb.Span
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(f.seen.Add(1))
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, `{"error":"bad request"}`, 400)
		return
	}
	count := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			count += len(ss.Spans)
		}
	}
	status, rejected := 200, int64(0)
	if f.policy != nil {
		status, rejected = f.policy(n)
	}
	f.mu.Lock()
	f.requests++
	if r.Header.Get("Content-Encoding") == "gzip" {
		f.gzipped++
	}
	if status == 200 {
		f.spans += count - int(rejected)
	}
	if f.ids != nil {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					f.ids[string(sp.TraceId)+string(sp.SpanId)]++
					f.traces[string(sp.TraceId)]++
					f.received = append(f.received, sp)
				}
			}
		}
	}
	f.mu.Unlock()
	if status != 200 {
		w.WriteHeader(status)
		return
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if rejected > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: "dropped"}
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func testPayloads(t *testing.T, n, batch int, gz bool) []Payload {
	t.Helper()
	pl, err := Prepare(Batches(genT(t, CorpusCanonical, 1, n), batch), ProtoOTLPProto, gz)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func TestLoadCountsOnlyAcknowledgedSpans(t *testing.T) {
	f := &fakeIngest{policy: func(n int) (int, int64) {
		switch n {
		case 3:
			return 429, 0
		case 5:
			return 500, 0
		case 7:
			return 200, 10 // partial success
		}
		return 200, 0
	}}
	ts := httptest.NewServer(f)
	defer ts.Close()
	pl := testPayloads(t, 2000, 100, false) // 20 requests
	res, err := Load(context.Background(), LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 3, KeepAlive: true}, pl)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 20 || res.SentSpans != 2000 {
		t.Fatalf("requests %d sent %d, want 20 and 2000", res.Requests, res.SentSpans)
	}
	if res.Status429 != 1 || res.Errors != 1 || res.Shed != 0 {
		t.Errorf("429s %d errors %d shed %d, want 1, 1, 0", res.Status429, res.Errors, res.Shed)
	}
	if want := int64(2000 - 100 - 100 - 10); res.AcceptedSpans != want || res.RejectedSpans != 10 {
		t.Errorf("accepted %d rejected %d, want %d and 10", res.AcceptedSpans, res.RejectedSpans, want)
	}
	if int64(f.spans) != res.AcceptedSpans {
		t.Errorf("server stored %d spans but the generator counted %d", f.spans, res.AcceptedSpans)
	}
	if res.Latency.Samples != 20 || res.Latency.P50 <= 0 || res.Latency.Max < res.Latency.P99 {
		t.Errorf("latency summary wrong: %+v", res.Latency)
	}
	if len(Refusals(RunFacts{Load: res, Expected: 2000, Stored: int64(f.spans)})) == 0 {
		t.Error("a run with a 429, a 500 and a partial success was not refused")
	}
}

func TestLoadGzipAndKeepAliveOff(t *testing.T) {
	f := &fakeIngest{}
	ts := httptest.NewServer(f)
	defer ts.Close()
	var conns atomic.Int64
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	pl := testPayloads(t, 1000, 100, true)
	raw := testPayloads(t, 1000, 100, false)
	if len(pl[0].Body) >= len(raw[0].Body) || pl[0].RawBytes != len(raw[0].Body) {
		t.Fatalf("gzip payload %d bytes vs raw %d (RawBytes %d)", len(pl[0].Body), len(raw[0].Body), pl[0].RawBytes)
	}
	res, err := Load(context.Background(), LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 2, Gzip: true, KeepAlive: false}, pl)
	if err != nil {
		t.Fatal(err)
	}
	if res.AcceptedSpans != 1000 || f.gzipped != 10 {
		t.Fatalf("accepted %d, gzipped requests %d; want 1000 and 10", res.AcceptedSpans, f.gzipped)
	}
	if conns.Load() != 10 {
		t.Errorf("keep-alive off opened %d connections for 10 requests, want 10", conns.Load())
	}
}

func TestLoadOpenLoopChargesQueueing(t *testing.T) {
	// The server takes 30 ms per request; the schedule asks for one request
	// every 10 ms from one worker, so requests fall behind schedule and their
	// latency, measured from the scheduled time, must grow past the service time.
	f := &fakeIngest{}
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond) // the server's service time, not a wait for a condition
		f.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(slow)
	defer ts.Close()
	pl := testPayloads(t, 1000, 100, false)
	res, err := Load(context.Background(), LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 1, Rate: 10_000, KeepAlive: true}, pl)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OpenLoop || res.AcceptedSpans != 1000 {
		t.Fatalf("open loop %v accepted %d", res.OpenLoop, res.AcceptedSpans)
	}
	// The last request was due at 90 ms and cannot finish before 10*30 = 300 ms.
	if res.Latency.Max < 150 {
		t.Errorf("max latency %.1f ms: open loop did not charge the delayed requests (coordinated omission)", res.Latency.Max)
	}
	if res.LateSends == 0 {
		t.Error("no late sends recorded though the server could not keep up")
	}
	// From the send, a request's latency is the server's 30 ms; from its
	// due time, that plus the wait behind the others.
	if a, s := res.AckedLatency, res.AckedSendLatency; s.Samples != 10 || s.P50 < 30 || s.P99 > a.P99 || s.Max > a.Max || s.Max >= 150 {
		t.Errorf("latency from the send %+v, from the due time %+v", s, a)
	}
	if res.SendLag.Samples != 10 || !(res.SendLag.Max > 100) || res.Unsent != 0 {
		t.Errorf("send lag %+v, unsent %d: the last send was due at 90 ms and could not start before 270 ms", res.SendLag, res.Unsent)
	}
}

// TestLoadOpenLoopEndsAtItsDuration: an open loop far behind its schedule
// stops at its duration on the wall clock, and counts the requests due
// within it that it never sent, instead of sending its whole backlog late.
func TestLoadOpenLoopEndsAtItsDuration(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // no answer while the load runs: each request ends at the client's timeout
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)                                            // before Close, which waits for the handlers
	pl := testPayloads(t, 1000, 10, false)                          // 100 requests of 10 spans
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a backlog sent in full would take 25 minutes
	defer cancel()
	res, err := Load(ctx, LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 1, Rate: 1_000_000, KeepAlive: true,
		Duration: 300 * time.Millisecond, Loop: true, Timeout: 50 * time.Millisecond}, pl)
	if err != nil {
		t.Fatalf("%v: the load went on past its duration", err)
	}
	// 100,000 requests/s for 300 ms are due; each request takes at least
	// its 50 ms timeout, so one worker starts at most 7.
	if res.Requests > 7 || res.Requests+res.Unsent < 29_900 || res.Requests+res.Unsent > 30_100 {
		t.Errorf("%d requests sent and %d unsent; want at most 7 sent and 30,000 in all", res.Requests, res.Unsent)
	}
	if res.Errors != res.Requests || res.AcceptedSpans != 0 {
		t.Errorf("errors %d of %d requests, accepted %d; want every request timed out", res.Errors, res.Requests, res.AcceptedSpans)
	}
}

func TestLoadDurationStopsALoop(t *testing.T) {
	ts := httptest.NewServer(&fakeIngest{})
	defer ts.Close()
	pl := testPayloads(t, 200, 100, false)
	res, err := Load(context.Background(), LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 2, KeepAlive: true, Duration: 200 * time.Millisecond, Loop: true}, pl)
	if err != nil {
		t.Fatal(err)
	}
	if res.SentSpans <= 200 {
		t.Errorf("looping sent only %d spans", res.SentSpans)
	}
	if res.Elapsed > 10*time.Second {
		t.Errorf("duration not honoured: %s", res.Elapsed)
	}
}

// TestLoadFreshIDs: a looping load with FreshIDs sends distinct spans on
// every pass (trace ids changed, a trace's spans still sharing theirs);
// without it, a pass re-sends the same ids.
func TestLoadFreshIDs(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		f := &fakeIngest{ids: map[string]int{}, traces: map[string]int{}}
		ts := httptest.NewServer(f)
		pl := testPayloads(t, 300, 100, false)
		res, err := Load(context.Background(), LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 2, KeepAlive: true,
			Duration: 300 * time.Millisecond, Loop: true, FreshIDs: fresh, PassShift: time.Hour}, pl)
		ts.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.SentSpans < 900 {
			t.Fatalf("fresh %v: looping sent only %d spans: too few passes to tell", fresh, res.SentSpans)
		}
		f.mu.Lock()
		distinct, traces := len(f.ids), len(f.traces)
		f.mu.Unlock()
		if fresh && int64(distinct) != res.SentSpans {
			t.Errorf("fresh ids: %d distinct spans received of %d sent", distinct, res.SentSpans)
		}
		if !fresh && distinct != 300 {
			t.Errorf("without fresh ids: %d distinct spans received, want the corpus's 300", distinct)
		}
		// The corpus's traces, once per pass (a pass may be cut short).
		tr := map[string]bool{}
		for _, b := range Batches(genT(t, CorpusCanonical, 1, 300), 100) {
			for _, sp := range b {
				tr[string(sp.TraceID[:])] = true
			}
		}
		if passes := (res.SentSpans + 299) / 300; fresh && (traces < len(tr)*int(passes-1) || traces > len(tr)*int(passes)) {
			t.Errorf("fresh ids: %d traces for %d passes of %d traces", traces, passes, len(tr))
		}
		// Pass k's spans are the corpus's, k hours later (PassShift), with
		// k mixed into the trace id; nothing else changes.
		orig := map[string]model.Span{}
		for _, b := range Batches(genT(t, CorpusCanonical, 1, 300), 100) {
			for _, sp := range b {
				orig[string(sp.TraceID[:12])+string(sp.SpanID[:])] = sp
			}
		}
		passes := map[uint64]bool{}
		for _, sp := range f.received {
			o, ok := orig[string(sp.TraceId[:12])+string(sp.SpanId)]
			if !ok {
				t.Fatalf("fresh %v: a span no pass of the corpus sent: %x/%x", fresh, sp.TraceId, sp.SpanId)
			}
			k := (sp.StartTimeUnixNano - o.StartTimeUnixNano) / uint64(time.Hour)
			mix := uint32(k) * 0x9e3779b9
			if !fresh {
				k, mix = 0, 0
			}
			want := binary.LittleEndian.Uint32(o.TraceID[12:]) ^ mix
			if sp.StartTimeUnixNano != o.StartTimeUnixNano+k*uint64(time.Hour) || sp.EndTimeUnixNano != o.EndTimeUnixNano+k*uint64(time.Hour) ||
				binary.LittleEndian.Uint32(sp.TraceId[12:]) != want || sp.Name != o.Name {
				t.Fatalf("fresh %v: span %x/%x sent as start %d end %d, from %d %d", fresh, sp.TraceId, sp.SpanId,
					sp.StartTimeUnixNano, sp.EndTimeUnixNano, o.StartTimeUnixNano, o.EndTimeUnixNano)
			}
			for j, ev := range sp.Events {
				if ev.TimeUnixNano != o.Events[j].TimeUnixNano+k*uint64(time.Hour) {
					t.Fatalf("fresh %v: an event's time moved by %d, its span's by %d hours", fresh, ev.TimeUnixNano-o.Events[j].TimeUnixNano, k)
				}
			}
			passes[k] = true
		}
		if fresh && len(passes) < 3 || !fresh && len(passes) != 1 {
			t.Errorf("fresh %v: spans of %d passes received", fresh, len(passes))
		}
	}
	if _, err := Load(context.Background(), LoadOptions{Endpoint: "http://127.0.0.1:1", Protocol: ProtoOTLPJSON, Duration: time.Second,
		Loop: true, FreshIDs: true}, testPayloads(t, 10, 10, false)); err == nil || !strings.Contains(err.Error(), "fresh ids need") {
		t.Errorf("fresh ids over JSON: %v, want a refusal", err)
	}
}

func TestLoadRefusesRemoteAndCountsShed(t *testing.T) {
	for _, ep := range []string{"http://10.1.2.3:4318", "example.com:4317", "http://192.168.0.1"} {
		if err := CheckLoopback(ep); err == nil {
			t.Errorf("CheckLoopback(%q) accepted a remote address", ep)
		}
	}
	for _, ep := range []string{"http://127.0.0.1:4318", "localhost:4317", "http://[::1]:4318", "127.0.0.1"} {
		if err := CheckLoopback(ep); err != nil {
			t.Errorf("CheckLoopback(%q): %v", ep, err)
		}
	}
	// A server that closes every connection without answering sheds it.
	hj := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer hj.Close()
	res, err := Load(context.Background(), LoadOptions{Endpoint: hj.URL, Protocol: ProtoOTLPProto, KeepAlive: true}, testPayloads(t, 200, 100, false))
	if err != nil {
		t.Fatal(err)
	}
	if res.Shed != 2 || res.AcceptedSpans != 0 {
		t.Errorf("shed %d accepted %d, want 2 and 0 (%s)", res.Shed, res.AcceptedSpans, res.FirstError)
	}
	if r := Refusals(RunFacts{Load: res, Expected: 200, Stored: 0}); len(r) == 0 || !strings.Contains(fmt.Sprint(r), "shed 2") {
		t.Errorf("refusals %q do not name the shed connections", r)
	}
}
