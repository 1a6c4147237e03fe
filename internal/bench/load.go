package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// Protocol is an ingest protocol the load generator speaks.
type Protocol string

// The protocols, named as the server's metrics label them.
const (
	ProtoOTLPProto  Protocol = "otlp-proto"  // OTLP/HTTP protobuf, POST /v1/traces
	ProtoOTLPJSON   Protocol = "otlp-json"   // OTLP/HTTP JSON, POST /v1/traces
	ProtoOTLPGRPC   Protocol = "otlp-grpc"   // OTLP/gRPC TraceService/Export
	ProtoNativeJSON Protocol = "native-json" // Rastro's native JSON, POST /v1/spans
)

// Protocols lists every protocol in a stable order.
var Protocols = []Protocol{ProtoOTLPProto, ProtoOTLPJSON, ProtoOTLPGRPC, ProtoNativeJSON}

// ParseProtocol checks a protocol name.
func ParseProtocol(s string) (Protocol, error) {
	for _, p := range Protocols {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown protocol %q (want otlp-proto, otlp-json, otlp-grpc or native-json)", s)
}

// Route returns the HTTP path the protocol posts to ("" for gRPC).
func (p Protocol) Route() string {
	switch p {
	case ProtoOTLPProto, ProtoOTLPJSON:
		return "/v1/traces"
	case ProtoNativeJSON:
		return "/v1/spans"
	}
	return ""
}

func (p Protocol) contentType() string {
	if p == ProtoOTLPProto {
		return "application/x-protobuf"
	}
	return "application/json"
}

// Payload is one request, encoded (and compressed) before any clock starts.
type Payload struct {
	Body     []byte // the bytes sent on the wire (HTTP body; for gRPC the uncompressed message)
	RawBytes int    // encoded size before gzip
	Spans    int
}

// LoadOptions configures one load run. Zero values get the defaults noted.
type LoadOptions struct {
	// Endpoint is the server: "http://HOST:PORT" (or HOST:PORT) for HTTP
	// protocols, HOST:PORT for otlp-grpc. It must be a loopback address.
	Endpoint    string
	Protocol    Protocol
	Concurrency int     // workers, each with its own connection; default 1
	Rate        float64 // open loop target in spans/s; 0 = closed loop
	Duration    time.Duration
	// Loop re-sends the payloads from the start when they run out before
	// Duration (the server de-duplicates by trace id and span id).
	Loop bool
	// FreshIDs, with Loop, makes every pass after the first send new spans:
	// each span's trace id gets the pass number mixed into its last four
	// bytes (in a copy of the payload), so a long open-loop ingest stores
	// distinct spans, as real traffic is, instead of re-sent copies. OTLP
	// protobuf over HTTP without gzip only.
	FreshIDs bool
	// PassShift, with FreshIDs, moves the times of pass k's spans (start,
	// end, events) k*PassShift later, so that later passes carry later
	// times, as traffic that keeps arriving does.
	PassShift time.Duration
	Gzip      bool          // payloads were gzipped by Prepare: send Content-Encoding gzip / the gRPC gzip compressor
	KeepAlive bool          // reuse HTTP connections
	Project   string        // X-Scope-OrgID; empty sends no header
	Token     string        // bearer token (Authorization header / gRPC metadata); empty sends none
	Timeout   time.Duration // per request; default 30s
	// Retry429, when set, re-sends a payload answered 429 (gRPC
	// RESOURCE_EXHAUSTED) after a backoff, as OTLP exporters do, until it is
	// acknowledged or the run ends; such answers count in
	// LoadResult.Retried429, not Status429. Latency runs to the final answer.
	Retry429 bool
	// OnAck, when set, is called with the send number of each request the
	// server acknowledged (from the worker goroutines, concurrently): pass
	// k's payload j is k*len(payloads)+j, so send%len(payloads) is the
	// payload.
	OnAck func(send int)
	// Progress, when set, receives a progress line every ProgressEvery (default 1s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// LoadResult is what a load run observed. Spans are counted as accepted only
// when the server acknowledged them (2xx / gRPC OK), minus any partial
// success rejections.
type LoadResult struct {
	Protocol      Protocol      `json:"protocol"`
	Concurrency   int           `json:"concurrency"`
	OpenLoop      bool          `json:"open_loop"`
	Elapsed       time.Duration `json:"elapsed_ns"`
	Requests      int           `json:"requests"`
	AckedRequests int           `json:"acked_requests"`
	SentSpans     int64         `json:"sent_spans"`
	AcceptedSpans int64         `json:"accepted_spans"`
	RejectedSpans int64         `json:"rejected_spans"` // partial_success.rejected_spans
	Status429     int           `json:"status_429"`
	Retried429    int           `json:"retried_429,omitempty"` // 429s answered and then retried (LoadOptions.Retry429)
	Errors        int           `json:"errors"`                // other non-2xx responses and request errors
	Shed          int           `json:"shed"`                  // connections reset, refused or closed by the server
	WireBytes     int64         `json:"wire_bytes"`
	LateSends     int           `json:"late_sends"` // open loop: sends that started after their scheduled time + 1ms
	// Latency is every request's, AckedLatency the acknowledged ones': in
	// an open loop from each request's due time (what a sender on a
	// schedule sees, its own backlog included), in a closed loop from the
	// send.
	Latency      Latency `json:"latency"`
	AckedLatency Latency `json:"acked_latency"`
	// AckedSendLatency is the acknowledged requests' latency from the
	// moment each was first sent: the server's answer time, without the
	// generator's backlog. It equals AckedLatency in a closed loop.
	AckedSendLatency Latency `json:"acked_send_latency"`
	// SendLag is, in an open loop, how long after its due time each
	// request was sent (0 when on time): the generator's backlog, from its
	// own CPU or from all its workers waiting on answers.
	SendLag Latency `json:"send_lag"`
	// Unsent is, in an open loop with a duration, the requests due within
	// it that were not sent when it ended: the generator's backlog then.
	// They are in no latency figure.
	Unsent         int     `json:"unsent"`
	SpansPerSecond float64 `json:"spans_per_second"`
	FirstError     string  `json:"first_error,omitempty"`
}

// FailedRequests is the number of requests that were not acknowledged.
func (r LoadResult) FailedRequests() int { return r.Status429 + r.Errors + r.Shed }

// Prepare encodes batches for protocol p, gzipping HTTP bodies
// when gz is set. Call it before the clock starts.
func Prepare(batches [][]model.Span, p Protocol, gz bool) ([]Payload, error) {
	out := make([]Payload, 0, len(batches))
	for i, b := range batches {
		pl, err := preparePayload(b, p, gz)
		if err != nil {
			return nil, fmt.Errorf("prepare batch %d: %w", i, err)
		}
		out = append(out, pl)
	}
	return out, nil
}

// CheckLoopback returns an error unless host (HOST, HOST:PORT or a URL) names
// a loopback address: the load generator never aims at another machine.
func CheckLoopback(endpoint string) error {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("endpoint %q is not a loopback address (load is only generated against 127.0.0.1, ::1 or localhost)", endpoint)
	}
	return nil
}

func httpBase(endpoint string) string {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	return strings.TrimRight(endpoint, "/")
}

func grpcTarget(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		return u.Host
	}
	return endpoint
}

