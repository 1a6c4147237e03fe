package metricstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
	"github.com/rastro-dev/rastro/internal/wal"
)

// Record types in the write-ahead log.
const (
	recProto = 1 // an ExportMetricsServiceRequest in protobuf
	recJSON  = 2 // the same in OTLP/JSON
)

var _ store.MetricBackend = (*Store)(nil)

// Options configures a Store. Zero fields take the defaults given.
type Options struct {
	// Dir is the store's directory (the server uses DATA/metrics).
	Dir string
	// FS is the filesystem; nil means the operating system's.
	FS vfs.FS
	// WALMode is the durability of an acknowledged request (default wal.ModeSync).
	WALMode wal.Mode
	// SealBytes: the head is sealed into a block once its estimated size
	// passes this. Default 64 MiB.
	SealBytes int64
	// MaxHeadBytes bounds the heads (the one filling and the one being
	// sealed): beyond it AppendMetrics refuses with store.ErrOverloaded
	// until a seal catches up. Default 4 x SealBytes.
	MaxHeadBytes int64
	// SealAge: the head is sealed at least this often when it holds
	// anything, so that the WAL does not grow without end. Default 1h.
	SealAge time.Duration
	// DeltaIdle: the running total of a series fed by delta points (delta.go)
	// is dropped from memory at the first seal after it has not been used
	// for this long; its next delta reads it back from storage. Default 1h.
	DeltaIdle time.Duration
	// Logf receives warnings. Default: discard.
	Logf func(format string, args ...any)
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("metricstore: no directory")
	}
	if o.SealBytes <= 0 {
		o.SealBytes = 64 << 20
	}
	if o.MaxHeadBytes <= 0 {
		o.MaxHeadBytes = 4 * o.SealBytes
	}
	if o.SealAge <= 0 {
		o.SealAge = time.Hour
	}
	if o.DeltaIdle <= 0 {
		o.DeltaIdle = time.Hour
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// memSeries is one series in the head: its chunk under construction and,
// apart, its newest sample, which a later sample of the same millisecond
// replaces (OTLP times are in nanoseconds; two points of a series may fall
// in one millisecond, and the last one sent wins).
type memSeries struct {
	project   string
	labels    store.Labels
	minT      int64
	app       appender // every sample but the newest
	last      store.Sample
	hasLast   bool
	exemplars []store.MetricExemplar
}

// add appends a sample; it reports false for one older than the newest.
func (m *memSeries) add(t int64, v float64) (ok bool, grew int) {
	if m.hasLast {
		switch {
		case t < m.last.T:
			return false, 0
		case t == m.last.T:
			m.last.V = v
			return true, 0
		}
		before, marks := len(m.app.s.b), len(m.app.marks)
		m.app.append(m.last.T, m.last.V)
		grew = len(m.app.s.b) - before + (len(m.app.marks)-marks)*int(unsafe.Sizeof(chunkMark{}))
	}
	m.last, m.hasLast = store.Sample{T: t, V: v}, true
	return true, grew
}

// flush moves the newest sample into the chunk (before the series is
// written to a block).
func (m *memSeries) flush() {
	if m.hasLast {
		m.app.append(m.last.T, m.last.V)
		m.hasLast = false
	}
}

// count is the number of samples.
func (m *memSeries) count() int {
	if m.hasLast {
		return m.app.n + 1
	}
	return m.app.n
}

// maxT is the time of the newest sample.
func (m *memSeries) maxT() int64 {
	if m.hasLast {
		return m.last.T
	}
	return m.app.t
}

// samples decodes the samples with mint <= t <= maxt.
func (m *memSeries) samples(mint, maxt int64) []store.Sample {
	out, err := m.app.samples(mint, maxt, nil)
	if err != nil {
		panic("metricstore: a head chunk does not decode (broken invariant): " + err.Error())
	}
	if m.hasLast && m.last.T >= mint && m.last.T <= maxt {
		out = append(out, m.last)
	}
	return out
}

// head is the write buffer: series by hash of project and labels.
type head struct {
	series map[uint64][]*memSeries
	bytes  int64
	points int
}

func newHead() *head { return &head{series: map[uint64][]*memSeries{}} }

func seriesHash(project string, ls store.Labels) uint64 {
	d := xxhash.New()
	d.WriteString(project)
	for _, l := range ls {
		d.Write([]byte{0xff})
		d.WriteString(l.Name)
		d.Write([]byte{0xfe})
		d.WriteString(l.Value)
	}
	return d.Sum64()
}

func labelsEqual(a, b store.Labels) bool { return slices.Equal(a, b) }

// Store is the metric store. Its methods are safe for concurrent use.
//
// Lock order: sealMu, then mu. mu guards head, sealing, blocks, man,
// closed, deltas and groups; no file I/O happens under it (a query copies
// the block list and takes a reference on each block first).
type Store struct {
	opts Options
	fs   vfs.FS
	wal  *wal.WAL

	sealMu sync.Mutex // one seal or retention pass at a time
	sealCh chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // the sealer goroutine: started by Open, ended by Close

	counters counters // atomics

	mu      sync.RWMutex
	head    *head
	sealing *head // the head being written to a block, still readable
	blocks  []*block
	man     manifest
	closed  bool
	// The running totals of delta series, by deltaKey, and the bucket
	// bounds of delta exponential histograms (delta.go).
	deltas map[string]*runningTotal
	groups map[string]*expGroup
}

type manifest struct {
	Version  int      `json:"version"`
	Blocks   []string `json:"blocks"`
	WALStart uint64   `json:"wal_start"` // the first WAL file not yet sealed
	NextFile uint64   `json:"next_file"`
}

const manifestName = "MANIFEST.json"

// Open opens (or creates) the store in opts.Dir: it reads the manifest,
// opens the blocks it lists (removing files a crash left unlisted) and
// replays the WAL into the head.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, fs: vfs.Or(opts.FS), head: newHead(), deltas: map[string]*runningTotal{}, groups: map[string]*expGroup{}, sealCh: make(chan struct{}, 1), done: make(chan struct{})}
	if err := s.fs.MkdirAll(opts.Dir); err != nil {
		return nil, fmt.Errorf("metricstore: %w", err)
	}
	if err := s.readManifest(); err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, name := range s.man.Blocks {
		b, err := openBlock(s.fs, opts.Dir, name, opts.Logf)
		if err != nil {
			// A block that cannot be read is left out, not fatal: every
			// other block stays available (quarantine, as the engine does).
			opts.Logf("metricstore: block %s left out: %v", name, err)
			listed[name] = true
			continue
		}
		s.blocks = append(s.blocks, b)
		listed[name] = true
	}
	logf := func(format string, args ...any) { opts.Logf("metricstore: "+format, args...) }
	if err := vfs.RemoveLeftovers(s.fs, opts.Dir, ".rmet", listed, "an interrupted seal", logf); err != nil {
		return nil, fmt.Errorf("metricstore: %w", err)
	}
	w, err := wal.Open(wal.Options{Dir: opts.Dir + "/wal", Mode: opts.WALMode, MinSeq: s.man.WALStart, FS: opts.FS, Logf: opts.Logf})
	if err != nil {
		return nil, fmt.Errorf("metricstore: %w", err)
	}
	s.wal = w
	if _, err := w.Replay(s.man.WALStart, func(r wal.Record) error {
		b, err := decode(r.Type, r.Body)
		if err != nil {
			opts.Logf("metricstore: a WAL record no longer decodes, skipped: %v", err)
			return nil
		}
		tr := translate(&b)
		if err := s.lookupBases(r.Project, &tr); err != nil {
			opts.Logf("metricstore: replay: %v (the delta series concerned start again from zero)", err)
		}
		s.apply(r.Project, &tr)
		return nil
	}); err != nil {
		w.Close()
		return nil, fmt.Errorf("metricstore: replay: %w", err)
	}
	s.wg.Add(1)
	go s.sealer()
	return s, nil
}

