package store

import (
	"context"
	"time"
)

// Status is a backend's report of its own state, for GET /api/v1/status
// and `rastro status`: what it holds and what it is doing.
type Status struct {
	Projects []ProjectCount // spans and traces stored, per project, by name
	Tiers    []TierCount    // segments by compaction size tier, smallest first
	// The write buffer (spans not yet sealed into a segment) and its limit.
	BufferSpans, BufferBytes, MaxBufferBytes int64
	// WALBytes are the live WAL files; OldestUnsealed is when the oldest
	// buffer holding spans began (zero when none): the WAL holds what
	// arrived since.
	WALBytes       int64
	OldestUnsealed time.Time
	SegmentBytes   int64
	ValueBytes     int64
	DiskBytes      int64 // segments, WAL and value store
	// Retention: the default and per-project overrides (0 keeps forever).
	Retention        time.Duration
	ProjectRetention map[string]time.Duration
	// Erasures by state over every project: recorded and not yet hidden,
	// hidden and waiting for their physical pass.
	ErasuresPending, ErasuresHidden int
	Quarantined                     []string // segments not served (failed verification)
	SealError                       string   // the last seal failure, while it lasts
}

// ProjectCount is one project's stored spans and traces (counted as
// Stats counts them).
type ProjectCount struct {
	Name          string
	Spans, Traces int64
}

// TierCount is the segments of one size tier.
type TierCount struct {
	Tier     int
	Segments int
	Bytes    int64
}

// StatusReporter is implemented by backends that report their state.
type StatusReporter interface {
	Status(ctx context.Context) (Status, error)
}
