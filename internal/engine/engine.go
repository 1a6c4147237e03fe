// Package engine is Rastro's embedded store: a WAL-backed in-memory write
// buffer, immutable columnar segments published through a manifest, and the
// query execution over both. *Engine is a store.Backend (with the optional
// store.Compactor and store.StatsReporter); NewCollector exports its
// metrics. It changes no process-wide setting itself: merges run through
// Options.Background, the process's policy (internal/process).
//
// Locking: mu guards the read view (active, frozen, segs). It is held only to
// swap pointers, never across I/O. pubMu serialises seals, manifest writes
// and value collection (CollectValues); queries never take it. The WAL's commit goroutine is the only writer into
// the active memtable, so ingest never waits on a query or a seal.
//
// Goroutines: Open starts the seal loop; Close stops it and waits for it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
	"github.com/rastro-dev/rastro/internal/valuestore"
	"github.com/rastro-dev/rastro/internal/vfs"
	"github.com/rastro-dev/rastro/internal/wal"
)

// Durability selects when an append is acknowledged.
type Durability = wal.Mode

const (
	DurabilityWAL      = wal.ModeSync     // acknowledged after fsync
	DurabilityBuffered = wal.ModeBuffered // acknowledged after write(2), fsynced every SyncInterval
)

// Options configures an Engine. The zero value of every field but Dir means its default.
type Options struct {
	Dir          string
	Durability   Durability
	SyncInterval time.Duration // buffered mode fsync interval; default 1s

	SealBytes   int64         // seal the write buffer when its estimated size exceeds this; default 64 MiB
	SealAge     time.Duration // seal the write buffer when its oldest row is older than this; default 1m
	WALMaxBytes int64         // force a seal when the WAL exceeds this many bytes; default 512 MiB
	// MaxBufferBytes bounds the write buffer plus buffers waiting to be
	// sealed (estimated bytes). Beyond it Append refuses with ErrBufferFull
	// until seals catch up. Default 4 x SealBytes.
	MaxBufferBytes int64
	// MemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit)
	// the engine holds while it is open when the process has none
	// (GOMEMLIMIT unset, no limit set by other code): 0 derives it from
	// the write buffers (at least 2 x SealBytes) and a headroom that follows
	// the rest of the live heap (twice it, at least 96 MiB, at most
	// 128 MiB of garbage: memoryHeadroom); positive asks
	// for that limit; negative sets none. See holdMemoryLimit.
	MemoryLimit int64
	BlockSpans  int // spans per segment block; default 1024 (see BenchmarkTraceByID)
	// BlockCacheBytes bounds the cache of decoded segment blocks (estimated
	// resident bytes); default 128 MiB; negative disables it.
	BlockCacheBytes int64
	// RowGroupTokenFilters writes a token filter per 64-row group of every
	// block (segment.WriterOptions.RowGroupTokenFilters): rare words read
	// about 64 rows instead of a block, for about 6% more disk on
	// text-heavy spans. Off by default.
	RowGroupTokenFilters bool

	// Prices prices LLM calls at ingest; nil means llm.DefaultPrices().
	Prices *llm.Prices

	// NoContentIndex writes segments without full-text token filters;
	// content search then scans (see internal/text for what is indexed).
	NoContentIndex bool

	// ValueThreshold: string values of span, event and link attributes of
	// at least this many bytes are stored apart, once per distinct value, in
	// the value store (DATA_DIR/values), and segments reference them by
	// SHA-256. 0 means DefaultValueThreshold (1 KiB); negative keeps every
	// value inline. Values are stored in pieces (segment.Pieces): a JSON
	// array at its elements, long text by content.
	ValueThreshold int
	// ContentThreshold: the prompt and completion attributes
	// (text.IsMessageKey) are stored apart from this many bytes, so that a
	// conversation that resends its history stores each message once. 0
	// means segment.DefaultContentThreshold; negative leaves them to
	// ValueThreshold. Ignored when ValueThreshold is negative.
	ContentThreshold int

	// NoCompaction turns background compaction off (Compact still works).
	NoCompaction bool
	// CompactionMaxSegmentBytes caps the size of a merged segment; segments
	// of half of it or more are not merged again. Default 1 GiB.
	CompactionMaxSegmentBytes int64
	// Background runs merges (compaction, retention and erasure rewrites)
	// under the process's runtime policy: thread priority, memory limit
	// (internal/process). nil runs them in the calling goroutine and changes
	// no process-wide setting.
	Background Background
	// CompactionFanout is how many adjacent segments of one size tier
	// trigger a merge, and the most one merge reads. Default 8, at most 64.
	CompactionFanout int
	// MergeDeferSegments: while Background reports ingest pressed (a
	// request refused for want of capacity lately), no merge starts as
	// long as at most this many segments are still to merge (not full):
	// the CPU goes to ingest and its seals, and the merges catch up once
	// the pressure ends. Default DefaultMergeDeferSegments; negative: merges
	// never wait.
	MergeDeferSegments int

	// Retention hides, then removes, spans whose start is older than this
	// (0 keeps everything); ProjectRetention overrides it per project (a
	// zero value there keeps that project's spans forever).
	Retention        time.Duration
	ProjectRetention map[string]time.Duration

	// EraseDelay is the most an acknowledged erasure waits before its
	// physical pass starts (requests within it share one pass). Default 10s.
	EraseDelay time.Duration
	// LifecycleInterval is how often the background loop looks for merges,
	// expired segments and due erasures. Default 10s.
	LifecycleInterval time.Duration
	// now replaces the clock (tests); nil means time.Now.
	now func() time.Time

	// FS is the filesystem under the data directory (internal/vfs): the
	// WAL, the segments, the manifest, the erasure list and the value store.
	// nil means the operating system's; tests cut power with a vfs.MemFS.
	// The directory lock (flock) is taken on the operating system's only.
	FS vfs.FS

	// valueFS replaces the value store's filesystem (tests inject faults).
	valueFS valuestore.FS
	// openSegment replaces segment.Open (tests inject read faults).
	openSegment func(path string) (*segment.Reader, error)

	Logger *slog.Logger
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("engine: data directory is required")
	}
	if o.Durability != DurabilityWAL && o.Durability != DurabilityBuffered {
		return fmt.Errorf("engine: unknown durability %d", o.Durability)
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = time.Second
	}
	if o.SealBytes <= 0 {
		o.SealBytes = 64 << 20
	}
	if o.SealAge <= 0 {
		o.SealAge = time.Minute
	}
	if o.WALMaxBytes <= 0 {
		o.WALMaxBytes = 512 << 20
	}
	if o.MaxBufferBytes <= 0 {
		o.MaxBufferBytes = 4 * o.SealBytes
	}
	if o.MaxBufferBytes < o.SealBytes {
		return fmt.Errorf("engine: buffer limit %d is below the seal size %d", o.MaxBufferBytes, o.SealBytes)
	}
	if o.BlockSpans <= 0 {
		o.BlockSpans = 1024
	}
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = 128 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Prices == nil {
		o.Prices = llm.DefaultPrices()
	}
	if o.ValueThreshold == 0 {
		o.ValueThreshold = DefaultValueThreshold
	}
	if o.CompactionMaxSegmentBytes <= 0 {
		o.CompactionMaxSegmentBytes = DefaultCompactionMaxSegmentBytes
	}
	if o.CompactionFanout == 0 {
		o.CompactionFanout = DefaultCompactionFanout
	}
	if o.MergeDeferSegments == 0 {
		o.MergeDeferSegments = DefaultMergeDeferSegments
	}
	if o.CompactionFanout < 2 || o.CompactionFanout > maxMergeInputs {
		return fmt.Errorf("engine: compaction fan-out %d out of range [2, %d]", o.CompactionFanout, maxMergeInputs)
	}
	if o.Retention < 0 {
		return fmt.Errorf("engine: negative retention %v", o.Retention)
	}
	for p, d := range o.ProjectRetention {
		if d < 0 {
			return fmt.Errorf("engine: negative retention %v for project %q", d, p)
		}
	}
	if o.EraseDelay <= 0 {
		o.EraseDelay = 10 * time.Second
	}
	if o.LifecycleInterval <= 0 {
		o.LifecycleInterval = 10 * time.Second
	}
	if o.now == nil {
		o.now = time.Now
	}
	return nil
}

