package chstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// Import copies spans from another backend (the embedded engine on a data
// directory, `rastro migrate --from-data-dir`) into the store, through
// Append: the materialized views feed the rollups, the attribute index and
// spans_by_trace exactly as for ingested spans.
//
// The copy walks each project's spans with the source's SearchSpans, newest
// first, one page (ImportOptions.BatchSpans) at a time, so it holds one page
// of spans whatever the size of the source. After each page ClickHouse has
// acknowledged, the position (the page's last span, the source's cursor) is
// written to the table import_progress, keyed by source and project; a run
// started again reads it and goes on from there.
//
// A page acknowledged and not checkpointed (the process killed between the
// two) must not be inserted twice: the rollups sum every inserted row for
// good, so a second copy would double LLM statistics and RED. Before each
// insert the progress row records the page's last span as pending; a run
// that finds a pending position asks ClickHouse which spans of each page up
// to it are already in spans and inserts only the others. An insert is one
// block, so a page is either all in spans or none of it is (for a killed
// client; see docs/clickhouse.md for a ClickHouse crash). On a cluster
// (importableCluster: one replica per shard) a page's insert is split over
// the shards, and a failure can leave it in some: the look-up, span by
// span, covers that as well.

// importTable is the checkpoint table. Rows are versions of one
// (source, project) position; the highest version wins. It is created by
// the first import, not by a migration: serving never reads it.
const importTable = `CREATE TABLE IF NOT EXISTS import_progress (
	source String,
	project String,
	version UInt64,
	cursor_start UInt64,
	cursor_trace FixedString(16),
	cursor_span FixedString(8),
	has_cursor UInt8,
	pending_start UInt64,
	pending_trace FixedString(16),
	pending_span FixedString(8),
	has_pending UInt8,
	spans UInt64,
	done UInt8
) ENGINE = ReplacingMergeTree(version) ORDER BY (source, project)`

// DefaultImportBatchSpans is ImportOptions.BatchSpans's default.
const DefaultImportBatchSpans = 5000

// ImportOptions configures Import.
type ImportOptions struct {
	// Source names the source in import_progress: the same name resumes
	// its position (`rastro migrate` uses the data directory's absolute
	// path).
	Source string
	// Projects are the source's projects, copied in this order.
	Projects []string
	// BatchSpans is the most spans read, inserted and checkpointed at once;
	// 0 means DefaultImportBatchSpans.
	BatchSpans int
	// Progress, when set, is called after each checkpointed page and when a
	// project is finished.
	Progress func(ImportProgress)
	// beforeInsert and afterInsert, in tests, run before a page's insert
	// (its pending position written) and between its insert and its
	// checkpoint; an error either returns stops the import there.
	beforeInsert, afterInsert func(project string, page int) error
}

// ImportProgress is where an import stands in one project.
type ImportProgress struct {
	Project string
	// Spans of the source walked so far, earlier runs included: each is in
	// ClickHouse, copied by this run or an earlier one.
	Spans uint64
	// Skipped are spans of this run found already in ClickHouse (from a
	// page an earlier run inserted and did not checkpoint) and not inserted
	// again.
	Skipped uint64
	// Done: every span of the project is copied.
	Done bool
	// Resumed: an earlier run had started this project.
	Resumed bool
}

// checkpoint is one import_progress row.
type checkpoint struct {
	version uint64
	cursor  *store.Cursor
	pending *store.Cursor
	spans   uint64
	done    bool
}

// Import copies every span of opts.Projects from src (see the comment
// above). It returns each project's progress, finished or not; an error
// (ctx's end included) leaves the checkpoints of every acknowledged page, so
// a later call with the same Source goes on from there.
func (s *Store) Import(ctx context.Context, src store.Reader, opts ImportOptions) ([]ImportProgress, error) {
	if opts.Source == "" {
		return nil, errors.New("import: no source name")
	}
	if opts.BatchSpans == 0 {
		opts.BatchSpans = DefaultImportBatchSpans
	}
	if opts.BatchSpans < 0 {
		return nil, fmt.Errorf("import: batch of %d spans", opts.BatchSpans)
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	if err := s.importableCluster(ctx); err != nil {
		return nil, err
	}
	stmts, err := s.target.statements(importTable)
	if err != nil {
		return nil, err
	}
	for _, stmt := range stmts {
		if err := s.conn.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("import: create import_progress: %w", err)
		}
	}
	var out []ImportProgress
	for _, project := range opts.Projects {
		p, err := s.importProject(ctx, src, project, &opts)
		out = append(out, p)
		if err != nil {
			return out, fmt.Errorf("import project %q: %w", project, err)
		}
	}
	return out, nil
}

