package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/store"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/vfs"
	"github.com/rastro-dev/rastro/internal/wal"
)

// Record types in the write-ahead log.
const (
	recProto  = 1 // an ExportLogsServiceRequest in protobuf
	recJSON   = 2 // the same in OTLP/JSON
	recNative = 3 // Rastro's native JSON array of records
)

// The types of the API side live in internal/store.
type (
	Format = store.LogFormat
	Result = store.LogResult
	Query  = store.LogQuery
	Cursor = store.LogCursor
	Hit    = store.LogHit
	Page   = store.LogPage
)

// Request formats.
const (
	FormatProto  = store.LogFormatProto
	FormatJSON   = store.LogFormatJSON
	FormatNative = store.LogFormatNative
)

var _ store.LogBackend = (*Store)(nil)

// Options configures a Store. Zero fields take the defaults given.
type Options struct {
	// Dir is the store's directory (the server uses DATA/logs).
	Dir string
	// FS is the filesystem; nil means the operating system's.
	FS vfs.FS
	// WALMode is the durability of an acknowledged request (default wal.ModeSync).
	WALMode wal.Mode
	// SealBytes: the write buffer is sealed into segments once its estimated
	// size passes this. Default 32 MiB.
	SealBytes int64
	// Now gives the observed time of records that carry neither a time nor an
	// observed time. Default time.Now.
	Now func() time.Time
	// Logf receives warnings. Default: discard.
	Logf func(format string, args ...any)
	// Reserve, when set, is told how the heap the write buffers hold
	// changes (positive as records arrive, negative once a seal lets them
	// go), so that a process-wide soft memory limit leaves room for them
	// (engine.ReserveMemory).
	Reserve func(delta int64)

	// Compaction, when set, merges small segments in the background after
	// seals (compact.go, docs/logs.md); Compact merges on request either way.
	Compaction bool
	// CompactionMaxSegmentBytes is the largest segment a merge writes;
	// segments of half of it or more are not merged again. Default
	// DefaultCompactionMaxSegmentBytes.
	CompactionMaxSegmentBytes int64
	// CompactionFanout is how many adjacent segments of one size tier
	// trigger a merge, and the most one merge reads (2-64). Default
	// DefaultCompactionFanout.
	CompactionFanout int
	// Retention, when set, gives a project's retention (0: forever): a
	// merge leaves out the records older than it.
	Retention func(project string) time.Duration
}

// heapPerEstimate is how much heap to reserve per byte the buffers hold,
// for Reserve: the collector lets the heap grow past the live bytes before
// it runs.
const heapPerEstimate = 2

// Store is the log store. Its methods are safe for concurrent use.
type Store struct {
	opts Options
	fs   vfs.FS
	wal  *wal.WAL

	sealMu sync.Mutex // one seal, retention pass, erasure or merge publication at a time; guards writes of man
	sealCh chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup

	// compactMu: one compaction at a time (compact.go); it guards
	// mergeFailed. compactCh wakes the background compactor after a seal;
	// stopCompact cancels a merge in progress at Close.
	compactMu   sync.Mutex
	mergeFailed map[string]bool
	compactCh   chan struct{}
	compactCtx  context.Context
	stopCompact context.CancelFunc

	mu       sync.RWMutex
	bufs     map[string]*projBuf // project -> records not yet sealed
	sealing  map[string]*projBuf // the buffer being sealed, still searchable
	bufBytes int64
	// sealingBytes is the estimate of the buffer being sealed.
	sealingBytes int64
	nextSeq      uint64 // given in WAL order by apply
	segs         []*segment
	man          manifest
	closed       bool
	sealErr      error
	subs         []*subscriber // live tails (tail.go)
}

type manifest struct {
	Version  int      `json:"version"`
	Segments []string `json:"segments"`
	WALStart uint64   `json:"wal_start"` // the first WAL file not yet sealed
	NextSeq  uint64   `json:"next_seq"`  // the sequence number of the first record in that file
	NextFile uint64   `json:"next_file"`
	// Erased lists the trace erasures whose records may still be in the
	// WAL (erase.go): replay and seals leave those records out.
	Erased []erasure `json:"erased,omitempty"`
}

const manifestName = "MANIFEST.json"