// Background is how the engine runs its heavy background work; the process
// decides the policy (process.Background implements it).
type Background interface {
	// RunMerge runs merge and returns when it has returned. busy reports
	// whether this engine's ingest is active.
	RunMerge(busy func() bool, merge func())
	// MergesDone is called after a run of merges.
	MergesDone()
	// RunSeal runs seal (one seal of a write buffer) and returns when it
	// has returned.
	RunSeal(seal func())
	// CommitLane gives the engine's WAL a lane: run runs one step of the
	// commit loop (wal.Options.Step) and returns when it has returned;
	// stop is called once the WAL is closed.
	CommitLane() (run func(step func()), stop func())
	// Pressed reports whether ingest refused a request for want of
	// capacity lately; merges then wait (Options.MergeDeferSegments).
	Pressed() bool
}

var _ interface {
	store.Backend
	store.Compactor
	store.StatsReporter
	store.DependencyReader
} = (*Engine)(nil)

// Engine is the embedded store. It is safe for concurrent use.
type Engine struct {
	opts Options
	log  *slog.Logger
	wal  *wal.WAL
	dir  string // segments directory
	lock io.Closer
	fs   vfs.FS
	// commitStep runs each step of the WAL's commit loop through the
	// process's policy (Background.CommitLane); commitStop ends its lane
	// once the WAL is closed.
	commitStep func(step func())
	commitStop func()

	mu     sync.RWMutex // guards the read view below
	active *memtable
	frozen []*memtable // oldest first; being sealed, still queried
	segs   []*segHandle

	pubMu    sync.Mutex // serialises seals and manifest writes
	manifest manifest   // guarded by pubMu

	quarantined []string // guarded by mu: segments that failed to open

	// memLimit is the engine's hold on the soft memory limit
	// (holdMemoryLimit); nil when it holds none.
	memLimit *memLimitHold

	kick chan struct{}
	// sealed is closed and replaced (under mu) each time a seal retires a
	// frozen buffer: pace waits on it.
	sealed chan struct{}
	// maxPace is the const maxPace, a field so tests can lengthen it.
	maxPace time.Duration
	stop    chan struct{}
	wg      sync.WaitGroup
	closed  atomic.Bool
	sealErr atomic.Pointer[error]

	// testBeforeManifest, when set by a test, runs after a segment is written
	// and its values synced, before the manifest names it; an error stops
	// the seal there, as a crash would (nothing is cleaned up).
	testBeforeManifest func(segment string) error

	cache    *blockCache
	llmCache llmResultCache
	// opsResults caches the merged segment parts of service queries.
	opsResults opsResultCache
	// decoding makes concurrent queries that need the same segment's
	// stored aggregates (or the same projection of them) decode it once:
	// a summary asks for several at a time on a cold engine.
	decoding singleflight.Group
	// opsCacheEntries counts the service-aggregate rollup entries the
	// segment handles cache (bounded by maxOpsCacheEntries).
	opsCacheEntries atomic.Int64

	// values holds large attribute values apart from segments (values.go).
	// It is safe for concurrent use; Puts and Syncs happen under pubMu.
	values *valuestore.Store

	// Lifecycle (lifecycle.go): lcMu serialises merges, retention sweeps and
	// erasure passes; the background loop and Compact take it.
	lcMu        sync.Mutex
	mergeFailed map[string]bool // guarded by lcMu: inputs of a failed merge, not retried until restart
	lcKick      chan struct{}
	lcCtx       context.Context // cancelled by Close: stops a merge in progress
	lcCancel    context.CancelFunc
	lastSweep   time.Time // guarded by lcMu

	// Erasure (erase.go): hide is what queries must not show; erMu guards
	// the ERASURES file and erasures.
	hide      atomic.Pointer[hideSet]
	erMu      sync.Mutex
	erasures  erasureFile
	eraseWake *time.Timer

	lastAppend atomic.Int64 // unix ns of the last Append (ingestActive)

	tails tails // live tails (tail.go)

	m counters
}

