package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// Erasure (docs/operations.md, "Erasing data"). An erasure request names a
// trace or a filter in a project. It is
//
//  1. recorded in DATA_DIR/ERASURES (fsynced) as "pending";
//  2. resolved to the traces it covers: the trace, or every trace with a span
//     matching the filter among the spans stored when the request came (a
//     user's id is usually on the root span only, while the prompts are on
//     child spans: erasing whole traces is what removes them);
//  3. recorded as "hidden" with those trace ids, and from then on no query
//     returns their spans (this is when the request is acknowledged);
//  4. within Options.EraseDelay, erased physically by the lifecycle loop: the
//     write buffer is sealed (seals leave erased traces out, and the WAL files
//     that held them are deleted), every segment holding one of the traces is
//     rewritten without it, and the value store deletes the values no segment
//     references any more, rewriting the packs that held them;
//  5. recorded as "done" with the count of spans removed; the trace ids are
//     dropped from the file.
//
// A crash anywhere is safe: a "pending" request is resolved again after
// restart (it was never acknowledged, but is honoured); a "hidden" one is
// hidden again at Open and its pass runs again.

// erasureStatus is the status of one erasure request as the ERASURES file
// stores it (its JSON is part of that file's format); status gives the
// store.Erasure the API serves.
type erasureStatus struct {
	ID          uint64     `json:"id"`
	Project     string     `json:"project"`
	Query       string     `json:"query,omitempty"`    // the filter, as given
	TraceID     string     `json:"trace_id,omitempty"` // for a single-trace erasure
	State       string     `json:"state"`
	RequestedAt time.Time  `json:"requested_at"`
	HiddenAt    *time.Time `json:"hidden_at,omitempty"`
	DoneAt      *time.Time `json:"done_at,omitempty"`
	Traces      int        `json:"traces"`       // traces covered
	SpansErased int64      `json:"spans_erased"` // spans physically removed so far
	Error       string     `json:"error,omitempty"`
}

// erasureRecord is an erasure as ERASURES stores it.
type erasureRecord struct {
	erasureStatus
	TraceIDs []string `json:"trace_ids,omitempty"` // hex, until done
}

// erasureFile is the content of DATA_DIR/ERASURES (framed like MANIFEST).
type erasureFile struct {
	Version  int             `json:"version"`
	NextID   uint64          `json:"next_id"`
	Erasures []erasureRecord `json:"erasures"`
}

const (
	erasuresName    = "ERASURES"
	erasuresVersion = 1
	// keepDone is how many finished erasures the file keeps for the API.
	keepDone = 1000
)

// ErrEraseRequest marks a malformed or refused erasure request; it wraps
// store.ErrBadRequest.
var ErrEraseRequest = kindError{"invalid erasure request", store.ErrBadRequest}

func readErasures(dir string) (erasureFile, error) { return readErasuresFS(vfs.OS{}, dir) }

func readErasuresFS(fsys vfs.FS, dir string) (erasureFile, error) {
	path := filepath.Join(dir, erasuresName)
	b, err := readFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return erasureFile{Version: erasuresVersion, NextID: 1}, nil
	}
	if err != nil {
		return erasureFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	var f erasureFile
	if err := decodeFramed(path, "erasure list", b, &f); err != nil {
		return erasureFile{}, err
	}
	if f.Version != erasuresVersion {
		return erasureFile{}, fmt.Errorf("%s: unsupported version %d (this build reads %d)", path, f.Version, erasuresVersion)
	}
	return f, nil
}

// saveErasuresLocked writes next as the erasure list and adopts it. Callers
// hold erMu.
func (e *Engine) saveErasuresLocked(next erasureFile) error {
	buf, err := encodeFramed(next)
	if err != nil {
		return fmt.Errorf("encode erasure list: %w", err)
	}
	if _, err := writeFileAtomic(e.fs, e.opts.Dir, erasuresName, buf); err != nil {
		return fmt.Errorf("record erasure: %w", err)
	}
	e.erasures = next
	return nil
}

func (f erasureFile) clone() erasureFile {
	f.Erasures = slices.Clone(f.Erasures)
	return f
}

func parseTraceIDs(hexes []string) ([]model.TraceID, error) {
	out := make([]model.TraceID, 0, len(hexes))
	for _, h := range hexes {
		var id model.TraceID
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != len(id) {
			return nil, fmt.Errorf("trace id %q is not 32 hex digits", h)
		}
		copy(id[:], b)
		out = append(out, id)
	}
	return out, nil
}