type sender interface {
	send(ctx context.Context, p *Payload) outcome
	close()
}

type outcome struct {
	ok       bool
	rejected int64
	is429    bool
	shed     bool
	err      string
}

// Load sends payloads as o says and reports what the server acknowledged.
// Closed loop: each worker sends its next payload once the previous one is
// answered; latency is send to answer. Open loop: payload i is due at
// start + (spans before i)/Rate; a worker sends it at that time or, when it
// is behind, at once, and latency runs from the due time, so a slow server
// is charged for the requests it delayed (no coordinated omission);
// LoadResult.AckedSendLatency runs from the send in both.
func Load(ctx context.Context, o LoadOptions, payloads []Payload) (LoadResult, error) {
	if err := CheckLoopback(o.Endpoint); err != nil {
		return LoadResult{}, err
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if len(payloads) == 0 {
		return LoadResult{}, errors.New("load: no payloads")
	}
	if o.Loop && o.Duration <= 0 {
		return LoadResult{}, errors.New("load: looping needs a duration")
	}
	if o.Rate < 0 {
		return LoadResult{}, fmt.Errorf("load: rate must be >= 0, got %g", o.Rate)
	}
	var idsAt, timesAt [][]int // FreshIDs: where each payload's trace ids and times are
	if o.FreshIDs {
		if o.Protocol != ProtoOTLPProto || o.Gzip {
			return LoadResult{}, fmt.Errorf("load: fresh ids need %s without gzip, not %s", ProtoOTLPProto, o.Protocol)
		}
		idsAt, timesAt = make([][]int, len(payloads)), make([][]int, len(payloads))
		for i := range payloads {
			ids, times, err := spanOffsets(payloads[i].Body)
			if err != nil {
				return LoadResult{}, fmt.Errorf("load: payload %d: %w", i, err)
			}
			idsAt[i], timesAt[i] = ids, times
		}
	}
	if _, err := ParseProtocol(string(o.Protocol)); err != nil {
		return LoadResult{}, err
	}
	senders := make([]sender, o.Concurrency)
	for i := range senders {
		s, err := newSender(o)
		if err != nil {
			for _, x := range senders[:i] {
				x.close()
			}
			return LoadResult{}, err
		}
		senders[i] = s
	}
	defer func() {
		for _, s := range senders {
			s.close()
		}
	}()

	// Open loop schedule: due offset of each payload in one pass.
	var due []time.Duration
	var passLen time.Duration
	if o.Rate > 0 {
		due = make([]time.Duration, len(payloads))
		var cum float64
		for i, p := range payloads {
			due[i] = time.Duration(cum / o.Rate * float64(time.Second))
			cum += float64(p.Spans)
		}
		passLen = time.Duration(cum / o.Rate * float64(time.Second))
	}

	var (
		next                                    atomic.Int64
		accepted, rejected, sent, wire          atomic.Int64
		requests, acked, n429, nerr, shed, late atomic.Int64
		retried, started                        atomic.Int64
		errOnce                                 sync.Once
		firstErr                                string
	)
	lat := make([][]time.Duration, o.Concurrency)
	ackLat := make([][]time.Duration, o.Concurrency)
	ackSendLat := make([][]time.Duration, o.Concurrency)
	lag := make([][]time.Duration, o.Concurrency)
	start := time.Now()
	var deadline time.Time
	if o.Duration > 0 {
		deadline = start.Add(o.Duration)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() { // owned by Load; stopped by stopProgress before Load returns
		defer close(progressDone)
		if o.Progress == nil {
			return
		}
		t := time.NewTicker(o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				el := time.Since(start).Seconds()
				a := accepted.Load()
				fmt.Fprintf(o.Progress, "%6.1fs  accepted %d spans  %.0f spans/s  requests %d  429s %d  errors %d  shed %d\n",
					el, a, float64(a)/el, requests.Load(), n429.Load(), nerr.Load(), shed.Load())
			}
		}
	}()

	var wg sync.WaitGroup
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func(w int) { // one worker; returns when payloads or time run out or ctx ends
			defer wg.Done()
			s := senders[w]
			var fresh Payload // FreshIDs: this worker's copy of the payload
			for {
				i := int(next.Add(1) - 1)
				pass := i / len(payloads)
				if pass > 0 && !o.Loop {
					return
				}
				p := &payloads[i%len(payloads)]
				if pass > 0 && o.FreshIDs {
					fresh.Body = append(fresh.Body[:0], p.Body...)
					fresh.RawBytes, fresh.Spans = p.RawBytes, p.Spans
					mix := uint32(pass) * 0x9e3779b9
					for _, at := range idsAt[i%len(payloads)] {
						id := fresh.Body[at+12 : at+16]
						binary.LittleEndian.PutUint32(id, binary.LittleEndian.Uint32(id)^mix)
					}
					shift := uint64(pass) * uint64(o.PassShift)
					for _, at := range timesAt[i%len(payloads)] {
						t := fresh.Body[at : at+8]
						if v := binary.LittleEndian.Uint64(t); v != 0 {
							binary.LittleEndian.PutUint64(t, v+shift)
						}
					}
					p = &fresh
				}
				sendAt := time.Now()
				if o.Rate > 0 {
					sendAt = start.Add(time.Duration(pass)*passLen + due[i%len(payloads)])
				}
				// The run ends at its deadline: at the due time of the next
				// request, or on the wall clock when the sends are behind.
				if !deadline.IsZero() && (!sendAt.Before(deadline) || !time.Now().Before(deadline)) || runCtx.Err() != nil {
					return
				}
				if o.Rate > 0 {
					if wait := time.Until(sendAt); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-t.C:
						case <-runCtx.Done():
							t.Stop()
							return
						}
					} else if wait < -time.Millisecond {
						late.Add(1)
					}
				}
				sentAt := time.Now()
				started.Add(1)
				if o.Rate > 0 {
					lag[w] = append(lag[w], max(sentAt.Sub(sendAt), 0))
				}
				rctx, rcancel := context.WithTimeout(runCtx, o.Timeout)
				out := s.send(rctx, p)
				rcancel()
				for backoff := 20 * time.Millisecond; o.Retry429 && out.is429 && runCtx.Err() == nil; backoff = min(2*backoff, time.Second) {
					retried.Add(1)
					t := time.NewTimer(backoff)
					select {
					case <-t.C:
					case <-runCtx.Done():
						t.Stop()
					}
					if runCtx.Err() != nil {
						break
					}
					rctx, rcancel := context.WithTimeout(runCtx, o.Timeout)
					out = s.send(rctx, p)
					rcancel()
				}
				if runCtx.Err() != nil && !out.ok {
					return // interrupted, not a server failure
				}
				answered := time.Now()
				took := answered.Sub(sendAt)
				lat[w] = append(lat[w], took)
				requests.Add(1)
				sent.Add(int64(p.Spans))
				wire.Add(int64(len(p.Body)))
				switch {
				case out.ok:
					acked.Add(1)
					ackLat[w] = append(ackLat[w], took)
					ackSendLat[w] = append(ackSendLat[w], answered.Sub(sentAt))
					if o.OnAck != nil {
						o.OnAck(i)
					}
					r := min(out.rejected, int64(p.Spans))
					rejected.Add(r)
					accepted.Add(int64(p.Spans) - r)
				case out.is429:
					n429.Add(1)
				case out.shed:
					shed.Add(1)
				default:
					nerr.Add(1)
				}
				if !out.ok && out.err != "" {
					errOnce.Do(func() { firstErr = out.err })
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopProgress)
	<-progressDone

	var all, ackAll, ackSendAll, lagAll []time.Duration
	for w := range lat {
		all = append(all, lat[w]...)
		ackAll = append(ackAll, ackLat[w]...)
		ackSendAll = append(ackSendAll, ackSendLat[w]...)
		lagAll = append(lagAll, lag[w]...)
	}
	r := LoadResult{
		Protocol: o.Protocol, Concurrency: o.Concurrency, OpenLoop: o.Rate > 0,
		Elapsed: elapsed, Requests: int(requests.Load()), AckedRequests: int(acked.Load()),
		SentSpans: sent.Load(), AcceptedSpans: accepted.Load(), RejectedSpans: rejected.Load(),
		Status429: int(n429.Load()), Retried429: int(retried.Load()), Errors: int(nerr.Load()), Shed: int(shed.Load()),
		WireBytes: wire.Load(), LateSends: int(late.Load()), Latency: SummarizeLatency(all), AckedLatency: SummarizeLatency(ackAll),
		AckedSendLatency: SummarizeLatency(ackSendAll), SendLag: SummarizeLatency(lagAll), FirstError: firstErr,
	}
	if o.Rate > 0 && o.Duration > 0 && passLen > 0 {
		// Requests due before the deadline: whole passes, then the part
		// of one.
		passes := int(o.Duration / passLen)
		n := passes*len(payloads) + sort.Search(len(due), func(j int) bool { return due[j] >= o.Duration-time.Duration(passes)*passLen })
		if !o.Loop {
			n = min(n, len(payloads))
		}
		r.Unsent = max(n-int(started.Load()), 0)
	}
	if elapsed > 0 {
		r.SpansPerSecond = float64(r.AcceptedSpans) / elapsed.Seconds()
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%6.1fs  done: accepted %d of %d spans\n", elapsed.Seconds(), r.AcceptedSpans, r.SentSpans)
	}
	return r, ctx.Err()
}

func newSender(o LoadOptions) (sender, error) {
	if o.Protocol == ProtoOTLPGRPC {
		cc, err := grpc.NewClient("passthrough:///"+grpcTarget(o.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("grpc client for %s: %w", o.Endpoint, err)
		}
		return &grpcSender{cc: cc, gzip: o.Gzip, project: o.Project, token: o.Token}, nil
	}
	tr := &http.Transport{
		Proxy:               nil, // loopback only: never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DisableKeepAlives:   !o.KeepAlive,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
	}
	return &httpSender{
		client: &http.Client{Transport: tr},
		url:    httpBase(o.Endpoint) + o.Protocol.Route(),
		proto:  o.Protocol,
		gzip:   o.Gzip,
		o:      o,
	}, nil
}

type httpSender struct {
	client *http.Client
	url    string
	proto  Protocol
	gzip   bool
	o      LoadOptions
}

func (h *httpSender) close() { h.client.CloseIdleConnections() }

func (h *httpSender) send(ctx context.Context, p *Payload) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(p.Body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	req.Header.Set("Content-Type", h.proto.contentType())
	if h.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if h.o.Project != "" {
		req.Header.Set("X-Scope-OrgID", h.o.Project)
	}
	if h.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.o.Token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return outcome{shed: isShed(err), err: fmt.Sprintf("POST %s: %v", h.url, err)}
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return outcome{is429: true, err: "429 Too Many Requests"}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return outcome{err: fmt.Sprintf("POST %s: %s: %s", h.url, resp.Status, strings.TrimSpace(string(body)))}
	case rerr != nil:
		return outcome{shed: isShed(rerr), err: fmt.Sprintf("POST %s: read response: %v", h.url, rerr)}
	}
	return outcome{ok: true, rejected: rejectedSpans(resp.Header.Get("Content-Type"), body)}
}

// rejectedSpans reads partial_success.rejected_spans from an OTLP (or
// native) response body; 0 when absent or unreadable.
func rejectedSpans(contentType string, body []byte) int64 {
	if len(body) == 0 {
		return 0
	}
	var m coltracepb.ExportTraceServiceResponse
	if strings.Contains(contentType, "protobuf") {
		if proto.Unmarshal(body, &m) != nil {
			return 0
		}
	} else if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &m) != nil {
		return 0
	}
	return m.GetPartialSuccess().GetRejectedSpans()
}

