// Package store is the seam between Rastro's API (internal/server) and its
// storage backends: the storage-neutral types the API speaks, and the small
// interfaces a backend implements, split by concern. The embedded engine
// (internal/engine) is one backend; a ClickHouse backend is meant to be
// another, behind the same API.
//
// A backend implements Backend (append, read, discovery, LLM statistics and
// sessions, live tail, erasure). Capabilities that only some backends have are
// optional interfaces the server discovers at run time with a type assertion:
// Compactor, StatsReporter, DependencyReader and SQLRunner. A route whose capability is missing answers
// 501. A backend's Prometheus metrics are its own collector, which whoever
// wires the backend in passes to the server (server.Options.Collectors).
//
// Every method takes a context.Context and returns an error. Types here carry
// no storage format (no segment, WAL or SQL type) and no JSON tags: the API
// package owns its JSON shapes. Spans are model.Span; filters are
// query.Filter, the query model every backend evaluates.
//
// Errors: backends wrap the sentinels below (errors.Is) so that the API can
// choose a status without knowing the backend. Everything else is an
// internal failure (HTTP 500).
package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
)

var (
	// ErrClosed: the backend is closed (or closing); nothing more is served.
	ErrClosed = errors.New("store: closed")
	// ErrOverloaded: the backend cannot take the write now and the client
	// should retry later (HTTP 429, gRPC RESOURCE_EXHAUSTED). Nothing was stored.
	ErrOverloaded = errors.New("store: overloaded")
	// ErrBadRequest: the request is malformed or refused as it stands (HTTP
	// 400); the error text says why.
	ErrBadRequest = errors.New("store: bad request")
	// ErrStopped: the backend stopped accepting writes after a write or
	// fsync error (fail-stop); a restart, once the disk is checked, is
	// needed. Every such error satisfies errors.Is(err, ErrStopped).
	ErrStopped = durable.ErrStopped
	// ErrUnavailable: the backend cannot serve the request now, through no
	// fault of the request (for example fewer live replicas than the insert
	// quorum); the client should retry later (HTTP 503 with Retry-After).
	ErrUnavailable = errors.New("store: unavailable")
	// ErrTooManyTails: no more live tails can be opened now (HTTP 503).
	ErrTooManyTails = errors.New("store: too many live tails open")
	// ErrCorruption marks damaged bytes found on disk, in any on-disk
	// structure (segment, WAL, value store, manifest): every corruption
	// error of this module satisfies errors.Is(err, ErrCorruption) and keeps
	// its own detail (file, offset, reason). An I/O failure (EIO, a closed
	// file, a full disk) never does.
	ErrCorruption = durable.ErrCorruption
)

// Backend is everything the API needs from a store of spans.
type Backend interface {
	Appender
	Reader
	Discovery
	LLM
	Tailer
	Eraser
}

// BufferReporter is implemented by a backend that holds acknowledged
// writes in memory until it writes them out (the embedded engine's write
// buffer). The server asks it before reading a request, so that a request
// it would refuse costs no memory, and to keep one project from taking the
// whole buffer.
type BufferReporter interface {
	// BufferUsage returns the bytes the buffer holds for project and in
	// all, and the most it may hold before refusing writes.
	BufferUsage(project string) (projectBytes, totalBytes, limitBytes int64)
	// PaceBytes returns the buffered bytes from which Append holds a
	// request back until the buffer drains (0: it never does).
	PaceBytes() int64
}

// Write is one decoded ingest request.
type Write struct {
	Project string
	// Type says how Body is encoded; Body is the request as received
	// (after decompression). A backend with a log stores Body and decodes
	// it again on replay with otlp.Decode; others may ignore both.
	Type otlp.RecordType
	Body []byte
	// Spans are the request's spans, decoded from Body. The backend takes
	// ownership of Body and Spans.
	Spans []model.Span
	// SpansDone is set by a backend whose successful Append leaves nothing
	// of its own holding Spans (their arrays: the spans, their attributes,
	// events and links; strings alias Body and may be kept): the caller
	// may then reuse that memory (otlp.Batch.Release). A backend that hands
	// spans to anything that outlives Append (a queue, a live tail) leaves
	// it false.
	SpansDone bool
	// NoHold asks the backend not to hold this request back while its
	// buffer drains (BufferReporter.PaceBytes): the server refuses the
	// project's requests meanwhile, so a hold would only delay the answer.
	NoHold bool
}

