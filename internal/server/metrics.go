package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rastro-dev/rastro/internal/otlp"
)

// metrics are the server's Prometheus series, on a registry of its own so
// that several servers can live in one process (tests). The backend's own
// series (WAL, seals, compaction, ...) come from its collectors
// (Options.Collectors), registered by New.
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
	authRefused   *prometheus.CounterVec

	// Limits against hostile clients (limits.go).
	queriesRunning prometheus.Gauge
	queriesRefused prometheus.Counter
	queryTimeouts  *prometheus.CounterVec
	connections    *prometheus.GaugeVec
	connsUnused    prometheus.Counter

	// Per-project ingest limits (projectlimits.go).
	projectLimited *prometheus.CounterVec
	projMu         sync.Mutex
	projLabels     map[string]bool
}

// maxProjectLabels bounds the project label of rastro_ingest_limited_total:
// projects are named by clients (X-Scope-OrgID), so past this many the rest
// count under "_other".
const maxProjectLabels = 100

// projectLabel is the label value of project.
func (m *metrics) projectLabel(project string) string {
	m.projMu.Lock()
	defer m.projMu.Unlock()
	if m.projLabels[project] {
		return project
	}
	if len(m.projLabels) >= maxProjectLabels {
		return "_other"
	}
	m.projLabels[project] = true
	return project
}

func newMetrics() *metrics {
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
		authRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_access_refused_total",
			Help: "Requests refused by the access check (HTTP and gRPC), by reason: missing_token, unknown_token, wrong_role, wrong_project, bad_project."}, []string{"reason"}),
		queriesRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rastro_queries_running",
			Help: "Query requests running now (at most --max-concurrent-queries)."}),
		queriesRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "rastro_queries_refused_total",
			Help: "Query requests refused with 429 because --max-concurrent-queries were running."}),
		queryTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_query_timeouts_total",
			Help: "Query requests whose time budget (--query-timeout) ran out, by route."}, []string{"route"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rastro_http_connections",
			Help: "Open HTTP connections by state: new (no request read yet), active (serving a request), idle (kept alive between requests)."}, []string{"state"}),
		projectLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rastro_ingest_limited_total",
			Help: "Ingest requests refused with 429 by a per-project limit, by project (the first 100 seen; then _other) and limit: rate (--project-rate), buffer_share (--project-buffer-share), concurrency (its part of --max-concurrent-ingest) or flood (refused while the write buffer is two seals deep, after being refused for its part of --max-concurrent-ingest)."}, []string{"project", "limit"}),
		projLabels: map[string]bool{},
		connsUnused: prometheus.NewCounter(prometheus.CounterOpts{Name: "rastro_http_connections_unused_total",
			Help: "HTTP connections closed before a whole request arrived: clients too slow to send their headers (--read-header-timeout), probes, aborted connects."}),
	}
	reg.MustRegister(m.queriesRunning, m.queriesRefused, m.queryTimeouts, m.connections, m.connsUnused, m.projectLimited)
	reg.MustRegister(m.authRefused, m.requests, m.spans, m.bytes, m.rejected, m.rejectedSpans, m.normalized, m.decodeNanos, m.queryDuration)
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))

	return m
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
