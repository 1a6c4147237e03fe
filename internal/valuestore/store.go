package valuestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/rastro-dev/rastro/internal/vfs"
)

// Ref identifies a value: the SHA-256 of its raw bytes.
type Ref [32]byte

// String returns the hash in hex.
func (r Ref) String() string { return hex.EncodeToString(r[:]) }

// RefOf returns the Ref of v without storing it.
func RefOf(v []byte) Ref { return sha256.Sum256(v) }

// loc is the resident index entry of one value: 28 bytes. A value Put but
// not yet written (in the pending frame) has pack 0 and off its position in
// Store.pend.
type loc struct {
	pack   uint32 // pack sequence
	off    uint32 // record offset in the pack (packs never reach 4 GiB)
	size   uint32 // record bytes, header included
	gen    uint32 // Collect epoch in which the value was last seen live or put
	rawOff uint32 // the value's place in the record's raw bytes (version 2)
	rawLen uint32
	share  uint32 // record bytes accounted to this value (the shares of a record sum to its size)
}

func (l loc) recordBytes() int64 { return int64(l.share) }

// pack is one open pack file.
type pack struct {
	seq  uint32
	path string
	f    File
	// refs counts the table's reference plus one per read in flight; the file
	// is closed when it drops to zero.
	refs atomic.Int32

	// Guarded by Store.wmu (written only with wmu held, and for the table by mu too).
	size    int64 // end of the last record
	synced  int64 // bytes known durable
	indexed int64 // bytes covered by the .idx file on disk (0: none)
	idxSize int64 // size of the .idx file
	sealed  bool  // no more appends
	damaged bool  // damage found at Open: never appended to nor deleted by Collect
	version uint8 // format version of the pack's records
	total   int   // values in the pack's records, live or not (Store.mu too)

	// Guarded by Store.mu.
	liveBytes int64 // record bytes of index entries that point here
	liveCount int
}

func (p *pack) acquire() { p.refs.Add(1) }
func (p *pack) release() {
	if p.refs.Add(-1) == 0 {
		_ = p.f.Close()
	}
}

// Store is a content-addressed store of large values; see the package doc.
// Its methods are safe for concurrent use, except Close, which must be called
// once, after every other call has returned.
type Store struct {
	opts Options
	fs   FS
	dir  string
	log  *slog.Logger
	enc  *zstd.Encoder
	// frameBytes: Put gathers values into a pending frame until it holds this
	// many raw bytes, then writes them as one record.
	frameBytes int

	collectMu sync.Mutex // serialises Collect

	// wmu serialises appends to the active pack, pack creation and sealing, and
	// every manifest publication. It is held during that I/O; Get never takes it.
	wmu     sync.Mutex
	active  *pack // append target; nil until the next Put creates one
	nextSeq uint32
	gen     uint64 // generation of the last published manifest
	failed  error
	// pend holds the values of the frame being gathered (written by Sync,
	// Close, Collect or when full); guarded by wmu and mu for writes, mu for
	// reads. pendRaw is their total size.
	pend    [][]byte
	pendRef []Ref
	pendRaw int

	// mu guards index, packs, the per-pack live counters and epoch. No I/O is
	// done while holding it.
	mu    sync.RWMutex
	index map[Ref]loc
	packs map[uint32]*pack
	epoch uint32

	closed      atomic.Bool
	dedupHits   atomic.Int64
	corruptions []*CorruptionError // found by Open; read-only afterwards
	openStats   OpenStats
}

// OpenStats describes what Open found and repaired.
type OpenStats struct {
	PacksLoaded    int   // packs in the manifest that were opened
	RecordsScanned int   // records read by scanning (packs or tails without an index)
	TruncatedBytes int64 // torn tail bytes cut from unindexed pack ends
	RemovedFiles   int   // unpublished packs, indexes and temporary files deleted
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name) }

