package store

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// OpsQuery selects the spans of the service routes (RED, heatmap, error
// groups): a window, and optionally one service and one span name.
type OpsQuery struct {
	Start, End uint64 // [Start, End), unix ns; 0 = unbounded
	Service    string // exact service name; "" = every service
	Name       string // exact span name; "" = every name
	// Step is the bucket width of RED and the heatmap: a whole number of
	// minutes. Buckets start at multiples of Step since the Unix epoch.
	Step time.Duration
	// ByOperation splits RED series by span name as well as service.
	ByOperation bool
	// NameOnly (with ByOperation) merges services: one series per span
	// name, with Service empty.
	NameOnly bool
	// Filter, when not nil, is a further condition every counted span
	// meets (a TraceQL filter, content words, status, durations); its
	// window and Limit are not consulted. A backend may answer a query
	// without Filter from stored aggregates and one with it by reading
	// spans, so Filter costs a scan.
	Filter *query.Filter
}

// REDPoint is one time bucket of a RED series.
type REDPoint struct {
	Start   uint64 // bucket start, unix ns
	Calls   int64
	Errors  int64
	Latency Quantiles
}

// REDSeries is the rate, errors and duration of one service (or one
// service and span name) over the window, and per bucket (empty buckets
// omitted, oldest first).
type REDSeries struct {
	Service   string
	Operation string // "" unless OpsQuery.ByOperation
	Calls     int64
	Errors    int64
	Latency   Quantiles
	Buckets   []REDPoint
}

// HeatCell is the count of spans of one time bucket and one duration bucket.
type HeatCell struct {
	Start  uint64 // time bucket start, unix ns
	Bucket int    // duration bucket: [Heatmap.Bounds[Bucket], Heatmap.Bounds[Bucket+1]) ns
	Count  int64
}

// Heatmap is a latency heatmap: time buckets by log-scaled duration buckets
// (about a factor of two wide). Cells are sparse, by time then bucket.
type Heatmap struct {
	Bounds []uint64 // lower bound of each duration bucket, ns; Bounds[0] = 0
	Cells  []HeatCell
}

// ErrorGroup is the spans with an error status sharing a service, span
// name, exception type and normalised message.
type ErrorGroup struct {
	Service   string
	Operation string
	Type      string // exception.type, else attribute error.type, else ""
	Message   string // the status message (else exception.message), normalised: numbers and ids replaced
	Count     int64
	First     uint64 // earliest span start, unix ns
	Last      uint64 // latest span start, unix ns
	Trace     model.TraceID
	Span      model.SpanID // the latest span of the group (a sample to open)
}

// ServiceReader is implemented by backends that answer the service pages:
// RED metrics, latency heatmaps and error groups.
type ServiceReader interface {
	// RED returns the series sorted by calls, descending (then service and
	// operation).
	RED(ctx context.Context, project string, q *OpsQuery) ([]REDSeries, Result, error)
	// Heatmap counts the matching spans by time and duration bucket.
	Heatmap(ctx context.Context, project string, q *OpsQuery) (Heatmap, Result, error)
	// ErrorGroups returns at most limit groups by count, descending (then
	// latest first). OpsQuery.Step and ByOperation are ignored.
	ErrorGroups(ctx context.Context, project string, q *OpsQuery, limit int) ([]ErrorGroup, Result, error)
}

// SortErrorGroups puts groups in ErrorGroups order: count descending, then
// latest first, then by key.
func SortErrorGroups(groups []ErrorGroup) {
	slices.SortFunc(groups, func(a, b ErrorGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Last, a.Last), strings.Compare(a.Service, b.Service),
			strings.Compare(a.Operation, b.Operation), strings.Compare(a.Type, b.Type), strings.Compare(a.Message, b.Message))
	})
}