func decode(typ uint8, body []byte) (otlp.MetricBatch, error) {
	switch typ {
	case recProto:
		return otlp.DecodeMetricsProto(body)
	case recJSON:
		return otlp.DecodeMetricsJSON(body)
	}
	return otlp.MetricBatch{}, fmt.Errorf("unknown record type %d", typ)
}

func (s *Store) readManifest() error {
	b, err := vfs.ReadFile(s.fs, s.opts.Dir+"/"+manifestName)
	if errors.Is(err, fs.ErrNotExist) {
		s.man = manifest{Version: 1}
		return nil
	}
	if err != nil {
		return fmt.Errorf("metricstore: read manifest: %w", err)
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
		return fmt.Errorf("write metrics manifest: %w", err)
	}
	return nil
}

// apply puts translated samples into the head, in WAL order (the WAL's
// commit goroutine, or replay). A sample older than its series' newest in
// the head is dropped and counted in tr; one of the same millisecond
// replaces it. Delta points are added to their series' running totals
// (delta.go).
func (s *Store) apply(project string, tr *translation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var now time.Time
	for i := 0; i < len(tr.points); {
		p := &tr.points[i]
		if p.delta == nil {
			if !s.addLocked(project, p, p.v) {
				tr.markStale(p.src)
			}
			i++
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		j := i + 1
		for j < len(tr.points) && tr.points[j].delta == p.delta {
			j++
		}
		s.applyDeltaLocked(project, tr, tr.points[i:j], 0, now)
		i = j
	}
	if len(tr.expDeltas) > 0 && now.IsZero() {
		now = time.Now()
	}
	for i := range tr.expDeltas {
		s.applyExpDeltaLocked(project, tr, &tr.expDeltas[i], now)
	}
	if n := len(tr.stale); n > 0 {
		tr.accepted -= n
		tr.reject(n, fmt.Sprintf("%d data points older than their series' newest sample were dropped (out of order)", n))
	}
}

// addLocked puts sample v of p's series into the head; it reports false
// for a sample older than the series' newest there.
func (s *Store) addLocked(project string, p *point, v float64) bool {
	h := s.head
	hs := seriesHash(project, p.labels)
	var ms *memSeries
	for _, c := range h.series[hs] {
		if c.project == project && labelsEqual(c.labels, p.labels) {
			ms = c
			break
		}
	}
	if ms == nil {
		ms = &memSeries{project: strings.Clone(project), labels: cloneLabels(p.labels), minT: p.t}
		h.series[hs] = append(h.series[hs], ms)
		h.bytes += 120 + int64(len(project))
		for _, l := range p.labels {
			h.bytes += 32 + int64(len(l.Name)+len(l.Value))
		}
	}
	n0 := ms.count()
	ok, grew := ms.add(p.t, v)
	if !ok {
		return false
	}
	h.bytes += int64(grew)
	h.points += ms.count() - n0
	if len(p.exemplars) > 0 {
		ms.exemplars = append(ms.exemplars, p.exemplars...)
		h.bytes += 40 * int64(len(p.exemplars))
	}
	return true
}

func cloneLabels(ls store.Labels) store.Labels {
	out := make(store.Labels, len(ls))
	for i, l := range ls {
		out[i] = store.Label{Name: strings.Clone(l.Name), Value: strings.Clone(l.Value)}
	}
	return out
}

// AppendMetrics decodes one export request and, unless it is malformed (an
// *otlp.Error, nothing stored), writes it to the WAL; when AppendMetrics
// returns without error its samples are durable (per the WAL mode) and
// readable.
func (s *Store) AppendMetrics(project string, format store.MetricFormat, body []byte) (store.MetricResult, error) {
	typ := uint8(recProto)
	if format == store.MetricFormatJSON {
		typ = recJSON
	}
	b, err := decode(typ, body)
	if err != nil {
		return store.MetricResult{}, err
	}
	tr := translate(&b) // here, in the request's goroutine, not under the lock
	if len(tr.points) == 0 && len(tr.expDeltas) == 0 {
		s.counters.rejected.Add(int64(tr.rejected))
		return store.MetricResult{Accepted: tr.accepted, Rejected: tr.rejected, RejectMsg: tr.rejectMsg, Problems: b.Problems}, nil
	}
	s.mu.RLock()
	closed, held := s.closed, s.head.bytes
	if s.sealing != nil {
		held += s.sealing.bytes
	}
	s.mu.RUnlock()
	if closed {
		return store.MetricResult{}, store.ErrClosed
	}
	if held >= s.opts.MaxHeadBytes {
		s.kickSeal()
		return store.MetricResult{}, fmt.Errorf("%w: the metric write buffer holds %d bytes, its limit is %d: seals are behind (nothing of this request was stored)",
			store.ErrOverloaded, held, s.opts.MaxHeadBytes)
	}
	if err := s.lookupBases(project, &tr); err != nil {
		return store.MetricResult{}, fmt.Errorf("metricstore: %w (nothing of this request was stored)", err)
	}
	err = s.wal.Append(wal.Record{Type: typ, Project: project, Body: body}, func() { s.apply(project, &tr) })
	if err != nil {
		return store.MetricResult{}, err
	}
	s.mu.RLock()
	full := s.head.bytes >= s.opts.SealBytes
	s.mu.RUnlock()
	if full {
		s.kickSeal()
	}
	s.counters.accepted.Add(int64(tr.accepted))
	s.counters.rejected.Add(int64(tr.rejected))
	return store.MetricResult{Accepted: tr.accepted, Rejected: tr.rejected, RejectMsg: tr.rejectMsg, Problems: b.Problems}, nil
}

// kickSeal asks the sealer for a seal without waiting.
func (s *Store) kickSeal() {
	select {
	case s.sealCh <- struct{}{}:
	default:
	}
}

func (s *Store) sealer() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.SealAge)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.sealCh:
		case <-t.C:
		}
		if err := s.Seal(); err != nil {
			s.opts.Logf("metricstore: seal failed (the samples stay in the WAL and the head): %v", err)
		}
	}
}

