package engine

import (
	"context"

	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/wal"
)

// Stats returns the counts for one project (store-wide sizes are not per
// project). Spans count stored rows: a re-sent span stored in two segments
// counts twice until compaction; traces are counted per segment and summed.
func (e *Engine) Stats(ctx context.Context, project string) (store.Stats, error) {
	if e.closed.Load() {
		return store.Stats{}, ErrClosed
	}
	return e.stats(project), nil
}

func (e *Engine) stats(project string) store.Stats {
	v := e.view()
	defer v.release()
	var st store.Stats
	for _, m := range v.mems {
		spans, traces := m.counts(project)
		st.Spans += spans
		st.Traces += traces
		st.BufferSpans += m.live.Load()
		st.BufferBytes += m.bytes.Load()
	}
	for _, s := range v.segs {
		st.SegmentBytes += s.info.Bytes
		for _, p := range s.info.Projects {
			if p.Name == project {
				st.Spans += int64(p.Spans)
				st.Traces += int64(p.Traces)
			}
		}
	}
	st.Segments = len(v.segs)
	st.WALBytes = e.wal.Size()
	vs := e.values.Stats()
	st.ValueBytes, st.Values = vs.DiskBytes, int64(vs.Values)
	st.DiskBytes = st.SegmentBytes + st.WALBytes + st.ValueBytes
	e.mu.RLock()
	st.Quarantined = append([]string(nil), e.quarantined...)
	e.mu.RUnlock()
	if p := e.sealErr.Load(); p != nil {
		st.SealError = (*p).Error()
	}
	return st
}

// Counters are cumulative engine metrics for /metrics.
type Counters struct {
	Seals, SealNanos, SealedSpans int64
	Corruptions                   int64
	BlocksExamined, BlocksPruned  int64
	// BlocksRowFiltered counts examined blocks (also in BlocksExamined)
	// whose rows a search filtered on their columns, decoding only the
	// candidates (segment.Reader.FilterRows).
	BlocksRowFiltered int64
	// AttrSegPruned counts segments a search skipped on their attribute
	// value summary (segment section 19), before any block filter.
	AttrSegPruned                  int64
	ReplayedRecords, ReplayedSpans int64
	BufferFull, SealErrors         int64
	// SealsBehind counts seals that started behind (the buffers half a
	// seal past SealBytes) and so ran at normal priority.
	SealsBehind int64
	// Paced counts appends held while the buffers held two seals' worth
	// (Engine.pace).
	Paced int64
	// LLM statistics: segments and blocks answered from stored aggregates,
	// and blocks whose rows were read instead.
	LLMAggSegments, LLMAggBlocks, LLMRowBlocks int64
	// Full-text search: segments and blocks skipped by token filters, and
	// those read.
	ContentSegPruned, ContentSegExamined     int64
	ContentBlockPruned, ContentBlockExamined int64
	ContentChunkPruned                       int64 // full write-buffer chunks skipped on their token filter
	// ContentSegDiskPruned counts segments (also in ContentSegPruned) that
	// passed the resident summary and were pruned by the disk summary;
	// ContentGroup* count 64-row groups of examined blocks skipped and read.
	ContentSegDiskPruned                     int64
	ContentGroupPruned, ContentGroupExamined int64
	// ContentRowsRejected counts candidate rows of the token map whose
	// texts, checked before decoding, did not match (a phrase's decoys).
	ContentRowsRejected int64
	// ValueErrors counts stored values that could not be read for a result
	// (a placeholder was returned instead).
	ValueErrors int64
	// IOErrors counts segment reads that failed for a reason other than
	// damage (EIO, a closed file): in a query, which then failed, or at
	// open, where the segment was then not served.
	IOErrors int64
	// Lifecycle: merges done and failed, input segments merged away, bytes
	// written and time spent by merges; segments dropped whole and rewritten
	// by retention; erasure passes and spans they removed.
	Merges, MergeErrors, SegmentsMerged, MergeBytes, MergeNanos int64
	// MergesDeferred counts merges due that waited while ingest was pressed
	// (Options.MergeDeferSegments).
	MergesDeferred                       int64
	RetentionDropped, RetentionRewritten int64
	ErasePasses, ErasedSpans             int64
	// Live tails open now, and spans dropped because a tail's reader was
	// too slow.
	Tails, TailDropped int64
	WAL                wal.Stats
}

// Counters returns a snapshot of the engine's cumulative metrics.
func (e *Engine) Counters() Counters {
	return Counters{
		Seals: e.m.seals.Load(), SealNanos: e.m.sealNanos.Load(), SealedSpans: e.m.sealedSpans.Load(),
		Corruptions:    e.m.corruptions.Load(),
		BlocksExamined: e.m.blocksExamined.Load(), BlocksPruned: e.m.blocksPruned.Load(),
		BlocksRowFiltered: e.m.blocksRowFiltered.Load(),
		AttrSegPruned:     e.m.attrSegPruned.Load(),
		ReplayedRecords:   e.m.replayedRecords.Load(), ReplayedSpans: e.m.replayedSpans.Load(),
		BufferFull: e.m.bufferFull.Load(), SealErrors: e.m.sealErrors.Load(),
		SealsBehind: e.m.sealsBehind.Load(), Paced: e.m.paced.Load(),
		LLMAggSegments: e.m.llmAggSegments.Load(), LLMAggBlocks: e.m.llmAggBlocks.Load(), LLMRowBlocks: e.m.llmRowBlocks.Load(),
		ContentSegPruned: e.m.contentSegPruned.Load(), ContentSegExamined: e.m.contentSegExamined.Load(),
		ContentBlockPruned: e.m.contentBlockPruned.Load(), ContentBlockExamined: e.m.contentBlockExamined.Load(),
		ContentSegDiskPruned: e.m.contentSegDiskPruned.Load(),
		ContentGroupPruned:   e.m.contentGroupPruned.Load(), ContentGroupExamined: e.m.contentGroupExamined.Load(),
		ContentRowsRejected: e.m.contentRowsRejected.Load(), ContentChunkPruned: e.m.contentChunkPruned.Load(),
		ValueErrors: e.m.valueErrors.Load(), IOErrors: e.m.ioErrors.Load(),
		Merges: e.m.merges.Load(), MergeErrors: e.m.mergeErrors.Load(), MergesDeferred: e.m.mergesDeferred.Load(), SegmentsMerged: e.m.segmentsMerged.Load(),
		MergeBytes: e.m.mergeBytes.Load(), MergeNanos: e.m.mergeNanos.Load(),
		RetentionDropped: e.m.retentionDropped.Load(), RetentionRewritten: e.m.retentionRewritten.Load(),
		ErasePasses: e.m.erasePasses.Load(), ErasedSpans: e.m.erasedSpans.Load(),
		Tails: e.m.tailsOpened.Load() - e.m.tailsClosed.Load(), TailDropped: e.m.tailDropped.Load(),
		WAL: e.wal.Stats(),
	}
}
