package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// LogBackend stores and searches OpenTelemetry log records
// (internal/logstore). A storage backend without logs has none: the API
// answers 501 for the log routes.
type LogBackend interface {
	// AppendLogs decodes one export request (an *otlp.Error when it is
	// malformed, nothing stored) and returns once its records are durable
	// per the durability mode and searchable.
	AppendLogs(project string, format LogFormat, body []byte) (LogResult, error)
	// SearchLogs returns the newest records matching q.
	SearchLogs(q LogQuery) (LogPage, error)
	// TailLogs follows the records of q.Project matching q's filters (not
	// its window, limit or cursor) as they are acknowledged.
	TailLogs(q LogQuery) (LogTail, error)
	// EraseTrace removes the project's records of one trace acknowledged
	// before the call, from every answer and from disk; it returns how many.
	EraseTrace(project string, trace model.TraceID) (int, error)
	// EraseTraces is EraseTrace for many traces at once.
	EraseTraces(project string, traces []model.TraceID) (int, error)
}

// LogTail is a live subscription to newly acknowledged log records.
type LogTail interface {
	// Next waits for records and returns them (in acknowledgement order)
	// with the count of matching records dropped since the last call
	// because the reader fell behind. It returns ctx's error when ctx
	// ends, and ErrClosed once the store closes.
	Next(ctx context.Context) (records []model.LogRecord, dropped int64, err error)
	Close()
}

// LogFormat is the encoding of a logs export request.
type LogFormat int

const (
	LogFormatProto  LogFormat = iota // ExportLogsServiceRequest, protobuf
	LogFormatJSON                    // the same in OTLP/JSON
	LogFormatNative                  // Rastro's native JSON: an array of flat records (otlp.DecodeNativeLogs)
)

// LogResult is what AppendLogs stored.
type LogResult struct {
	Accepted  int
	Rejected  int
	RejectMsg string
	Problems  model.Problems
}

// LogQuery selects log records of one project. Zero fields do not filter.
type LogQuery struct {
	Project string
	// Since and Until bound the record's time (LogRecord.Time): Since <= t < Until; Until 0 = no bound.
	Since, Until uint64
	TraceID      model.TraceID
	SpanID       model.SpanID
	Service      string
	// MinSeverity keeps records at or above this severity number.
	MinSeverity model.SeverityNumber
	// Text keeps records whose body or string attributes contain every word
	// of it (the span content search's tokenizer: case and accents folded).
	Text string
	// Match, if set, is a further filter on the whole record.
	Match func(*model.LogRecord) bool
	// Limit is the page size (default 100).
	Limit int
	// Before continues from a previous page's Next.
	Before *LogCursor
}

// LogHit is one matching record and its sequence number.
type LogHit struct {
	Seq    uint64
	Record model.LogRecord
}

// LogPage is one page of a log search, newest first.
type LogPage struct {
	Hits []LogHit
	// Next is set when more records may match: pass it as LogQuery.Before.
	Next *LogCursor
	// BlocksRead and BlocksSkipped count segment blocks read and pruned.
	BlocksRead, BlocksSkipped int
}

// LogCursor marks a place in the newest-first order: the next page holds
// the records strictly older than (Time, Seq).
type LogCursor struct {
	Time uint64
	Seq  uint64
}

// String encodes the cursor for an API ("time.seq").
func (c LogCursor) String() string {
	return strconv.FormatUint(c.Time, 10) + "." + strconv.FormatUint(c.Seq, 10)
}

// ParseLogCursor reads what LogCursor.String wrote.
func ParseLogCursor(s string) (LogCursor, error) {
	t, q, ok := strings.Cut(s, ".")
	ti, err1 := strconv.ParseUint(t, 10, 64)
	qi, err2 := strconv.ParseUint(q, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return LogCursor{}, fmt.Errorf("bad cursor %q: want the next_cursor of a previous answer", s)
	}
	return LogCursor{Time: ti, Seq: qi}, nil
}
