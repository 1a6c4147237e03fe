package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// protocol labels, used in metrics and by the benchmark harness.
const (
	protoOTLPProto   = "otlp-proto"
	protoOTLPJSON    = "otlp-json"
	protoOTLPGRPC    = "otlp-grpc"
	protoNative      = "native-json"
	protoZipkinJSON  = "zipkin-json"
	protoZipkinProto = "zipkin-proto"
)

// ingestError is a request failure with its HTTP status and metric reason.
type ingestError struct {
	status int
	reason string
	msg    string
	// retryAfter, for a 429 or 503, is the Retry-After delay in seconds (0: 1).
	retryAfter int
}

func (e *ingestError) Error() string { return e.msg }

func badRequest(format string, a ...any) *ingestError {
	return &ingestError{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, a...), 0}
}

// bodyChunk is the unit in which readBody reads a body and admits its
// memory.
const bodyChunk = 32 << 10

// bodyChunks holds the chunks readBody reads into, for the next request.
var bodyChunks = sync.Pool{New: func() any { return new([bodyChunk]byte) }}

// readBody reads the request body, decompressing gzip, and enforces the size
// limit on both the wire bytes and the decompressed bytes (a gzip bomb is
// refused). It reads into chunks of bodyChunk bytes, admitting each chunk's
// memory (admit) as it is taken, never ahead of the bytes that arrived: a
// client that declares a large body and sends it slowly holds only what it
// sent, for at most the read timeout. At the end the body is copied once
// into a buffer of its exact size and the chunks go back to a pool (growing
// one buffer by doubling allocated about three times the body: a fifth of
// what the server allocated during ingest, docs/operations.md). held is what
// the caller releases once it is done with the body, also on error.
func (s *Server) readBody(r *http.Request) (body []byte, held int64, ierr *ingestError) {
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, 0, tooLarge(limit)
	}
	// most is the most the body can be: its declared length when it is
	// not compressed (one spare byte reads the end), else the limit.
	most := limit + 1
	var src io.Reader = http.MaxBytesReader(nil, r.Body, limit)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		if r.ContentLength >= 0 {
			most = r.ContentLength + 1
		}
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			if ierr := readFailure(err, limit, s.opts.ReadTimeout); ierr != nil {
				return nil, 0, ierr
			}
			return nil, 0, badRequest("gzip body is invalid: %v", err)
		}
		defer zr.Close()
		src = zr
	default:
		return nil, 0, &ingestError{http.StatusUnsupportedMediaType, "unsupported_encoding",
			fmt.Sprintf("Content-Encoding %q is not supported: use gzip or none", enc), 0}
	}
	var chunks []*[bodyChunk]byte
	defer func() {
		for _, c := range chunks {
			bodyChunks.Put(c)
		}
	}()
	var n int64 // bytes read
	for {
		off := int(n % bodyChunk)
		if off == 0 && n/bodyChunk == int64(len(chunks)) { // every chunk taken is full
			if n > limit {
				return nil, held, tooLarge(limit)
			}
			// A chunk, or what the declared length leaves of one (one
			// more byte reads the end).
			grow := max(min(bodyChunk, most-n), 1)
			if !s.admit(grow) {
				return nil, held, overloaded()
			}
			held += grow
			chunks = append(chunks, bodyChunks.Get().(*[bodyChunk]byte))
		}
		m, err := src.Read(chunks[len(chunks)-1][off:])
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			if ierr := readFailure(err, limit, s.opts.ReadTimeout); ierr != nil {
				return nil, held, ierr
			}
			if _, gz := src.(*gzip.Reader); gz && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader)) {
				return nil, held, badRequest("gzip body is truncated or corrupt: %v", err)
			}
			return nil, held, badRequest("read body: %v", err)
		}
	}
	if n > limit {
		return nil, held, tooLarge(limit)
	}
	body = make([]byte, n)
	for i, c := range chunks {
		copy(body[i*bodyChunk:], c[:])
	}
	// The body holds n bytes of what its chunks were admitted for.
	if held > n {
		s.release(held - n)
		held = n
	}
	return body, held, nil
}

// readFailure classifies a body read error that is the client's pace or
// size rather than its content: past the limit (413) or past the read
// timeout (408). Other errors give nil.
func readFailure(err error, limit int64, timeout time.Duration) *ingestError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &ingestError{http.StatusRequestTimeout, "read_timeout",
			fmt.Sprintf("the request body did not arrive within the read timeout of %v (--read-timeout): send it faster, or in smaller requests", timeout), 0}
	}
	return nil
}

func overloaded() *ingestError {
	return &ingestError{http.StatusTooManyRequests, "overloaded",
		"server is at its in-flight limit; retry after the Retry-After delay", 0}
}

