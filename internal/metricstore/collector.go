package metricstore

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the store's running totals (atomics: read without locks).
type counters struct {
	accepted atomic.Int64 // OTLP data points acknowledged
	rejected atomic.Int64 // points and exemplars not stored
	seals    atomic.Int64
	sealErrs atomic.Int64
}

type gaugeDef struct {
	name, help string
	get        func(*Stats) float64
}

var storeGauges = []gaugeDef{
	{"rastro_metric_head_series", "series in the metric store's heads", func(s *Stats) float64 { return float64(s.Series) }},
	{"rastro_metric_head_points", "points in the metric store's heads", func(s *Stats) float64 { return float64(s.HeadPoints) }},
	{"rastro_metric_head_bytes", "estimated bytes of the metric store's heads", func(s *Stats) float64 { return float64(s.HeadBytes) }},
	{"rastro_metric_blocks", "metric block files in use", func(s *Stats) float64 { return float64(s.Blocks) }},
	{"rastro_metric_block_points", "points in metric block files", func(s *Stats) float64 { return float64(s.BlockPoints) }},
	{"rastro_metric_block_bytes", "bytes of metric block files", func(s *Stats) float64 { return float64(s.BlockBytes) }},
	{"rastro_metric_wal_bytes", "bytes in the metric store's live WAL files", func(s *Stats) float64 { return float64(s.WALBytes) }},
}

type counterDef struct {
	name, help string
	get        func(*counters) int64
}

var storeCounters = []counterDef{
	{"rastro_metric_points_accepted_total", "OTLP metric data points acknowledged", func(c *counters) int64 { return c.accepted.Load() }},
	{"rastro_metric_points_rejected_total", "OTLP metric data points (and exemplars) not stored: delta temporality, out of order, malformed ids", func(c *counters) int64 { return c.rejected.Load() }},
	{"rastro_metric_seals_total", "metric heads sealed into blocks", func(c *counters) int64 { return c.seals.Load() }},
	{"rastro_metric_seal_errors_total", "metric seals that failed (the points stay in the WAL and the head)", func(c *counters) int64 { return c.sealErrs.Load() }},
}

type collector struct {
	current func() *Store
	gauges  []*prometheus.Desc
	ctrs    []*prometheus.Desc
}

// NewCollector exposes the store's sizes and counters in Prometheus format;
// current gives the open store (nil before it opens: counters are 0 and
// sizes absent).
func NewCollector(current func() *Store) prometheus.Collector {
	c := &collector{current: current}
	for _, g := range storeGauges {
		c.gauges = append(c.gauges, prometheus.NewDesc(g.name, g.help, nil, nil))
	}
	for _, k := range storeCounters {
		c.ctrs = append(c.ctrs, prometheus.NewDesc(k.name, k.help, nil, nil))
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.gauges {
		ch <- d
	}
	for _, d := range c.ctrs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.current()
	var cs *counters
	if s != nil {
		cs = &s.counters
	} else {
		cs = &counters{}
	}
	for i, k := range storeCounters {
		ch <- prometheus.MustNewConstMetric(c.ctrs[i], prometheus.CounterValue, float64(k.get(cs)))
	}
	if s == nil {
		return
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return
	}
	st := s.Stats()
	for i, g := range storeGauges {
		ch <- prometheus.MustNewConstMetric(c.gauges[i], prometheus.GaugeValue, g.get(&st))
	}
}