// Seal writes the head into a block file and removes the WAL files it covers.
func (s *Store) Seal() error {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	s.mu.RLock()
	empty := len(s.head.series) == 0
	s.mu.RUnlock()
	if empty {
		return nil
	}
	walStart, err := s.wal.Rotate(func(uint64) {
		s.mu.Lock()
		s.sealing, s.head = s.head, newHead()
		s.dropIdleDeltasLocked(time.Now().Add(-s.opts.DeltaIdle))
		for _, l := range s.sealing.series {
			for _, m := range l {
				m.flush() // the block holds whole chunks
			}
		}
		s.mu.Unlock()
	})
	if err != nil {
		return err
	}
	// The sealing head is no longer written: read it without the lock.
	var ss []*memSeries
	for _, l := range s.sealing.series {
		ss = append(ss, l...)
	}
	slices.SortFunc(ss, func(a, b *memSeries) int {
		if c := strings.Compare(a.project, b.project); c != 0 {
			return c
		}
		return store.CompareLabels(a.labels, b.labels)
	})
	m := s.man
	m.Blocks = slices.Clone(m.Blocks)
	name := fmt.Sprintf("%016d.rmet", m.NextFile)
	m.NextFile++
	blk, err := writeBlock(s.fs, s.opts.Dir, name, ss)
	if err != nil {
		s.counters.sealErrs.Add(1)
		s.restoreSealing()
		return err
	}
	m.Blocks = append(m.Blocks, name)
	m.WALStart = walStart
	if err := s.writeManifest(m); err != nil {
		s.counters.sealErrs.Add(1)
		blk.release()
		s.fs.Remove(s.opts.Dir + "/" + name)
		s.restoreSealing()
		return err
	}
	s.mu.Lock()
	s.man = m
	s.blocks = append(slices.Clone(s.blocks), blk)
	s.sealing = nil
	s.mu.Unlock()
	s.counters.seals.Add(1)
	if err := s.wal.RemoveBefore(walStart); err != nil {
		s.opts.Logf("metricstore: removing sealed WAL files: %v", err)
	}
	return nil
}