func (s *Store) importProject(ctx context.Context, src store.Reader, project string, opts *ImportOptions) (ImportProgress, error) {
	cp, err := s.loadCheckpoint(ctx, opts.Source, project)
	if err != nil {
		return ImportProgress{Project: project}, err
	}
	prog := ImportProgress{Project: project, Spans: cp.spans, Done: cp.done, Resumed: cp.version > 0}
	if cp.done {
		if opts.Progress != nil {
			opts.Progress(prog)
		}
		return prog, nil
	}
	// Every span, whatever its time: the source hides erased traces (and
	// the spans its retention hides) itself.
	all := query.Filter{}
	for page := 0; ; page++ {
		spans, next, res, err := src.SearchSpans(ctx, project, &all, opts.BatchSpans, cp.cursor)
		if err != nil {
			return prog, fmt.Errorf("read the source after %d spans: %w", cp.spans, err)
		}
		if err := ctx.Err(); err != nil {
			return prog, err
		}
		if len(res.Warnings) > 0 {
			// A damaged part skipped would be a silent loss: stop, and say
			// what the source could not read.
			return prog, fmt.Errorf("read the source after %d spans: damaged parts skipped: %s", cp.spans, strings.Join(res.Warnings, "; "))
		}
		if len(spans) == 0 {
			cp.done, cp.pending = true, nil
			if err := s.saveCheckpoint(ctx, opts.Source, project, &cp); err != nil {
				return prog, err
			}
			prog.Done = true
			if opts.Progress != nil {
				opts.Progress(prog)
			}
			return prog, nil
		}
		last := spans[len(spans)-1]
		end := &store.Cursor{Start: last.StartTimeUnixNano, Trace: last.TraceID, Span: last.SpanID}
		walked := uint64(len(spans))
		// An earlier run may have inserted spans up to cp.pending without
		// checkpointing them: they are looked up and left out.
		dedupe := cp.pending != nil
		if cp.pending == nil || cursorBefore(cp.pending, end) {
			// Before the insert, the checkpoint says how far it may reach.
			cp.pending = end
			if err := s.saveCheckpoint(ctx, opts.Source, project, &cp); err != nil {
				return prog, err
			}
		}
		if dedupe {
			kept, err := s.notStored(ctx, project, spans)
			if err != nil {
				return prog, err
			}
			prog.Skipped += uint64(len(spans) - len(kept))
			spans = kept
		}
		if opts.beforeInsert != nil {
			if err := opts.beforeInsert(project, page); err != nil {
				return prog, err
			}
		}
		if len(spans) > 0 {
			if err := s.Append(ctx, &store.Write{Project: project, Spans: spans}); err != nil {
				return prog, fmt.Errorf("insert %d spans after %d: %w", len(spans), cp.spans, err)
			}
		}
		if opts.afterInsert != nil {
			if err := opts.afterInsert(project, page); err != nil {
				return prog, err
			}
		}
		cp.cursor, cp.spans, cp.done = end, cp.spans+walked, next == nil
		if !cursorBefore(end, cp.pending) {
			cp.pending = nil // everything up to it is now checkpointed
		}
		// The page is acknowledged: its checkpoint is written even when
		// ctx has ended meanwhile (Append completes a write under way), so
		// an interruption between pages loses no position.
		if err := s.saveCheckpoint(context.WithoutCancel(ctx), opts.Source, project, &cp); err != nil {
			return prog, err
		}
		prog.Spans, prog.Done = cp.spans, cp.done
		if opts.Progress != nil {
			opts.Progress(prog)
		}
		if cp.done {
			return prog, nil
		}
		if err := ctx.Err(); err != nil {
			return prog, err
		}
	}
}

// importableCluster refuses an import into a cluster whose shards have
// more than one replica. On a cluster of one replica per shard the import
// is what it is on one node: import_progress is a Distributed table like
// the others, an insert into a Distributed table returns once every shard
// holds its rows (insert_distributed_sync), and a read of one reaches the
// only replica of every shard, so a resumed run, through any node, reads
// every checkpoint and every span acknowledged before. With replicas a
// read may reach a replica that has not fetched an insert yet: a resumed
// run could miss a page an interrupted run inserted (its quorum, if any,
// not reached) and copy it again, which the rollups would count twice.
func (s *Store) importableCluster(ctx context.Context) error {
	if s.target.cluster == "" {
		return nil
	}
	var most uint64
	err := s.conn.QueryRow(ctx, "SELECT toUInt64(max(n)) FROM (SELECT shard_num, count() AS n FROM system.clusters WHERE cluster = ? GROUP BY shard_num)", s.target.cluster).Scan(&most)
	if err != nil {
		return fmt.Errorf("import: read the replicas of cluster %s: %w", s.target.cluster, err)
	}
	if most > 1 {
		return fmt.Errorf("import: into cluster %s, whose shards have up to %d replicas, is not built: a resumed import could read a replica that has not "+
			"fetched what the interrupted one inserted, and copy those spans twice (docs/clickhouse.md#cluster-mode); import into a cluster of one replica per shard, "+
			"or into a single node", s.target.cluster, most)
	}
	return nil
}

