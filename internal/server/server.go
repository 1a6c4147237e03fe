// Package server exposes a storage backend over HTTP (OTLP/HTTP, native
// JSON, the query API, metrics, health) and gRPC (OTLP TraceService).
//
// It knows storage only through the interfaces of internal/store, never a
// backend's package: cli/serve opens the embedded engine and attaches it
// with SetBackend. Routes are one declarative table (routes.go) that both the
// mux and the OpenAPI consistency test read; each API family keeps its
// routes and handlers in a file of its own. The package owns its JSON
// shapes: storage types never reach the wire as they are.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/mcpserver"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/rastro-dev/rastro/internal/spanmetrics"
	"github.com/rastro-dev/rastro/internal/store"
)

// DefaultProject is the project of requests without an X-Scope-OrgID header.
const DefaultProject = "default"

// MaxBodyLimit is the largest request body limit the server accepts (a
// request is one WAL record, and records are capped well above this).
const MaxBodyLimit = 512 << 20

// Options configures a Server.
type Options struct {
	HTTPAddr string // e.g. 127.0.0.1:4318; port 0 picks a free port
	GRPCAddr string // e.g. 127.0.0.1:4317; empty disables gRPC
	// ExtraHTTPAddrs are more addresses serving the same HTTP routes, so
	// that configurations written for Tempo (3200), Jaeger query (16686) or
	// Zipkin (9411) work unchanged. Empty entries are skipped.
	ExtraHTTPAddrs []string
	// PprofAddr, when not empty, serves Go's profiles (net/http/pprof,
	// /debug/pprof/...) on a listener of their own: CPU, heap, goroutines
	// of the running server. It has no access control, so it must be a
	// loopback address unless Insecure is set.
	PprofAddr    string
	MaxBodyBytes int64 // request body limit, after decompression too; default 16 MiB
	// SpanMetricsInterval is how often the span metrics (/spanmetrics) are
	// written into the metric store, for /prom; 0 means
	// DefaultSpanMetricsInterval, a negative value never.
	SpanMetricsInterval time.Duration
	MaxInflightBytes    int64 // decoded bytes admitted at once before answering 429; default 256 MiB
	Logger              *slog.Logger
	// Collectors are the backend's Prometheus collectors, served at
	// /metrics beside the server's own from the start (the backend may
	// not be attached yet).
	Collectors []prometheus.Collector
	// UI serves every path no API route claims (the embedded web UI);
	// nil answers them with a JSON 404.
	UI http.Handler
	// NoMCP turns off the MCP server at /mcp (streamable HTTP).
	NoMCP bool
	// Prices is the LLM price table listed at GET /api/v1/llm/prices; nil
	// answers 501.
	Prices *llm.Prices

	// AuthFile lists the tokens the server accepts (format: authfile.go,
	// docs/security.md); empty turns access control off, which only a
	// loopback address or Insecure allows.
	AuthFile string
	// Insecure allows non-loopback addresses without an auth file (a proxy
	// or firewall in front does the access control).
	Insecure bool
	// TLSCert and TLSKey are PEM files: with them the HTTP and gRPC
	// listeners speak TLS only. TLSClientCA, a PEM bundle, makes clients
	// present a certificate it signed.
	TLSCert, TLSKey, TLSClientCA string

	// Limits against slow and hostile clients (limits.go,
	// docs/operations.md); zero takes the default.
	ReadHeaderTimeout time.Duration // to receive a request's headers; default 10 s
	ReadTimeout       time.Duration // to receive a whole request, body included; default 1 min
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer; it must exceed QueryTimeout. Streams (live tail) set
	// their own deadline per write. Default 2 min.
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration // a kept-alive connection waiting for its next request; default 2 min
	MaxHeaderBytes int           // request line and headers; default 64 KiB (above it: 431)
	// MaxConcurrentQueries is how many query requests run at once; beyond
	// it they are refused with 429 and Retry-After. Default 16.
	MaxConcurrentQueries int
	// QueryTimeout is a query request's time budget: its context ends
	// then, and whole-trace queries stop early and answer partially
	// before it. Default 30 s.
	QueryTimeout time.Duration
	// GRPCMaxStreams is the most concurrent calls on one gRPC connection;
	// default 64.
	GRPCMaxStreams uint32

	// Per-project ingest limits (projectlimits.go, docs/operations.md).
	// ProjectRate is each project's ingest rate in spans/s (0: no limit),
	// with bursts of ProjectBurst spans (0: one second's worth).
	ProjectRate, ProjectBurst float64
	// MaxConcurrentIngest is how many ingest requests are decoded and
	// stored at once (their bodies read); beyond it a request gets 429 at
	// once, so an overloaded server refuses instead of queueing and its
	// acknowledgements stay fast. Default DefaultMaxConcurrentIngest.
	MaxConcurrentIngest int
	// RunIngest runs the CPU-bound part of storing a request (decoding it)
	// under the process's policy (process.Background.RunIngest); nil runs it
	// in the request's goroutine.
	RunIngest func(work func())
	// IngestRefused is called when ingest refuses a request for want of
	// the server's capacity (see capacityRefusal), so that the process's
	// policy gives ingest its CPU share back (process.Background); nil: no
	// one is told.
	IngestRefused func()
	// ProjectBufferShare is the part of the backend's write buffer one
	// project may hold while the buffer is more than half full; beyond it
	// the project's requests get 429, the others' still go in. 0 selects
	// DefaultProjectBufferShare; 1 turns the share off.
	ProjectBufferShare float64
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.HTTPAddr == "" {
		return errors.New("server: HTTP address is required")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	if o.MaxBodyBytes > MaxBodyLimit {
		return fmt.Errorf("server: body limit %d bytes is above the largest supported, %d", o.MaxBodyBytes, MaxBodyLimit)
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = 256 << 20
	}
	if o.MaxInflightBytes < o.MaxBodyBytes {
		o.MaxInflightBytes = o.MaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := o.validateLimits(); err != nil {
		return err
	}
	if err := o.validateProjectLimits(); err != nil {
		return err
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("server: TLS needs both a certificate (--tls-cert) and its key (--tls-key)")
	}
	if o.TLSClientCA != "" && o.TLSCert == "" {
		return errors.New("server: client certificate verification (--tls-client-ca) needs TLS (--tls-cert and --tls-key)")
	}
	if o.PprofAddr != "" && !o.Insecure && !isLoopback(o.PprofAddr) {
		return fmt.Errorf("server: refusing to serve profiles on %s: it is not a loopback address, and the profiling "+
			"endpoint has no access control (a goroutine dump shows what every request is doing). Use a loopback "+
			"address such as 127.0.0.1:1777, or --insecure if a firewall in front controls access", o.PprofAddr)
	}
	if o.AuthFile == "" && !o.Insecure {
		for _, addr := range append([]string{o.HTTPAddr, o.GRPCAddr}, o.ExtraHTTPAddrs...) {
			if addr != "" && !isLoopback(addr) {
				return fmt.Errorf("server: refusing to listen on %s without access control: it is not a loopback address, "+
					"and with no tokens configured anyone who reaches it could read, write and erase every project's spans. "+
					"Give --auth-file with tokens (docs/security.md), or --insecure if a proxy or firewall in front controls access", addr)
			}
		}
	}
	return nil
}

// isLoopback reports whether a listen address is on loopback only: a
// loopback IP, or "localhost". Any other host name counts as reachable
// from elsewhere, and an empty host means every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server serves one backend. Create it with New, start it with Start, attach
// the backend with SetBackend once it is open (until then ingest and queries
// answer 503 and /readyz reports not ready), stop it with Shutdown.
type Server struct {
	opts    Options
	log     *slog.Logger
	backend atomic.Pointer[attached]
	// logs is the log store (logs.go); noLogs: the backend has none.
	logs   atomic.Pointer[attachedLogs]
	noLogs atomic.Bool
	// metricsStore is the metric store (metrics_ingest.go); noMetrics: the backend has none.
	metricsStore atomic.Pointer[attachedMetrics]
	noMetrics    atomic.Bool
	met          *metrics
	// spanMetrics counts the acknowledged spans for /spanmetrics.
	spanMetrics *spanmetrics.Registry
	// auth is the auth file's tokens, swapped whole by ReloadAuth; nil
	// when access control is off.
	auth atomic.Pointer[authSet]
	tls  *serverTLS // nil without TLS
	// api is the route table's handler (without compression): the HTTP
	// server's, and the one MCP tools call in process.
	api http.Handler
	mcp http.Handler

	inflight atomic.Int64
	// querySlots holds one token per query request running (limits.go);
	// its capacity is Options.MaxConcurrentQueries.
	querySlots chan struct{}
	conns      *connStates
	rates      *projectRates // per-project ingest rate (nil: none)
	// ingestSlots counts the ingest requests being decoded and stored
	// (Options.MaxConcurrentIngest; projectlimits.go).
	ingestSlots *ingestSlots

	httpLn, grpcLn net.Listener
	extraLns       []net.Listener
	pprof          *http.Server // nil unless Options.PprofAddr
	pprofLn        net.Listener
	http           *http.Server
	grpc           *grpc.Server
	wg             sync.WaitGroup

	// stopping is closed when Shutdown starts; streaming handlers (live
	// tail) end then, since Shutdown waits for every handler.
	stopping chan struct{}
	stopOnce sync.Once

	status *statusSampler // for /api/v1/status (status.go)
}

// New builds a server; it does not listen yet.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, stopping: make(chan struct{}), status: &statusSampler{started: time.Now()}}
	s.met = newMetrics()
	s.spanMetrics = spanmetrics.New(0)
	s.querySlots = make(chan struct{}, opts.MaxConcurrentQueries)
	s.ingestSlots = newIngestSlots(opts.MaxConcurrentIngest)
	if opts.ProjectRate > 0 {
		s.rates = newProjectRates(opts.ProjectRate, opts.ProjectBurst, nil)
	}
	s.conns = newConnStates(s.met)
	for _, c := range opts.Collectors {
		if err := s.met.reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: register metrics: %w", err)
		}
	}
	if opts.AuthFile != "" {
		set, err := loadAuthFile(opts.AuthFile)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.auth.Store(set)
	}
	if opts.TLSCert != "" {
		t, err := newServerTLS(opts.TLSCert, opts.TLSKey, opts.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.tls = t
	}
	s.api = s.mux(s.routeTable())
	if !opts.NoMCP {
		s.mcp = mcpserver.Handler(s.api, opts.UI != nil, opts.Prices)
	}
	api := gzipJSON(s.api)
	s.http = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served(r)
			api.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ConnState:         s.conns.track,
		ConnContext:       s.conns.connContext,
	}
	if s.tls != nil {
		s.http.TLSConfig = s.tls.config()
	}
	s.grpc = newGRPCServer(s)
	return s, nil
}

