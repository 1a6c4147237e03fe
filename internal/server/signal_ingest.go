package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

// This file holds what the OTLP/HTTP receivers of logs (/v1/logs) and
// metrics (/v1/metrics) share: the Content-Type, the admission before a
// store's append, the store's refusals, and the answer.

// otlpContentType reads the Content-Type of an OTLP/HTTP export to path:
// JSON (isJSON) or protobuf. Any other type is answered 415 here, and ok
// is false.
func (s *Server) otlpContentType(w http.ResponseWriter, r *http.Request, path string) (isJSON, ok bool) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return false, true
	case "application/json":
		return true, true
	}
	s.countRejected("unsupported_media_type")
	writeError(w, http.StatusUnsupportedMediaType,
		fmt.Sprintf("Content-Type %q is not supported on %s: use application/x-protobuf or application/json", r.Header.Get("Content-Type"), path))
	return false, false
}

// admitHTTP admits one OTLP/HTTP export of spans, logs or metrics: a body
// over --max-body-bytes is refused before it is read (413, final, rather
// than 429); then the project's limits and a full write buffer; then, if
// no ingest slot is free for the project now, a 429 before the body is
// read; then the body is read, its bytes admitted as bytes in flight; then
// an ingest slot is taken (a slot is not held while a slow client sends its
// body). release gives back what it took.
//
// Why the early refusal: under a flood most requests are refused for want
// of a slot, and reading each body first (a buffer per request, grown as
// it arrives) was 41% of the server's allocated bytes in an overload run
// (docs/benchmarks/overload.md), garbage the collector then had to chase.
func (s *Server) admitHTTP(r *http.Request) (project string, body []byte, release func(), ierr *ingestError) {
	project = projectFrom(r.Context())
	if r.ContentLength > s.opts.MaxBodyBytes {
		return project, nil, nil, tooLarge(s.opts.MaxBodyBytes)
	}
	if b := s.currentBackend(); b != nil {
		if ierr := s.admitProject(b, project); ierr != nil {
			discardBody(r, s.opts.MaxBodyBytes)
			return project, nil, nil, ierr
		}
	}
	if ierr := s.ingestBusy(project); ierr != nil {
		discardBody(r, s.opts.MaxBodyBytes)
		return project, nil, nil, ierr
	}
	body, held, ierr := s.readBody(r)
	if ierr != nil {
		s.release(held)
		return project, nil, nil, ierr
	}
	done, ierr := s.ingestSlot(project)
	if ierr != nil {
		s.release(held)
		return project, nil, nil, ierr
	}
	return project, body, func() { done(); s.release(held) }, nil
}

// httpOutcome counts an OTLP/HTTP export under protocol and, when ierr is
// set, answers it (with Retry-After on 429 and 503); it reports whether it
// answered.
func (s *Server) httpOutcome(w http.ResponseWriter, protocol string, ierr *ingestError) bool {
	code := http.StatusOK
	if ierr != nil {
		code = ierr.status
	}
	s.met.requests.WithLabelValues(protocol, strconv.Itoa(code)).Inc()
	if ierr == nil {
		return false
	}
	s.countRejected(ierr.reason)
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(max(ierr.retryAfter, 1)))
	}
	writeError(w, code, ierr.msg)
	return true
}

// writeExportResponse answers a stored OTLP/HTTP export of spans, logs or metrics
// with its Export*ServiceResponse, in protobuf or JSON: empty, or with
// partial_success {rejected count (1), error_message (2)} when the store
// rejected some items. rejectedField is the count's JSON name
// ("rejectedSpans", "rejectedLogRecords", "rejectedDataPoints"); proto3 JSON writes it, an
// int64, as a string.
func writeExportResponse(w http.ResponseWriter, isJSON bool, rejectedField string, rejected int, msg string) {
	if !isJSON {
		var out []byte
		if rejected > 0 {
			ps := protowire.AppendTag(nil, 1, protowire.VarintType)
			ps = protowire.AppendVarint(ps, uint64(rejected))
			ps = protowire.AppendTag(ps, 2, protowire.BytesType)
			ps = protowire.AppendString(ps, msg)
			out = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), ps)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		w.Write(out)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if rejected > 0 {
		fmt.Fprintf(w, `{"partialSuccess":{"`+rejectedField+`":"%d","errorMessage":%s}}`+"\n", rejected, jsonQuote(msg))
		return
	}
	w.Write([]byte("{}\n"))
}

// appendError answers a log or metric store's refusal of an append; what
// names the signal ("logs", "metrics") and overloaded answers
// store.ErrOverloaded.
func appendError(err error, what string, overloaded func(error) *ingestError) *ingestError {
	var oe *otlp.Error
	switch {
	case errors.As(err, &oe):
		return badRequest("decode %s request: %v", what, err)
	case errors.Is(err, syscall.ENOSPC):
		return &ingestError{http.StatusServiceUnavailable, "disk_full", "the disk is full: this request was not stored (what was acknowledged before is kept): " + err.Error(), 5}
	case errors.Is(err, store.ErrClosed):
		return &ingestError{http.StatusServiceUnavailable, "stopping", "the server is stopping", 0}
	case errors.Is(err, store.ErrOverloaded):
		return overloaded(err)
	}
	msg := "could not store the " + what + " durably: " + err.Error()
	if errors.Is(err, store.ErrStopped) {
		msg += " (after a write or fsync error the store accepts no more writes: check the disk and the server log, then restart)"
	}
	return &ingestError{http.StatusServiceUnavailable, "storage_error", msg, 0}
}

// discardBuffers are the buffers discardBody reads into.
var discardBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// discardBody reads and drops the rest of a refused request's body (at most
// limit bytes, within the server's read timeout) through a pooled buffer,
// so that the answer keeps the connection: net/http itself would drain at
// most 256 KiB and close the connection after a larger body, and a client
// still writing that body can then see a broken connection instead of the
// 429. A client that asked to be told first (Expect: 100-continue) has not
// sent its body: reading would ask for it, so it is not read, and net/http
// answers and closes the connection.
func discardBody(r *http.Request, limit int64) {
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("Expect")), "100-continue") {
		return
	}
	buf := discardBuffers.Get().(*[]byte)
	defer discardBuffers.Put(buf)
	io.CopyBuffer(io.Discard, io.LimitReader(r.Body, limit+1), *buf)
}