// Open opens (creating if needed) the store in opts.Dir. It loads the resident
// index from the pack indexes, scanning only pack regions no index covers; it
// cuts a torn tail, removes packs that were never published, and records the
// damage it finds (see Corruptions) instead of failing, so the rest stays
// readable. It fails on I/O errors and on files of an unknown format version.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	enc, err := encoderFor(opts.ZstdLevel)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:       opts,
		fs:         opts.FS,
		dir:        opts.Dir,
		log:        opts.Logger,
		enc:        enc,
		index:      make(map[Ref]loc),
		frameBytes: opts.FrameBytes,
		packs:      make(map[uint32]*pack),
	}
	if err := s.load(); err != nil {
		for _, p := range s.packs {
			p.release()
		}
		return nil, err
	}
	return s, nil
}

func (s *Store) corrupt(file string, off int64, format string, args ...any) {
	ce := &CorruptionError{File: s.path(file), Offset: off, Msg: fmt.Sprintf(format, args...)}
	s.corruptions = append(s.corruptions, ce)
	s.log.Warn("value store damage", "file", ce.File, "offset", ce.Offset, "problem", ce.Msg)
}

func (s *Store) remove(name, why string) error {
	if err := s.fs.Remove(s.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.path(name), err)
	}
	s.openStats.RemovedFiles++
	s.log.Info("value store removed file", "file", s.path(name), "reason", why)
	return nil
}

func (s *Store) load() error {
	if err := s.fs.MkdirAll(s.dir); err != nil {
		return fmt.Errorf("create value store dir %s: %w", s.dir, err)
	}
	names, err := s.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("list value store dir %s: %w", s.dir, err)
	}
	diskPacks := map[uint32]bool{}
	diskIdx := map[uint32]bool{}
	haveManifest := false
	removed := false
	var maxSeq uint32
	for _, n := range names {
		if seq, ok := parseSeqName(n, packSuffix); ok {
			diskPacks[seq] = true
			maxSeq = max(maxSeq, seq)
		} else if seq, ok := parseSeqName(n, idxSuffix); ok {
			diskIdx[seq] = true
		} else if n == manifestName {
			haveManifest = true
		} else if len(n) > len(tmpSuffix) && n[len(n)-len(tmpSuffix):] == tmpSuffix {
			// A temporary file is renamed only after it is complete, so one left
			// behind was never published.
			if err := s.remove(n, "temporary file of an interrupted publication"); err != nil {
				return err
			}
			removed = true
		}
	}

	var listed []uint32
	publish := false
	var m manifest
	switch {
	case !haveManifest && len(diskPacks) == 0:
		publish = true // a new store
	case !haveManifest:
		s.corrupt(manifestName, 0, "manifest missing; adopting the %d pack files found", len(diskPacks))
		publish = true
	default:
		b, err := vfs.ReadFile(s.fs, s.path(manifestName))
		if err != nil {
			return fmt.Errorf("read %s: %w", s.path(manifestName), err)
		}
		var off int64
		m, off, err = decodeManifest(b)
		switch {
		case errors.Is(err, errVersion):
			return fmt.Errorf("open %s: %w: %v", s.path(manifestName), ErrUnsupportedVersion, err)
		case err != nil:
			// Without a trustworthy list nothing can be proven unpublished, so
			// every pack is kept: an unpublished one only holds copies of values
			// that are in published packs too (see docs/format/values.md).
			s.corrupt(manifestName, off, "%v; adopting the %d pack files found", err, len(diskPacks))
			m = manifest{}
			publish = true
		default:
			listed = m.packs
		}
	}
	if publish {
		for seq := range diskPacks {
			listed = append(listed, seq)
		}
		slices.Sort(listed)
	} else {
		// The manifest is intact: a pack it does not list was either created for
		// a rotation whose publication did not complete (no value in it was ever
		// acknowledged) or written or retired by a Collect (its live values are
		// in listed packs). Either way it is unpublished and is removed.
		listedSet := map[uint32]bool{}
		for _, seq := range listed {
			listedSet[seq] = true
		}
		for seq := range diskPacks {
			if !listedSet[seq] {
				if err := s.remove(packName(seq), "pack not in the manifest (never published, or retired)"); err != nil {
					return err
				}
				removed = true
			}
		}
		for seq := range diskIdx {
			if !listedSet[seq] {
				if err := s.remove(idxName(seq), "index of a pack not in the manifest"); err != nil {
					return err
				}
				removed = true
			}
		}
	}
	s.gen = m.gen
	s.nextSeq = max(m.nextSeq, maxSeq+1, 1)

	kept := listed[:0:0]
	for _, seq := range listed {
		if !diskPacks[seq] {
			s.corrupt(packName(seq), 0, "pack listed in the manifest is missing; its values are lost")
			publish = true
			continue
		}
		p, err := s.loadPack(seq, diskIdx[seq])
		if err != nil {
			return err
		}
		s.packs[seq] = p
		kept = append(kept, seq)
		s.openStats.PacksLoaded++
	}
	// Appends continue in the newest pack if it is intact, of the current
	// version and not full.
	if n := len(kept); n > 0 {
		p := s.packs[kept[n-1]]
		if !p.damaged && p.version == formatVersion && p.size < s.opts.PackBytes {
			p.sealed = false
			s.active = p
		}
	}
	if publish {
		if err := s.publishManifestLocked(kept); err != nil {
			return err
		}
	} else if removed {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("sync value store dir %s: %w", s.dir, err)
		}
	}
	return nil
}