// Appender stores ingested spans.
type Appender interface {
	// Append stores w durably (as the backend's durability setting defines)
	// and makes its spans visible to queries before it returns: the caller
	// acknowledges the client then. ErrOverloaded means nothing was stored
	// and the client should retry. ctx is checked before the write starts;
	// a write under way completes.
	Append(ctx context.Context, w *Write) error
}

// Result carries what a query could not read: warnings naming the damaged
// parts that were skipped. An empty Result means a complete answer.
type Result struct {
	Warnings []string
}

// Cursor is a position in the newest-first span order (start time
// descending, then trace id, then span id ascending): a page continues with
// the spans that sort strictly after it.
type Cursor struct {
	Start uint64
	Trace model.TraceID
	Span  model.SpanID
}

// TraceSummary describes one trace in trace search results.
type TraceSummary struct {
	TraceID     model.TraceID
	RootService string // empty when the root span has not arrived
	RootName    string
	Start       uint64 // earliest span start, unix ns
	End         uint64 // latest span end, unix ns
	Spans       int
	Errors      int
	Services    []string // sorted
	Matched     int      // spans that matched the filter
}

// Reader answers traces and span searches.
type Reader interface {
	// Trace returns every span of a trace in project, ordered by start time,
	// each span once (the newest copy of a re-sent span); none when the
	// store does not hold it.
	Trace(ctx context.Context, project string, id model.TraceID) ([]model.Span, Result, error)
	// SearchSpans returns up to limit spans matching f, newest first, after
	// cursor (nil for the first page), and the next page's cursor (nil when
	// there is none). f.Limit is not consulted: limit is.
	SearchSpans(ctx context.Context, project string, f *query.Filter, limit int, cursor *Cursor) ([]model.Span, *Cursor, Result, error)
	// SearchTraces returns up to limit traces with a span matching f, the
	// traces with the newest matching spans first.
	SearchTraces(ctx context.Context, project string, f *query.Filter, limit int) ([]TraceSummary, Result, error)
}

// Summarize builds a trace summary from a trace's spans.
func Summarize(id model.TraceID, spans []model.Span) TraceSummary {
	sum := TraceSummary{TraceID: id, Spans: len(spans)}
	svc := map[string]bool{}
	for i := range spans {
		s := &spans[i]
		if i == 0 || s.StartTimeUnixNano < sum.Start {
			sum.Start = s.StartTimeUnixNano
		}
		if s.EndTimeUnixNano > sum.End {
			sum.End = s.EndTimeUnixNano
		}
		if s.StatusCode == model.StatusError {
			sum.Errors++
		}
		svc[s.Service] = true
		if s.IsRoot() && sum.RootName == "" {
			sum.RootService, sum.RootName = s.Service, s.Name
		}
	}
	for k := range svc {
		sum.Services = append(sum.Services, k)
	}
	slices.Sort(sum.Services)
	return sum
}

// NameCount is a name with how many spans carry it.
type NameCount struct {
	Name  string
	Count int
	// Type is, for AttributeValues, the value's type: TypeString, TypeInt,
	// TypeFloat or TypeBool (the int 500 and the string "500" are listed
	// apart); for Operations, the spans' kind ("server", "client",
	// "producer", "consumer", "internal", "unspecified"), one entry per
	// (name, kind).
	Type string
}

// Attribute value types, as NameCount.Type names them.
const (
	TypeString = "string"
	TypeInt    = "int"
	TypeFloat  = "float"
	TypeBool   = "bool"
)

// Discovery lists what the store holds in a window [start, end) of span start
// times (unix ns; 0 = unbounded), with span counts. Services and
// AttributeKeys are ordered by name; AttributeValues by count, descending,
// then value. Attribute keys carry their scope: "span.http.route",
// "resource.service.name".
type Discovery interface {
	Services(ctx context.Context, project string, start, end uint64) ([]NameCount, Result, error)
	// Operations lists a service's span names with their kinds (one entry
	// per name and kind, ordered by name then kind); every service's when
	// service is empty.
	Operations(ctx context.Context, project, service string, start, end uint64) ([]NameCount, Result, error)
	AttributeKeys(ctx context.Context, project string, start, end uint64) ([]NameCount, Result, error)
	// AttributeValues lists at most limit values of the attribute key
	// (scoped, or unscoped for both scopes).
	AttributeValues(ctx context.Context, project, key string, start, end uint64, limit int) ([]NameCount, Result, error)
}

