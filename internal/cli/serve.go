package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rastro-dev/rastro/internal/chstore"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/metricstore"
	"github.com/rastro-dev/rastro/internal/parallel"
	"github.com/rastro-dev/rastro/internal/process"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/ui"
)

func init() {
	register(&Command{Name: "serve", Short: "run the server (OTLP ingest, query API) on an embedded store", Run: runServe})
}

// serveConfig holds the values of rastro serve's flags.
type serveConfig struct {
	dataDir, httpAddr, grpcAddr, durability, logLevel string
	storage, clickhouseURL, clickhouseCluster         string
	tempoAddr, jaegerAddr, zipkinAddr                 string
	pprofAddr                                         string
	pricesFile                                        string
	authFile, tlsCert, tlsKey, tlsClientCA            string
	insecure                                          bool
	ui                                                bool
	mcp                                               bool
	noContentIndex                                    bool
	syncInterval, sealAge                             time.Duration
	maxBody, maxInflight, sealBytes, walMax, maxBuf   byteSize
	clickhouseWALMax                                  byteSize

	compaction                    bool
	compactionMax                 byteSize
	mergeHeadroom                 byteSize
	ingestNice                    int
	schedIdle                     string
	valueThreshold                byteSize
	compactionFanout              int
	mergeDefer                    int
	retention                     days
	retentionProject              projectDays
	eraseDelay, lifecycleInterval time.Duration
	spanMetricsInterval           time.Duration

	// Limits against slow and hostile clients (server.Options).
	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout, queryTimeout time.Duration
	maxHeader                                                               byteSize
	maxQueries, grpcMaxStreams, maxIngest                                   int
	projectRate, projectBurst, projectShare                                 float64

	// The SQL mode's limits (--storage clickhouse; chstore.SQLLimits).
	sqlTimeout   time.Duration
	sqlMaxRows   int
	sqlMaxMemory byteSize
	sqlMaxRead   int64
	sqlMaxResult byteSize
}

