package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rastro-dev/rastro/internal/store"
)

// engineCounters are the engine's cumulative counters as Prometheus exports
// them. Adding a counter touches this package only: the counters struct,
// Counters, and one line here.
var engineCounters = []struct {
	name, help string
	get        func(c *Counters) int64
}{
	{"rastro_wal_records_total", "Records appended to the WAL (one per accepted request).", func(c *Counters) int64 { return int64(c.WAL.Records) }},
	{"rastro_wal_batches_total", "Group commits: WAL writes that carried one or more records.", func(c *Counters) int64 { return int64(c.WAL.Batches) }},
	{"rastro_wal_fsyncs_total", "WAL fsyncs. fsyncs per acknowledged request = this / rastro_wal_records_total.", func(c *Counters) int64 { return int64(c.WAL.Syncs) }},
	{"rastro_wal_written_bytes_total", "Bytes written to the WAL.", func(c *Counters) int64 { return int64(c.WAL.BytesWritten) }},
	{"rastro_wal_write_ns_total", "Nanoseconds spent in WAL write(2) calls.", func(c *Counters) int64 { return int64(c.WAL.WriteNanos) }},
	{"rastro_wal_fsync_ns_total", "Nanoseconds spent in WAL fsyncs.", func(c *Counters) int64 { return int64(c.WAL.SyncNanos) }},
	{"rastro_seals_total", "Write buffers sealed into segments.", func(c *Counters) int64 { return c.Seals }},
	{"rastro_seal_ns_total", "Nanoseconds spent sealing.", func(c *Counters) int64 { return c.SealNanos }},
	{"rastro_sealed_spans_total", "Spans written into segments by seals.", func(c *Counters) int64 { return c.SealedSpans }},
	{"rastro_corruption_errors_total", "Damaged segment parts found (segment or block skipped).", func(c *Counters) int64 { return c.Corruptions }},
	{"rastro_io_errors_total", "Segment reads that failed without damage (EIO, a closed file): the query failed, or the segment was not served at open.", func(c *Counters) int64 { return c.IOErrors }},
	{"rastro_query_blocks_examined_total", "Segment blocks read by searches.", func(c *Counters) int64 { return c.BlocksExamined }},
	{"rastro_query_blocks_row_filtered_total", "Segment blocks read by searches in part: rows filtered on their columns, only the candidates decoded.", func(c *Counters) int64 { return c.BlocksRowFiltered }},
	{"rastro_query_segments_pruned_total", "Segments skipped by searches using their resident attribute value summary.", func(c *Counters) int64 { return c.AttrSegPruned }},
	{"rastro_query_blocks_pruned_total", "Segment blocks skipped by searches using block metadata and filters.", func(c *Counters) int64 { return c.BlocksPruned }},
	{"rastro_ingest_buffer_full_total", "Appends refused (429) because the write buffer was at --max-buffer-bytes.", func(c *Counters) int64 { return c.BufferFull }},
	{"rastro_seals_behind_total", "Seals that started with the write buffers half a seal past --seal-bytes (seals falling behind ingest) and so ran at normal priority, not at --ingest-nice.", func(c *Counters) int64 { return c.SealsBehind }},
	{"rastro_ingest_paced_total", "Span requests held (at most 1 s) while the write buffers held two seals' worth, until a seal retired one.", func(c *Counters) int64 { return c.Paced }},
	{"rastro_seal_errors_total", "Seals that failed (the data stays in the WAL; see /api/v1/stats seal_error).", func(c *Counters) int64 { return c.SealErrors }},
	{"rastro_llm_aggregate_segments_total", "Segments whose LLM statistics were answered from stored aggregates.", func(c *Counters) int64 { return c.LLMAggSegments }},
	{"rastro_llm_aggregate_blocks_total", "Blocks whose LLM statistics were answered from stored aggregates.", func(c *Counters) int64 { return c.LLMAggBlocks }},
	{"rastro_llm_row_blocks_total", "Blocks whose rows were read for LLM statistics (straddling the window, filtered, or no aggregates).", func(c *Counters) int64 { return c.LLMRowBlocks }},
	{"rastro_content_segments_pruned_total", "Segments a content search skipped on their resident token summary.", func(c *Counters) int64 { return c.ContentSegPruned }},
	{"rastro_content_segments_examined_total", "Segments a content search had to look into (summary said maybe).", func(c *Counters) int64 { return c.ContentSegExamined }},
	{"rastro_content_blocks_pruned_total", "Blocks a content search skipped on their token filter.", func(c *Counters) int64 { return c.ContentBlockPruned }},
	{"rastro_content_blocks_examined_total", "Blocks a content search read after their token filter said maybe.", func(c *Counters) int64 { return c.ContentBlockExamined }},
	{"rastro_content_segments_disk_pruned_total", "Segments a content search skipped on their on-disk token summary (after the resident one said maybe).", func(c *Counters) int64 { return c.ContentSegDiskPruned }},
	{"rastro_content_buffer_chunks_pruned_total", "Full write-buffer chunks (4,096 spans) a content search skipped on their token filter, built on the first content search that reached them.", func(c *Counters) int64 { return c.ContentChunkPruned }},
	{"rastro_content_row_groups_pruned_total", "64-row groups a content search skipped on their token filter (when row-group filters are written).", func(c *Counters) int64 { return c.ContentGroupPruned }},
	{"rastro_content_row_groups_examined_total", "64-row groups a content search read after their token filter said maybe.", func(c *Counters) int64 { return c.ContentGroupExamined }},
	{"rastro_content_rows_rejected_total", "Rows the token map named that a content search rejected on their texts alone, without decoding them (a phrase's words apart).", func(c *Counters) int64 { return c.ContentRowsRejected }},
	{"rastro_value_errors_total", "Large values stored apart that could not be read for a result (placeholder shown, warning returned).", func(c *Counters) int64 { return c.ValueErrors }},
	{"rastro_compaction_merges_total", "Merges done by compaction (segments merged into one).", func(c *Counters) int64 { return c.Merges }},
	{"rastro_compaction_errors_total", "Merges that failed (their inputs are not merged again until restart; see the log).", func(c *Counters) int64 { return c.MergeErrors }},
	{"rastro_compaction_deferred_total", "Merges due that waited because ingest was refusing requests for want of capacity (while at most --merge-defer-segments segments are still to merge).", func(c *Counters) int64 { return c.MergesDeferred }},
	{"rastro_compaction_segments_merged_total", "Input segments merged away by compaction.", func(c *Counters) int64 { return c.SegmentsMerged }},
	{"rastro_compaction_bytes_written_total", "Segment bytes written by merges and rewrites (compaction, retention, erasure).", func(c *Counters) int64 { return c.MergeBytes }},
	{"rastro_compaction_nanoseconds_total", "Nanoseconds spent in merges and rewrites.", func(c *Counters) int64 { return c.MergeNanos }},
	{"rastro_retention_segments_dropped_total", "Segments dropped whole because every span had expired.", func(c *Counters) int64 { return c.RetentionDropped }},
	{"rastro_retention_segments_rewritten_total", "Segments rewritten without their expired spans.", func(c *Counters) int64 { return c.RetentionRewritten }},
	{"rastro_erasure_passes_total", "Physical erasure passes completed.", func(c *Counters) int64 { return c.ErasePasses }},
	{"rastro_erased_spans_total", "Spans physically removed by completed erasures.", func(c *Counters) int64 { return c.ErasedSpans }},
	{"rastro_tail_dropped_spans_total", "Spans a live tail skipped because its client read too slowly (the client is told how many).", func(c *Counters) int64 { return c.TailDropped }},
	{"rastro_wal_replayed_spans_total", "Spans recovered from the WAL at start-up.", func(c *Counters) int64 { return c.ReplayedSpans }},
}

