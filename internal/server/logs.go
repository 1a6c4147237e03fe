package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

type attachedLogs struct{ store.LogBackend }

// SetLogs attaches the log store. Until it is called the log routes answer
// 503 while the server starts; a backend that has none (ClickHouse) never
// calls it and the routes answer 501.
func (s *Server) SetLogs(l store.LogBackend) { s.logs.Store(&attachedLogs{l}) }

// NoLogs marks that this server has no log store (the storage backend does
// not offer one): the log routes answer 501.
func (s *Server) NoLogs() { s.noLogs.Store(true) }

const protoLogsOTLPProto, protoLogsOTLPJSON = "otlp-logs-proto", "otlp-logs-json"

func (s *Server) logRoutes() []route {
	return []route{
		{method: "POST", pattern: "/v1/logs", access: accessIngest, handler: s.handleOTLPLogs, documented: true},
		{method: "GET", pattern: "/api/v1/logs", access: accessRead, name: "logs", listing: &listing{"logs", "log records"}, handler: s.handleLogs, documented: true},
		{method: "GET", pattern: "/api/v1/traces/{trace_id}/logs", access: accessRead, name: "trace_logs", handler: s.handleTraceLogs, documented: true},
		{method: "GET", pattern: "/api/v1/logs/tail", access: accessRead, handler: s.handleLogsTail, documented: true, stream: true},
	}
}

// currentLogs is the attached log store, or nil with the error to answer.
func (s *Server) currentLogs() (store.LogBackend, *ingestError) {
	if a := s.logs.Load(); a != nil {
		return a.LogBackend, nil
	}
	if s.noLogs.Load() {
		return nil, &ingestError{http.StatusNotImplemented, "not_implemented",
			"logs are not built for this storage backend yet: use the embedded storage (docs/clickhouse.md)", 0}
	}
	return nil, &ingestError{http.StatusServiceUnavailable, "not_ready", "server is starting: replaying the WAL", 0}
}