// newServeFlags declares rastro serve's flags; the README's configuration
// table is generated from it (see readme_test.go).
func newServeFlags(env *Env) (*flag.FlagSet, *serveConfig) {
	fs := newFlagSet(env, "serve", "[flags]")
	c := &serveConfig{maxBody: 16 << 20, maxInflight: 256 << 20, sealBytes: 64 << 20, walMax: 512 << 20, clickhouseWALMax: chstore.DefaultMaxWALBytes,
		compactionMax: engine.DefaultCompactionMaxSegmentBytes, mergeHeadroom: process.DefaultMergeHeadroom,
		valueThreshold: engine.DefaultValueThreshold, maxHeader: server.DefaultMaxHeaderBytes, sqlMaxMemory: chstore.DefaultSQLMaxMemory,
		sqlMaxResult: chstore.DefaultSQLMaxResultBytes}
	fs.StringVar(&c.storage, "storage", "embedded", "where spans are kept: embedded (the engine, in --data-dir) or clickhouse (--clickhouse-url; docs/clickhouse.md)")
	fs.StringVar(&c.clickhouseURL, "clickhouse-url", "", "with --storage clickhouse: the database, clickhouse://user:password@host:9000/database?secure=true (native protocol); the schema is migrated at start")
	fs.StringVar(&c.clickhouseCluster, "clickhouse-cluster", "", "with --storage clickhouse: the cluster (remote_servers) the database is spread over: the schema is created ON CLUSTER (Replicated*MergeTree local tables and Distributed tables), writes and reads go through the Distributed tables (docs/clickhouse.md#cluster-mode)")
	fs.Var(&c.clickhouseWALMax, "clickhouse-wal-max-bytes", "with --storage clickhouse --durability wal: requests logged and not yet inserted into ClickHouse beyond which ingest answers 429 (what an outage of ClickHouse can absorb; their decoded spans are held in memory too, several times this size)")
	fs.DurationVar(&c.sqlTimeout, "sql-timeout", chstore.DefaultSQLMaxExecutionTime, "with --storage clickhouse: the most one statement of the SQL mode (POST /api/v1/sql) may run (ClickHouse's max_execution_time, whole seconds; keep it under --query-timeout)")
	fs.IntVar(&c.sqlMaxRows, "sql-max-rows", chstore.DefaultSQLMaxRows, "with --storage clickhouse: the most rows one SQL-mode statement may answer (its request's limit; default limit 1000)")
	fs.Var(&c.sqlMaxMemory, "sql-max-memory", "with --storage clickhouse: the memory one SQL-mode statement may use in ClickHouse (max_memory_usage)")
	fs.Int64Var(&c.sqlMaxRead, "sql-max-rows-read", chstore.DefaultSQLMaxRowsToRead, "with --storage clickhouse: the table rows one SQL-mode statement may read, whole granules of 8,192 rows (max_rows_to_read)")
	fs.Var(&c.sqlMaxResult, "sql-max-result-bytes", "with --storage clickhouse: the largest answer of one SQL-mode statement, uncompressed in ClickHouse (max_result_bytes)")
	fs.StringVar(&c.dataDir, "data-dir", "./rastro-data", "directory holding the store (created if missing)")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:4318", "address for OTLP/HTTP, native JSON ingest and the query API (port 0 picks a free port)")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:4317", "address for OTLP/gRPC (empty disables it; port 0 picks a free port)")
	fs.StringVar(&c.tempoAddr, "tempo-addr", "", "also serve the HTTP API here, for configurations written for Tempo (its port is 3200); empty: off")
	fs.StringVar(&c.jaegerAddr, "jaeger-addr", "", "also serve the HTTP API here, for configurations written for Jaeger query (its port is 16686); empty: off")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "serve Go's runtime profiles (CPU, heap, goroutines: /debug/pprof/) on this address, loopback only unless --insecure (docs/operations.md); empty: off")
	fs.StringVar(&c.zipkinAddr, "zipkin-addr", "", "also serve the HTTP API here, for Zipkin senders (Zipkin's port is 9411; POST /api/v2/spans); empty: off")
	fs.StringVar(&c.durability, "durability", "wal", "when a write is acknowledged: wal (after fsync) or buffered (after write; fsync every --sync-interval); with --storage clickhouse: insert (once ClickHouse acknowledged the insert; the default there) or wal (once fsynced in a WAL in --data-dir, inserted into ClickHouse in large blocks in the background; docs/clickhouse.md)")
	fs.DurationVar(&c.syncInterval, "sync-interval", time.Second, "fsync interval in buffered durability")
	fs.Var(&c.maxBody, "max-body-bytes", "largest accepted request body, enforced after decompression too")
	fs.Var(&c.maxInflight, "max-inflight-bytes", "request bytes admitted at once; beyond it ingest answers 429 (gRPC RESOURCE_EXHAUSTED)")
	fs.Var(&c.sealBytes, "seal-bytes", "seal the in-memory write buffer into a segment when it grows past this size (spans, logs and metrics each have their own buffer)")
	fs.DurationVar(&c.sealAge, "seal-age", time.Minute, "seal the write buffer when its oldest span has waited this long")
	fs.Var(&c.walMax, "wal-max-bytes", "seal early when the WAL grows past this size, bounding its disk use and replay time")
	fs.Var(&c.maxBuf, "max-buffer-bytes", "heap for spans not yet sealed (the buffer's estimate, within 25% of the heap it holds); from 2 x --seal-bytes a request waits up to 1 s for a seal to end (a flooding project's is refused instead), and beyond this limit ingest answers 429 until seals catch up (0 = 4 x --seal-bytes)")
	fs.BoolVar(&c.noContentIndex, "no-content-index", false, "write segments without full-text token filters (content search then scans every block)")
	fs.Var(&c.valueThreshold, "value-threshold", "string attribute values of at least this size (long prompts and completions) are stored apart, once per distinct value, and read only for results that show them (0 keeps every value inline)")
	fs.BoolVar(&c.ui, "ui", true, "serve the web UI at / on the HTTP port (--ui=false turns it off)")
	fs.BoolVar(&c.mcp, "mcp", true, "serve the MCP server for AI agents at /mcp on the HTTP port (--mcp=false turns it off)")
	fs.BoolVar(&c.compaction, "compaction", true, "merge small segments into larger ones in the background (policy: docs/operations.md)")
	fs.Var(&c.compactionMax, "compaction-max-segment-bytes", "largest segment a merge writes; segments of half this size or more are not merged again")
	fs.Var(&c.mergeHeadroom, "merge-headroom", "while a merge runs and ingest is idle, the collector runs once garbage reaches this much above the live heap (a soft memory limit; never above GOMEMLIMIT); 0 = Go's default, up to the live heap's size")
	fs.IntVar(&c.ingestNice, "ingest-nice", process.DefaultIngestNice, "nice value (0-19, Linux) of the threads that decode span requests, commit the WAL and seal the write buffer: queries keep their latency while spans arrive (0 = normal priority)")
	fs.StringVar(&c.schedIdle, "sched-idle", "all", "lowered threads that also run in Linux's SCHED_IDLE policy, only on CPU time no normal-priority thread wants, a query taking the CPU from them at once (queries first), except for 5 s after ingest refuses a request for want of capacity: all = seals, merges, request decoding and WAL commits; background = seals and merges; none = each at its nice value alone (docs/operations.md)")
	fs.IntVar(&c.compactionFanout, "compaction-fanout", engine.DefaultCompactionFanout, "adjacent segments of one size tier that trigger a merge, and the most one merge reads (2-64)")
	fs.IntVar(&c.mergeDefer, "merge-defer-segments", engine.DefaultMergeDeferSegments, "while ingest refuses requests for want of capacity, merges wait as long as at most this many segments are still to merge: the CPU goes to ingest, and merges catch up after the flood (0: merges never wait; docs/operations.md)")
	fs.Var(&c.retention, "retention", "drop spans whose start is older than this, e.g. 7d or 36h (0 keeps everything)")
	fs.Var(&c.retentionProject, "retention-project", "per-project retention overriding --retention, e.g. \"staging=1d,prod=30d\" (0 keeps that project forever)")
	fs.DurationVar(&c.eraseDelay, "erase-delay", 10*time.Second, "the most an acknowledged erasure waits before its spans are physically removed (requests within it share one pass)")
	fs.DurationVar(&c.lifecycleInterval, "lifecycle-interval", 10*time.Second, "how often the background loop looks for merges, expired segments and due erasures")
	fs.DurationVar(&c.spanMetricsInterval, "span-metrics-interval", server.DefaultSpanMetricsInterval, "how often the span metrics (/spanmetrics) are written into the metric store, so that /prom charts them; 0 never")
	fs.StringVar(&c.pricesFile, "prices", "", "JSON price table overriding and extending the built-in LLM prices (format: docs/llm.md)")
	fs.StringVar(&c.authFile, "auth-file", "", "JSON file of access tokens with roles and projects (format: docs/security.md); reloaded on SIGHUP; empty: no access control, allowed on loopback addresses only")
	fs.BoolVar(&c.insecure, "insecure", false, "allow non-loopback addresses without --auth-file (when a proxy or firewall in front controls access)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate (chain) for TLS on the HTTP and gRPC ports; with --tls-key; reloaded on SIGHUP; empty: plain text")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM bundle of CAs whose client certificates are required on every connection (mutual TLS); reloaded on SIGHUP; empty: none asked")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "HTTP: close a connection whose request headers have not all arrived in this time (slow clients); gRPC: the same for the connection handshake")
	fs.DurationVar(&c.readTimeout, "read-timeout", server.DefaultReadTimeout, "the most an HTTP request may take to arrive, body included (a slower ingest body is answered 408), and a gRPC call in all (DEADLINE_EXCEEDED)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", server.DefaultWriteTimeout, "HTTP: the most a request may take from its headers to the end of its answer; must exceed --query-timeout; the live tail sets its own deadline per write")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close a kept-alive HTTP connection, or a gRPC connection, idle this long")
	fs.Var(&c.maxHeader, "max-header-bytes", "largest HTTP request line and headers; beyond it the answer is 431")
	fs.IntVar(&c.maxQueries, "max-concurrent-queries", server.DefaultMaxConcurrentQueries, "query requests run at once (search, traces, discovery, LLM, Tempo, Jaeger; not ingest, health or the live tail); beyond it they get 429 with Retry-After")
	fs.DurationVar(&c.queryTimeout, "query-timeout", server.DefaultQueryTimeout, "a query request's time budget: past it the query stops and answers 503 saying so (structural and pipeline queries stop at half of it and answer partially)")
	fs.IntVar(&c.grpcMaxStreams, "grpc-max-streams", server.DefaultGRPCMaxStreams, "concurrent calls on one gRPC connection (each may hold one message of up to --max-body-bytes)")
	fs.IntVar(&c.maxIngest, "max-concurrent-ingest", server.DefaultMaxConcurrentIngest, "ingest requests decoded and stored at once (their bodies read), one project at most three quarters of them (a quarter for 1 s after it was refused for more); beyond it they get 429 with Retry-After at once instead of waiting, so accepted requests stay fast under overload and a flooding project leaves room for the others")
	fs.Float64Var(&c.projectRate, "project-rate", 0, "each project's ingest rate in spans/s, beyond which its requests get 429 with Retry-After (0: no limit)")
	fs.Float64Var(&c.projectBurst, "project-burst", 0, "spans a project may send at once above --project-rate (0: one second's worth)")
	fs.Float64Var(&c.projectShare, "project-buffer-share", server.DefaultProjectBufferShare, "the part of the write buffer (--max-buffer-bytes) one project may hold while the buffer is more than half full and other projects hold part of it; beyond it that project's requests get 429 and the others' still go in (1: no share)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return fs, c
}