// isShed reports whether a transport error means the server dropped,
// reset or refused the connection: every transport failure except a timeout
// or a cancellation on our side.
func isShed(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.As(err, new(*net.OpError))
}

type grpcSender struct {
	cc      *grpc.ClientConn
	gzip    bool
	project string
	token   string
}

func (g *grpcSender) close() { g.cc.Close() }

func (g *grpcSender) send(ctx context.Context, p *Payload) outcome {
	var opts []grpc.CallOption
	if g.gzip {
		opts = append(opts, grpc.UseCompressor(gzip.Name))
	}
	if g.project != "" {
		ctx = metadataContext(ctx, g.project)
	}
	if g.token != "" {
		ctx = tokenContext(ctx, g.token)
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	err := g.cc.Invoke(ctx, coltracepb.TraceService_Export_FullMethodName, encodedMessage(p.Body), resp,
		append(opts, grpc.ForceCodec(encodedCodec{}))...)
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.ResourceExhausted:
			return outcome{is429: true, err: "RESOURCE_EXHAUSTED: " + st.Message()}
		case codes.Unavailable:
			return outcome{shed: true, err: "UNAVAILABLE: " + st.Message()}
		}
		return outcome{err: fmt.Sprintf("gRPC Export: %s: %s", st.Code(), st.Message())}
	}
	return outcome{ok: true, rejected: resp.GetPartialSuccess().GetRejectedSpans()}
}