// Start binds the listeners and serves in background goroutines (stopped by Shutdown).
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen http %s: %w", s.opts.HTTPAddr, err)
	}
	s.httpLn = ln
	for _, addr := range s.opts.ExtraHTTPAddrs {
		if addr == "" {
			continue
		}
		xl, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range append(s.extraLns, ln) {
				l.Close()
			}
			return fmt.Errorf("listen http %s: %w", addr, err)
		}
		s.extraLns = append(s.extraLns, xl)
	}
	if s.opts.PprofAddr != "" {
		pl, err := net.Listen("tcp", s.opts.PprofAddr)
		if err != nil {
			for _, l := range append(s.extraLns, ln) {
				l.Close()
			}
			return fmt.Errorf("listen pprof %s: %w", s.opts.PprofAddr, err)
		}
		s.pprofLn = pl
	}
	if s.opts.GRPCAddr != "" {
		gl, err := net.Listen("tcp", s.opts.GRPCAddr)
		if err != nil {
			for _, l := range append(s.extraLns, ln) {
				l.Close()
			}
			if s.pprofLn != nil {
				s.pprofLn.Close()
			}
			return fmt.Errorf("listen grpc %s: %w", s.opts.GRPCAddr, err)
		}
		s.grpcLn = gl
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.grpc.Serve(gl); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				s.log.Error("grpc server stopped", "err", err)
			}
		}()
	}
	for _, l := range append([]net.Listener{ln}, s.extraLns...) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			serve := s.http.Serve
			if s.tls != nil {
				serve = func(l net.Listener) error { return s.http.ServeTLS(l, "", "") }
			}
			if err := serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("http server stopped", "addr", l.Addr().String(), "err", err)
			}
		}()
	}
	if s.pprofLn != nil {
		s.pprof = &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.pprof.Serve(s.pprofLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("pprof server stopped", "addr", s.pprofLn.Addr().String(), "err", err)
			}
		}()
	}
	s.wg.Add(1)
	go s.runStatusSampler()
	if every := s.opts.SpanMetricsInterval; every >= 0 {
		if every == 0 {
			every = DefaultSpanMetricsInterval
		}
		s.wg.Add(1)
		go s.runSpanMetricsWriter(every)
	}
	return nil
}

