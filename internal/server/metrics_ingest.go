package server

import (
	"context"
	"net/http"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"

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
	isJSON, ok := s.otlpContentType(w, r, "/v1/metrics")
	if !ok {
		return
	}
	format, protocol := store.MetricFormatProto, protoMetricsOTLPProto
	if isJSON {
		format, protocol = store.MetricFormatJSON, protoMetricsOTLPJSON
	}
	res, ierr := s.ingestMetrics(r, format)
	if s.httpOutcome(w, protocol, ierr) {
		return
	}
	writeExportResponse(w, isJSON, "rejectedDataPoints", res.Rejected, res.RejectMsg)
}

// ingestMetrics admits, reads and stores one metrics request.
func (s *Server) ingestMetrics(r *http.Request, format store.MetricFormat) (store.MetricResult, *ingestError) {
	ms, ierr := s.currentMetrics()
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	project, body, release, ierr := s.admitHTTP(r)
	if ierr != nil {
		return store.MetricResult{}, ierr
	}
	defer release()
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
	return appendError(err, "metrics", func(err error) *ingestError {
		return &ingestError{http.StatusTooManyRequests, "overloaded", err.Error(), 1}
	})
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