// now is the engine's clock.
func (e *Engine) now() time.Time { return e.opts.now() }

// counters are engine-side metrics, read by the server for /metrics.
type counters struct {
	seals, sealNanos, sealedSpans  atomic.Int64
	corruptions                    atomic.Int64
	blocksExamined, blocksPruned   atomic.Int64
	blocksRowFiltered              atomic.Int64 // blocks of which only the rows passing FilterRows were decoded
	attrSegPruned                  atomic.Int64 // segments an attribute value summary ruled out
	replayedRecords, replayedSpans atomic.Int64
	replayRejectedRecords          atomic.Int64
	bufferFull, sealErrors         atomic.Int64
	sealsBehind, paced             atomic.Int64
	// LLM statistics: parts answered from stored aggregates versus rows.
	llmAggSegments, llmAggBlocks, llmRowBlocks atomic.Int64
	// Full-text search: segments and blocks skipped by token filters, and
	// those that had to be read.
	contentSegPruned, contentSegExamined     atomic.Int64
	contentBlockPruned, contentBlockExamined atomic.Int64
	// Of the segments the resident summary passed, those the disk summary
	// pruned; 64-row groups skipped and read by row-group filters.
	contentSegDiskPruned                     atomic.Int64
	contentGroupPruned, contentGroupExamined atomic.Int64
	contentRowsRejected                      atomic.Int64 // candidate rows rejected on their texts
	contentChunkPruned                       atomic.Int64 // full buffer chunks skipped on their token filter
	// Stored values that could not be read for a result (placeholder shown).
	valueErrors atomic.Int64
	// Segment reads that failed without damage (EIO, a closed file).
	ioErrors atomic.Int64
	// Lifecycle: merges, input segments merged away, output bytes and time;
	// segments dropped whole and rewritten by retention; spans erased.
	merges, segmentsMerged, mergeBytes, mergeNanos, mergeErrors atomic.Int64
	mergesDeferred                                              atomic.Int64
	retentionDropped, retentionRewritten                        atomic.Int64
	erasePasses, erasedSpans                                    atomic.Int64
	// Live tail (tail.go): tails opened and closed, spans dropped by full tails.
	tailsOpened, tailsClosed, tailDropped atomic.Int64
}

