package engine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
	"github.com/rastro-dev/rastro/internal/valuestore"
	"github.com/rastro-dev/rastro/internal/wal"
)

// quarantineDir is the folder of DATA_DIR where fsck --repair moves damaged
// segment files. Nothing reads it; the files are kept for inspection.
const quarantineDir = "quarantine"

// FsckOptions configure Fsck.
type FsckOptions struct {
	// Repair quarantines damaged segments (DATA_DIR/quarantine) and drops
	// them from the manifest, rebuilds a segment whose blocks are intact but
	// whose index, filter or aggregate sections are damaged, rebuilds a
	// missing or damaged manifest from the segment files present, and
	// replays a damaged WAL into a segment (dropping the damaged records).
	Repair bool
	// Engine supplies the segment writer settings used by a repair
	// (BlockSpans, NoContentIndex, RowGroupTokenFilters, ValueThreshold), as
	// the server would seal with them. Dir is ignored; zero values are the
	// defaults.
	Engine Options
}

// FsckProblem is one problem Fsck found.
type FsckProblem struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"` // start of the damaged part; -1 when no single place is at fault
	Msg    string `json:"message"`
	// Repair says what a repair did about it; empty when nothing was done.
	Repair string `json:"repair,omitempty"`
}

func (p FsckProblem) String() string {
	s := p.File
	if p.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", p.Offset)
	}
	s += ": " + p.Msg
	if p.Repair != "" {
		s += " [repaired: " + p.Repair + "]"
	}
	return s
}

// FsckReport is what Fsck found (and, with Repair, did).
type FsckReport struct {
	Dir string `json:"dir"`
	// Problems lists everything found damaged or inconsistent.
	Problems []FsckProblem `json:"problems"`
	// Notes lists states that are not problems: a torn WAL tail (replay cuts
	// it), segment files the manifest does not name (removed on next open),
	// stored values no segment references (collectable), quarantined files.
	Notes []string `json:"notes"`
	// Unchecked lists files of DATA_DIR this version does not know.
	Unchecked []string `json:"unchecked"`

	Segments     int   `json:"segments"`      // segment files verified
	SegmentBytes int64 `json:"segment_bytes"` // their size
	Blocks       int   `json:"blocks"`
	Spans        int   `json:"spans"` // spans read back from intact blocks
	ValuePacks   int   `json:"value_packs"`
	Values       int   `json:"values"` // stored values read back intact
	ValueBytes   int64 `json:"value_bytes"`
	WALFiles     int   `json:"wal_files"`
	WALRecords   int   `json:"wal_records"`

	// Repaired is set when Repair ran; Actions lists what it changed and
	// Remaining what a check after the repair still found.
	Repaired  bool          `json:"repaired"`
	Actions   []string      `json:"actions,omitempty"`
	Remaining []FsckProblem `json:"remaining,omitempty"`
}

// Clean reports whether no problem remains: none was found, or a repair
// ran and the check after it found none.
func (r *FsckReport) Clean() bool {
	if r.Repaired {
		return len(r.Remaining) == 0
	}
	return len(r.Problems) == 0
}

// fsckState is what the check learned, for the repair.
type fsckState struct {
	rep         *FsckReport
	dir, segDir string
	man         manifest
	manState    string // "ok", "missing" (segment files present), "damaged", "absent" (empty store)
	segFiles    []string
	missing     []string                         // named by the manifest, not on disk
	verif       map[string]*segment.Verification // by segment name
	walDamaged  bool
	valDamaged  bool
}