// engineGauges are the engine's levels: one stats walk per scrape serves all
// but the tail count.
var engineGauges = []struct {
	name, help string
	get        func(c *Counters, st *store.Stats) int64
}{
	{"rastro_tails", "Live tails open now (GET /api/v1/tail).", func(c *Counters, _ *store.Stats) int64 { return c.Tails }},
	{"rastro_segments", "Published segments.", func(_ *Counters, st *store.Stats) int64 { return int64(st.Segments) }},
	{"rastro_buffer_spans", "Spans in the in-memory write buffers (active and being sealed).", func(_ *Counters, st *store.Stats) int64 { return st.BufferSpans }},
	{"rastro_buffer_bytes", "Estimated bytes of the in-memory write buffers.", func(_ *Counters, st *store.Stats) int64 { return st.BufferBytes }},
	{"rastro_wal_bytes", "Bytes in live WAL files.", func(_ *Counters, st *store.Stats) int64 { return st.WALBytes }},
	{"rastro_value_store_bytes", "Bytes of the store of large values kept apart from segments.", func(_ *Counters, st *store.Stats) int64 { return st.ValueBytes }},
	{"rastro_segment_bytes", "Bytes in published segment files.", func(_ *Counters, st *store.Stats) int64 { return st.SegmentBytes }},
	{"rastro_quarantined_segments", "Segments not served because they failed verification at open.", func(_ *Counters, st *store.Stats) int64 { return int64(len(st.Quarantined)) }},
}

// collector exports an engine's counters and gauges; see NewCollector.
type collector struct {
	current            func() *Engine
	counterDs, gaugeDs []*prometheus.Desc
}

// NewCollector returns the Prometheus collector of the engine current
// returns, read once per scrape: its counters, and the store's sizes. The
// server registers it before the engine opens (the WAL replay comes first):
// while current returns nil the counters read 0 and the gauges of the
// store's sizes are absent; after the engine closed its counters are still
// reported, its sizes are not.
func NewCollector(current func() *Engine) prometheus.Collector {
	c := &collector{current: current}
	for _, m := range engineCounters {
		c.counterDs = append(c.counterDs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	for _, g := range engineGauges {
		c.gaugeDs = append(c.gaugeDs, prometheus.NewDesc(g.name, g.help, nil, nil))
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.counterDs {
		ch <- d
	}
	for _, d := range c.gaugeDs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	var cs Counters
	e := c.current()
	if e != nil {
		cs = e.Counters() // atomics only: safe after Close too
	}
	open := e != nil && !e.closed.Load()
	for i, m := range engineCounters {
		ch <- prometheus.MustNewConstMetric(c.counterDs[i], prometheus.CounterValue, float64(m.get(&cs)))
	}
	var st store.Stats
	if open {
		st = e.stats("") // no project is named "": store-wide sizes only
	}
	for i, g := range engineGauges {
		if open || g.name == "rastro_tails" {
			ch <- prometheus.MustNewConstMetric(c.gaugeDs[i], prometheus.GaugeValue, float64(g.get(&cs, &st)))
		}
	}
}