// Open opens (or creates) the store in opts.Dir: it reads the manifest,
// opens the segments it lists (removing files a crash left unlisted) and
// replays the WAL into the write buffer.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("logstore: no directory")
	}
	if opts.SealBytes <= 0 {
		opts.SealBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Reserve == nil {
		opts.Reserve = func(int64) {}
	}
	if opts.CompactionMaxSegmentBytes == 0 {
		opts.CompactionMaxSegmentBytes = DefaultCompactionMaxSegmentBytes
	}
	if opts.CompactionFanout == 0 {
		opts.CompactionFanout = DefaultCompactionFanout
	}
	if opts.CompactionMaxSegmentBytes < 0 || opts.CompactionFanout < 2 || opts.CompactionFanout > 64 {
		return nil, fmt.Errorf("logstore: compaction: max segment bytes %d (want > 0) or fan-out %d (want 2-64) out of range",
			opts.CompactionMaxSegmentBytes, opts.CompactionFanout)
	}
	s := &Store{opts: opts, fs: vfs.Or(opts.FS), bufs: map[string]*projBuf{}, sealCh: make(chan struct{}, 1), done: make(chan struct{}),
		mergeFailed: map[string]bool{}, compactCh: make(chan struct{}, 1)}
	s.compactCtx, s.stopCompact = context.WithCancel(context.Background())
	if err := s.fs.MkdirAll(opts.Dir); err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	if err := s.readManifest(); err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, name := range s.man.Segments {
		seg, err := openSegment(s.fs, opts.Dir, name)
		if err != nil {
			return nil, fmt.Errorf("logstore: %w", err)
		}
		s.segs = append(s.segs, seg)
		listed[name] = true
	}
	logf := func(format string, args ...any) { opts.Logf("logstore: "+format, args...) }
	if err := vfs.RemoveLeftovers(s.fs, opts.Dir, ".rlog", listed, "an interrupted seal", logf); err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	w, err := wal.Open(wal.Options{Dir: opts.Dir + "/wal", Mode: opts.WALMode, MinSeq: s.man.WALStart, FS: opts.FS, Logf: opts.Logf})
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	s.wal = w
	s.nextSeq = s.man.NextSeq
	if _, err := w.Replay(s.man.WALStart, func(r wal.Record) error {
		b, err := decode(r.Type, r.Body)
		if err != nil {
			opts.Logf("logstore: a WAL record no longer decodes, skipped: %v", err)
			return nil
		}
		s.add(r.Project, b.Records, tokenize(b.Records))
		return nil
	}); err != nil {
		w.Close()
		return nil, fmt.Errorf("logstore: replay: %w", err)
	}
	s.wg.Add(1)
	go s.sealer()
	if opts.Compaction {
		s.wg.Add(1)
		go s.compactor()
	}
	return s, nil
}

func decode(typ uint8, body []byte) (otlp.LogBatch, error) {
	switch typ {
	case recProto:
		return otlp.DecodeLogsProto(body)
	case recJSON:
		return otlp.DecodeLogsJSON(body)
	case recNative:
		return otlp.DecodeNativeLogs(body)
	}
	return otlp.LogBatch{}, fmt.Errorf("unknown record type %d", typ)
}

func (s *Store) readManifest() error {
	b, err := vfs.ReadFile(s.fs, s.opts.Dir+"/"+manifestName)
	if errors.Is(err, fs.ErrNotExist) {
		s.man = manifest{Version: 1}
		return nil
	}
	if err != nil {
		return fmt.Errorf("logstore: read manifest: %w", err)
	}
	if err := json.Unmarshal(b, &s.man); err != nil || s.man.Version != 1 {
		return &CorruptionError{File: s.opts.Dir + "/" + manifestName, Reason: fmt.Sprintf("unreadable manifest (version %d): %v", s.man.Version, err)}
	}
	return nil
}

func (s *Store) writeManifest(m manifest) error {
	b, err := json.Marshal(m)
	if err == nil {
		err = vfs.WriteFileAtomic(s.fs, s.opts.Dir+"/"+manifestName, b)
	}
	if err != nil {
		return fmt.Errorf("write logs manifest: %w", err)
	}
	return nil
}