// Fsck checks a data directory: the manifest (checksum, JSON, every named
// segment present), every segment (segment.Verify), the WAL files, the value
// store (valuestore.VerifyDir), and the cross-references (every stored
// value a segment references is present and intact). Without Repair it
// modifies nothing. It refuses to run while a server holds the store's
// LOCK. The error is for what prevents checking (a lock held, I/O errors);
// damage is reported in the FsckReport.
func Fsck(dir string, opts FsckOptions) (*FsckReport, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("fsck: %s is not a directory", dir)
	}
	lock, err := fsckLock(dir, opts.Repair)
	if err != nil {
		return nil, err
	}
	s, err := fsckCheck(dir)
	if err != nil || !opts.Repair {
		unlock(lock)
		if err != nil {
			return nil, err
		}
		return s.rep, nil
	}
	rep := s.rep
	rep.Repaired = true
	reopen, err := s.repair(opts.Engine)
	unlock(lock)
	if err != nil {
		return rep, fmt.Errorf("fsck repair: %w", err)
	}
	if reopen {
		// Opening the engine replays the WAL (skipping damaged records) and
		// recovers the value store; closing seals what was replayed and
		// removes the WAL files it came from.
		eo := opts.Engine
		eo.Dir = dir
		eo.Logger = slog.New(slog.DiscardHandler)
		e, err := Open(eo)
		if err != nil {
			return rep, fmt.Errorf("fsck repair: open the repaired store: %w", err)
		}
		if err := e.Close(); err != nil {
			return rep, fmt.Errorf("fsck repair: close the repaired store: %w", err)
		}
		rep.Actions = append(rep.Actions, "opened and closed the store: WAL replayed (damaged records dropped) and sealed, value store recovered")
	}
	after, err := Fsck(dir, FsckOptions{})
	if err != nil {
		return rep, fmt.Errorf("fsck after repair: %w", err)
	}
	rep.Remaining = after.Problems
	if rep.Remaining == nil {
		rep.Remaining = []FsckProblem{}
	}
	return rep, nil
}

// fsckLock refuses when a running server holds DATA_DIR/LOCK. A check only
// takes the lock if the file exists (it creates nothing); a repair creates
// it, as Open does.
func fsckLock(dir string, create bool) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	if create {
		f, err := durable.LockDir(dir)
		if err != nil {
			return nil, fmt.Errorf("fsck: %w: stop the server first", err)
		}
		return f, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fsck: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("fsck: data directory %s is in use by a running rastro process (lock %s held): stop the server first", dir, path)
		}
		return nil, fmt.Errorf("fsck: lock %s: %w", path, err)
	}
	return f, nil
}

func unlock(f *os.File) {
	if f != nil {
		f.Close()
	}
}

func (s *fsckState) problem(file string, off int64, format string, args ...any) *FsckProblem {
	s.rep.Problems = append(s.rep.Problems, FsckProblem{File: file, Offset: off, Msg: fmt.Sprintf(format, args...)})
	return &s.rep.Problems[len(s.rep.Problems)-1]
}

func (s *fsckState) note(format string, args ...any) {
	s.rep.Notes = append(s.rep.Notes, fmt.Sprintf(format, args...))
}