// loadErasures reads ERASURES at Open and hides the traces of every erasure
// not yet done.
func (e *Engine) loadErasures() error {
	f, err := readErasuresFS(e.fs, e.opts.Dir)
	if err != nil {
		return err
	}
	e.erasures = f
	hs := &hideSet{traces: map[traceKey]*atomic.Int64{}}
	for _, r := range f.Erasures {
		if r.State != store.EraseHidden {
			continue
		}
		ids, err := parseTraceIDs(r.TraceIDs)
		if err != nil {
			return fmt.Errorf("%s: erasure %d: %w", filepath.Join(e.opts.Dir, erasuresName), r.ID, err)
		}
		for _, id := range ids {
			hs.traces[traceKey{r.Project, id}] = new(atomic.Int64)
		}
	}
	e.hide.Store(hs)
	return nil
}

// Erase records an erasure request durably, resolves it to traces and hides
// them, then returns its status (state "hidden"). The physical pass follows
// within Options.EraseDelay; Erasures reports its progress.
func (e *Engine) Erase(ctx context.Context, req store.EraseRequest) (store.Erasure, error) {
	if e.closed.Load() {
		return store.Erasure{}, ErrClosed
	}
	var f *query.Filter
	switch {
	case req.TraceID != nil && req.Query != "":
		return store.Erasure{}, fmt.Errorf("%w: give a trace id or a query, not both", ErrEraseRequest)
	case req.TraceID == nil && strings.TrimSpace(req.Query) == "":
		return store.Erasure{}, fmt.Errorf("%w: give a trace id or a query", ErrEraseRequest)
	case req.TraceID == nil:
		var err error
		if f, err = eraseFilter(req.Query); err != nil {
			return store.Erasure{}, err
		}
	}
	var ids []model.TraceID
	if f != nil {
		var err error
		if ids, err = e.matchingTraces(ctx, req.Project, f); err != nil {
			return store.Erasure{}, err
		}
		if !req.All && len(ids) > 0 {
			all, err := e.coversProject(ctx, req.Project, ids)
			if err != nil {
				return store.Erasure{}, err
			}
			if all {
				return store.Erasure{}, fmt.Errorf("%w: query %q matches every one of the %d traces of project %q; to erase them all, say so (API: \"all\": true; CLI: --all)", ErrEraseRequest, req.Query, len(ids), req.Project)
			}
		}
	} else {
		ids = []model.TraceID{*req.TraceID}
	}
	e.erMu.Lock()
	defer e.erMu.Unlock()
	rec := erasureRecord{erasureStatus: erasureStatus{ID: e.erasures.NextID, Project: req.Project, Query: req.Query,
		State: store.ErasePending, RequestedAt: e.now().UTC()}}
	if req.TraceID != nil {
		rec.TraceID = req.TraceID.String()
	}
	next := e.erasures.clone()
	next.NextID++
	next.Erasures = append(next.Erasures, rec)
	if err := e.saveErasuresLocked(next); err != nil {
		return store.Erasure{}, err
	}
	st, err := e.resolveLocked(len(e.erasures.Erasures)-1, ids)
	out := st.status(0)
	out.TraceIDs = ids
	return out, err
}

// matchingTraces returns the traces of project with a span matching f,
// over all time.
func (e *Engine) matchingTraces(ctx context.Context, project string, f *query.Filter) ([]model.TraceID, error) {
	all := *f
	all.Start, all.End = 0, 0
	seen := map[model.TraceID]bool{}
	var ids []model.TraceID
	var res queryResult
	err := e.scan(ctx, project, &all, nil, &res, func(s *model.Span, _ shadowCheck) {
		if !seen[s.TraceID] {
			seen[s.TraceID] = true
			ids = append(ids, s.TraceID)
		}
	}, func() (uint64, bool) { return 0, false })
	if err != nil {
		return nil, fmt.Errorf("resolve erasure: %w", err)
	}
	if res.ioErr != nil {
		return nil, fmt.Errorf("resolve erasure: %w", res.ioErr)
	}
	if len(res.Warnings) > 0 {
		// A segment could not be read: its matching traces are unknown.
		// Do not report a partial erasure as complete.
		return nil, fmt.Errorf("resolve erasure: %s", res.Warnings[0])
	}
	return ids, nil
}

