package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// metrics are the server's Prometheus series, on a registry of its own so
// that several servers can live in one process (tests).
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	spans         *prometheus.CounterVec
	bytes         *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	rejectedSpans prometheus.Counter
	normalized    *prometheus.CounterVec
	decodeNanos   *prometheus.CounterVec
	queryDuration *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_ingest_requests_total",
			Help: "Ingest requests by protocol and response code (HTTP status or gRPC code)."}, []string{"protocol", "code"}),
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_ingest_spans_total",
			Help: "Spans accepted, by protocol."}, []string{"protocol"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_ingest_bytes_total",
			Help: "Accepted request bytes after decompression, by protocol."}, []string{"protocol"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_ingest_rejected_total",
			Help: "Rejected ingest requests by reason."}, []string{"reason"}),
		rejectedSpans: prometheus.NewCounter(prometheus.CounterOpts{Name: "rastro_ingest_rejected_spans_total",
			Help: "Spans rejected individually (partial success), e.g. for invalid ids."}),
		normalized: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_ingest_normalized_spans_total",
			Help: "Spans stored after repairing a problem, by problem."}, []string{"problem"}),
		decodeNanos: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_decode_ns_total",
			Help: "Nanoseconds spent decoding request bodies, by protocol (divide by rastro_ingest_spans_total for ns/span)."}, []string{"protocol"}),
		queryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rastro_query_duration_seconds",
			Help:    "Query API latency by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.spans, m.bytes, m.rejected, m.rejectedSpans, m.normalized, m.decodeNanos, m.queryDuration)
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))

	counter := func(name, help string, f func(c engine.Counters) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			e := s.eng.Load()
			if e == nil {
				return 0
			}
			return float64(f(e.Counters()))
		}))
	}
	counter("rastro_wal_records_total", "Records appended to the WAL (one per accepted request).", func(c engine.Counters) int64 { return int64(c.WAL.Records) })
	counter("rastro_wal_batches_total", "Group commits: WAL writes that carried one or more records.", func(c engine.Counters) int64 { return int64(c.WAL.Batches) })
	counter("rastro_wal_fsyncs_total", "WAL fsyncs. fsyncs per acknowledged request = this / rastro_wal_records_total.", func(c engine.Counters) int64 { return int64(c.WAL.Syncs) })
	counter("rastro_wal_written_bytes_total", "Bytes written to the WAL.", func(c engine.Counters) int64 { return int64(c.WAL.BytesWritten) })
	counter("rastro_wal_write_ns_total", "Nanoseconds spent in WAL write(2) calls.", func(c engine.Counters) int64 { return int64(c.WAL.WriteNanos) })
	counter("rastro_wal_fsync_ns_total", "Nanoseconds spent in WAL fsyncs.", func(c engine.Counters) int64 { return int64(c.WAL.SyncNanos) })
	counter("rastro_seals_total", "Write buffers sealed into segments.", func(c engine.Counters) int64 { return c.Seals })
	counter("rastro_seal_ns_total", "Nanoseconds spent sealing.", func(c engine.Counters) int64 { return c.SealNanos })
	counter("rastro_sealed_spans_total", "Spans written into segments by seals.", func(c engine.Counters) int64 { return c.SealedSpans })
	counter("rastro_corruption_errors_total", "Damaged segment parts found (segment or block skipped).", func(c engine.Counters) int64 { return c.Corruptions })
	counter("rastro_query_blocks_examined_total", "Segment blocks read by searches.", func(c engine.Counters) int64 { return c.BlocksExamined })
	counter("rastro_query_blocks_pruned_total", "Segment blocks skipped by searches using block metadata and filters.", func(c engine.Counters) int64 { return c.BlocksPruned })
	counter("rastro_ingest_buffer_full_total", "Appends refused (429) because the write buffer was at --max-buffer-bytes.", func(c engine.Counters) int64 { return c.BufferFull })
	counter("rastro_seal_errors_total", "Seals that failed (the data stays in the WAL; see /api/v1/stats seal_error).", func(c engine.Counters) int64 { return c.SealErrors })
	counter("rastro_llm_aggregate_segments_total", "Segments whose LLM statistics were answered from stored aggregates.", func(c engine.Counters) int64 { return c.LLMAggSegments })
	counter("rastro_llm_aggregate_blocks_total", "Blocks whose LLM statistics were answered from stored aggregates.", func(c engine.Counters) int64 { return c.LLMAggBlocks })
	counter("rastro_llm_row_blocks_total", "Blocks whose rows were read for LLM statistics (straddling the window, filtered, or no aggregates).", func(c engine.Counters) int64 { return c.LLMRowBlocks })
	counter("rastro_content_segments_pruned_total", "Segments a content search skipped on their resident token summary.", func(c engine.Counters) int64 { return c.ContentSegPruned })
	counter("rastro_content_segments_examined_total", "Segments a content search had to look into (summary said maybe).", func(c engine.Counters) int64 { return c.ContentSegExamined })
	counter("rastro_content_blocks_pruned_total", "Blocks a content search skipped on their token filter.", func(c engine.Counters) int64 { return c.ContentBlockPruned })
	counter("rastro_content_blocks_examined_total", "Blocks a content search read after their token filter said maybe.", func(c engine.Counters) int64 { return c.ContentBlockExamined })
	counter("rastro_content_segments_disk_pruned_total", "Segments a content search skipped on their on-disk token summary (after the resident one said maybe).", func(c engine.Counters) int64 { return c.ContentSegDiskPruned })
	counter("rastro_content_row_groups_pruned_total", "64-row groups a content search skipped on their token filter (when row-group filters are written).", func(c engine.Counters) int64 { return c.ContentGroupPruned })
	counter("rastro_content_row_groups_examined_total", "64-row groups a content search read after their token filter said maybe.", func(c engine.Counters) int64 { return c.ContentGroupExamined })
	counter("rastro_value_errors_total", "Large values stored apart that could not be read for a result (placeholder shown, warning returned).", func(c engine.Counters) int64 { return c.ValueErrors })
	counter("rastro_compaction_merges_total", "Merges done by compaction (segments merged into one).", func(c engine.Counters) int64 { return c.Merges })
	counter("rastro_compaction_errors_total", "Merges that failed (their inputs are not merged again until restart; see the log).", func(c engine.Counters) int64 { return c.MergeErrors })
	counter("rastro_compaction_segments_merged_total", "Input segments merged away by compaction.", func(c engine.Counters) int64 { return c.SegmentsMerged })
	counter("rastro_compaction_bytes_written_total", "Segment bytes written by merges and rewrites (compaction, retention, erasure).", func(c engine.Counters) int64 { return c.MergeBytes })
	counter("rastro_compaction_nanoseconds_total", "Nanoseconds spent in merges and rewrites.", func(c engine.Counters) int64 { return c.MergeNanos })
	counter("rastro_retention_segments_dropped_total", "Segments dropped whole because every span had expired.", func(c engine.Counters) int64 { return c.RetentionDropped })
	counter("rastro_retention_segments_rewritten_total", "Segments rewritten without their expired spans.", func(c engine.Counters) int64 { return c.RetentionRewritten })
	counter("rastro_erasure_passes_total", "Physical erasure passes completed.", func(c engine.Counters) int64 { return c.ErasePasses })
	counter("rastro_erased_spans_total", "Spans physically removed by completed erasures.", func(c engine.Counters) int64 { return c.ErasedSpans })
	counter("rastro_tail_dropped_spans_total", "Spans a live tail skipped because its client read too slowly (the client is told how many).", func(c engine.Counters) int64 { return c.TailDropped })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rastro_tails", Help: "Live tails open now (GET /api/v1/tail)."}, func() float64 {
		if e := s.eng.Load(); e != nil {
			return float64(e.Counters().Tails)
		}
		return 0
	}))
	counter("rastro_wal_replayed_spans_total", "Spans recovered from the WAL at start-up.", func(c engine.Counters) int64 { return c.ReplayedSpans })
	reg.MustRegister(&storeCollector{s: s})
	return m
}