// add puts decoded records into the write buffer, numbering them; it runs
// in WAL order (the WAL's apply, or replay). toks[i] are the sorted word
// hashes of recs[i] (tokenize).
func (s *Store) add(project string, recs []model.LogRecord, toks [][]uint64) {
	if len(recs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pb := s.bufs[project]
	if pb == nil {
		pb = newProjBuf()
		s.bufs[project] = pb
	}
	before := pb.bytes
	erased := erasedIn(s.man.Erased, project) // only a replay meets records an erasure covers
	tabs := pb.tables()
	var offered []entry // for live tails
	for i := range recs {
		seq := s.nextSeq
		s.nextSeq++
		if isErased(erased, recs[i].TraceID, seq) {
			continue
		}
		if err := pb.push(tabs, &recs[i], seq, toks[i]); err != nil {
			// The record was decoded from this request: its resource
			// and scope encode and decode.
			panic("logstore: bug: a decoded record does not re-encode: " + err.Error())
		}
		if len(s.subs) > 0 {
			offered = append(offered, entry{seq: seq, rec: recs[i], toks: toks[i]})
		}
	}
	for _, sub := range s.subs {
		sub.offer(project, offered)
	}
	est := pb.bytes - before
	s.bufBytes += est
	s.opts.Reserve(heapPerEstimate * est)
}

// tokenize gives each record's word hashes, sorted and without repeats,
// as capped sub-slices of one array.
func tokenize(recs []model.LogRecord) [][]uint64 {
	out := make([][]uint64, len(recs))
	var all []uint64
	for i := range recs {
		start := len(all)
		recordTokens(&recs[i], func(h uint64) { all = append(all, h) })
		hs := all[start:]
		slices.Sort(hs)
		all = all[:start+len(slices.Compact(hs))]
		out[i] = all[start:len(all):len(all)]
	}
	return out
}

// recordHashes is a record's word hashes, sorted and without repeats.
func recordHashes(r *model.LogRecord) []uint64 {
	var hs []uint64
	recordTokens(r, func(h uint64) { hs = append(hs, h) })
	slices.Sort(hs)
	return slices.Clip(slices.Compact(hs))
}

// ErrClosed is returned by AppendLogs after Close.
var ErrClosed = store.ErrClosed

// AppendLogs decodes one export request and, unless it is malformed (an
// *otlp.Error, nothing stored), writes it to the WAL; when AppendLogs returns
// without error its records are durable (per the WAL mode) and searchable.
func (s *Store) AppendLogs(project string, format Format, body []byte) (Result, error) {
	typ := uint8(recProto)
	switch format {
	case FormatJSON:
		typ = recJSON
	case FormatNative:
		typ = recNative
	}
	b, err := decode(typ, body)
	if err != nil {
		return Result{}, err
	}
	res := Result{Accepted: len(b.Records), Rejected: b.Rejected, RejectMsg: b.RejectMsg, Problems: b.Problems}
	if len(b.Records) == 0 {
		return res, nil
	}
	// A record with neither time is given the time it was received; the
	// request is re-encoded so that replay gives it the same one.
	now := uint64(0)
	for i := range b.Records {
		if b.Records[i].Time() == 0 {
			if now == 0 {
				now = uint64(s.opts.Now().UnixNano())
			}
			b.Records[i].ObservedTimeUnixNano = now
		}
	}
	if now != 0 {
		body, typ = otlp.EncodeLogsProto(b.Records), recProto
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return Result{}, ErrClosed
	}
	toks := tokenize(b.Records) // here, in the request's goroutine, not under the lock
	err = s.wal.Append(wal.Record{Type: typ, Project: project, Body: body}, func() {
		s.add(project, b.Records, toks)
	})
	if err != nil {
		return Result{}, err
	}
	s.mu.RLock()
	full := s.bufBytes >= s.opts.SealBytes
	s.mu.RUnlock()
	if full {
		select {
		case s.sealCh <- struct{}{}:
		default:
		}
	}
	return res, nil
}

func (s *Store) sealer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.sealCh:
			if err := s.Seal(); err != nil {
				s.opts.Logf("logstore: seal failed (the records stay in the WAL and the buffer): %v", err)
			}
		}
	}
}

// Seal writes the write buffer into segment files (one per project) and
// removes the WAL files they cover.
func (s *Store) Seal() error {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	return s.sealLocked()
}

func (s *Store) sealLocked() error {
	s.mu.RLock()
	empty := len(s.bufs) == 0
	s.mu.RUnlock()
	if empty {
		return nil
	}
	var nextSeq uint64
	walStart, err := s.wal.Rotate(func(uint64) {
		s.mu.Lock()
		s.sealing, s.bufs, s.sealingBytes, s.bufBytes = s.bufs, map[string]*projBuf{}, s.bufBytes, 0
		nextSeq = s.nextSeq
		s.mu.Unlock()
	})
	if err != nil {
		return err
	}
	projects := make([]string, 0, len(s.sealing))
	for p := range s.sealing {
		projects = append(projects, p)
	}
	slices.Sort(projects)
	m := s.man
	m.Segments = slices.Clone(m.Segments)
	var made []*segment
	for _, p := range projects {
		pb := s.sealing[p]
		order := s.liveRows(p, pb)
		if len(order) == 0 {
			continue
		}
		name := fmt.Sprintf("%016d.rlog", m.NextFile)
		m.NextFile++
		seg, err := writeSegment(s.fs, s.opts.Dir, name, p, pb, order)
		if err != nil {
			s.restoreSealing()
			return err
		}
		made = append(made, seg)
		m.Segments = append(m.Segments, name)
	}
	m.WALStart, m.NextSeq = walStart, nextSeq
	m.Erased = pendingErasures(m.Erased, nextSeq)
	if err := s.writeManifest(m); err != nil {
		s.restoreSealing()
		return err
	}
	s.mu.Lock()
	s.man = m
	s.segs = append(slices.Clone(s.segs), made...)
	s.sealing = nil
	s.opts.Reserve(-heapPerEstimate * s.sealingBytes)
	s.sealingBytes = 0
	s.mu.Unlock()
	if err := s.wal.RemoveBefore(walStart); err != nil {
		s.opts.Logf("logstore: removing sealed WAL files: %v", err)
	}
	if len(made) > 0 && s.opts.Compaction {
		select {
		case s.compactCh <- struct{}{}:
		default:
		}
	}
	return nil
}

