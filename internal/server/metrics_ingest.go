package server

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"syscall"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

type attachedMetrics struct{ store.MetricBackend }

// SetMetrics attaches the metric store. Until it is called the metric
// routes answer 503 while the server starts; a backend that has none
// (ClickHouse) never calls it and the routes answer 501.
func (s *Server) SetMetrics(m store.MetricBackend) { s.metricsStore.Store(&attachedMetrics{m}) }

// NoMetrics marks that this server has no metric store: the metric routes answer 501.
func (s *Server) NoMetrics() { s.noMetrics.Store(true) }

const (
	protoMetricsOTLPProto = "otlp-metrics-proto"
	protoMetricsOTLPJSON  = "otlp-metrics-json"
	protoMetricsOTLPGRPC  = "otlp-metrics-grpc"
)

// metricsExportMethod is the full name of MetricsService/Export.
const metricsExportMethod = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

func (s *Server) metricRoutes() []route {
	rs := []route{{method: "POST", pattern: "/v1/metrics", access: accessIngest, handler: s.handleOTLPMetrics, documented: true}}
	return append(rs, s.promRoutes()...)
}

// currentMetrics is the attached metric store, or nil with the error to answer.
func (s *Server) currentMetrics() (store.MetricBackend, *ingestError) {
	if a := s.metricsStore.Load(); a != nil {
		return a.MetricBackend, nil
	}
	if s.noMetrics.Load() {
		return nil, &ingestError{http.StatusNotImplemented, "not_implemented",
			"metrics are not built for this storage backend yet: use the embedded storage (docs/clickhouse.md)", 0}
	}
	return nil, &ingestError{http.StatusServiceUnavailable, "not_ready", "server is starting: replaying the WAL", 0}
}

// handleOTLPMetrics serves POST /v1/metrics: OTLP/HTTP metrics, protobuf or
// JSON, gzip or not, with the admission and durability of /v1/traces.
func (s *Server) handleOTLPMetrics(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var format store.MetricFormat
	protocol := protoMetricsOTLPProto
	switch mt {
	case "application/x-protobuf", "application/protobuf":
	case "application/json":
		format, protocol = store.MetricFormatJSON, protoMetricsOTLPJSON
	default:
		s.met.rejected.WithLabelValues("unsupported_media_type").Inc()
		writeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not supported on /v1/metrics: use application/x-protobuf or application/json", r.Header.Get("Content-Type")))
		return
	}
	res, ierr := s.ingestMetrics(r, format)
	code := http.StatusOK
	if ierr != nil {
		code = ierr.status
	}
	s.met.requests.WithLabelValues(protocol, strconv.Itoa(code)).Inc()
	if ierr != nil {
		s.met.rejected.WithLabelValues(ierr.reason).Inc()
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", strconv.Itoa(max(ierr.retryAfter, 1)))
		}
		writeError(w, code, ierr.msg)
		return
	}
	if format == store.MetricFormatProto {
		// ExportMetricsServiceResponse{partial_success{rejected_data_points, error_message}}
		var out []byte
		if res.Rejected > 0 {
			ps := protowire.AppendTag(nil, 1, protowire.VarintType)
			ps = protowire.AppendVarint(ps, uint64(res.Rejected))
			ps = protowire.AppendTag(ps, 2, protowire.BytesType)
			ps = protowire.AppendString(ps, res.RejectMsg)
			out = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), ps)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		w.Write(out)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if res.Rejected > 0 {
		fmt.Fprintf(w, `{"partialSuccess":{"rejectedDataPoints":"%d","errorMessage":%s}}`+"\n", res.Rejected, strconv.Quote(res.RejectMsg))
		return
	}
	w.Write([]byte("{}\n"))
}

// ingestMetrics admits, reads and stores one metrics request.
func (s *Server) ingestMetrics(r *http.Request, format store.MetricFormat) (store.MetricResult, *ingestError) {
	ms, ierr := s.currentMetrics()
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	project := projectFrom(r.Context())
	if r.ContentLength > s.opts.MaxBodyBytes {
		return store.MetricResult{}, tooLarge(s.opts.MaxBodyBytes)
	}
	if b := s.currentBackend(); b != nil {
		if ierr := s.admitProject(b, project); ierr != nil {
			return store.MetricResult{}, ierr
		}
	}
	body, held, ierr := s.readBody(r)
	defer s.release(held)
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	done, ierr := s.ingestSlot()
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	defer done()
	return s.appendMetrics(ms, project, format, body)
}

func (s *Server) appendMetrics(ms store.MetricBackend, project string, format store.MetricFormat, body []byte) (store.MetricResult, *ingestError) {
	res, err := ms.AppendMetrics(project, format, body)
	if err != nil {
		return res, metricAppendError(err)
	}
	if res.Accepted == 0 && res.Rejected > 0 {
		return res, badRequest("every data point was rejected (%d): %s", res.Rejected, res.RejectMsg)
	}
	return res, nil
}

func metricAppendError(err error) *ingestError {
	var oe *otlp.Error
	switch {
	case errors.As(err, &oe):
		return badRequest("decode metrics request: %v", err)
	case errors.Is(err, syscall.ENOSPC):
		return &ingestError{http.StatusServiceUnavailable, "disk_full", "the disk is full: this request was not stored (what was acknowledged before is kept): " + err.Error(), 5}
	case errors.Is(err, store.ErrClosed):
		return &ingestError{http.StatusServiceUnavailable, "stopping", "the server is stopping", 0}
	case errors.Is(err, store.ErrOverloaded):
		return &ingestError{http.StatusTooManyRequests, "overloaded", err.Error(), 1}
	}
	msg := "could not store the metrics durably: " + err.Error()
	if errors.Is(err, store.ErrStopped) {
		msg += " (after a write or fsync error the store accepts no more writes: check the disk and the server log, then restart)"
	}
	return &ingestError{http.StatusServiceUnavailable, "storage_error", msg, 0}
}

var metricsServiceDesc = exportService("opentelemetry.proto.collector.metrics.v1.MetricsService", metricsExportMethod,
	"opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
	func(s *Server, ctx context.Context, body []byte) (any, error) { return s.exportMetrics(ctx, body) })

// exportMetrics handles one OTLP/gRPC metrics Export call.
func (s *Server) exportMetrics(ctx context.Context, body []byte) (*colmetricspb.ExportMetricsServiceResponse, error) {
	res, ierr := s.exportMetricsGRPC(ctx, body)
	if err := s.grpcOutcome(protoMetricsOTLPGRPC, ierr); err != nil {
		return nil, err
	}
	resp := &colmetricspb.ExportMetricsServiceResponse{}
	if res.Rejected > 0 {
		resp.PartialSuccess = &colmetricspb.ExportMetricsPartialSuccess{RejectedDataPoints: int64(res.Rejected), ErrorMessage: res.RejectMsg}
	}
	return resp, nil
}

func (s *Server) exportMetricsGRPC(ctx context.Context, body []byte) (store.MetricResult, *ingestError) {
	ms, ierr := s.currentMetrics()
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	project, release, ierr := s.admitExport(ctx, body)
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	defer release()
	return s.appendMetrics(ms, project, store.MetricFormatProto, body)
}