func tooLarge(limit int64) *ingestError {
	return &ingestError{http.StatusRequestEntityTooLarge, "too_large",
		fmt.Sprintf("request body exceeds the limit of %d bytes (--max-body-bytes; a compressed body counts decompressed)", limit), 0}
}

// ingestRoutes are the receivers: OTLP/HTTP and the native JSON route.
func (s *Server) ingestRoutes() []route {
	return []route{
		{method: "POST", pattern: "/v1/traces", access: accessIngest, handler: s.handleOTLP, documented: true},
		{method: "POST", pattern: "/v1/spans", access: accessIngest, handler: s.handleNative, documented: true},
		// Zipkin v2 (docs/grafana.md): JSON or protobuf ListOfSpans.
		{method: "POST", pattern: "/api/v2/spans", access: accessIngest, handler: s.handleZipkin},
	}
}

// handleZipkin serves POST /api/v2/spans: Zipkin v2 spans, JSON (the
// default) or protobuf, answered 202 with no body as Zipkin does, with the
// same durability and admission as OTLP.
func (s *Server) handleZipkin(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "", "application/json":
		s.ingestHTTP(w, r, protoZipkinJSON, otlp.RecordZipkinJSON)
	case "application/x-protobuf", "application/protobuf":
		s.ingestHTTP(w, r, protoZipkinProto, otlp.RecordZipkinProto)
	default:
		s.countRejected("unsupported_media_type")
		writeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not supported on /api/v2/spans: use application/json or application/x-protobuf", r.Header.Get("Content-Type")))
	}
}

// handleOTLP serves POST /v1/traces.
func (s *Server) handleOTLP(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		s.ingestHTTP(w, r, protoOTLPProto, otlp.RecordOTLPProto)
	case "application/json":
		s.ingestHTTP(w, r, protoOTLPJSON, otlp.RecordOTLPJSON)
	default:
		s.countRejected("unsupported_media_type")
		writeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not supported on /v1/traces: use application/x-protobuf or application/json", r.Header.Get("Content-Type")))
	}
}

// handleNative serves POST /v1/spans.
func (s *Server) handleNative(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" && mt != "" {
		s.countRejected("unsupported_media_type")
		writeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not supported on /v1/spans: use application/json", r.Header.Get("Content-Type")))
		return
	}
	s.ingestHTTP(w, r, protoNative, otlp.RecordNative)
}

func (s *Server) ingestHTTP(w http.ResponseWriter, r *http.Request, protocol string, rt otlp.RecordType) {
	res, ierr := s.ingestRequest(r, protocol, rt)
	if s.httpOutcome(w, protocol, ierr) {
		return
	}
	switch rt {
	case otlp.RecordZipkinJSON, otlp.RecordZipkinProto:
		w.WriteHeader(http.StatusAccepted)
	case otlp.RecordOTLPProto, otlp.RecordOTLPJSON:
		writeExportResponse(w, rt == otlp.RecordOTLPJSON, "rejectedSpans", res.Rejected, res.RejectMsg)
	default:
		w.Header().Set("Content-Type", "application/json")
		resp := map[string]any{"accepted": res.Accepted}
		if res.Rejected > 0 {
			resp["rejected"] = res.Rejected
			resp["error"] = res.RejectMsg
		}
		json.NewEncoder(w).Encode(resp)
	}
}

// ingestRequest admits, reads, decodes and stores one HTTP request
// (admitHTTP: a body too large is refused before admission, with 413; the
// project's limits, a full write buffer and no free ingest slot are refused
// before the body is read; a slow client holds memory, bounded, never an
// ingest slot).
func (s *Server) ingestRequest(r *http.Request, protocol string, rt otlp.RecordType) (ingested, *ingestError) {
	b := s.currentBackend()
	if b == nil {
		return ingested{}, &ingestError{http.StatusServiceUnavailable, "not_ready", "server is starting: replaying the WAL", 0}
	}
	project, body, release, ierr := s.admitHTTP(r)
	if ierr != nil {
		return ingested{}, ierr
	}
	defer release()
	return s.store(r.Context(), b, project, protocol, rt, body)
}

// ingested is what the response to a stored request reports.
type ingested struct {
	Accepted, Rejected int    // spans
	RejectMsg          string // the first rejected span's reason
}