// restoreSealing puts a buffer whose seal failed back in front of the
// current one, so that a later seal retries it (its WAL files are kept).
func (s *Store) restoreSealing() {
	s.mu.Lock()
	for p, pb := range s.sealing {
		merged := newProjBuf()
		for _, src := range []*projBuf{pb, s.bufs[p]} {
			if src == nil {
				continue
			}
			for i := range src.n {
				if err := merged.copyRow(src, i); err != nil {
					panic("logstore: bug: a buffered record does not copy: " + err.Error())
				}
			}
		}
		s.bufs[p] = merged
	}
	s.bufBytes += s.sealingBytes // still reserved
	s.sealingBytes = 0
	s.sealing = nil
	s.mu.Unlock()
}

// DropBefore removes the segments whose newest record is older than cutoff
// (nanoseconds) and whose project satisfies match (nil: every project):
// retention. It returns the records removed.
func (s *Store) DropBefore(cutoff uint64, match func(project string) bool) (int, error) {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	s.mu.RLock()
	var keep, drop []*segment
	for _, seg := range s.segs {
		if seg.maxT < cutoff && (match == nil || match(seg.project)) {
			drop = append(drop, seg)
		} else {
			keep = append(keep, seg)
		}
	}
	m := s.man
	s.mu.RUnlock()
	if len(drop) == 0 {
		return 0, nil
	}
	m.Segments = nil
	for _, seg := range keep {
		m.Segments = append(m.Segments, seg.name)
	}
	if err := s.writeManifest(m); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.man, s.segs = m, keep
	s.mu.Unlock()
	n := 0
	for _, seg := range drop {
		n += seg.count
		s.release(seg)
	}
	return n, s.fs.SyncDir(s.opts.Dir)
}

// acquire takes a reference to each segment of segs, which the caller took
// from s.segs under mu (held): their files stay until release.
func acquire(segs []*segment) {
	for _, seg := range segs {
		seg.refs.Add(1)
	}
}

// release drops a reference to seg (the store's, once its manifest no
// longer lists it, or a reader's) and removes its file when it was the
// last one. A crash before that leaves a file the manifest does not list,
// which Open removes.
func (s *Store) release(seg *segment) {
	if n := seg.refs.Add(-1); n > 0 {
		return
	} else if n < 0 {
		panic("logstore: bug: a segment released more often than held")
	}
	if err := s.fs.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.opts.Logf("logstore: remove %s: %v", seg.path, err)
	}
}

// Stats describes the store.
type Stats struct {
	Records         int   `json:"records"`
	BufferedRecords int   `json:"buffered_records"`
	Segments        int   `json:"segments"`
	SegmentBytes    int64 `json:"segment_bytes"`
	WALBytes        int64 `json:"wal_bytes"`
	// WAL counts the log's group commits and their write and fsync time
	// since Open (the ingest benchmarks report them).
	WAL wal.Stats `json:"-"`
}

// Stats counts records, segments and bytes.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var st Stats
	for _, seg := range s.segs {
		st.Records += seg.count
		st.SegmentBytes += seg.bytes
	}
	st.Segments = len(s.segs)
	for _, m := range []map[string]*projBuf{s.bufs, s.sealing} {
		for _, pb := range m {
			st.BufferedRecords += pb.n
		}
	}
	st.Records += st.BufferedRecords
	st.WALBytes = s.wal.Size()
	st.WAL = s.wal.Stats()
	return st
}

// Close seals the buffer and closes the WAL.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for _, sub := range subs {
		sub.end()
	}
	close(s.done)
	s.stopCompact()
	s.wg.Wait()
	err := s.Seal()
	return errors.Join(err, s.wal.Close())
}