// loadPack opens a listed pack and adds its records to the index.
func (s *Store) loadPack(seq uint32, hasIdx bool) (*pack, error) {
	name := packName(seq)
	f, err := s.fs.OpenFile(s.path(name), os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("open pack %s: %w", s.path(name), err)
	}
	p := &pack{seq: seq, path: s.path(name), f: f, sealed: true}
	p.refs.Store(1)
	size, err := f.Size()
	if err != nil {
		p.release()
		return nil, fmt.Errorf("stat pack %s: %w", p.path, err)
	}
	p.size = size
	hdr := make([]byte, packHeaderSize)
	if size >= packHeaderSize {
		if _, err := f.ReadAt(hdr, 0); err != nil {
			p.release()
			return nil, fmt.Errorf("read pack %s: %w", p.path, err)
		}
	} else {
		hdr = hdr[:size]
		if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
			p.release()
			return nil, fmt.Errorf("read pack %s: %w", p.path, err)
		}
	}
	if off, err := checkPackHeader(hdr, seq); err != nil {
		if errors.Is(err, errVersion) {
			p.release()
			return nil, fmt.Errorf("open pack %s: %w: %v", p.path, ErrUnsupportedVersion, err)
		}
		s.corrupt(name, off, "%v; no value of this pack is readable", err)
		p.damaged = true
		return p, nil
	}
	p.version = hdr[4]

	// Records the index covers are trusted as located (Get verifies each one);
	// the rest of the file is scanned.
	scanFrom := int64(packHeaderSize)
	idxOK := false
	if hasIdx {
		iname := idxName(seq)
		b, err := vfs.ReadFile(s.fs, s.path(iname))
		if err != nil {
			p.release()
			return nil, fmt.Errorf("read pack index %s: %w", s.path(iname), err)
		}
		covered, total, entries, off, derr := decodeIndex(b, seq)
		switch {
		case errors.Is(derr, errVersion):
			p.release()
			return nil, fmt.Errorf("open pack index %s: %w: %v", s.path(iname), ErrUnsupportedVersion, derr)
		case derr != nil:
			s.corrupt(iname, off, "%v; rebuilding the pack's index by scanning it", derr)
			p.damaged = true
		case covered > size:
			s.corrupt(name, size, "pack is %d bytes but its index covers %d: truncated; scanning what is left", size, covered)
			p.damaged = true
		default:
			idxOK = true
			scanFrom = covered
			p.indexed, p.synced, p.idxSize = covered, covered, int64(len(b))
			s.addEntries(p, entries)
			p.total = max(total, len(entries))
		}
	}
	res, err := scanPack(f, scanFrom, size, p.version, func(off int64, rec record) {
		s.openStats.RecordsScanned++
		for _, m := range rec.vals {
			s.addLoaded(p, m.ref, loc{pack: p.seq, off: uint32(off), size: uint32(rec.size), rawOff: m.rawOff, rawLen: m.rawLen, share: m.share})
		}
		p.total += len(rec.vals)
	})
	if err != nil {
		p.release()
		return nil, fmt.Errorf("scan pack %s: %w", p.path, err)
	}
	for _, d := range res.damaged {
		s.corrupt(name, d.off, "%s; skipped %d bytes to the next intact record", d.msg, d.skipped)
		p.damaged = true
	}
	if res.tail > 0 {
		if p.damaged || (hasIdx && !idxOK) {
			s.corrupt(name, res.end, "%d bytes after the last intact record", res.tail)
			p.damaged = true
		} else {
			// The unindexed end of a pack is where appends were in flight when the
			// process stopped: a torn write. Cut it so appends can resume.
			if err := f.Truncate(res.end); err != nil {
				p.release()
				return nil, fmt.Errorf("truncate torn tail of pack %s at %d: %w", p.path, res.end, err)
			}
			if err := f.Sync(); err != nil {
				p.release()
				return nil, fmt.Errorf("sync pack %s: %w", p.path, err)
			}
			s.log.Warn("value store cut a torn pack tail", "file", p.path, "offset", res.end, "bytes", res.tail)
			s.openStats.TruncatedBytes += res.tail
			p.size = res.end
		}
	}
	p.synced = p.size
	return p, nil
}