// Open opens or creates the store in opts.Dir and replays its WAL. The
// returned engine is ready for queries and appends.
func Open(opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	segDir := filepath.Join(opts.Dir, "segments")
	walDir := filepath.Join(opts.Dir, "wal")
	valDir := filepath.Join(opts.Dir, "values")
	fsys := vfs.Or(opts.FS)
	if opts.openSegment == nil {
		opts.openSegment = func(path string) (*segment.Reader, error) { return segment.OpenFS(opts.FS, path) }
	}
	if opts.valueFS == nil {
		opts.valueFS = opts.FS
	}
	for _, d := range []string{opts.Dir, segDir, walDir} {
		if err := fsys.MkdirAll(d); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	lock, err := lockDirFS(fsys, opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := checkManifestPresent(fsys, opts.Dir, segDir); err != nil {
		lock.Close()
		return nil, err
	}
	man, err := readManifestFS(fsys, opts.Dir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if !fileExists(fsys, filepath.Join(opts.Dir, manifestName)) {
		// A new store gets its manifest before anything else, so that a
		// segment file without a manifest beside it always means a lost
		// manifest (refused above), never a crash before the first seal.
		if _, err := writeManifestFS(fsys, opts.Dir, man); err != nil {
			lock.Close()
			return nil, fmt.Errorf("create manifest: %w", err)
		}
	}
	// The fastest zstd level: new values are compressed while sealing, on
	// the ingest machine's critical path for sealing throughput.
	values, err := valuestore.Open(valuestore.Options{Dir: valDir, ZstdLevel: 1, Logger: opts.Logger.With("component", "valuestore"), FS: opts.valueFS})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open value store: %w", err)
	}
	for _, c := range values.Corruptions() {
		opts.Logger.Error("value store damage isolated", "err", c)
	}
	e := &Engine{
		opts:       opts,
		log:        opts.Logger,
		dir:        segDir,
		lock:       lock,
		fs:         fsys,
		manifest:   man,
		kick:       make(chan struct{}, 1),
		sealed:     make(chan struct{}),
		maxPace:    maxPace,
		stop:       make(chan struct{}),
		active:     newMemtable(time.Now(), nil),
		cache:      newBlockCache(opts.BlockCacheBytes),
		llmCache:   llmResultCache{max: 1 << 20},
		opsResults: opsResultCache{max: 1 << 20},
		values:     values,

		mergeFailed: map[string]bool{},
		lcKick:      make(chan struct{}, 1),
	}
	e.lcCtx, e.lcCancel = context.WithCancel(context.Background())
	if err := e.loadErasures(); err != nil {
		values.Close()
		lock.Close()
		return nil, err
	}
	e.openSegments()
	e.removeOrphans()

	e.commitStep, e.commitStop = func(step func()) { step() }, func() {}
	if b := opts.Background; b != nil {
		e.commitStep, e.commitStop = b.CommitLane()
	}
	w, err := wal.Open(wal.Options{
		Dir:          walDir,
		Mode:         opts.Durability,
		SyncInterval: opts.SyncInterval,
		// Never number new WAL files below the manifest's replay start,
		// even if the WAL directory was emptied.
		MinSeq: man.WALStart,
		FS:     opts.FS,
		Step:   e.commitStep,
		Logf:   func(f string, a ...any) { e.log.Warn(fmt.Sprintf(f, a...), "component", "wal") },
	})
	if err != nil {
		e.commitStop()
		e.closeSegments()
		values.Close()
		lock.Close()
		return nil, fmt.Errorf("open wal: %w", err)
	}
	e.wal = w
	if err := e.replay(); err != nil {
		w.Close()
		e.commitStop()
		e.closeSegments()
		values.Close()
		lock.Close()
		return nil, err
	}
	e.memLimit = holdMemoryLimit(opts.MemoryLimit, 2*opts.SealBytes, e.bufferBytes)
	e.wg.Add(2)
	go e.sealLoop()
	go e.lifecycleLoop()
	return e, nil
}

func (e *Engine) openSegments() {
	for _, name := range e.manifest.Segments {
		path := filepath.Join(e.dir, name)
		r, err := e.opts.openSegment(path)
		if err != nil {
			// Isolate the damage: keep serving everything else, and say so
			// (log, /api/v1/stats quarantined, rastro_quarantined_segments).
			// Only damage counts as corruption: a segment that could not be
			// read (EIO, a missing file) is an I/O error.
			switch e.classifyRead(err) {
			case readDamage:
				e.log.Error("segment damaged; not served", "file", path, "err", err)
			case readUnsupported:
				e.log.Error("segment written by a newer version; not served", "file", path, "err", err)
			case readIO:
				e.log.Error("segment could not be read; not served", "file", path, "err", err)
			}
			e.quarantined = append(e.quarantined, name)
			continue
		}
		if err := r.AttrSummaryErr(); err != nil {
			// Served without it: searches read its block filters instead.
			e.m.corruptions.Add(1)
			e.log.Error("segment attribute value summary damaged; served without it (rastro fsck --repair rebuilds it)", "file", path, "err", err)
		}
		e.segs = append(e.segs, newSegHandle(name, r))
	}
}

// removeOrphans deletes temporary files, and segment files that the manifest
// does not name: those numbered at or above NextSegment were written but
// never published (a crash before the manifest rename); those below it were
// retired from the store. A store whose manifest is missing while segment
// files exist is refused, not emptied: see checkManifestPresent.
func (e *Engine) removeOrphans() {
	named := map[string]bool{}
	for _, n := range e.manifest.Segments {
		named[n] = true
	}
	names, err := e.fs.List(e.dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if named[n] {
			continue
		}
		if strings.HasSuffix(n, ".tmp") || strings.HasSuffix(n, ".seg") {
			e.log.Info("removing unpublished file", "file", filepath.Join(e.dir, n))
			e.fs.Remove(filepath.Join(e.dir, n))
		}
	}
}

// checkManifestPresent refuses to open a store that has segment files but no
// manifest (a partial copy or restore): opening it would discard them.
func checkManifestPresent(fsys vfs.FS, dir, segDir string) error {
	if fileExists(fsys, filepath.Join(dir, manifestName)) {
		return nil
	}
	names, _ := fsys.List(segDir)
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			segs = append(segs, n)
		}
	}
	if len(segs) > 0 {
		return fmt.Errorf("%s is missing but %d segment files are present in %s: refusing to open "+
			"(restore the MANIFEST, or move the segments away to start an empty store)", filepath.Join(dir, manifestName), len(segs), segDir)
	}
	return nil
}

