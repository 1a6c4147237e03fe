// Package metricstore stores OpenTelemetry metrics as Prometheus series
// beside the span engine, in the same data directory (under metrics/) and
// with the same guarantees: a request is in the write-ahead log
// (internal/wal, group commit, fsync per the durability mode) before it is
// acknowledged, its samples are readable as soon as it is acknowledged, and
// a seal moves the head into an immutable block file, after which the WAL
// files it covered are removed (docs/format/metrics.md).
//
// An export request is translated to series by Prometheus' own OTLP rules
// (translate.go, docs/metrics.md): metric names with unit and type suffixes,
// attributes as labels, job and instance from the resource, histograms as
// _bucket/_sum/_count (exponential histograms as classic buckets at
// scale 0, expohist.go). Delta temporality is converted to cumulative
// series when the samples join the head, in WAL order (delta.go), except
// for the GenAI client histograms, kept as sent and marked (KeepsDelta).
//
// The head keeps one Gorilla-compressed chunk per series (chunk.go:
// delta-of-delta times, XOR values, as Prometheus' XOR chunks) plus the
// series' newest sample apart, which a later sample of the same millisecond
// replaces. A block holds every series of one sealed head, one checksummed
// record each; its index (labels, time range, where the chunk is,
// exemplars) is kept in memory and chunks are read on demand.
//
// Goroutines: one sealer per Store, started by Open and stopped by Close,
// seals when the head passes Options.SealBytes and every Options.SealAge.
package metricstore