// addEntries indexes the entries of a pack index. The record bytes are
// shared among the values of each record as a scan would share them.
func (s *Store) addEntries(p *pack, entries []idxEntry) {
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].off == entries[i].off {
			j++
		}
		lens := make([]uint32, j-i)
		for k := range lens {
			lens[k] = entries[i+k].rawLen
		}
		sh := shares(int64(entries[i].size), lens)
		for k, e := range entries[i:j] {
			if e.off > 1<<32-1 {
				continue
			}
			s.addLoaded(p, e.ref, loc{pack: p.seq, off: uint32(e.off), size: e.size, rawOff: e.rawOff, rawLen: e.rawLen, share: sh[k]})
		}
		i = j
	}
}

// addLoaded indexes a value found at Open; a value already indexed from an
// earlier pack is a duplicate and its bytes count as dead.
func (s *Store) addLoaded(p *pack, ref Ref, l loc) {
	if _, ok := s.index[ref]; ok {
		return
	}
	s.index[ref] = l
	p.liveBytes += l.recordBytes()
	p.liveCount++
}

// writeFileAtomic publishes data under name with vfs.WriteFileAtomic:
// temporary file, fsync, rename, fsync of the directory.
func (s *Store) writeFileAtomic(name string, data []byte) error {
	return vfs.WriteFileAtomic(s.fs, s.path(name), data)
}

// publishManifestLocked makes packs the published list. Callers hold wmu (or
// are Open). The directory fsync also makes earlier file creations durable.
func (s *Store) publishManifestLocked(packs []uint32) error {
	m := manifest{gen: s.gen + 1, nextSeq: s.nextSeq, packs: packs}
	if err := s.writeFileAtomic(manifestName, encodeManifest(m)); err != nil {
		return fmt.Errorf("publish value store manifest: %w", err)
	}
	s.gen = m.gen
	return nil
}

// packListLocked returns the sequences of the open packs, ascending.
func (s *Store) packListLocked() []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := make([]uint32, 0, len(s.packs))
	for seq := range s.packs {
		list = append(list, seq)
	}
	slices.Sort(list)
	return list
}