func (e *Engine) replay() error {
	start := time.Now()
	st, err := e.wal.Replay(e.manifest.WALStart, func(r wal.Record) error {
		b, err := otlp.Decode(otlp.RecordType(r.Type), r.Body)
		e.m.replayedRecords.Add(1)
		if err != nil {
			// A record is only written after it decoded once; failing now means
			// the decoder changed. Keep going: losing one request beats refusing to start.
			e.m.replayRejectedRecords.Add(1)
			e.log.Error("wal record no longer decodes; skipped", "type", r.Type, "project", r.Project, "err", err)
			return nil
		}
		llm.Enrich(b.Spans, e.opts.Prices)
		e.active.insert(r.Project, b.Spans, int64(len(r.Body)))
		e.m.replayedSpans.Add(int64(len(b.Spans)))
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay wal: %w", err)
	}
	e.log.Info("wal replayed", "records", e.m.replayedRecords.Load(), "spans", e.m.replayedSpans.Load(),
		"files", st.Files, "bytes", st.Bytes, "corrupt_files", st.CorruptFiles, "resyncs", st.Resyncs,
		"skipped_bytes", st.SkippedBytes, "truncated_bytes", st.TruncatedBytes, "corruptions", len(st.Corruptions),
		"took", time.Since(start).String())
	return nil
}

// ErrClosed is returned by Append, queries and tails after Close.
var ErrClosed = kindError{"engine: closed", store.ErrClosed}

// ErrBufferFull is returned by Append when the memory for unsealed spans is
// at its limit; the caller should answer "retry later" (HTTP 429). It wraps
// store.ErrOverloaded.
var ErrBufferFull = kindError{"engine: write buffer full; sealing is behind", store.ErrOverloaded}

// kindError is an engine error with its own message that is also one of the
// store's kinds (errors.Is(err, kind)).
type kindError struct {
	msg  string
	kind error
}

func (e kindError) Error() string { return e.msg }
func (e kindError) Unwrap() error { return e.kind }

// bufferBytes is the estimated memory of the write buffer and the buffers
// waiting to be sealed.
func (e *Engine) bufferBytes() int64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	b := e.active.bytes.Load()
	for _, m := range e.frozen {
		b += m.bytes.Load()
	}
	return b
}