// cursorBefore reports whether a sorts before b in the store's result
// order (newest start first, then trace id, then span id): a span at b
// comes later in the walk than one at a.
func cursorBefore(a, b *store.Cursor) bool {
	if a.Start != b.Start {
		return a.Start > b.Start
	}
	if c := bytes.Compare(a.Trace[:], b.Trace[:]); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.Span[:], b.Span[:]) < 0
}

// notStored returns the spans of page that spans does not hold yet.
func (s *Store) notStored(ctx context.Context, project string, page []model.Span) ([]model.Span, error) {
	lo, hi := page[0].StartTimeUnixNano, page[0].StartTimeUnixNano
	seen := map[model.TraceID]bool{}
	var ids []model.TraceID
	for i := range page {
		lo, hi = min(lo, page[i].StartTimeUnixNano), max(hi, page[i].StartTimeUnixNano)
		if !seen[page[i].TraceID] {
			seen[page[i].TraceID] = true
			ids = append(ids, page[i].TraceID)
		}
	}
	type key struct {
		t model.TraceID
		s model.SpanID
	}
	have := map[key]bool{}
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT trace_id, span_id FROM spans WHERE project = ? AND start >= ? AND start <= ? AND trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16))",
		project, lo, hi, traceIDs(ids))
	if err != nil {
		return nil, fmt.Errorf("look up spans already copied: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t, sp string
		if err := rows.Scan(&t, &sp); err != nil {
			return nil, fmt.Errorf("look up spans already copied: %w", err)
		}
		var k key
		copy(k.t[:], t)
		copy(k.s[:], sp)
		have[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up spans already copied: %w", err)
	}
	kept := page[:0]
	for i := range page {
		if !have[key{page[i].TraceID, page[i].SpanID}] {
			kept = append(kept, page[i])
		}
	}
	return kept, nil
}

func (s *Store) loadCheckpoint(ctx context.Context, source, project string) (checkpoint, error) {
	var cp checkpoint
	rows, err := s.conn.Query(ctx, `SELECT version, cursor_start, cursor_trace, cursor_span, has_cursor,
		pending_start, pending_trace, pending_span, has_pending, spans, done
		FROM import_progress WHERE source = ? AND project = ? ORDER BY version DESC LIMIT 1`, source, project)
	if err != nil {
		return cp, fmt.Errorf("read import_progress: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var (
			c, p               store.Cursor
			ct, cs, pt, ps     string
			hasC, hasP, done   uint8
			version, cst, pstt uint64
		)
		if err := rows.Scan(&version, &cst, &ct, &cs, &hasC, &pstt, &pt, &ps, &hasP, &cp.spans, &done); err != nil {
			return cp, fmt.Errorf("read import_progress: %w", err)
		}
		cp.version, cp.done = version, done == 1
		if hasC == 1 {
			c.Start = cst
			copy(c.Trace[:], ct)
			copy(c.Span[:], cs)
			cp.cursor = &c
		}
		if hasP == 1 {
			p.Start = pstt
			copy(p.Trace[:], pt)
			copy(p.Span[:], ps)
			cp.pending = &p
		}
	}
	if err := rows.Err(); err != nil {
		return cp, fmt.Errorf("read import_progress: %w", err)
	}
	return cp, nil
}

// saveCheckpoint writes cp as the next version of (source, project).
func (s *Store) saveCheckpoint(ctx context.Context, source, project string, cp *checkpoint) error {
	cp.version++
	var c, p store.Cursor
	var hasC, hasP, done uint8
	if cp.cursor != nil {
		c, hasC = *cp.cursor, 1
	}
	if cp.pending != nil {
		p, hasP = *cp.pending, 1
	}
	if cp.done {
		done = 1
	}
	if err := insertRow(ctx, s.conn, s.quorum, "INSERT INTO import_progress (source, project, version, cursor_start, cursor_trace, cursor_span, has_cursor, pending_start, pending_trace, pending_span, has_pending, spans, done)",
		source, project, cp.version, c.Start, string(c.Trace[:]), string(c.Span[:]), hasC,
		p.Start, string(p.Trace[:]), string(p.Span[:]), hasP, cp.spans, done); err != nil {
		return fmt.Errorf("write import_progress: %w", err)
	}
	return nil
}