// failLocked puts the store in the failed state. Callers hold wmu.
func (s *Store) failLocked(err error) error {
	if s.failed == nil {
		s.failed = err
	}
	return fmt.Errorf("%w: %w", ErrFailed, err)
}

func (s *Store) writableLocked() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.failed != nil {
		return fmt.Errorf("%w: %w", ErrFailed, s.failed)
	}
	return nil
}

// createPack creates pack seq with its header, fsynced. It is not yet
// published.
func (s *Store) createPack(seq uint32) (*pack, error) {
	path := s.path(packName(seq))
	f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, fmt.Errorf("create pack %s: %w", path, err)
	}
	p := &pack{seq: seq, path: path, f: f, version: formatVersion}
	p.refs.Store(1)
	if _, err := f.WriteAt(appendPackHeader(nil, seq), 0); err != nil {
		p.release()
		return nil, fmt.Errorf("write pack header %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		p.release()
		return nil, fmt.Errorf("sync pack %s: %w", path, err)
	}
	p.size, p.synced = packHeaderSize, packHeaderSize
	return p, nil
}

// newActiveLocked creates the next pack and publishes it in the manifest
// before any value is written to it: a pack that holds an acknowledged value
// is therefore always listed.
func (s *Store) newActiveLocked() (*pack, error) {
	seq := s.nextSeq
	s.nextSeq++
	p, err := s.createPack(seq)
	if err != nil {
		return nil, err
	}
	if err := s.publishManifestLocked(append(s.packListLocked(), seq)); err != nil {
		p.release()
		return nil, err
	}
	s.mu.Lock()
	s.packs[seq] = p
	s.mu.Unlock()
	s.active = p
	return p, nil
}

// sealLocked makes p durable and writes its index, so a later Open reads the
// index instead of scanning. Callers hold wmu.
func (s *Store) sealLocked(p *pack) error {
	if p.synced < p.size {
		if err := p.f.Sync(); err != nil {
			return fmt.Errorf("sync pack %s: %w", p.path, err)
		}
		p.synced = p.size
	}
	p.sealed = true
	if p.indexed == p.size {
		return nil
	}
	entries := s.entriesOf(p.seq)
	s.mu.RLock()
	total := p.total
	s.mu.RUnlock()
	b := encodeIndex(p.seq, p.size, total, entries)
	if err := s.writeFileAtomic(idxName(p.seq), b); err != nil {
		return fmt.Errorf("write index of pack %s: %w", p.path, err)
	}
	p.indexed, p.idxSize = p.size, int64(len(b))
	return nil
}

// entriesOf lists the index entries that point into pack seq, by offset. It
// walks the whole index (about 20 ns per entry), once per sealed pack.
func (s *Store) entriesOf(seq uint32) []idxEntry {
	s.mu.RLock()
	var out []idxEntry
	for ref, l := range s.index {
		if l.pack == seq {
			out = append(out, idxEntry{ref: ref, off: uint64(l.off), size: l.size, rawOff: l.rawOff, rawLen: l.rawLen})
		}
	}
	s.mu.RUnlock()
	sortEntries(out)
	return out
}

func sortEntries(es []idxEntry) {
	slices.SortFunc(es, func(a, b idxEntry) int {
		if a.off != b.off {
			return int(int64(a.off) - int64(b.off))
		}
		return int(int64(a.rawOff) - int64(b.rawOff))
	})
}

// markExisting reports whether ref is stored, marking it live for a Collect in
// progress (a Put during Collect is a reference being created).
func (s *Store) markExisting(ref Ref) bool {
	s.mu.Lock()
	l, ok := s.index[ref]
	if ok && l.gen != s.epoch {
		l.gen = s.epoch
		s.index[ref] = l
	}
	s.mu.Unlock()
	return ok
}