// coversProject reports whether ids are every trace the project holds: it
// reads spans until one belongs to another trace, so an erasure that spares
// most of the project stops within the first block.
func (e *Engine) coversProject(ctx context.Context, project string, ids []model.TraceID) (bool, error) {
	set := make(map[model.TraceID]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	spared := false
	var res queryResult
	err := e.scan(ctx, project, &query.Filter{}, nil, &res, func(s *model.Span, _ shadowCheck) {
		if !set[s.TraceID] {
			spared = true
		}
	}, func() (uint64, bool) { return math.MaxUint64, spared })
	if err == nil {
		err = res.ioErr
	}
	if err != nil {
		return false, fmt.Errorf("check erasure query: %w", err)
	}
	return !spared && len(res.Warnings) == 0, nil
}

// resolveLocked records the pending erasure at index i of the list as
// resolved to ids, and hides them. Callers hold erMu.
func (e *Engine) resolveLocked(i int, ids []model.TraceID) (erasureStatus, error) {
	rec := e.erasures.Erasures[i]
	slices.SortFunc(ids, func(a, b model.TraceID) int { return compareTraceIDs(a, b) })
	now := e.now().UTC()
	rec.State, rec.HiddenAt, rec.Traces = store.EraseHidden, &now, len(ids)
	rec.TraceIDs = make([]string, len(ids))
	for j, id := range ids {
		rec.TraceIDs[j] = id.String()
	}
	next := e.erasures.clone()
	next.Erasures[i] = rec
	if err := e.saveErasuresLocked(next); err != nil {
		return rec.erasureStatus, err
	}
	e.setHidden(func(m map[traceKey]*atomic.Int64) {
		for _, id := range ids {
			if m[traceKey{rec.Project, id}] == nil {
				m[traceKey{rec.Project, id}] = new(atomic.Int64)
			}
		}
	})
	if e.eraseWake != nil {
		e.eraseWake.Stop()
	}
	e.eraseWake = time.AfterFunc(e.opts.EraseDelay, e.kickLifecycle)
	return rec.erasureStatus, nil
}

// eraseFilter parses an erasure's query. A query matching every span is
// refused: that is what retention is for.
func eraseFilter(q string) (*query.Filter, error) {
	expr, err := query.ParseTraceQL(q)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %w", ErrEraseRequest, err)
	}
	if expr == nil || expr.String() == "{ }" {
		return nil, fmt.Errorf("%w: query %q matches every span; give a condition (a whole project ages out with --retention)", ErrEraseRequest, q)
	}
	return &query.Filter{Expr: expr}, nil
}

func compareTraceIDs(a, b model.TraceID) int {
	return slices.Compare(a[:], b[:])
}

// Erasures returns the status of project's recorded erasures, oldest first,
// with the spans erased so far.
func (e *Engine) Erasures(ctx context.Context, project string) ([]store.Erasure, error) {
	e.erMu.Lock()
	defer e.erMu.Unlock()
	hs := e.hidden()
	out := []store.Erasure{}
	for _, r := range e.erasures.Erasures {
		if r.Project != project {
			continue
		}
		var erased int64
		if r.State == store.EraseHidden {
			ids, _ := parseTraceIDs(r.TraceIDs)
			for _, id := range ids {
				if n := hs.traces[traceKey{r.Project, id}]; n != nil {
					erased += n.Load()
				}
			}
		}
		out = append(out, r.status(erased))
	}
	return out, nil
}

// status is the API's view of the erasure, with erased more spans removed
// so far than the record says.
func (s erasureStatus) status(erased int64) store.Erasure {
	return store.Erasure{ID: s.ID, Project: s.Project, Query: s.Query, TraceID: s.TraceID, State: s.State,
		RequestedAt: s.RequestedAt, HiddenAt: s.HiddenAt, DoneAt: s.DoneAt, Traces: s.Traces,
		SpansErased: s.SpansErased + erased, Error: s.Error}
}

// EraseNow runs the physical pass of every hidden erasure at once, without
// waiting for EraseDelay, and returns when it is done.
func (e *Engine) EraseNow(ctx context.Context) error {
	e.lcMu.Lock()
	defer e.lcMu.Unlock()
	return e.erasePassLocked(ctx, true)
}