func fsckCheck(dir string) (*fsckState, error) {
	s := &fsckState{rep: &FsckReport{Dir: dir, Problems: []FsckProblem{}, Notes: []string{}, Unchecked: []string{}},
		dir: dir, segDir: filepath.Join(dir, "segments"), verif: map[string]*segment.Verification{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("fsck: list %s: %w", dir, err)
	}
	for _, e := range ents {
		switch n := e.Name(); {
		case n == manifestName || n == "LOCK" || n == "segments" || n == "wal" || n == "values":
		case n == erasuresName:
			// A damaged erasure list is not repairable from the data: the
			// server refuses to open (erased traces could reappear).
			if f, err := readErasures(dir); err != nil {
				s.problem(filepath.Join(dir, n), corruptionOffset(err), "%v (restore it from a backup; the server refuses to open without it)", err)
			} else {
				for _, r := range f.Erasures {
					if r.State != store.EraseDone {
						s.note("%s: erasure %d is %s: the server finishes it after it starts", filepath.Join(dir, n), r.ID, r.State)
					}
				}
			}
		case n == erasuresName+".tmp":
			s.note("%s: temporary file of an interrupted erasure-list write (ignored)", filepath.Join(dir, n))
		case n == manifestName+".tmp":
			s.note("%s: temporary file of an interrupted manifest publication (ignored)", filepath.Join(dir, n))
		case n == quarantineDir:
			q, _ := os.ReadDir(filepath.Join(dir, n))
			s.note("%s: %d quarantined files (not part of the store)", filepath.Join(dir, n), len(q))
		default:
			s.rep.Unchecked = append(s.rep.Unchecked, filepath.Join(dir, n))
		}
	}
	if err := s.checkManifest(); err != nil {
		return nil, err
	}
	if err := s.checkSegments(); err != nil {
		return nil, err
	}
	w, err := wal.VerifyDir(filepath.Join(dir, "wal"))
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	s.rep.WALFiles, s.rep.WALRecords = w.Files, w.Records
	for _, c := range w.Corruptions {
		s.walDamaged = true
		s.problem(c.File, c.Offset, "WAL: %s (%d bytes unreadable; replay skips them)", c.Reason, c.Skipped)
	}
	if c := w.TornTail; c != nil {
		s.note("%s: torn tail at offset %d (%s; %d bytes): what a crash leaves, replay truncates it", c.File, c.Offset, c.Reason, c.Skipped)
	}
	vals, err := valuestore.VerifyDir(filepath.Join(dir, "values"))
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	s.rep.ValuePacks, s.rep.Values, s.rep.ValueBytes = vals.Packs, vals.Values, vals.Bytes
	for _, c := range vals.Problems {
		s.valDamaged = true
		s.problem(c.File, c.Offset, "value store: %s", c.Msg)
	}
	for _, n := range vals.Notes {
		s.note("%s", n)
	}
	s.crossReferences(vals)
	return s, nil
}

func (s *fsckState) checkManifest() error {
	path := filepath.Join(s.dir, manifestName)
	segs, err := filepath.Glob(filepath.Join(s.segDir, "*.seg"))
	if err != nil {
		return fmt.Errorf("fsck: list segments: %w", err)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if len(segs) > 0 {
			s.manState = "missing"
			s.problem(path, -1, "manifest missing while %d segment files are present (the server refuses to open)", len(segs))
		} else {
			s.manState = "absent"
		}
		return nil
	}
	m, err := readManifest(s.dir)
	var ce *CorruptionError
	switch {
	case errors.As(err, &ce):
		s.manState = "damaged"
		s.problem(path, ce.Offset, "%s", ce.Msg)
	case err != nil:
		return fmt.Errorf("fsck: %w", err)
	default:
		s.manState, s.man = "ok", m
	}
	return nil
}

// checkSegments verifies the segments the store is made of: those the
// manifest names or, without a usable manifest, every segment file (a
// rebuilt manifest lists them all).
func (s *fsckState) checkSegments() error {
	ents, err := os.ReadDir(s.segDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fsck: list %s: %w", s.segDir, err)
	}
	onDisk := map[string]bool{}
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
			s.rep.Unchecked = append(s.rep.Unchecked, filepath.Join(s.segDir, n))
		case strings.HasSuffix(n, ".seg"):
			onDisk[n] = true
			s.segFiles = append(s.segFiles, n)
		case strings.HasSuffix(n, ".tmp"):
			s.note("%s: temporary file of an interrupted seal (removed on next open)", filepath.Join(s.segDir, n))
		default:
			s.rep.Unchecked = append(s.rep.Unchecked, filepath.Join(s.segDir, n))
		}
	}
	slices.Sort(s.segFiles)
	check := s.segFiles
	if s.manState == "ok" {
		check = nil
		named := map[string]bool{}
		for _, n := range s.man.Segments {
			named[n] = true
			if !onDisk[n] {
				s.missing = append(s.missing, n)
				s.problem(filepath.Join(s.segDir, n), -1, "segment named by the manifest is missing; its spans are lost")
				continue
			}
			check = append(check, n)
		}
		for _, n := range s.segFiles {
			if !named[n] {
				s.note("%s: segment file the manifest does not name (unpublished or retired; removed on next open)", filepath.Join(s.segDir, n))
			}
		}
	}
	for _, n := range check {
		v, err := segment.Verify(filepath.Join(s.segDir, n))
		if err != nil {
			return fmt.Errorf("fsck: %w", err)
		}
		s.verif[n] = v
		s.rep.Segments++
		s.rep.SegmentBytes += v.Info.Bytes
		s.rep.Blocks += v.Info.Blocks
		s.rep.Spans += v.SpansRead
		for _, p := range v.Problems {
			s.problem(p.File, p.Offset, "%s", p.Msg)
		}
	}
	return nil
}