// Put stores v unless a value with the same SHA-256 is already stored, and
// returns its Ref and whether it was newly written. The value is readable at
// once, and durable after the next successful Sync. Values are gathered into
// a frame of Options.FrameBytes, written when full or by Sync.
func (s *Store) Put(v []byte) (Ref, bool, error) {
	if len(v) > MaxValueBytes {
		return Ref{}, false, fmt.Errorf("put value: %d bytes exceeds the %d-byte limit", len(v), MaxValueBytes)
	}
	if s.closed.Load() {
		return Ref{}, false, ErrClosed
	}
	ref := Ref(sha256.Sum256(v))
	if s.markExisting(ref) {
		s.dedupHits.Add(1)
		return ref, false, nil
	}

	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return Ref{}, false, err
	}
	if s.markExisting(ref) { // stored by a concurrent Put meanwhile
		s.dedupHits.Add(1)
		return ref, false, nil
	}
	if n := len(s.pend); n > 0 && (s.pendRaw+len(v) > s.frameBytes || n == maxFrameValues) {
		if err := s.flushLocked(); err != nil {
			return Ref{}, false, s.failLocked(fmt.Errorf("put value: %w", err))
		}
	}
	s.mu.Lock()
	s.index[ref] = loc{off: uint32(len(s.pend)), gen: s.epoch}
	s.pend = append(s.pend, slices.Clone(v))
	s.pendRef = append(s.pendRef, ref)
	s.pendRaw += len(v)
	s.mu.Unlock()
	if s.pendRaw >= s.frameBytes {
		if err := s.flushLocked(); err != nil {
			return ref, true, s.failLocked(fmt.Errorf("put value: %w", err))
		}
	}
	return ref, true, nil
}

// flushLocked writes the pending frame to the active pack (creating one if
// needed) and rotates the pack when full. Callers hold wmu.
func (s *Store) flushLocked() error {
	if len(s.pend) == 0 {
		return nil
	}
	rec := encodeFrame(s.enc, s.pend)
	p := s.active
	if p == nil {
		var err error
		if p, err = s.newActiveLocked(); err != nil {
			return err
		}
	}
	off := p.size
	if _, err := p.f.WriteAt(rec, off); err != nil {
		return fmt.Errorf("write pack %s at %d: %w", p.path, off, err)
	}
	p.size += int64(len(rec))
	lens := make([]uint32, len(s.pend))
	for i, v := range s.pend {
		lens[i] = uint32(len(v))
	}
	sh := shares(int64(len(rec)), lens)
	s.mu.Lock()
	var rawOff uint32
	for i, ref := range s.pendRef {
		// A pending value is always in the index: Collect writes the pending
		// frame before it deletes anything.
		l := s.index[ref]
		s.index[ref] = loc{pack: p.seq, off: uint32(off), size: uint32(len(rec)), gen: l.gen, rawOff: rawOff, rawLen: lens[i], share: sh[i]}
		rawOff += lens[i]
		p.liveBytes += int64(sh[i])
		p.liveCount++
	}
	p.total += len(s.pend)
	s.pend, s.pendRef, s.pendRaw = nil, nil, 0
	s.mu.Unlock()
	if p.size >= s.opts.PackBytes {
		if err := s.sealLocked(p); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
		s.active = nil
	}
	return nil
}

// Sync makes every Put that returned before it durable: it writes the
// pending frame and fsyncs the active pack (packs are fsynced when rotated,
// and a new pack's directory entry when it is published).
func (s *Store) Sync() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	if err := s.flushLocked(); err != nil {
		return s.failLocked(fmt.Errorf("sync: %w", err))
	}
	p := s.active
	if p == nil || p.synced == p.size {
		return nil
	}
	if err := p.f.Sync(); err != nil {
		return s.failLocked(fmt.Errorf("sync pack %s: %w", p.path, err))
	}
	p.synced = p.size
	return nil
}

// Has reports whether the store holds ref.
func (s *Store) Has(ref Ref) bool {
	s.mu.RLock()
	_, ok := s.index[ref]
	s.mu.RUnlock()
	return ok
}