// ExtraHTTPAddrs are the bound addresses of Options.ExtraHTTPAddrs (after
// Start), in order.
func (s *Server) ExtraHTTPAddrs() []string {
	out := make([]string, len(s.extraLns))
	for i, l := range s.extraLns {
		out[i] = l.Addr().String()
	}
	return out
}

// PprofAddr is the bound profiling address (after Start), or "" when off.
func (s *Server) PprofAddr() string {
	if s.pprofLn == nil {
		return ""
	}
	return s.pprofLn.Addr().String()
}

// HTTPAddr is the bound HTTP address (after Start).
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// GRPCAddr is the bound gRPC address, or "" when gRPC is disabled.
func (s *Server) GRPCAddr() string {
	if s.grpcLn == nil {
		return ""
	}
	return s.grpcLn.Addr().String()
}

// attached is the backend in use (an interface cannot be stored atomically
// as it is).
type attached struct{ store.Backend }

// SetBackend attaches the open backend; the server becomes ready.
func (s *Server) SetBackend(b store.Backend) { s.backend.Store(&attached{b}) }

// currentBackend is the attached backend, or nil before SetBackend.
func (s *Server) currentBackend() store.Backend {
	if a := s.backend.Load(); a != nil {
		return a.Backend
	}
	return nil
}

// Shutdown stops accepting connections and waits for in-flight requests
// (bounded by ctx). It does not close the backend.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	err := s.http.Shutdown(ctx)
	if s.pprof != nil {
		// A CPU profile in progress holds its request for its duration:
		// cut it rather than wait.
		s.pprof.Close()
	}
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	s.wg.Wait()
	return err
}

// contextUntil returns a context that parent's end or stop's closing cancels.
func contextUntil(parent context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

var projectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// projectOf validates a tenant header value; empty means the default project.
func projectOf(v string) (string, error) {
	if v == "" {
		return DefaultProject, nil
	}
	if !projectRE.MatchString(v) {
		return "", fmt.Errorf("X-Scope-OrgID %q is not a valid project: use 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", v)
	}
	return v, nil
}