// restoreSealing makes a head whose seal failed readable again beside the
// current one; its WAL files are kept, so the next seal (or a restart's
// replay) covers it.
func (s *Store) restoreSealing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sealing
	s.sealing = nil
	// Samples of the failed head go first: they are older.
	for hs, l := range old.series {
		for _, ms := range l {
			found := false
			for _, c := range s.head.series[hs] {
				if c.project == ms.project && labelsEqual(c.labels, ms.labels) {
					merged := &memSeries{project: ms.project, labels: ms.labels, minT: ms.minT, exemplars: append(slices.Clone(ms.exemplars), c.exemplars...)}
					for _, x := range ms.samples(-1<<63, 1<<63-1) {
						merged.add(x.T, x.V)
					}
					for _, x := range c.samples(-1<<63, 1<<63-1) {
						merged.add(x.T, x.V)
					}
					*c = *merged
					found = true
				}
			}
			if !found {
				s.head.series[hs] = append(s.head.series[hs], ms)
			}
		}
	}
	s.head.bytes += old.bytes
	s.head.points += old.points
}

// DropBefore removes the blocks whose newest sample is older than the
// cutoff (milliseconds) of every project with series in them: retention by
// whole blocks. cutoff gives a project's cutoff (math.MinInt64 keeps its
// samples forever). It returns the samples removed.
func (s *Store) DropBefore(cutoff func(project string) int64) (int, error) {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	s.mu.RLock()
	var keep, drop []*block
	for _, b := range s.blocks {
		ok := true
		for i := 0; ok && i < len(b.series); i++ {
			ok = b.maxT < cutoff(b.series[i].project)
		}
		if ok {
			drop = append(drop, b)
		} else {
			keep = append(keep, b)
		}
	}
	m := s.man
	s.mu.RUnlock()
	if len(drop) == 0 {
		return 0, nil
	}
	m.Blocks = nil
	for _, b := range keep {
		m.Blocks = append(m.Blocks, b.name)
	}
	if err := s.writeManifest(m); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.man, s.blocks = m, keep
	s.mu.Unlock()
	n := 0
	for _, b := range drop {
		n += b.points
		if err := s.fs.Remove(b.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logf("metricstore: remove %s: %v", b.path, err)
		}
		b.release() // closed once the last query reading it is done
	}
	return n, s.fs.SyncDir(s.opts.Dir)
}

// Stats describes the store.
type Stats struct {
	Series      int   `json:"head_series"`
	HeadPoints  int   `json:"head_points"`
	HeadBytes   int64 `json:"head_bytes"`
	Blocks      int   `json:"blocks"`
	BlockPoints int   `json:"block_points"`
	BlockBytes  int64 `json:"block_bytes"`
	WALBytes    int64 `json:"wal_bytes"`
}

// Stats counts series, points and bytes.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var st Stats
	for _, h := range []*head{s.head, s.sealing} {
		if h == nil {
			continue
		}
		for _, l := range h.series {
			st.Series += len(l)
		}
		st.HeadPoints += h.points
		st.HeadBytes += h.bytes
	}
	for _, b := range s.blocks {
		st.Blocks++
		st.BlockPoints += b.points
		st.BlockBytes += b.bytes
	}
	st.WALBytes = s.wal.Size()
	return st
}

// Close seals the head and closes the WAL and the blocks.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	s.wg.Wait()
	err := s.Seal()
	err = errors.Join(err, s.wal.Close())
	s.mu.Lock()
	blocks := s.blocks
	s.blocks = nil
	s.mu.Unlock()
	for _, b := range blocks {
		b.release()
	}
	return err
}