// Get reads the value ref from disk, decompresses it and verifies its SHA-256.
// It returns ErrNotFound for an unknown ref and a *CorruptionError (with the
// pack file and record offset) when the stored bytes are damaged. The result
// is a fresh slice owned by the caller; nothing is cached.
func (s *Store) Get(ref Ref) ([]byte, error) { return s.get(ref, nil) }

// Reader reads values for one short-lived reader (a query), keeping the last
// few frames it decompressed, so that values written together (the messages
// of one call) cost one decompression. It holds their bytes until it is
// dropped; it is not safe for concurrent use.
type Reader struct {
	s      *Store
	frames [readerFrames]readerFrame
	next   int
}

const readerFrames = 8

type readerFrame struct {
	pack, off uint32
	raw       []byte
}

// NewReader returns a Reader of s.
func (s *Store) NewReader() *Reader { return &Reader{s: s} }

// Get is Store.Get, reusing the frames r decompressed last. The result may
// share memory with other results of r; it must not be modified.
func (r *Reader) Get(ref Ref) ([]byte, error) { return r.s.get(ref, r) }

func (r *Reader) frame(l loc) []byte {
	for _, f := range r.frames {
		if f.raw != nil && f.pack == l.pack && f.off == l.off {
			return f.raw
		}
	}
	return nil
}

func (s *Store) get(ref Ref, r *Reader) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	s.mu.RLock()
	l, ok := s.index[ref]
	var p *pack
	if ok && l.pack == 0 {
		v := slices.Clone(s.pend[l.off])
		s.mu.RUnlock()
		return v, nil
	}
	if ok {
		p = s.packs[l.pack]
		p.acquire()
	}
	s.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	defer p.release()
	off := int64(l.off)
	bad := func(format string, args ...any) error {
		return &CorruptionError{File: p.path, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if r != nil && p.version != 1 {
		if raw := r.frame(l); raw != nil && uint64(l.rawOff)+uint64(l.rawLen) <= uint64(len(raw)) {
			if v := raw[l.rawOff : l.rawOff+l.rawLen]; RefOf(v) == ref {
				return v, nil
			}
		}
	}
	buf := make([]byte, l.size)
	n, err := p.f.ReadAt(buf, off)
	if n < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, bad("record of %d bytes extends past the end of the file", len(buf))
		}
		return nil, fmt.Errorf("get value %s: read pack %s at %d: %w", ref, p.path, off, err)
	}
	var raw []byte
	if p.version == 1 {
		raw, err = valueV1(buf, ref)
	} else {
		var frame []byte
		raw, frame, err = valueV2(buf, l, r != nil)
		if frame != nil {
			r.frames[r.next] = readerFrame{pack: l.pack, off: l.off, raw: frame}
			r.next = (r.next + 1) % readerFrames
		}
	}
	if err != nil {
		return nil, bad("%v", err)
	}
	if RefOf(raw) != ref {
		return nil, bad("value does not hash to its SHA-256")
	}
	return raw, nil
}

// valueV1 decodes the version-1 record buf of value ref.
func valueV1(buf []byte, ref Ref) ([]byte, error) {
	h, err := parseRecordHeader(buf)
	switch {
	case err != nil:
		return nil, err
	case h.ref != ref:
		return nil, fmt.Errorf("record holds value %s, index expects %s", h.ref, ref)
	case int64(len(buf)) != h.size():
		return nil, fmt.Errorf("record of %d bytes, index says %d", h.size(), len(buf))
	}
	body := buf[recordHeaderSize:]
	if crc(body) != h.bodyCRC {
		return nil, errors.New("record body checksum mismatch")
	}
	return decodeBody(h, body)
}