// handleOTLPLogs serves POST /v1/logs: OTLP/HTTP logs, protobuf or JSON,
// gzip or not, with the admission and durability of /v1/traces.
func (s *Server) handleOTLPLogs(w http.ResponseWriter, r *http.Request) {
	isJSON, ok := s.otlpContentType(w, r, "/v1/logs")
	if !ok {
		return
	}
	format, protocol := store.LogFormatProto, protoLogsOTLPProto
	if isJSON {
		format, protocol = store.LogFormatJSON, protoLogsOTLPJSON
	}
	res, format, ierr := s.ingestLogs(r, format)
	if s.httpOutcome(w, protocol, ierr) {
		return
	}
	if format == store.LogFormatNative {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"accepted":%d`, res.Accepted)
		if res.Rejected > 0 {
			fmt.Fprintf(w, `,"rejected":%d,"error":%s`, res.Rejected, jsonQuote(res.RejectMsg))
		}
		w.Write([]byte("}\n"))
		return
	}
	writeExportResponse(w, isJSON, "rejectedLogRecords", res.Rejected, res.RejectMsg)
}

// ingestLogs admits, reads and stores one logs request; it returns the
// format the body was read as (a JSON array is the native shape).
func (s *Server) ingestLogs(r *http.Request, format store.LogFormat) (store.LogResult, store.LogFormat, *ingestError) {
	ls, ierr := s.currentLogs()
	if ierr != nil {
		return store.LogResult{}, format, ierr
	}
	project, body, release, ierr := s.admitHTTP(r)
	if ierr != nil {
		return store.LogResult{}, format, ierr
	}
	defer release()
	// A JSON array is Rastro's native shape (the records as /api/v1/logs
	// answers them); an object is OTLP/JSON.
	if format == store.LogFormatJSON && bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("[")) {
		format = store.LogFormatNative
	}
	res, ierr := s.appendLogs(ls, project, format, body)
	return res, format, ierr
}

// appendLogs stores a logs request's body, read as format; shared by HTTP and gRPC.
func (s *Server) appendLogs(ls store.LogBackend, project string, format store.LogFormat, body []byte) (store.LogResult, *ingestError) {
	res, err := ls.AppendLogs(project, format, body)
	if err != nil {
		return res, logAppendError(err)
	}
	if res.Accepted == 0 && res.Rejected > 0 {
		return res, badRequest("every log record was rejected (%d): %s", res.Rejected, res.RejectMsg)
	}
	if s.rates != nil {
		s.rates.take(project, res.Accepted)
	}
	return res, nil
}

func logAppendError(err error) *ingestError {
	return appendError(err, "logs", func(err error) *ingestError { // ClickHouse's insert queue is full
		return &ingestError{http.StatusTooManyRequests, "buffer_full", "too many log records waiting to be stored: " + err.Error(), 1}
	})
}

// handleLogs serves GET /api/v1/logs.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	q, err := parseLogQuery(r, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.answerLogs(w, r, q)
}

// handleTraceLogs serves GET /api/v1/traces/{trace_id}/logs: the logs of
// one trace, oldest first, as a trace's spans are read.
func (s *Server) handleTraceLogs(w http.ResponseWriter, r *http.Request) {
	id, err := model.ParseTraceID(r.PathValue("trace_id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	q, err := parseLogQuery(r, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	q.TraceID = id
	s.answerLogs(w, r, q)
}

func (s *Server) answerLogs(w http.ResponseWriter, r *http.Request, q store.LogQuery) {
	t0 := time.Now()
	ls, ierr := s.currentLogs()
	if ierr != nil {
		writeError(w, ierr.status, ierr.msg)
		return
	}
	q.Project = projectFrom(r.Context())
	page, err := ls.SearchLogs(q)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	buf := make([]byte, 0, 512*len(page.Hits)+64)
	buf = append(buf, `{"logs":[`...)
	for i := range page.Hits {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = otlp.AppendLogJSON(buf, &page.Hits[i].Record)
	}
	buf = append(buf, ']')
	if page.Next != nil {
		buf = append(buf, `,"next_cursor":"`...)
		buf = append(buf, page.Next.String()...)
		buf = append(buf, '"')
	}
	buf = append(buf, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	setServerTiming(w, t0)
	w.Write(buf)
}

// handleLogsTail streams the project's log records that match the filter
// parameters as they are acknowledged, as server-sent events (the span
// tail's stream, tail.go):
//
//	: tail open
//	event: logs    data: {"logs":[...]}
//	event: dropped data: {"dropped":N}   records skipped because the client read too slowly
//	event: limited data: {"limited":N}   records over max_rate
//	: keepalive
func (s *Server) handleLogsTail(w http.ResponseWriter, r *http.Request) {
	ls, ierr := s.currentLogs()
	if ierr != nil {
		writeError(w, ierr.status, ierr.msg)
		return
	}
	v := r.URL.Query()
	maxRate := 0
	if m := v.Get("max_rate"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1_000_000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("max_rate %q: want a whole number from 1 to 1000000", m))
			return
		}
		maxRate = n
	}
	for _, p := range []string{"since", "until", "limit", "cursor"} {
		if v.Has(p) {
			writeError(w, http.StatusBadRequest, p+": a tail takes no "+p+"; it streams every matching record from now until the client disconnects")
			return
		}
	}
	v.Del("max_rate")
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = v.Encode()
	q, err := parseLogQuery(r2, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	q.Project = projectFrom(r.Context())
	t, err := ls.TailLogs(q)
	if err != nil {
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer t.Close()
	bucket := tokenBucket{rate: float64(maxRate), tokens: float64(maxRate), last: time.Now()}
	s.streamEvents(w, r, func(ctx context.Context) (event, error) {
		recs, dropped, err := t.Next(ctx)
		var limited int64
		if maxRate > 0 && len(recs) > 0 {
			n := bucket.take(len(recs), time.Now())
			limited = int64(len(recs) - n)
			recs = recs[:n]
		}
		var buf []byte
		if len(recs) > 0 {
			buf = append(buf, "event: logs\ndata: {\"logs\":["...)
			for i := range recs {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = otlp.AppendLogJSON(buf, &recs[i])
			}
			buf = append(buf, "]}\n\n"...)
		}
		return event{buf, dropped, limited}, err
	})
}

// maxLogLimit bounds one page of logs.
const maxLogLimit = 10000

// parseLogQuery reads the log search's parameters: since, until, limit and
// cursor as the span search reads them, trace_id, span_id, service,
// severity (the lowest severity kept: a number 1-24 or a name such as WARN
// or error), content (words that must all appear in the body or a string
// attribute) and q (a log filter, query.ParseLogFilter).
func parseLogQuery(r *http.Request, now time.Time) (store.LogQuery, error) {
	v := r.URL.Query()
	var q store.LogQuery
	for name := range v {
		switch name {
		case "since", "until", "limit", "cursor", "trace_id", "span_id", "service", "severity", "content", "q":
		default:
			return q, fmt.Errorf("unknown parameter %q: the log search takes since, until, limit, cursor, trace_id, span_id, service, severity, content and q", name)
		}
	}
	for _, p := range []struct {
		name string
		dst  *uint64
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(p.name); s != "" {
			t, err := query.ParseTime(s, now)
			if err != nil {
				return q, fmt.Errorf("%s: %v", p.name, err)
			}
			if t.Before(time.Unix(0, 0)) {
				return q, fmt.Errorf("%s %q is before 1970", p.name, s)
			}
			*p.dst = uint64(t.UnixNano())
		}
	}
	if q.Until != 0 && q.Until <= q.Since {
		return q, fmt.Errorf("until must be after since")
	}
	q.Limit = 100
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLogLimit {
			return q, fmt.Errorf("limit %q: want a whole number from 1 to %d", s, maxLogLimit)
		}
		q.Limit = n
	}
	if s := v.Get("cursor"); s != "" {
		c, err := store.ParseLogCursor(s)
		if err != nil {
			return q, err
		}
		q.Before = &c
	}
	if s := v.Get("trace_id"); s != "" {
		id, err := model.ParseTraceID(s)
		if err != nil {
			return q, err
		}
		q.TraceID = id
	}
	if s := v.Get("span_id"); s != "" {
		id, err := model.ParseSpanID(s)
		if err != nil {
			return q, err
		}
		q.SpanID = id
	}
	q.Service = v.Get("service")
	if s := v.Get("severity"); s != "" {
		n, err := parseSeverity(s)
		if err != nil {
			return q, err
		}
		q.MinSeverity = n
	}
	q.Text = v.Get("content")
	if s := v.Get("q"); s != "" {
		f, err := query.ParseLogFilter(s)
		if err != nil {
			return q, fmt.Errorf("q: %v", err)
		}
		// The filter's necessary conditions let the store skip blocks; the
		// filter itself decides every record.
		h := f.Hints()
		if q.Service == "" {
			q.Service = h.Service
		}
		q.MinSeverity = max(q.MinSeverity, h.MinSeverity)
		if q.TraceID.IsZero() {
			q.TraceID = h.TraceID
		}
		q.Match = f.Match
	}
	return q, nil
}

// parseSeverity reads the severity parameter: a number 1-24 or a name.
func parseSeverity(v string) (model.SeverityNumber, error) {
	if n, ok := otlp.ParseSeverity(v); ok && n >= 0 && n <= 24 {
		return n, nil
	}
	return 0, fmt.Errorf("severity %q: want 1-24 or a name (TRACE, DEBUG, INFO, WARN, ERROR, FATAL)", v)
}

// logsExportMethod is the full name of LogsService/Export.
const logsExportMethod = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

const protoLogsOTLPGRPC = "otlp-logs-grpc"

var logsServiceDesc = exportService("opentelemetry.proto.collector.logs.v1.LogsService", logsExportMethod,
	"opentelemetry/proto/collector/logs/v1/logs_service.proto",
	func(s *Server, ctx context.Context, body []byte) (any, error) { return s.exportLogs(ctx, body) })

// exportLogs handles one OTLP/gRPC logs Export call.
func (s *Server) exportLogs(ctx context.Context, body []byte) (*collogspb.ExportLogsServiceResponse, error) {
	res, ierr := s.exportLogsGRPC(ctx, body)
	if err := s.grpcOutcome(protoLogsOTLPGRPC, ierr); err != nil {
		return nil, err
	}
	resp := &collogspb.ExportLogsServiceResponse{}
	if res.Rejected > 0 {
		resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: int64(res.Rejected), ErrorMessage: res.RejectMsg}
	}
	return resp, nil
}

func (s *Server) exportLogsGRPC(ctx context.Context, body []byte) (store.LogResult, *ingestError) {
	ls, ierr := s.currentLogs()
	if ierr != nil {
		return store.LogResult{}, ierr
	}
	project, release, ierr := s.admitExport(ctx, body)
	if ierr != nil {
		return store.LogResult{}, ierr
	}
	defer release()
	return s.appendLogs(ls, project, store.LogFormatProto, body)
}