// spareP raises GOMAXPROCS once per process: a process that serves
// several times (the tests run serve in process) must not add a P each time.
var spareP sync.Once

func runServe(ctx context.Context, env *Env, args []string) error {
	fs, c := newServeFlags(env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := envDefaults(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	// Zero would silently mean "the default" below: refuse it instead.
	for name, v := range map[string]int64{"--max-body-bytes": int64(c.maxBody), "--max-inflight-bytes": int64(c.maxInflight),
		"--seal-bytes": int64(c.sealBytes), "--sync-interval": int64(c.syncInterval), "--seal-age": int64(c.sealAge),
		"--wal-max-bytes": int64(c.walMax), "--compaction-max-segment-bytes": int64(c.compactionMax),
		"--erase-delay": int64(c.eraseDelay), "--lifecycle-interval": int64(c.lifecycleInterval),
		"--read-header-timeout": int64(c.readHeaderTimeout), "--read-timeout": int64(c.readTimeout), "--write-timeout": int64(c.writeTimeout),
		"--idle-timeout": int64(c.idleTimeout), "--query-timeout": int64(c.queryTimeout), "--max-header-bytes": int64(c.maxHeader),
		"--max-concurrent-queries": int64(c.maxQueries), "--grpc-max-streams": int64(c.grpcMaxStreams),
		"--max-concurrent-ingest": int64(c.maxIngest), "--clickhouse-wal-max-bytes": int64(c.clickhouseWALMax)} {
		if v <= 0 {
			return fmt.Errorf("%w: %s must be above zero", errUsage, name)
		}
	}
	if c.projectShare <= 0 || c.projectShare > 1 {
		return fmt.Errorf("%w: --project-buffer-share %v must be above 0 and at most 1", errUsage, c.projectShare)
	}
	if c.grpcMaxStreams > math.MaxUint32 {
		return fmt.Errorf("%w: --grpc-max-streams %d is above %d", errUsage, c.grpcMaxStreams, uint32(math.MaxUint32))
	}
	var mode engine.Durability
	switch {
	case c.storage == "clickhouse":
	case c.durability == "wal":
		mode = engine.DurabilityWAL
	case c.durability == "buffered":
		mode = engine.DurabilityBuffered
	default:
		return fmt.Errorf("%w: --durability %q: use wal or buffered", errUsage, c.durability)
	}
	switch {
	case c.storage != "embedded" && c.storage != "clickhouse":
		return fmt.Errorf("%w: --storage %q: use embedded or clickhouse", errUsage, c.storage)
	case c.storage == "clickhouse" && c.clickhouseURL == "":
		return fmt.Errorf("%w: --storage clickhouse needs --clickhouse-url", errUsage)
	case c.storage == "embedded" && c.clickhouseURL != "":
		return fmt.Errorf("%w: --clickhouse-url is for --storage clickhouse", errUsage)
	case c.storage == "embedded" && c.clickhouseCluster != "":
		return fmt.Errorf("%w: --clickhouse-cluster is for --storage clickhouse", errUsage)
	}
	chOpts := chstore.Options{URL: c.clickhouseURL, Cluster: c.clickhouseCluster, Retention: time.Duration(c.retention), ProjectRetention: c.retentionProject.m,
		SQL: chstore.SQLLimits{MaxExecutionTime: c.sqlTimeout, MaxRows: c.sqlMaxRows, MaxMemory: int64(c.sqlMaxMemory), MaxRowsToRead: c.sqlMaxRead,
			MaxResultBytes: int64(c.sqlMaxResult)}}
	if c.storage == "clickhouse" {
		if err := chOpts.Validate(); err != nil {
			return fmt.Errorf("%w: --clickhouse-url: %v", errUsage, err)
		}
		durabilitySet := false
		fs.Visit(func(f *flag.Flag) { durabilitySet = durabilitySet || f.Name == "durability" })
		switch {
		case !durabilitySet || c.durability == "insert":
			c.durability = "insert"
		case c.durability == "wal":
			chOpts.WALDir, chOpts.MaxWALBytes = filepath.Join(c.dataDir, "clickhouse-wal"), int64(c.clickhouseWALMax)
		default:
			return fmt.Errorf("%w: --durability %q with --storage clickhouse: use insert (a 2xx once ClickHouse acknowledged the insert; the default) or wal (once fsynced in a WAL in --data-dir)", errUsage, c.durability)
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: use debug, info, warn or error", errUsage, c.logLevel)
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	prices := llm.DefaultPrices()
	if c.pricesFile != "" {
		var err error
		if prices, err = llm.LoadPrices(c.pricesFile); err != nil {
			return fmt.Errorf("%w: --prices: %v", errUsage, err)
		}
	}

	if c.mergeDefer < 0 {
		return fmt.Errorf("%w: --merge-defer-segments must not be negative (0: merges never wait), got %d", errUsage, c.mergeDefer)
	}
	if c.ingestNice < 0 || c.ingestNice > 19 {
		return fmt.Errorf("%w: --ingest-nice must be 0-19, got %d", errUsage, c.ingestNice)
	}
	if c.schedIdle != "none" && c.schedIdle != "background" && c.schedIdle != "all" {
		return fmt.Errorf("%w: --sched-idle must be none, background or all, got %q", errUsage, c.schedIdle)
	}
	bg := &process.Background{MergeHeadroom: offIfZero(c.mergeHeadroom), MergeNice: process.DefaultMergeNice,
		IngestNice: c.ingestNice, IdleBackground: c.schedIdle != "none", IdleIngest: c.schedIdle == "all"}
	if c.schedIdle != "none" && runtime.GOOS == "linux" {
		if err := process.IdleAvailable(); err != nil {
			log.Warn("--sched-idle: threads cannot be moved to SCHED_IDLE here; they keep their nice value", "sched_idle", c.schedIdle, "err", err)
		}
	}
	// A P per CPU Go sees, plus one for each thread the policy lowers in
	// priority (at least one). When every P runs a goroutine, Go polls the
	// network only from sysmon, every 10 ms, so a query that arrives then
	// waits that long before it is read, and then for a P; and a P held by a
	// lowered thread (the ingest decoder, the WAL commit loop, a seal, a
	// merge) stays held while that thread waits for a CPU behind
	// normal-priority work. With a P for each, the lowered threads never
	// leave queries fewer Ps than CPUs, and a spare P is mostly parked in
	// the network poller. Measured with rastro bench search-live
	// (docs/operations.md, "Scheduling"). GOMAXPROCS in the environment
	// wins.
	spareP.Do(func() {
		if os.Getenv("GOMAXPROCS") == "" {
			cpus := runtime.GOMAXPROCS(0)
			parallel.SetCPUs(cpus)
			runtime.GOMAXPROCS(cpus + max(1, bg.LoweredLanes()))
		}
	})
	defer bg.Close() // after the server below has stopped (deferred later, run earlier)
	opts := engine.Options{
		Dir: c.dataDir, Durability: mode, SyncInterval: c.syncInterval,
		SealBytes: int64(c.sealBytes), SealAge: c.sealAge, WALMaxBytes: int64(c.walMax), MaxBufferBytes: int64(c.maxBuf), NoContentIndex: c.noContentIndex, Prices: prices, Logger: log,
		NoCompaction: !c.compaction, CompactionMaxSegmentBytes: int64(c.compactionMax), CompactionFanout: c.compactionFanout,
		MergeDeferSegments: cmp.Or(c.mergeDefer, -1), // the engine's 0 is its default
		ValueThreshold:     int(offIfZero(c.valueThreshold)), Retention: time.Duration(c.retention), ProjectRetention: c.retentionProject.m,
		EraseDelay: c.eraseDelay, LifecycleInterval: c.lifecycleInterval,
		// The process's runtime policy: merges on a low-priority thread, with
		// the memory guard holding the soft limit near the live heap.
		Background: bg,
	}
	// Settings are checked before anything listens: a bad one is a usage
	// error, not a server that starts and then exits.
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	// The engine opens after the ports are bound (WAL replay can take a
	// while); its metrics are served from the start, 0 until it is open.
	var opened atomic.Pointer[engine.Engine]
	var openedMetrics atomic.Pointer[metricstore.Store]
	var webUI http.Handler
	if c.ui {
		webUI = ui.Handler()
	}
	// SIGHUP reloads the auth file and the certificate. It is caught from
	// here on, before anything listens: its default action ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv, err := server.New(server.Options{
		HTTPAddr: c.httpAddr, GRPCAddr: strings.TrimSpace(c.grpcAddr),
		ExtraHTTPAddrs: []string{c.tempoAddr, c.jaegerAddr, c.zipkinAddr},
		PprofAddr:      c.pprofAddr,
		MaxBodyBytes:   int64(c.maxBody), MaxInflightBytes: int64(c.maxInflight), Logger: log,
		SpanMetricsInterval: spanMetricsEvery(c.spanMetricsInterval),
		Collectors:          []prometheus.Collector{engine.NewCollector(opened.Load), metricstore.NewCollector(openedMetrics.Load)},
		Prices:              prices,
		UI:                  webUI,
		NoMCP:               !c.mcp,
		AuthFile:            c.authFile, Insecure: c.insecure,
		TLSCert: c.tlsCert, TLSKey: c.tlsKey, TLSClientCA: c.tlsClientCA,
		ReadHeaderTimeout: c.readHeaderTimeout, ReadTimeout: c.readTimeout, WriteTimeout: c.writeTimeout, IdleTimeout: c.idleTimeout,
		MaxHeaderBytes: int(c.maxHeader), MaxConcurrentQueries: c.maxQueries, QueryTimeout: c.queryTimeout, GRPCMaxStreams: uint32(c.grpcMaxStreams),
		ProjectRate: c.projectRate, ProjectBurst: c.projectBurst, ProjectBufferShare: c.projectShare, MaxConcurrentIngest: c.maxIngest,
		RunIngest:     bg.RunIngest,
		IngestRefused: bg.IngestRefused,
	})
	if err != nil {
		// Bad settings, an auth file or certificate that does not load:
		// refused before anything listens.
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := srv.Start(); err != nil {
		return err
	}
	scheme := "http"
	if c.tlsCert != "" {
		scheme = "https"
	}
	switch {
	case c.authFile != "":
		log.Info("access control on", "auth_file", c.authFile)
	case c.insecure:
		log.Warn("access control off on a non-loopback address (--insecure): anyone who reaches the ports can read, write and erase every project")
	}
	// The reload loop ends when runServe returns, which waits for it.
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for {
			select {
			case <-reloadCtx.Done():
				return
			case <-hup:
				if err := srv.Reload(); err != nil {
					log.Error("reload on SIGHUP failed: the tokens and certificate loaded before stay in use", "err", err)
					continue
				}
				log.Info("reloaded on SIGHUP", "auth_file", c.authFile, "tls_cert", c.tlsCert)
			}
		}
	}()
	defer func() { stopReload(); <-reloaded }()
	log.Info("listening", "http", srv.HTTPAddr(), "grpc", srv.GRPCAddr(), "also", srv.ExtraHTTPAddrs(), "data_dir", c.dataDir,
		"durability", c.durability, "storage", c.storage, "gomaxprocs", runtime.GOMAXPROCS(0), "version", server.Version())
	b := banner{version: server.Version(), dataDir: c.dataDir, http: scheme + "://" + srv.HTTPAddr(), grpc: srv.GRPCAddr(), ui: c.ui, also: srv.ExtraHTTPAddrs(),
		opening: "opening the store (replaying the WAL)"}
	if c.storage == "clickhouse" {
		b.dataDir, b.opening = "ClickHouse at "+clickHouseHost(c.clickhouseURL), "connecting to ClickHouse"
	}
	b.write(env.Stdout)

	// Fewer collections while the live heap is small (process.StartGCFloor;
	// an operator's GOGC turns it off).
	defer process.StartGCFloor(process.DefaultGCFloor)()

	start := time.Now()
	if c.storage == "clickhouse" {
		chOpts.Prices, chOpts.Logger = prices, log
		srv.NoMetrics()
		return serveClickHouse(ctx, env.Stdout, srv, log, chOpts, start)
	}
	eng, err := engine.Open(opts)
	if err != nil {
		shutdown(srv, log)
		return fmt.Errorf("open store %s: %w", c.dataDir, err)
	}
	logs, err := openLogs(c, mode, log)
	if err != nil {
		shutdown(srv, log)
		eng.Close()
		return fmt.Errorf("open log store %s/logs: %w", c.dataDir, err)
	}
	mets, err := openMetrics(c.dataDir, mode, int64(c.sealBytes), log)
	if err != nil {
		shutdown(srv, log)
		logs.Close()
		eng.Close()
		return fmt.Errorf("open metric store %s/metrics: %w", c.dataDir, err)
	}
	opened.Store(eng)
	srv.SetBackend(eng)
	srv.SetLogs(logs)
	openedMetrics.Store(mets)
	srv.SetMetrics(mets)
	retentionCtx, stopRetention := context.WithCancel(ctx)
	retentionDone := make(chan struct{}, 2)
	go func() {
		defer func() { retentionDone <- struct{}{} }()
		logRetention(retentionCtx, logs, c.lifecycleInterval, time.Duration(c.retention), c.retentionProject.m, log)
	}()
	go func() {
		defer func() { retentionDone <- struct{}{} }()
		metricRetention(retentionCtx, mets, c.lifecycleInterval, time.Duration(c.retention), c.retentionProject.m, log)
	}()
	recovered := eng.Counters().ReplayedSpans
	log.Info("ready", "took", time.Since(start).String(), "wal_spans_recovered", recovered)
	fmt.Fprintf(env.Stdout, "ready in %s: %s recovered from the WAL\n", time.Since(start).Round(time.Millisecond), plural(recovered, "span"))

	<-ctx.Done()
	log.Info("shutting down: finishing in-flight requests")
	shutdown(srv, log)
	stopRetention()
	<-retentionDone
	<-retentionDone
	lerr := logs.Close()
	merr := mets.Close()
	if err := eng.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	if lerr != nil {
		return fmt.Errorf("close log store: %w", lerr)
	}
	if merr != nil {
		return fmt.Errorf("close metric store: %w", merr)
	}
	log.Info("stopped")
	return nil
}

// serveClickHouse attaches a ClickHouse backend to the listening server and
// serves until ctx ends.
func serveClickHouse(ctx context.Context, out io.Writer, srv *server.Server, log *slog.Logger, opts chstore.Options, start time.Time) error {
	ch, err := chstore.Open(ctx, opts)
	if err != nil {
		shutdown(srv, log)
		return fmt.Errorf("open ClickHouse store: %w", err)
	}
	srv.SetBackend(ch)
	srv.SetLogs(ch)
	log.Info("ready", "storage", "clickhouse", "version", ch.Features().Version, "took", time.Since(start).String())
	if opts.WALDir == "" {
		fmt.Fprintf(out, "ready in %s: ClickHouse %s\n", time.Since(start).Round(time.Millisecond), ch.Features().Version)
	} else {
		fmt.Fprintf(out, "ready in %s: ClickHouse %s, WAL in %s, %s recovered from it\n", time.Since(start).Round(time.Millisecond),
			ch.Features().Version, opts.WALDir, plural(ch.WALRecovered(), "span"))
	}
	<-ctx.Done()
	log.Info("shutting down: finishing in-flight requests")
	shutdown(srv, log)
	if err := ch.Close(); err != nil {
		return fmt.Errorf("close ClickHouse store: %w", err)
	}
	log.Info("stopped")
	return nil
}

func shutdown(srv *server.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
}

// offIfZero maps a size flag's "0 = off" to the engine's negative value.
func offIfZero(b byteSize) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}

// spanMetricsEvery maps the flag (0: never) to server.Options (negative:
// never, 0: the default).
func spanMetricsEvery(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