// Append stores one decoded request: its body is written to the WAL, and
// once it is durable (per Durability) its spans become visible to queries, in
// that order. Append returns only after both; the caller acknowledges the
// client then. The engine takes ownership of the body and spans, and derives
// each span's LLM fields (llm.Enrich) before storing it; replay derives them
// again. On success it sets w.SpansDone unless a live tail took the spans
// (the write buffer keeps copies). ctx is checked before the write starts.
func (e *Engine) Append(ctx context.Context, w *store.Write) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	project, body, spans := w.Project, w.Body, w.Spans
	if len(spans) == 0 {
		return nil
	}
	if err := e.pace(ctx, project, w.NoHold); err != nil {
		return err
	}
	if e.bufferBytes() >= e.opts.MaxBufferBytes {
		e.m.bufferFull.Add(1)
		e.requestSeal()
		return ErrBufferFull
	}
	e.lastAppend.Store(time.Now().UnixNano())
	llm.Enrich(spans, e.opts.Prices)
	tailed := false
	err := e.wal.Append(wal.Record{Type: uint8(w.Type), Project: project, Body: body}, func() {
		// Runs in the WAL commit goroutine, serialised with Rotate.
		e.mu.RLock()
		m := e.active
		e.mu.RUnlock()
		m.insert(project, spans, int64(cap(body)))
		tailed = e.publish(project, spans, int64(len(body)))
		if m.bytes.Load() >= e.opts.SealBytes {
			e.requestSeal()
		}
	})
	if err != nil {
		return fmt.Errorf("append to wal: %w", err)
	}
	// The write buffer copied the spans; only a tail keeps them.
	w.SpansDone = !tailed
	return nil
}

// maxPace bounds how long pace holds one request.
const maxPace = time.Second