// storeCollector exports the store's gauges from one Stats call per scrape
// (Stats walks the write buffer, so once is enough).
type storeCollector struct{ s *Server }

var storeGauges = []struct {
	desc *prometheus.Desc
	get  func(st *engine.Stats) int64
}{
	{prometheus.NewDesc("rastro_segments", "Published segments.", nil, nil), func(st *engine.Stats) int64 { return int64(st.Segments) }},
	{prometheus.NewDesc("rastro_buffer_spans", "Spans in the in-memory write buffers (active and being sealed).", nil, nil), func(st *engine.Stats) int64 { return st.BufferSpans }},
	{prometheus.NewDesc("rastro_buffer_bytes", "Estimated bytes of the in-memory write buffers.", nil, nil), func(st *engine.Stats) int64 { return st.BufferBytes }},
	{prometheus.NewDesc("rastro_wal_bytes", "Bytes in live WAL files.", nil, nil), func(st *engine.Stats) int64 { return st.WALBytes }},
	{prometheus.NewDesc("rastro_value_store_bytes", "Bytes of the store of large values kept apart from segments.", nil, nil), func(st *engine.Stats) int64 { return st.ValueBytes }},
	{prometheus.NewDesc("rastro_segment_bytes", "Bytes in published segment files.", nil, nil), func(st *engine.Stats) int64 { return st.SegmentBytes }},
	{prometheus.NewDesc("rastro_quarantined_segments", "Segments not served because they failed verification at open.", nil, nil), func(st *engine.Stats) int64 { return int64(len(st.Quarantined)) }},
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range storeGauges {
		ch <- g.desc
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.s.eng.Load()
	if e == nil {
		return
	}
	st := e.Stats(DefaultProject)
	for _, g := range storeGauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.get(&st)))
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) countProblems(b otlp.Batch) {
	if n := b.Problems.EndBeforeStart; n > 0 {
		m.normalized.WithLabelValues("end_before_start").Add(float64(n))
	}
	if n := b.Problems.MissingService; n > 0 {
		m.normalized.WithLabelValues("missing_service").Add(float64(n))
	}
	if n := b.Problems.InvalidUTF8; n > 0 {
		m.normalized.WithLabelValues("invalid_utf8").Add(float64(n))
	}
}

// timed wraps a query handler with the latency histogram for its route.
func (m *metrics) timed(route string, h http.HandlerFunc) http.HandlerFunc {
	obs := m.queryDuration.WithLabelValues(route)
	return func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h(w, r)
		obs.Observe(time.Since(t0).Seconds())
	}
}