// encodedMessage is a request already encoded in protobuf: encodedCodec
// sends it as it is, so a gRPC sender marshals nothing per call, as an HTTP
// sender sends its body as it is (marshalling 1000 spans per call was the
// generator's own CPU, which the server's threads share on one host).
type encodedMessage []byte

// encodedCodec is the protobuf codec ("proto", the content-subtype every
// OTLP receiver takes) that writes an encodedMessage's bytes unchanged.
type encodedCodec struct{}

func (encodedCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(encodedMessage); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (encodedCodec) Unmarshal(data []byte, v any) error {
	return proto.Unmarshal(data, v.(proto.Message))
}

func (encodedCodec) Name() string { return "proto" }

// spanOffsets returns the offsets in an encoded ExportTraceServiceRequest
// of every span's 16-byte trace id (field 1 of Span, in field 2 of
// ScopeSpans, in field 2 of ResourceSpans, in field 1 of the request) and of
// every fixed64 time: a span's start and end (fields 7 and 8) and its
// events' times (field 1 of Event, field 11 of Span).
func spanOffsets(body []byte) (ids, times []int, err error) {
	var walk func(b []byte, base, depth int) error
	walk = func(b []byte, base, depth int) error {
		for off := 0; off < len(b); {
			num, typ, n := protowire.ConsumeTag(b[off:])
			if n < 0 {
				return fmt.Errorf("bad tag at %d: %w", base+off, protowire.ParseError(n))
			}
			off += n
			if typ == protowire.Fixed64Type && (depth == 3 && (num == 7 || num == 8) || depth == 4 && num == 1) {
				times = append(times, base+off)
			}
			if typ != protowire.BytesType {
				m := protowire.ConsumeFieldValue(num, typ, b[off:])
				if m < 0 {
					return fmt.Errorf("bad field %d at %d: %w", num, base+off, protowire.ParseError(m))
				}
				off += m
				continue
			}
			v, m := protowire.ConsumeBytes(b[off:])
			if m < 0 {
				return fmt.Errorf("bad field %d at %d: %w", num, base+off, protowire.ParseError(m))
			}
			start := base + off + m - len(v)
			switch {
			case depth == 0 && num == 1, depth == 1 && num == 2, depth == 2 && num == 2, depth == 3 && num == 11:
				if err := walk(v, start, depth+1); err != nil {
					return err
				}
			case depth == 3 && num == 1:
				if len(v) != 16 {
					return fmt.Errorf("trace id of %d bytes at %d", len(v), start)
				}
				ids = append(ids, start)
			}
			off += m
		}
		return nil
	}
	err = walk(body, 0, 0)
	return ids, times, err
}