// valueV2 decodes the frame buf and returns the value l locates in it: in a
// slice of its own, or, when share is set and the frame holds several values,
// a slice of the frame's raw bytes, which it returns too.
func valueV2(buf []byte, l loc, share bool) (v, frame []byte, err error) {
	h, err := parseFrameHeader(buf)
	switch {
	case err != nil:
		return nil, nil, err
	case h.size() != int64(len(buf)):
		return nil, nil, fmt.Errorf("record of %d bytes, index says %d", h.size(), len(buf))
	case uint64(l.rawOff)+uint64(l.rawLen) > h.rawLen:
		return nil, nil, fmt.Errorf("index places the value at %d+%d of a record of %d raw bytes", l.rawOff, l.rawLen, h.rawLen)
	}
	body := buf[h.hdrLen:]
	if crc(body) != h.bodyCRC {
		return nil, nil, errors.New("record body checksum mismatch")
	}
	raw, err := decodeFrame(h, body)
	if err != nil {
		return nil, nil, err
	}
	v = raw[l.rawOff : l.rawOff+l.rawLen]
	switch {
	case len(h.lens) == 1:
	case share:
		frame = raw
	default:
		v = slices.Clone(v) // do not pin the whole frame
	}
	return v, frame, nil
}

// Corruptions returns the damage Open found (and isolated): the rest of the
// store is readable.
func (s *Store) Corruptions() []*CorruptionError { return slices.Clone(s.corruptions) }

// OpenStats returns what Open found and repaired.
func (s *Store) OpenStats() OpenStats { return s.openStats }

// IndexBytesPerEntry is the measured resident cost of one distinct value in
// the index (a Go map from 32-byte hash to 28-byte location, averaged over map
// growth; see BenchmarkOpen100k).
const IndexBytesPerEntry = 90

// Stats is a snapshot of the store's size.
type Stats struct {
	Values     int   // distinct values in the index
	Packs      int   // pack files
	DiskBytes  int64 // bytes of packs, pack indexes (and manifest)
	LiveBytes  int64 // bytes of the records the index points at
	IndexBytes int64 // estimated resident memory of the index (Values x IndexBytesPerEntry)
	DedupHits  int64 // Puts of a value already stored, since Open
}

// Stats returns the store's current size.
func (s *Store) Stats() Stats {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Values: len(s.index), Packs: len(s.packs), DedupHits: s.dedupHits.Load()}
	st.IndexBytes = int64(st.Values) * IndexBytesPerEntry
	st.DiskBytes = manifestHeaderSize + 4 + 4*int64(len(s.packs))
	for _, p := range s.packs {
		st.DiskBytes += p.size + p.idxSize
		st.LiveBytes += p.liveBytes
	}
	return st
}

// Close seals the active pack (fsync and index, so the next Open need not scan
// it) and closes every file. Reads in flight finish first.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Swap(true) {
		return ErrClosed
	}
	var err error
	if s.failed == nil {
		if ferr := s.flushLocked(); ferr != nil {
			err = fmt.Errorf("close value store: %w", ferr)
		}
	}
	if s.failed == nil && err == nil && s.active != nil {
		if serr := s.sealLocked(s.active); serr != nil {
			err = fmt.Errorf("close value store: %w", serr)
		}
	}
	s.active = nil
	s.mu.Lock()
	for seq, p := range s.packs {
		delete(s.packs, seq)
		p.release()
	}
	s.mu.Unlock()
	return err
}

// Verify reads every indexed value back (checksums, decompression, SHA-256),
// as fsck does, and returns the damaged ones. It stops at the first I/O error.
func (s *Store) Verify() ([]*CorruptionError, error) {
	s.mu.RLock()
	refs := make([]Ref, 0, len(s.index))
	for r := range s.index {
		refs = append(refs, r)
	}
	s.mu.RUnlock()
	var bad []*CorruptionError
	for _, r := range refs {
		_, err := s.Get(r)
		var ce *CorruptionError
		switch {
		case err == nil, errors.Is(err, ErrNotFound):
		case errors.As(err, &ce):
			bad = append(bad, ce)
		default:
			return bad, err
		}
	}
	slices.SortFunc(bad, func(a, b *CorruptionError) int {
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		return int(a.Offset - b.Offset)
	})
	return bad, nil
}
