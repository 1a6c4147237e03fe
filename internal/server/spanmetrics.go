package server

import (
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// DefaultSpanMetricsInterval is how often the span metrics are written into
// the metric store, as a Prometheus scraping /spanmetrics every 15 s would.
const DefaultSpanMetricsInterval = 15 * time.Second

// runSpanMetricsWriter writes every project's span metrics into the
// attached metric store every interval, so that the /prom API charts them
// like ingested metrics (rate, increase, histogram_quantile over time).
func (s *Server) runSpanMetricsWriter(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopping:
			return
		case now := <-t.C:
			s.WriteSpanMetrics(now)
		}
	}
}

// WriteSpanMetrics writes the span metrics of every project into the
// attached metric store, stamped now; it does nothing before the store is
// attached or when the backend has none. Failures are logged: the next
// write carries the counters forward.
func (s *Server) WriteSpanMetrics(now time.Time) {
	a := s.metricsStore.Load()
	if a == nil {
		return
	}
	for _, p := range s.spanMetrics.Projects() {
		body, err := s.spanMetrics.ExportRequest(p, s.status.started, now)
		if err != nil || body == nil {
			if err != nil {
				s.log.Error("span metrics: encode", "project", p, "err", err)
			}
			continue
		}
		if res, err := a.AppendMetrics(p, store.MetricFormatProto, body); err != nil {
			s.log.Warn("span metrics: not written to the metric store", "project", p, "err", err)
		} else if res.Rejected > 0 {
			s.log.Warn("span metrics: points refused by the metric store", "project", p, "refused", res.Rejected, "reason", res.RejectMsg)
		}
	}
}