// store decodes body and appends it to the backend; shared by HTTP and gRPC.
func (s *Server) store(ctx context.Context, be store.Backend, project, protocol string, rt otlp.RecordType, body []byte) (ingested, *ingestError) {
	var b otlp.Batch
	var err error
	var took time.Duration // the decoding itself, not the wait for the worker
	s.runIngest(func() {
		t0 := time.Now()
		b, err = otlp.DecodeOwned(rt, body) // body is this request's own and only read after this
		took = time.Since(t0)
	})
	s.met.decodeNanos.WithLabelValues(protocol).Add(float64(took.Nanoseconds()))
	if err != nil {
		return ingested{}, badRequest("decode %s request: %v", protocol, err)
	}
	if len(b.Spans) == 0 && b.Rejected > 0 {
		return ingested{}, badRequest("every span was rejected (%d): %s", b.Rejected, b.RejectMsg)
	}
	s.met.countProblems(b)
	w := &store.Write{Project: project, Type: rt, Body: body, Spans: b.Spans, NoHold: s.ingestSlots.flooding(project)}
	if err := be.Append(ctx, w); err != nil {
		switch {
		case errors.Is(err, store.ErrOverloaded):
			return ingested{}, &ingestError{http.StatusTooManyRequests, "buffer_full",
				"the write buffer is full while sealing catches up; retry after the Retry-After delay", 0}
		case errors.Is(err, store.ErrBadRequest):
			return ingested{}, badRequest("%v", err)
		case errors.Is(err, store.ErrUnavailable):
			return ingested{}, &ingestError{http.StatusServiceUnavailable, "unavailable", "the store cannot take this request now (nothing was stored); retry after the Retry-After delay: " + err.Error(), 1}
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			// The client went away or gave up before the write started:
			// nothing was stored, and nothing is wrong with the store.
			return ingested{}, &ingestError{http.StatusServiceUnavailable, "cancelled", "request cancelled before it was stored: " + err.Error(), 0}
		}
		if errors.Is(err, syscall.ENOSPC) {
			s.log.Warn("ingest refused: the disk is full", "err", err)
			return ingested{}, &ingestError{http.StatusServiceUnavailable, "disk_full", "the disk is full: this request was not stored (what was acknowledged before is kept); " +
				"free space on the data directory's disk and ingest resumes by itself: " + err.Error(), 5}
		}
		s.log.Error("append failed", "err", err)
		msg := "could not store the request durably: " + err.Error()
		if errors.Is(err, store.ErrStopped) {
			msg += " (after a write or fsync error the store accepts no more writes: check the disk and the server log, then restart; docs/operations.md, Disk faults)"
		}
		return ingested{}, &ingestError{http.StatusServiceUnavailable, "storage_error", msg, 0}
	}
	s.rates.take(project, len(b.Spans))
	s.spanMetrics.Observe(project, b.Spans)
	s.met.spans.WithLabelValues(protocol).Add(float64(len(b.Spans)))
	s.met.bytes.WithLabelValues(protocol).Add(float64(len(body)))
	if b.Rejected > 0 {
		s.met.rejectedSpans.Add(float64(b.Rejected))
	}
	res := ingested{Accepted: len(b.Spans), Rejected: b.Rejected, RejectMsg: b.RejectMsg}
	if w.SpansDone {
		// Nothing holds the spans now: their arrays go to the next
		// request's decode (the collector has about 900 bytes per span
		// fewer to chase).
		b.Release()
	}
	return res, nil
}

// runIngest runs work through Options.RunIngest, or at once without one.
func (s *Server) runIngest(work func()) {
	if s.opts.RunIngest != nil {
		s.opts.RunIngest(work)
		return
	}
	work()
}

// capacityRefusal lists the refusal reasons that say the server, not the
// client or its project's configured rate, is short of capacity: the write
// buffer full (also a project held to its share of it while sealing
// catches up), the bytes in flight or the concurrent ingest requests at
// their limit.
var capacityRefusal = map[string]bool{
	"overloaded": true, "buffer_full": true, "project_buffer_share": true, "project_flood": true,
	"ingest_busy": true, "project_ingest_busy": true,
}

// countRejected counts an ingest request refused for reason and tells
// Options.IngestRefused of a refusal for want of capacity.
func (s *Server) countRejected(reason string) {
	s.met.rejected.WithLabelValues(reason).Inc()
	if s.opts.IngestRefused != nil && capacityRefusal[reason] {
		s.opts.IngestRefused()
	}
}

func (s *Server) admit(n int64) bool {
	if s.inflight.Add(n) > s.opts.MaxInflightBytes {
		s.inflight.Add(-n)
		return false
	}
	return true
}

func (s *Server) release(n int64) { s.inflight.Add(-n) }

// writeError writes {"error": msg}.
// jsonQuote is s as a JSON string (strconv.Quote is Go's syntax, whose \x
// escapes are not JSON). Invalid UTF-8 becomes U+FFFD.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}
