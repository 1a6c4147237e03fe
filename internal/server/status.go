package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// GET /api/v1/status: a one-screen report of the running server (`rastro
// status`). Its totals are read from the metrics registry at the time of
// the request, so they are the figures /metrics shows; its rates come from
// samples of the same registry over the last minute (statusSampler).

const (
	// statusSampleEvery is how often the sampler reads the counters; the
	// last seal and merge are known to within it.
	statusSampleEvery = 2 * time.Second
	// statusRateWindow is the span of the rates.
	statusRateWindow = time.Minute
)

// statusRoutes serve the report.
func (s *Server) statusRoutes() []route {
	return []route{
		// The request's project's counts, and server-wide figures any
		// read token may see on /metrics; with access control off, every
		// project's counts.
		{method: "GET", pattern: "/api/v1/status", access: accessRead, name: "status", handler: s.withBackend(s.handleStatus), documented: true},
	}
}

// The counters the report reads, as /metrics names them. Each is the sum
// of its series.
var statusCounters = []string{
	"rastro_ingest_spans_total", "rastro_query_duration_seconds", "rastro_queries_refused_total",
	"rastro_ingest_limited_total", "rastro_ingest_rejected_total", "rastro_query_timeouts_total",
	"rastro_seals_total", "rastro_sealed_spans_total", "rastro_seal_errors_total",
	"rastro_compaction_merges_total", "rastro_compaction_errors_total",
	"rastro_corruption_errors_total", "rastro_io_errors_total", "rastro_value_errors_total",
	"rastro_ingest_buffer_full_total", "rastro_wal_replayed_spans_total",
	"rastro_segments", "rastro_wal_bytes", "rastro_buffer_bytes", "rastro_buffer_spans",
	"rastro_segment_bytes", "rastro_value_store_bytes", "rastro_quarantined_segments",
}

// statusSample is the counters at one moment.
type statusSample struct {
	at time.Time
	v  map[string]float64
	// ingest429 are ingest requests answered 429 (HTTP) or
	// RESOURCE_EXHAUSTED (gRPC).
	ingest429 float64
}