// crossReferences checks that every stored value a segment references is
// present and intact, and counts the values no segment references.
func (s *fsckState) crossReferences(vals *valuestore.DirVerification) {
	used := map[valuestore.Ref]bool{}
	complete := true
	names := make([]string, 0, len(s.verif))
	for n := range s.verif {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := s.verif[n]
		complete = complete && v.BlocksIntact
		var bad []valuestore.Ref
		for _, h := range v.ValueRefs {
			used[h] = true
			if !vals.Has(h) {
				bad = append(bad, h)
			}
		}
		if len(bad) > 0 {
			s.problem(v.File, -1, "references %d stored values missing or damaged in the value store (first sha256:%s); spans show a placeholder for them",
				len(bad), hex.EncodeToString(bad[0][:]))
		}
	}
	free := 0
	for _, r := range vals.Refs() {
		if !used[r] {
			free++
		}
	}
	if free > 0 && complete && s.manState == "ok" {
		s.note("%d stored values are referenced by no segment (collectable; not a problem)", free)
	}
}

// repair acts on what the check found. It reports whether the store must
// be opened and closed to finish (WAL or value store damage).
func (s *fsckState) repair(eo Options) (reopen bool, err error) {
	eo.Dir = s.dir
	if err := eo.Validate(); err != nil {
		return false, err
	}
	rep := s.rep
	next := s.man
	changed := false
	switch s.manState {
	case "missing", "damaged":
		next = manifest{Version: manifestVersion, WALStart: 0, Segments: slices.Clone(s.segFiles)}
		changed = true
		rep.Actions = append(rep.Actions, fmt.Sprintf("rebuilt %s listing the %d segment files in name order, wal_start 0 (the WAL replays; duplicates resolve newest-copy-wins)",
			manifestName, len(next.Segments)))
		s.markRepaired(filepath.Join(s.dir, manifestName), "manifest rebuilt from the segment files")
	}
	next.NextSegment = max(next.NextSegment, 1)
	for _, n := range s.segFiles {
		if id, err := strconv.ParseUint(strings.TrimSuffix(n, ".seg"), 10, 64); err == nil {
			next.NextSegment = max(next.NextSegment, id+1)
		}
	}
	if len(s.missing) > 0 {
		next.Segments = slices.DeleteFunc(slices.Clone(next.Segments), func(n string) bool { return slices.Contains(s.missing, n) })
		changed = true
		for _, n := range s.missing {
			s.markRepaired(filepath.Join(s.segDir, n), "dropped from the manifest")
		}
		rep.Actions = append(rep.Actions, fmt.Sprintf("dropped %d missing segments from the manifest", len(s.missing)))
	}
	for _, n := range slices.Clone(next.Segments) {
		v := s.verif[n]
		if v == nil || v.Clean() || onlyUnsupported(v) {
			continue
		}
		path := filepath.Join(s.segDir, n)
		qpath, err := s.quarantine(n)
		if err != nil {
			return false, err
		}
		if v.Readable {
			st, err := s.rebuild(qpath, n, eo)
			if err == nil && st.Spans > 0 {
				msg := "segment rebuilt from its blocks"
				if st.LostBlocks > 0 {
					msg = fmt.Sprintf("segment rebuilt from its %d intact blocks; %d damaged blocks (%d spans) lost", st.Blocks, st.LostBlocks, st.LostSpans)
				}
				rep.Actions = append(rep.Actions, fmt.Sprintf("%s: %s (damaged original moved to %s)", path, msg, qpath))
				s.markRepaired(path, msg)
				continue
			}
			if err == nil {
				err = errors.New("no intact block")
			}
			os.Remove(path)
			rep.Actions = append(rep.Actions, fmt.Sprintf("could not rebuild %s: %v", path, err))
		}
		next.Segments = slices.DeleteFunc(next.Segments, func(x string) bool { return x == n })
		changed = true
		rep.Actions = append(rep.Actions, fmt.Sprintf("quarantined %s to %s and dropped it from the manifest (its spans are no longer served)",
			path, qpath))
		s.markRepaired(path, "segment quarantined")
	}
	if changed {
		if _, err := writeManifest(s.dir, next); err != nil {
			return false, err
		}
	}
	return s.walDamaged || s.valDamaged || s.manState == "missing" || s.manState == "damaged", nil
}