// erasePassLocked runs the physical pass for the hidden erasures requested
// at least EraseDelay ago (all with force), and resolves pending ones (a
// crash before they were resolved). Callers hold lcMu.
func (e *Engine) erasePassLocked(ctx context.Context, force bool) error {
	e.erMu.Lock()
	for i := range e.erasures.Erasures {
		r := e.erasures.Erasures[i]
		if r.State != store.ErasePending {
			continue
		}
		var err error
		if r.TraceID != "" {
			ids, perr := parseTraceIDs([]string{r.TraceID})
			if perr == nil {
				_, err = e.resolveLocked(i, ids)
			} else {
				err = perr
			}
		} else {
			var f *query.Filter
			var ids []model.TraceID
			if f, err = eraseFilter(r.Query); err == nil {
				if ids, err = e.matchingTraces(ctx, r.Project, f); err == nil {
					_, err = e.resolveLocked(i, ids)
				}
			}
		}
		if err != nil {
			e.log.Error("could not resolve a recorded erasure; retrying later", "id", r.ID, "err", err)
		}
	}
	var due []erasureRecord
	now := e.now()
	for _, r := range e.erasures.Erasures {
		if r.State == store.EraseHidden && (force || !now.Before(r.RequestedAt.Add(e.opts.EraseDelay))) {
			due = append(due, r)
		}
	}
	e.erMu.Unlock()
	if len(due) == 0 {
		return nil
	}
	start := time.Now()
	keys := map[traceKey]bool{}
	for _, r := range due {
		ids, err := parseTraceIDs(r.TraceIDs)
		if err != nil {
			return fmt.Errorf("erasure %d: %w", r.ID, err)
		}
		for _, id := range ids {
			keys[traceKey{r.Project, id}] = true
		}
	}
	// 1. The write buffer and the WAL: a seal leaves erased traces out and
	// deletes the WAL files it covered. A span of an erased trace acknowledged
	// during the seal is caught by the next round.
	for round := 0; ; round++ {
		if err := e.Seal(); err != nil {
			return fmt.Errorf("erasure pass: seal: %w", err)
		}
		if !e.bufferHolds(keys) {
			break
		}
		if round == 3 {
			return errors.New("erasure pass: spans of erased traces keep arriving; retrying later")
		}
	}
	// 2. Segments holding any of the traces are rewritten without them.
	e.mu.RLock()
	segs := slices.Clone(e.segs)
	e.mu.RUnlock()
	rewritten := 0
	for _, h := range segs {
		hit, err := segHolds(h, keys)
		if err != nil {
			return fmt.Errorf("erasure pass: segment %s: %w", h.name, err)
		}
		if !hit {
			continue
		}
		if _, err := e.rewrite(ctx, []*segHandle{h}, e.dropper()); err != nil {
			return fmt.Errorf("erasure pass: %w", err)
		}
		rewritten++
	}
	// 3. Values no segment references any more, out of the packs too.
	if _, err := e.collectValues(true); err != nil {
		return fmt.Errorf("erasure pass: %w", err)
	}
	// 4. Done: record the counts, forget the trace ids.
	e.erMu.Lock()
	defer e.erMu.Unlock()
	hs := e.hidden()
	doneAt := e.now().UTC()
	next := e.erasures.clone()
	doneIDs := map[uint64]bool{}
	for _, r := range due {
		doneIDs[r.ID] = true
	}
	for i := range next.Erasures {
		r := &next.Erasures[i]
		if !doneIDs[r.ID] {
			continue
		}
		ids, _ := parseTraceIDs(r.TraceIDs)
		for _, id := range ids {
			if n := hs.traces[traceKey{r.Project, id}]; n != nil {
				r.SpansErased += n.Load()
			}
		}
		r.State, r.DoneAt, r.TraceIDs = store.EraseDone, &doneAt, nil
		e.m.erasedSpans.Add(r.SpansErased)
	}
	next.Erasures = trimDone(next.Erasures)
	if err := e.saveErasuresLocked(next); err != nil {
		return fmt.Errorf("erasure pass: %w", err)
	}
	// Traces still named by an erasure not done stay hidden.
	still := map[traceKey]bool{}
	for _, r := range next.Erasures {
		if r.State == store.EraseHidden {
			ids, _ := parseTraceIDs(r.TraceIDs)
			for _, id := range ids {
				still[traceKey{r.Project, id}] = true
			}
		}
	}
	e.setHidden(func(m map[traceKey]*atomic.Int64) {
		for k := range keys {
			if !still[k] {
				delete(m, k)
			}
		}
	})
	e.m.erasePasses.Add(1)
	e.log.Info("erasure pass done", "erasures", len(due), "traces", len(keys), "segments_rewritten", rewritten,
		"took", time.Since(start).String())
	return nil
}

// trimDone keeps the newest keepDone finished erasures.
func trimDone(rs []erasureRecord) []erasureRecord {
	done := 0
	for _, r := range rs {
		if r.State == store.EraseDone {
			done++
		}
	}
	out := rs[:0]
	for _, r := range rs {
		if r.State == store.EraseDone && done > keepDone {
			done--
			continue
		}
		out = append(out, r)
	}
	return out
}

// bufferHolds reports whether the write buffer holds a span of the traces.
func (e *Engine) bufferHolds(keys map[traceKey]bool) bool {
	v := e.view()
	defer v.release()
	for _, m := range v.mems {
		for k := range keys {
			if len(m.traceRows(k.project, k.trace)) > 0 {
				return true
			}
		}
	}
	return false
}

// segHolds reports whether a segment holds any of the traces.
func segHolds(h *segHandle, keys map[traceKey]bool) (bool, error) {
	for k := range keys {
		if h.projectInfo(k.project) == nil {
			continue
		}
		ok, err := h.r.ContainsTrace(k.project, k.trace)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
