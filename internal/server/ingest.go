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
	"strconv"
	"strings"
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
}

func (e *ingestError) Error() string { return e.msg }

func badRequest(format string, a ...any) *ingestError {
	return &ingestError{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, a...)}
}

// readBody reads the request body, decompressing gzip, and enforces the size
// limit on both the wire bytes and the decompressed bytes (a gzip bomb is refused).
func (s *Server) readBody(r *http.Request) ([]byte, *ingestError) {
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	var src io.Reader = http.MaxBytesReader(nil, r.Body, limit)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, tooLarge(limit)
			}
			return nil, badRequest("gzip body is invalid: %v", err)
		}
		defer zr.Close()
		src = zr
	default:
		return nil, &ingestError{http.StatusUnsupportedMediaType, "unsupported_encoding",
			fmt.Sprintf("Content-Encoding %q is not supported: use gzip or none", enc)}
	}
	body, err := io.ReadAll(io.LimitReader(src, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
			return nil, badRequest("gzip body is truncated or corrupt: %v", err)
		}
		return nil, badRequest("read body: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(limit)
	}
	return body, nil
}

func tooLarge(limit int64) *ingestError {
	return &ingestError{http.StatusRequestEntityTooLarge, "too_large",
		fmt.Sprintf("request body exceeds the limit of %d bytes (--max-body-bytes; a compressed body counts decompressed)", limit)}
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
		s.met.rejected.WithLabelValues("unsupported_media_type").Inc()
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
		s.met.rejected.WithLabelValues("unsupported_media_type").Inc()
		writeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not supported on /v1/traces: use application/x-protobuf or application/json", r.Header.Get("Content-Type")))
	}
}

// handleNative serves POST /v1/spans.
func (s *Server) handleNative(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" && mt != "" {
		s.met.rejected.WithLabelValues("unsupported_media_type").Inc()
		writeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not supported on /v1/spans: use application/json", r.Header.Get("Content-Type")))
		return
	}
	s.ingestHTTP(w, r, protoNative, otlp.RecordNative)
}

func (s *Server) ingestHTTP(w http.ResponseWriter, r *http.Request, protocol string, rt otlp.RecordType) {
	res, ierr := s.ingestRequest(r, protocol, rt)
	code := http.StatusOK
	if ierr != nil {
		code = ierr.status
	}
	s.met.requests.WithLabelValues(protocol, strconv.Itoa(code)).Inc()
	if ierr != nil {
		s.met.rejected.WithLabelValues(ierr.reason).Inc()
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, code, ierr.msg)
		return
	}
	if rt == otlp.RecordZipkinJSON || rt == otlp.RecordZipkinProto {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rt == otlp.RecordOTLPProto {
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		w.Write(exportResponseProto(res.Rejected, res.RejectMsg))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if rt == otlp.RecordOTLPJSON {
		resp := map[string]any{}
		if res.Rejected > 0 {
			resp["partialSuccess"] = map[string]any{"rejectedSpans": strconv.Itoa(res.Rejected), "errorMessage": res.RejectMsg}
		}
		json.NewEncoder(w).Encode(resp)
		return
	}
	resp := map[string]any{"accepted": len(res.Spans)}
	if res.Rejected > 0 {
		resp["rejected"] = res.Rejected
		resp["error"] = res.RejectMsg
	}
	json.NewEncoder(w).Encode(resp)
}

// ingestRequest admits, reads, decodes and stores one HTTP request.
func (s *Server) ingestRequest(r *http.Request, protocol string, rt otlp.RecordType) (otlp.Batch, *ingestError) {
	b := s.currentBackend()
	if b == nil {
		return otlp.Batch{}, &ingestError{http.StatusServiceUnavailable, "not_ready", "server is starting: replaying the WAL"}
	}
	project := projectFrom(r.Context())
	// A body that can never be accepted is refused before admission, so the
	// client gets 413 (final) rather than 429 (retry).
	if r.ContentLength > s.opts.MaxBodyBytes {
		return otlp.Batch{}, tooLarge(s.opts.MaxBodyBytes)
	}
	// Admission: bound the bytes in flight by what the body may grow to.
	want := s.opts.MaxBodyBytes
	if r.ContentLength >= 0 && r.Header.Get("Content-Encoding") == "" {
		want = max(r.ContentLength, 1)
	}
	if !s.admit(want) {
		return otlp.Batch{}, &ingestError{http.StatusTooManyRequests, "overloaded",
			"server is at its in-flight limit; retry after the Retry-After delay"}
	}
	defer s.release(want)
	body, ierr := s.readBody(r)
	if ierr != nil {
		return otlp.Batch{}, ierr
	}
	return s.store(r.Context(), b, project, protocol, rt, body)
}

// store decodes body and appends it to the backend; shared by HTTP and gRPC.
func (s *Server) store(ctx context.Context, be store.Backend, project, protocol string, rt otlp.RecordType, body []byte) (otlp.Batch, *ingestError) {
	t0 := time.Now()
	b, err := otlp.Decode(rt, body)
	s.met.decodeNanos.WithLabelValues(protocol).Add(float64(time.Since(t0).Nanoseconds()))
	if err != nil {
		return b, badRequest("decode %s request: %v", protocol, err)
	}
	if len(b.Spans) == 0 && b.Rejected > 0 {
		return b, badRequest("every span was rejected (%d): %s", b.Rejected, b.RejectMsg)
	}
	s.met.countProblems(b)
	if err := be.Append(ctx, &store.Write{Project: project, Type: rt, Body: body, Spans: b.Spans}); err != nil {
		switch {
		case errors.Is(err, store.ErrOverloaded):
			return b, &ingestError{http.StatusTooManyRequests, "buffer_full",
				"the write buffer is full while sealing catches up; retry after the Retry-After delay"}
		case errors.Is(err, store.ErrBadRequest):
			return b, badRequest("%v", err)
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			// The client went away or gave up before the write started:
			// nothing was stored, and nothing is wrong with the store.
			return b, &ingestError{http.StatusServiceUnavailable, "cancelled", "request cancelled before it was stored: " + err.Error()}
		}
		s.log.Error("append failed", "err", err)
		return b, &ingestError{http.StatusServiceUnavailable, "storage_error", "could not store the request durably: " + err.Error()}
	}
	s.met.spans.WithLabelValues(protocol).Add(float64(len(b.Spans)))
	s.met.bytes.WithLabelValues(protocol).Add(float64(len(body)))
	if b.Rejected > 0 {
		s.met.rejectedSpans.Add(float64(b.Rejected))
	}
	return b, nil
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
func writeError(w http.ResponseWriter, code int, msg string) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}
