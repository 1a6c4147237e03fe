// Package chstore is the ClickHouse backend of the storage seam: a
// store.Backend that keeps spans in a ClickHouse database and answers the
// API's queries with SQL, so that stateless `rastro serve` processes can
// share one store that shards and replicates (docs/clickhouse.md).
//
// It speaks ClickHouse's native protocol through clickhouse-go v2. Every value
// that comes from a request reaches SQL as a bound parameter (the driver
// quotes it; 18.16 has no server-side parameters), never by string building.
//
// Writes: Append queues a decoded request; a collector gathers the queued
// requests for a batching window (group commit) and hands the batch to one
// of several inserters, which insert it as one block per table. Append
// returns when ClickHouse has acknowledged the insert; the spans are then
// visible to every rastro process on the same database. A full queue answers
// store.ErrOverloaded (429); a ClickHouse that cannot be reached fails the
// write (503).
//
// Reads: trace by id through a small trace-id -> time-range table; span and
// trace search by SQL conditions drawn from the filter's hints, then
// query.Filter.Match in Go on each candidate, so a filter SQL cannot express
// (TraceQL beyond the hints, content words, trace-level conditions) stays
// correct. Statistics without such a filter are GROUP BY queries over spans;
// with one, and for sessions and the service pages, the window's spans are
// read and aggregated span by span (scan.go), up to Options.MaxScanSpans.
//
// Live tails see the spans acknowledged by this process only.
//
// Cluster mode (Options.Cluster; cluster.go): the same queries over
// Distributed tables of the original names, with replicated local tables
// under them, created ON CLUSTER.
//
// Goroutines: Open starts one collector and Options.Inserters inserters,
// the erasure pass (erasepass.go), and with a retention the sweeper
// (retention.go); Close stops the pass and the sweeper (cancelling what
// they run) and waits for them, stops accepting writes, lets them drain the
// queue, waits for them, then closes the connection pool.
package chstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/store"
)

// Defaults of Options.
const (
	DefaultBatchWindow    = 20 * time.Millisecond
	DefaultMaxBatchSpans  = 100_000
	DefaultInserters      = 4
	DefaultMaxQueuedSpans = 1_000_000
	DefaultMaxScanSpans   = 2_000_000
	DefaultErasureEvery   = 30 * time.Second
	DefaultWALWindow      = 500 * time.Millisecond
	DefaultMaxWALBytes    = 64 << 20
	DefaultWALCloseWait   = 30 * time.Second
)

// Options configures a Store.
type Options struct {
	// URL is the DSN of clickhouse-go v2, native protocol:
	// clickhouse://user:password@host:9000/database?dial_timeout=5s&secure=true
	URL string
	// BatchWindow is how long the collector waits for more writes before
	// inserting what it has (group commit).
	BatchWindow time.Duration
	// MaxBatchSpans closes a batch early once it holds this many spans.
	MaxBatchSpans int
	// Inserters is how many inserts may be in flight at once.
	Inserters int
	// MaxQueuedSpans bounds the spans accepted and not yet acknowledged by
	// ClickHouse; beyond it Append fails with store.ErrOverloaded.
	MaxQueuedSpans int
	// MaxScanSpans bounds the spans one aggregation read span by span may
	// load (see scan.go); beyond it the query is refused (400) and asks for
	// a narrower window.
	MaxScanSpans int
	// Retention hides, then removes, spans whose start is older than this
	// (0 keeps everything); ProjectRetention overrides it per project (0
	// keeps that project forever). The same settings as the engine's
	// (retention.go).
	Retention        time.Duration
	ProjectRetention map[string]time.Duration
	// RetentionEvery is how often the retention sweep runs.
	RetentionEvery time.Duration
	// ErasureEvery is how often the erasure pass runs (erasepass.go): it
	// records erasures whose rows are gone as done and starts a removal
	// again where rows are left and none is under way.
	ErasureEvery time.Duration
	// Now is the clock of retention cutoffs; nil means time.Now.
	Now func() time.Time
	// NoRollups answers statistics from spans alone (for tests comparing
	// the two, and to rule the rollups out).
	NoRollups bool
	// NoAttrIndex searches without the attribute index (attrindex.go).
	NoAttrIndex bool
	// NoIndexSlices reads a page of the attribute index in one query over
	// the whole window instead of newest time slice first (attrindex.go;
	// for tests and benchmarks comparing the two).
	NoIndexSlices bool
	// NoByTrace reads whole spans from spans instead of spans_by_trace
	// (bytrace.go; for tests and benchmarks comparing the two).
	NoByTrace bool
	// Prices prices LLM calls at append; nil means llm.DefaultPrices().
	Prices *llm.Prices
	// SQL bounds each statement of the SQL mode (sql.go).
	SQL SQLLimits
	// Logger receives the version found and the migrations applied; nil
	// discards.
	Logger *slog.Logger
	// WALDir, when set, puts a write-ahead log in that directory in front
	// of ClickHouse (walfront.go): Append returns once a request is fsynced
	// there, and a shipper inserts what was logged in large blocks. ""
	// (the default) acknowledges a request once ClickHouse acknowledged
	// its insert.
	WALDir string
	// WALWindow is how long the shipper lets a generation of logged
	// requests gather before inserting it (while an insert runs, the next
	// generation gathers anyway).
	WALWindow time.Duration
	// MaxWALBytes bounds the requests logged and not yet inserted (their
	// bodies; their decoded spans are held in memory too); beyond it
	// Append fails with store.ErrOverloaded.
	MaxWALBytes int64
	// WALCloseWait is how long Close keeps trying to insert what the WAL
	// holds before it leaves the rest there for the next Open.
	WALCloseWait time.Duration
	// Cluster is the name of the ClickHouse cluster (remote_servers) the
	// database is spread over; "" is a single node. On a cluster Open
	// creates the cluster schema ON CLUSTER, writes and reads go through
	// the Distributed tables, and mutations address the local tables ON
	// CLUSTER (cluster.go).
	Cluster string
}