// readCounters reads statusCounters from the registry: counters, gauges
// and histograms (their sample count).
func (s *Server) readCounters() statusSample {
	out := statusSample{at: time.Now(), v: map[string]float64{}}
	want := map[string]bool{}
	for _, n := range statusCounters {
		want[n] = true
		out.v[n] = 0
	}
	fams, err := s.met.reg.Gather()
	if err != nil {
		s.log.Warn("status: read metrics", "err", err)
	}
	for _, f := range fams {
		name := f.GetName()
		for _, m := range f.GetMetric() {
			if name == "rastro_ingest_requests_total" {
				for _, l := range m.GetLabel() {
					if l.GetName() == "code" && (l.GetValue() == "429" || l.GetValue() == "ResourceExhausted") {
						out.ingest429 += m.GetCounter().GetValue()
					}
				}
				continue
			}
			if !want[name] {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				out.v[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out.v[name] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out.v[name] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// statusSampler keeps a minute of counter samples, and when seals and
// merges last happened. Its goroutine is started by Start and ends when
// Shutdown begins (s.stopping); Shutdown waits for it (s.wg).
type statusSampler struct {
	started time.Time

	mu        sync.Mutex // guards the fields below
	samples   []statusSample
	lastSeal  time.Time
	lastMerge time.Time
}

func (s *Server) runStatusSampler() {
	defer s.wg.Done()
	t := time.NewTicker(statusSampleEvery)
	defer t.Stop()
	s.status.add(s.readCounters())
	for {
		select {
		case <-s.stopping:
			return
		case <-t.C:
			s.status.add(s.readCounters())
		}
	}
}

// add records a sample, dropping those older than the rate window needs.
func (ss *statusSampler) add(x statusSample) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if n := len(ss.samples); n > 0 {
		prev := ss.samples[n-1]
		if x.v["rastro_seals_total"] > prev.v["rastro_seals_total"] {
			ss.lastSeal = x.at
		}
		if x.v["rastro_compaction_merges_total"] > prev.v["rastro_compaction_merges_total"] {
			ss.lastMerge = x.at
		}
	}
	ss.samples = append(ss.samples, x)
	// Keep one sample at least statusRateWindow old.
	for len(ss.samples) > 2 && x.at.Sub(ss.samples[1].at) >= statusRateWindow {
		ss.samples = ss.samples[1:]
	}
}

// since returns the oldest sample kept (the rates' start) and the last
// seal and merge seen, noting one more if now shows it.
func (ss *statusSampler) since(now statusSample) (first statusSample, ok bool, lastSeal, lastMerge time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	lastSeal, lastMerge = ss.lastSeal, ss.lastMerge
	if len(ss.samples) == 0 {
		return statusSample{}, false, lastSeal, lastMerge
	}
	last := ss.samples[len(ss.samples)-1]
	if now.v["rastro_seals_total"] > last.v["rastro_seals_total"] {
		lastSeal = now.at
	}
	if now.v["rastro_compaction_merges_total"] > last.v["rastro_compaction_merges_total"] {
		lastMerge = now.at
	}
	return ss.samples[0], true, lastSeal, lastMerge
}

// statusJSON is the API shape of /api/v1/status (docs/api.md#status).
type statusJSON struct {
	Version       string              `json:"version"`
	Started       string              `json:"started"`
	UptimeSeconds float64             `json:"uptime_seconds"`
	Storage       string              `json:"storage"` // "embedded", or the backend's kind when it does not report
	Projects      []projectStatusJSON `json:"projects"`
	Segments      segmentsStatusJSON  `json:"segments"`
	DiskBytes     int64               `json:"disk_bytes"`
	ValueBytes    int64               `json:"value_bytes"`
	WAL           walStatusJSON       `json:"wal"`
	Buffer        bufferStatusJSON    `json:"buffer"`
	RatesSeconds  float64             `json:"rates_over_seconds"` // the span the rates cover (a minute once the server has run one)
	Ingest        ingestStatusJSON    `json:"ingest"`
	Queries       queryStatusJSON     `json:"queries"`
	Seals         lifecycleJSON       `json:"seals"`
	Merges        lifecycleJSON       `json:"merges"`
	Warnings      warningsJSON        `json:"warnings"`
	Retention     retentionJSON       `json:"retention"`
	Erasures      erasuresStatusJSON  `json:"erasures"`
}

type projectStatusJSON struct {
	Name   string `json:"name"`
	Spans  int64  `json:"spans"`
	Traces int64  `json:"traces"`
}

type segmentsStatusJSON struct {
	Count int              `json:"count"`
	Bytes int64            `json:"bytes"`
	Tiers []tierStatusJSON `json:"tiers"`
}

type tierStatusJSON struct {
	Tier     int   `json:"tier"`
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
}

type walStatusJSON struct {
	Bytes int64 `json:"bytes"`
	// OldestUnsealed is when the oldest unsealed buffer began (the WAL
	// holds what arrived since); empty when every span is sealed.
	OldestUnsealed string  `json:"oldest_unsealed,omitempty"`
	AgeSeconds     float64 `json:"age_seconds"`
	ReplayedSpans  int64   `json:"replayed_spans"` // recovered at start-up
}

type bufferStatusJSON struct {
	Spans    int64   `json:"spans"`
	Bytes    int64   `json:"bytes"`
	MaxBytes int64   `json:"max_bytes"`
	Fill     float64 `json:"fill"` // bytes / max_bytes
}

type ingestStatusJSON struct {
	SpansTotal     int64   `json:"spans_total"`
	SpansPerSecond float64 `json:"spans_per_second"`
	Refused429     int64   `json:"refused_429_total"`     // requests answered 429 / RESOURCE_EXHAUSTED
	BufferFull     int64   `json:"buffer_full_total"`     // of which: the write buffer was full
	ProjectLimited int64   `json:"project_limited_total"` // of which: a per-project limit
	Rejected       int64   `json:"rejected_total"`        // requests refused as malformed, too large, ...
}

type queryStatusJSON struct {
	Total      int64   `json:"total"`
	PerSecond  float64 `json:"per_second"`
	Refused429 int64   `json:"refused_429_total"`
	Timeouts   int64   `json:"timeouts_total"`
}

type lifecycleJSON struct {
	Total  int64  `json:"total"`
	Errors int64  `json:"errors_total"`
	Last   string `json:"last,omitempty"` // when one last finished, to within 2 s; empty: none since start
	Error  string `json:"error,omitempty"`
}

type warningsJSON struct {
	Corruptions int64    `json:"corruptions_total"`
	IOErrors    int64    `json:"io_errors_total"`
	ValueErrors int64    `json:"value_errors_total"`
	Quarantined []string `json:"quarantined"`
}

type retentionJSON struct {
	Default  string            `json:"default"` // "off" or a duration such as 7d
	Projects map[string]string `json:"projects,omitempty"`
}

type erasuresStatusJSON struct {
	Pending int `json:"pending"`
	Hidden  int `json:"hidden"` // hidden from queries, physical removal to come
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	now := s.readCounters()
	first, ok, lastSeal, lastMerge := s.status.since(now)
	v := now.v
	n := func(name string) int64 { return int64(v[name]) }
	out := statusJSON{
		Version: Version(), Started: s.status.started.UTC().Format(time.RFC3339), UptimeSeconds: now.at.Sub(s.status.started).Seconds(),
		Storage: "embedded", Projects: []projectStatusJSON{},
		Segments:  segmentsStatusJSON{Count: int(n("rastro_segments")), Bytes: n("rastro_segment_bytes"), Tiers: []tierStatusJSON{}},
		WAL:       walStatusJSON{Bytes: n("rastro_wal_bytes"), ReplayedSpans: n("rastro_wal_replayed_spans_total")},
		Buffer:    bufferStatusJSON{Spans: n("rastro_buffer_spans"), Bytes: n("rastro_buffer_bytes")},
		Ingest:    ingestStatusJSON{SpansTotal: n("rastro_ingest_spans_total"), Refused429: int64(now.ingest429), BufferFull: n("rastro_ingest_buffer_full_total"), ProjectLimited: n("rastro_ingest_limited_total"), Rejected: n("rastro_ingest_rejected_total")},
		Queries:   queryStatusJSON{Total: n("rastro_query_duration_seconds"), Refused429: n("rastro_queries_refused_total"), Timeouts: n("rastro_query_timeouts_total")},
		Seals:     lifecycleJSON{Total: n("rastro_seals_total"), Errors: n("rastro_seal_errors_total"), Last: rfc3339Time(lastSeal)},
		Merges:    lifecycleJSON{Total: n("rastro_compaction_merges_total"), Errors: n("rastro_compaction_errors_total"), Last: rfc3339Time(lastMerge)},
		Warnings:  warningsJSON{Corruptions: n("rastro_corruption_errors_total"), IOErrors: n("rastro_io_errors_total"), ValueErrors: n("rastro_value_errors_total"), Quarantined: []string{}},
		Retention: retentionJSON{Default: "off"},
	}
	if ok {
		if d := now.at.Sub(first.at).Seconds(); d > 0 {
			out.RatesSeconds = d
			out.Ingest.SpansPerSecond = (v["rastro_ingest_spans_total"] - first.v["rastro_ingest_spans_total"]) / d
			out.Queries.PerSecond = (v["rastro_query_duration_seconds"] - first.v["rastro_query_duration_seconds"]) / d
		}
	}
	sr, reports := b.(store.StatusReporter)
	if !reports {
		out.Storage = "other (this backend reports no store status)"
		writeJSON(w, http.StatusOK, out)
		return
	}
	st, err := sr.Status(r.Context())
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	// With access control on, a token sees its request's project only.
	allProjects := s.auth.Load() == nil
	for _, p := range st.Projects {
		if allProjects || p.Name == project {
			out.Projects = append(out.Projects, projectStatusJSON{p.Name, p.Spans, p.Traces})
		}
	}
	for _, t := range st.Tiers {
		out.Segments.Tiers = append(out.Segments.Tiers, tierStatusJSON(t))
	}
	out.DiskBytes, out.ValueBytes = st.DiskBytes, st.ValueBytes
	if !st.OldestUnsealed.IsZero() {
		out.WAL.OldestUnsealed = rfc3339Time(st.OldestUnsealed)
		out.WAL.AgeSeconds = now.at.Sub(st.OldestUnsealed).Seconds()
	}
	out.Buffer.MaxBytes = st.MaxBufferBytes
	if st.MaxBufferBytes > 0 {
		out.Buffer.Fill = float64(out.Buffer.Bytes) / float64(st.MaxBufferBytes)
	}
	out.Seals.Error = st.SealError
	if st.Quarantined != nil {
		out.Warnings.Quarantined = st.Quarantined
	}
	if st.Retention > 0 {
		out.Retention.Default = fmtWindow(st.Retention)
	}
	for p, d := range st.ProjectRetention {
		if allProjects || p == project {
			if out.Retention.Projects == nil {
				out.Retention.Projects = map[string]string{}
			}
			out.Retention.Projects[p] = "off"
			if d > 0 {
				out.Retention.Projects[p] = fmtWindow(d)
			}
		}
	}
	out.Erasures = erasuresStatusJSON{Pending: st.ErasuresPending, Hidden: st.ErasuresHidden}
	writeJSON(w, http.StatusOK, out)
}

func rfc3339Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