// pace holds a request of project while the write buffers hold two seals'
// worth or more (PaceBytes) and seals are working (the last one did not
// fail), until a seal retires a buffer, ctx ends or maxPace has passed; then
// Append goes on and refuses only if the buffers are at MaxBufferBytes. Why:
// when ingest outruns the seals, the buffers would grow to MaxBufferBytes (4
// seals by default) and the heap with them; holding the requests instead
// slows the senders to what the seals keep up with, and the CPU the
// requests would have used goes to the seal. Measured with the sustained
// scenario of rastro bench ingest (docs/benchmarks/ingest.md).
//
// Not held: a request the caller marked noHold (its project is refused
// already, docs/operations.md "A flood is refused, not held"), and one of a
// project holding less than an even share of the buffers among the
// projects writing: holding it would slow the seals' debt by little and
// delay a sender that is not the cause.
func (e *Engine) pace(ctx context.Context, project string, noHold bool) error {
	limit := e.PaceBytes()
	if limit == 0 || noHold {
		return nil
	}
	var timeout <-chan time.Time
	for {
		// sealed before the bytes: a seal retiring in between closes it.
		e.mu.RLock()
		sealed := e.sealed
		e.mu.RUnlock()
		b, mine, rows, projects := e.paceShare(project)
		if b < limit || mine*int64(projects) < rows {
			return nil
		}
		if timeout == nil {
			e.m.paced.Add(1)
			e.requestSeal()
			t := time.NewTimer(e.maxPace)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-sealed:
		case <-timeout:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ingestQuiet is how long after the last append ingest counts as idle.
const ingestQuiet = time.Second

// ingestActive reports whether spans were appended within ingestQuiet.
func (e *Engine) ingestActive() bool {
	return time.Now().UnixNano()-e.lastAppend.Load() < int64(ingestQuiet)
}

func (e *Engine) requestSeal() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Seal freezes the write buffer and writes it to a segment now, returning once
// the segment is published. It is a no-op when the buffer is empty.
func (e *Engine) Seal() error {
	if err := e.freeze(); err != nil {
		return err
	}
	return e.sealFrozen()
}

func (e *Engine) sealLoop() {
	defer e.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-e.kick:
		case <-t.C:
		}
		e.memLimit.update()
		e.mu.RLock()
		m := e.active
		e.mu.RUnlock()
		due := m.bytes.Load() >= e.opts.SealBytes ||
			(m.n.Load() > 0 && time.Since(m.created) >= e.opts.SealAge) ||
			(m.n.Load() > 0 && e.wal.Size() >= e.opts.WALMaxBytes)
		if !due {
			continue
		}
		var err error
		if e.bufferBytes() >= e.opts.SealBytes+e.opts.SealBytes/2 {
			// Behind: the buffer grew half a seal past its size while
			// the previous seal ran (or a failed seal's buffer waits).
			// This seal runs at the process's normal priority, not the
			// background's: a seal that yields to ingest falls further
			// behind, until ingest is refused with 429 (measured, with
			// --ingest-nice 10 for every seal: 1,226 of 3,000 requests
			// refused in the sustained scenario, against 1 at nice 0).
			e.m.sealsBehind.Add(1)
			err = e.Seal()
		} else {
			e.runSeal(func() { err = e.Seal() })
		}
		if err != nil {
			e.log.Error("seal failed; data stays in the WAL and the write buffer", "err", err)
			e.m.sealErrors.Add(1)
			e.sealErr.Store(&err)
		} else {
			e.sealErr.Store(nil)
		}
	}
}

// freeze moves the active memtable to the frozen list at a WAL boundary.
func (e *Engine) freeze() error {
	e.mu.RLock()
	empty := e.active.n.Load() == 0
	e.mu.RUnlock()
	if empty {
		return nil
	}
	_, err := e.wal.Rotate(func(seq uint64) {
		e.mu.Lock()
		e.active.walEnd = seq
		e.frozen = append(e.frozen, e.active)
		// A closing engine takes no more appends: its last buffer need
		// not be sized for another full one.
		prev := e.active
		if e.closed.Load() {
			prev = nil
		}
		e.active = newMemtable(time.Now(), prev)
		e.mu.Unlock()
	})
	if err != nil {
		return fmt.Errorf("rotate wal: %w", err)
	}
	return nil
}

// sealFrozen writes every frozen memtable to a segment, oldest first, and
// publishes each through the manifest.
func (e *Engine) sealFrozen() error {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	for {
		e.mu.RLock()
		var m *memtable
		if len(e.frozen) > 0 {
			m = e.frozen[0]
		}
		e.mu.RUnlock()
		if m == nil {
			return nil
		}
		if err := e.sealOneLocked(m); err != nil {
			return err
		}
	}
}

func (e *Engine) sealOneLocked(m *memtable) error {
	start := time.Now()
	// Expired spans and erased traces are not written (hide.go).
	byProject, src := m.sealRows(e.dropper())
	var h *segHandle
	if len(byProject) > 0 {
		name := fmt.Sprintf("%016d.seg", e.manifest.NextSegment)
		info, err := segment.WriteRows(e.dir, name, byProject, src, e.writerOptions())
		if err != nil {
			return fmt.Errorf("write segment %s: %w", name, err)
		}
		// A published segment must never reference a value that a crash
		// could lose: make the values durable before the manifest names it.
		if info.ValueRefs > 0 {
			if err := e.values.Sync(); err != nil {
				e.fs.Remove(filepath.Join(e.dir, name))
				return fmt.Errorf("seal segment %s: sync value store: %w", name, err)
			}
		}
		if hook := e.testBeforeManifest; hook != nil {
			if err := hook(name); err != nil {
				return err
			}
		}
		r, err := e.opts.openSegment(filepath.Join(e.dir, name))
		if err != nil {
			return fmt.Errorf("reopen sealed segment %s: %w", name, err)
		}
		h = newSegHandle(name, r)
		e.m.sealedSpans.Add(int64(info.Spans))
	}
	next := e.manifest
	next.Segments = append([]string(nil), e.manifest.Segments...)
	if h != nil {
		next.Segments = append(next.Segments, h.name)
		next.NextSegment++
	}
	next.WALStart = m.walEnd
	renamed, err := writeManifestFS(e.fs, e.opts.Dir, next)
	if err != nil && !renamed {
		if h != nil {
			h.r.Close()
			e.fs.Remove(filepath.Join(e.dir, h.name))
		}
		return err
	}
	// Once renamed, the new manifest may be what a restart reads: the segment
	// stays, whatever happens next.
	e.manifest = next
	// Publish: the segment replaces the frozen memtable in one step, so a
	// query sees the spans exactly once.
	e.mu.Lock()
	if h != nil {
		e.segs = append(e.segs, h)
	}
	e.frozen = e.frozen[1:]
	close(e.sealed)
	e.sealed = make(chan struct{})
	e.mu.Unlock()
	if err != nil {
		// The directory fsync failed: the rename may not survive a crash, so
		// the WAL must keep these records. A restart then holds them twice
		// (segment and replay) at worst, which queries resolve.
		return fmt.Errorf("manifest published but not synced; WAL kept: %w", err)
	}
	if err := e.wal.RemoveBefore(m.walEnd); err != nil {
		e.log.Warn("could not reclaim wal files", "err", err)
	}
	e.m.seals.Add(1)
	e.m.sealNanos.Add(time.Since(start).Nanoseconds())
	e.log.Debug("sealed", "spans", m.live.Load(), "took", time.Since(start).String())
	return nil
}

// contentTokens is the full-text tokeniser of segments' and buffer chunks'
// token filters, nil without a content index (Options.NoContentIndex).
func (e *Engine) contentTokens() func(*model.Span, func(uint64)) {
	if e.opts.NoContentIndex {
		return nil
	}
	return spanContentTokens
}

func spanContentTokens(s *model.Span, emit func(uint64)) {
	text.SpanTokens(s, text.DefaultMinLen, emit)
}

// writerOptions are the segment writer's options for seals and merges.
func (e *Engine) writerOptions() segment.WriterOptions {
	wo := segment.WriterOptions{BlockSpans: e.opts.BlockSpans, FS: e.opts.FS}
	if tokens := e.contentTokens(); tokens != nil {
		wo.ContentTokens = tokens
		wo.RowGroupTokenFilters = e.opts.RowGroupTokenFilters
	}
	if e.opts.ValueThreshold > 0 {
		wo.StoreValue, wo.ValueThreshold = e.storeValue, e.opts.ValueThreshold
		if e.opts.ContentThreshold >= 0 {
			wo.IsContent, wo.ContentThreshold = text.IsMessageKey, e.opts.ContentThreshold
		}
	}
	return wo
}

// Close stops the seal loop, seals what is buffered, and closes the WAL and
// every segment. Callers must have stopped issuing Appends and queries.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	e.lcCancel()
	close(e.stop)
	e.wg.Wait()
	e.erMu.Lock()
	if e.eraseWake != nil {
		e.eraseWake.Stop()
	}
	e.erMu.Unlock()
	sealErr := e.Seal()
	if sealErr != nil {
		e.log.Error("final seal failed; the WAL keeps the data", "err", sealErr)
	}
	werr := e.wal.Close()
	e.commitStop()
	e.closeSegments()
	if err := e.values.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("close value store: %w", err)
	}
	e.lock.Close()
	e.memLimit.release()
	return werr
}

func (e *Engine) closeSegments() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.segs {
		e.cache.dropSegment(s)
		s.close()
	}
	e.segs = nil
}