// Validate fills defaults and refuses impossible settings.
func (o *Options) Validate() error {
	if o.URL == "" {
		return errors.New("chstore: no ClickHouse URL (clickhouse://host:9000/database)")
	}
	if !strings.HasPrefix(o.URL, "clickhouse://") && !strings.HasPrefix(o.URL, "tcp://") {
		return fmt.Errorf("chstore: ClickHouse URL %q: use clickhouse://host:9000/database (the native protocol; HTTP is not supported yet)", redact(o.URL))
	}
	if _, err := clickhouse.ParseDSN(o.URL); err != nil {
		return fmt.Errorf("chstore: ClickHouse URL: %w", err)
	}
	if o.Cluster != "" && !identRE.MatchString(o.Cluster) {
		return fmt.Errorf("chstore: cluster name %q: use letters, digits and _ (it is written into DDL)", o.Cluster)
	}
	if o.BatchWindow == 0 {
		o.BatchWindow = DefaultBatchWindow
	}
	if o.MaxBatchSpans == 0 {
		o.MaxBatchSpans = DefaultMaxBatchSpans
	}
	if o.WALWindow == 0 {
		o.WALWindow = DefaultWALWindow
	}
	if o.MaxWALBytes == 0 {
		o.MaxWALBytes = DefaultMaxWALBytes
	}
	if o.WALCloseWait == 0 {
		o.WALCloseWait = DefaultWALCloseWait
	}
	if o.Inserters == 0 {
		o.Inserters = DefaultInserters
	}
	if o.MaxQueuedSpans == 0 {
		o.MaxQueuedSpans = DefaultMaxQueuedSpans
	}
	if o.MaxScanSpans == 0 {
		o.MaxScanSpans = DefaultMaxScanSpans
	}
	if o.RetentionEvery == 0 {
		o.RetentionEvery = DefaultRetentionEvery
	}
	if o.ErasureEvery == 0 {
		o.ErasureEvery = DefaultErasureEvery
	}
	if o.BatchWindow < 0 || o.MaxBatchSpans < 0 || o.Inserters < 0 || o.MaxQueuedSpans < 0 || o.MaxScanSpans < 0 || o.RetentionEvery < 0 || o.ErasureEvery < 0 {
		return errors.New("chstore: negative batch window, batch size, inserters, queue, scan limit, retention sweep or erasure pass interval")
	}
	if o.Retention < 0 {
		return fmt.Errorf("chstore: negative retention %v", o.Retention)
	}
	for p, d := range o.ProjectRetention {
		if d < 0 {
			return fmt.Errorf("chstore: negative retention %v for project %q", d, p)
		}
	}
	if err := o.SQL.validate(); err != nil {
		return err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Prices == nil {
		o.Prices = llm.DefaultPrices()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// redact hides the password of a URL for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// Store is the ClickHouse backend. It is safe for concurrent use.
type Store struct {
	opts     Options
	target   schemaTarget // the database, and the cluster if any
	quorum   int          // the URL's insert_quorum (quorum.go)
	conn     driver.Conn
	features Features
	rollups  map[string]bool // rollups and indexes that saw every span (rollup.go)

	rollupReads atomic.Int64 // queries the rollup answered part of (tests)
	indexReads  atomic.Int64 // searches whose candidates came from the attribute index (tests)
	indexSlices atomic.Int64 // time slices of the attribute index read (tests)
	hourReads   atomic.Int64 // LLM statistics that read the hourly rollup (tests)
	spanInserts atomic.Int64 // inserts into spans acknowledged (benchmarks: spans per insert)
	reRemovals  atomic.Int64 // removals the erasure pass started again (tests)

	w writer // the write path (append.go)

	tails *store.TailHub
	wf    *walFront // the WAL in front of ClickHouse; nil without one

	seqMu sync.Mutex
	seq   uint64 // the last log sequence number given (under seqMu; logs.go)

	logTailMu sync.Mutex
	logTails  []*logTail // live log tails (under logTailMu)

	eraseMu sync.Mutex // one erasure at a time in this process

	doneMu    sync.Mutex
	doneSeen  map[erasureKey]time.Time // when a read or the pass first found none of an erasure's rows left, until it is recorded done (under doneMu)
	eraseWake chan struct{}            // a read found an erasure done that is not recorded so (buffer 1)

	retMu       sync.Mutex        // one retention sweep at a time
	deleted     map[string]uint64 // project -> cutoff of the last retention delete of spans started (under retMu)
	deletedLogs map[string]uint64 // the same for logs (under retMu)

	// The background goroutines (erasure pass, sweeper) run until Close
	// cancels bgCtx, and Close waits for them on bg.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

var _ interface {
	store.Backend
	store.ServiceReader
	store.DependencyReader
	store.SQLRunner
} = (*Store)(nil)

// connect opens a connection pool for url and checks that the server
// answers. On a cluster, its sessions insert into Distributed tables
// synchronously (clusterSettings).
func connect(ctx context.Context, url string, pool int, cluster string) (driver.Conn, error) {
	o, err := clickhouse.ParseDSN(url)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse URL: %w", err)
	}
	if o.MaxOpenConns < pool {
		o.MaxOpenConns = pool
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if cluster != "" {
		if o.Settings == nil {
			o.Settings = clickhouse.Settings{}
		}
		for k, v := range clusterSettings {
			o.Settings[k] = v
		}
	}
	conn, err := clickhouse.Open(o)
	if err != nil {
		return nil, fmt.Errorf("open ClickHouse %v: %w", o.Addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("reach ClickHouse %v: %w", o.Addr, err)
	}
	return conn, nil
}

// Open connects to ClickHouse, detects its features, applies the schema's
// migrations and starts the write path.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	sc, err := targetOf(opts.URL, opts.Cluster)
	if err != nil {
		return nil, err
	}
	quorum, err := quorumOf(opts.URL)
	if err != nil {
		return nil, err
	}
	if quorum > 1 {
		opts.Inserters = 1 // one quorum insert at a time per table (quorum.go)
	}
	conn, err := connect(ctx, opts.URL, opts.Inserters+8, opts.Cluster)
	if err != nil {
		return nil, err
	}
	feat, err := Detect(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := checkQuorum(ctx, conn, opts.Cluster, quorum); err != nil {
		conn.Close()
		return nil, err
	}
	applied, err := migrate(ctx, conn, feat, sc, quorum)
	if err != nil {
		conn.Close()
		return nil, err
	}
	rollups, err := completeRollups(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	opts.Logger.Info("clickhouse", "version", feat.Version, "migrations_applied", applied, "schema_version", latestVersion(), "rollups", rollups)
	s := &Store{opts: opts, target: sc, quorum: quorum, conn: conn, features: feat, rollups: rollups, tails: store.NewTailHub("chstore", maxTails, tailQueue),
		doneSeen: map[erasureKey]time.Time{}, eraseWake: make(chan struct{}, 1),
		deleted: map[string]uint64{}, deletedLogs: map[string]uint64{}}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.w.start(s)
	if opts.WALDir != "" {
		if s.wf, err = openWALFront(s, opts.WALDir); err != nil {
			s.w.stop()
			s.tails.Close()
			conn.Close()
			return nil, err
		}
	}
	s.bg.Add(1)
	go s.erasurePass()
	if opts.hasRetention() {
		s.bg.Add(1)
		go s.sweeper()
	}
	return s, nil
}

// Features are what the server can do, found at Open.
func (s *Store) Features() Features { return s.features }

// Close stops the background goroutines, stops accepting writes, waits for
// the queued ones to be inserted (or fail), ends every tail and closes the
// connections. With a WAL in front of ClickHouse it first tries, for up to
// WALCloseWait, to insert what the WAL holds; what ClickHouse does not take
// stays there for the next Open.
func (s *Store) Close() error {
	var werr error
	if s.wf != nil {
		werr = s.wf.close()
	}
	s.bgCancel()
	s.bg.Wait()
	s.w.stop()
	s.tails.Close()
	s.closeLogTails()
	if err := s.conn.Close(); err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("close the WAL in front of ClickHouse: %w", werr)
	}
	return nil
}

// WALRecovered is how many spans Open replayed from the WAL in front of
// ClickHouse (Options.WALDir) to insert them: spans acknowledged before a
// crash or an outage that ClickHouse had not acknowledged yet.
func (s *Store) WALRecovered() int {
	if s.wf == nil {
		return 0
	}
	return s.wf.recovered
}

// usable reports why a call cannot proceed: ctx's end, or a closed store.
func (s *Store) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.w.isClosed() {
		return store.ErrClosed
	}
	return nil
}