// Tailer opens live tails.
type Tailer interface {
	// Tail subscribes to the spans of project acknowledged from now on that
	// f matches (f's window still applies to start times; f.Limit does not).
	// Spans hidden from queries (expired, erased) are not sent. The caller
	// must Close the stream. ErrTooManyTails when none can be opened now.
	Tail(ctx context.Context, project string, f *query.Filter) (TailStream, error)
}

// TailStream is one live tail. Next and Close may be called from different
// goroutines; Next from one goroutine at a time.
type TailStream interface {
	// Next waits for matching spans and returns them, with the number of
	// spans of the project skipped since the last call because the reader
	// was too slow. It returns ctx's error when ctx ends, and ErrClosed once
	// the stream or the backend is closed.
	Next(ctx context.Context) (spans []model.Span, dropped int64, err error)
	Close()
}

// Erasure states.
const (
	ErasePending = "pending" // recorded, not yet resolved to traces
	EraseHidden  = "hidden"  // resolved; hidden from every query, physical removal to come
	EraseDone    = "done"    // removed from storage
)

// EraseRequest says what to erase: exactly one of TraceID and Query (a
// TraceQL spanset filter: every trace with a matching span is erased, over
// all time).
type EraseRequest struct {
	Project string
	TraceID *model.TraceID
	Query   string
	// All confirms a query erasure that covers every trace of the project;
	// without it such a request is refused (ErrBadRequest).
	All bool
}

// Erasure is the status of one erasure request.
type Erasure struct {
	ID          uint64
	Project     string
	Query       string // the filter, as given
	TraceID     string // for a single-trace erasure, hex
	State       string // ErasePending, EraseHidden or EraseDone
	RequestedAt time.Time
	HiddenAt    *time.Time
	DoneAt      *time.Time
	Traces      int   // traces covered
	SpansErased int64 // spans physically removed so far
	Error       string
	// TraceIDs are the traces the erasure covers, as Erase resolved them
	// (so that the caller can erase what else belongs to them: their log
	// records). Erasures leaves it nil; a backend that resolves later
	// leaves it nil too.
	TraceIDs []model.TraceID
}

// Eraser removes data on request (privacy erasure).
type Eraser interface {
	// Erase records req durably, hides the traces it covers from every
	// query, and returns its status; physical removal follows. A malformed
	// or refused request wraps ErrBadRequest.
	Erase(ctx context.Context, req EraseRequest) (Erasure, error)
	// Erasures returns the status of project's erasures, oldest first.
	Erasures(ctx context.Context, project string) ([]Erasure, error)
}

// CompactResult reports a compaction run.
type CompactResult struct {
	Merges         int
	SegmentsBefore int
	SegmentsAfter  int
	BytesWritten   int64
	Took           time.Duration
}

// Dependency is a count of calls from one service to another: spans of
// Child whose parent span belongs to Parent; Errors counts those child
// spans with an error status.
type Dependency struct {
	Parent, Child string
	Calls         int64
	Errors        int64
}

// DependencyReader is implemented by backends that compute the service
// call graph (the Jaeger UI's and Grafana's node graph).
type DependencyReader interface {
	// Dependencies counts the calls between services of the spans started
	// in [start, end), ordered by parent then child.
	Dependencies(ctx context.Context, project string, start, end uint64) ([]Dependency, Result, error)
}

// Compactor is implemented by backends that can compact on request.
type Compactor interface {
	// Compact runs compaction to completion (every project).
	Compact(ctx context.Context) (CompactResult, error)
}

// Stats describes a store: counts for one project, sizes for the whole
// store. A backend leaves zero what it does not have (a backend without a
// write-ahead log reports no WAL bytes).
type Stats struct {
	Spans        int64 // stored spans of the project (a re-sent span may count twice until compaction)
	Traces       int64 // traces of the project, summed per storage part
	Segments     int   // storage parts (all projects)
	DiskBytes    int64 // everything on disk
	SegmentBytes int64
	BufferSpans  int64 // spans in memory, not yet in a storage part
	BufferBytes  int64
	WALBytes     int64
	ValueBytes   int64    // large values stored apart
	Values       int64    // distinct large values stored apart
	Quarantined  []string // storage parts not served because they failed verification
	SealError    string   // the last failure to move buffered spans to storage, while it lasts
}

// StatsReporter is implemented by backends that describe themselves.
type StatsReporter interface {
	Stats(ctx context.Context, project string) (Stats, error)
}