func onlyUnsupported(v *segment.Verification) bool {
	for _, p := range v.Problems {
		if !p.Unsupported {
			return false
		}
	}
	return true
}

func (s *fsckState) markRepaired(file, what string) {
	for i := range s.rep.Problems {
		if s.rep.Problems[i].File == file && s.rep.Problems[i].Repair == "" {
			s.rep.Problems[i].Repair = what
		}
	}
}

// quarantine moves a segment file to DATA_DIR/quarantine and returns its
// new path.
func (s *fsckState) quarantine(name string) (string, error) {
	qdir := filepath.Join(s.dir, quarantineDir)
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", qdir, err)
	}
	dst := filepath.Join(qdir, name)
	for i := 1; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = filepath.Join(qdir, fmt.Sprintf("%s.%d", name, i))
	}
	if err := os.Rename(filepath.Join(s.segDir, name), dst); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", name, err)
	}
	return dst, nil
}

// rebuild writes segments/name again from the intact blocks of src, with
// the writer settings the engine seals with, and returns what it kept.
// Spans read back hold stored-value references, which the writer keeps as
// references. Blocks are streamed in segment order; if skipping a damaged
// block broke that order (a trace whose first spans were in it), the
// intact spans are sorted in memory and written again.
func (s *fsckState) rebuild(src, name string, eo Options) (segment.Salvaged, error) {
	wo := segment.WriterOptions{BlockSpans: eo.BlockSpans}
	if !eo.NoContentIndex {
		// The token index must hold the words of stored values too (a
		// content search would otherwise miss their spans): spans with
		// references are tokenised resolved, and still written with them.
		rv, closeValues, err := s.valueResolver()
		if err != nil {
			return segment.Salvaged{}, err
		}
		defer closeValues()
		wo.ContentTokens = func(sp *model.Span, emit func(uint64)) {
			if spanHasRefs(sp) {
				r := rv.span(sp)
				sp = &r
			}
			text.SpanTokens(sp, text.DefaultMinLen, emit)
		}
		wo.RowGroupTokenFilters = eo.RowGroupTokenFilters
	}
	w, err := segment.NewWriter(s.segDir, name, wo)
	if err != nil {
		return segment.Salvaged{}, err
	}
	st, err := segment.Salvage(src, w.Append)
	if err == nil {
		_, err = w.Close()
		if err == nil {
			return st, nil
		}
	} else {
		w.Abort()
	}
	if segment.IsCorruption(err) && st.Blocks == 0 {
		return st, err
	}
	byProject := map[string][]*model.Span{}
	st, err = segment.Salvage(src, func(p string, spans []model.Span) error {
		for i := range spans {
			byProject[p] = append(byProject[p], &spans[i])
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if _, err := segment.WritePtrs(s.segDir, name, byProject, wo); err != nil {
		return st, err
	}
	return st, nil
}

// valueResolver opens the store's value store for reading stored values
// while segments are rebuilt. A value it cannot read leaves its words out
// of the rebuilt token index, with a note.
func (s *fsckState) valueResolver() (*resolver, func(), error) {
	vs, err := valuestore.Open(valuestore.Options{Dir: filepath.Join(s.dir, "values")})
	if err != nil {
		return nil, nil, fmt.Errorf("open the value store to index stored values: %w", err)
	}
	rv := &resolver{get: vs.Get, onFail: func(ref valuestore.Ref, err error) {
		s.note("stored value %s unreadable while rebuilding; its words are not in the rebuilt token index: %v", ref, err)
	}}
	return rv, func() { vs.Close() }, nil
}

// corruptionOffset is the offset a CorruptionError names, or 0.
func corruptionOffset(err error) int64 {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return ce.Offset
	}
	return 0
}
