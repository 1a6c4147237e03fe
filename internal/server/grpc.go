package server

import (
	"context"
	"fmt"
	"net/http"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip decompressor OTel exporters use
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/otlp"
)

// rawRequest receives an Export request's wire bytes untouched: the server
// decodes them with its own decoder and stores the same bytes in the WAL.
type rawRequest struct{ b []byte }

// rawCodec is the server's gRPC codec: requests stay raw bytes, responses are
// ordinary protobuf messages.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return proto.Marshal(m)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch t := v.(type) {
	case *rawRequest:
		// data may be reused by gRPC after this returns.
		t.b = append([]byte(nil), data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, t)
	}
	return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
}

// exportMethod is the full name of TraceService/Export.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

var traceServiceDesc = exportService("opentelemetry.proto.collector.trace.v1.TraceService", exportMethod,
	"opentelemetry/proto/collector/trace/v1/trace_service.proto",
	func(s *Server, ctx context.Context, body []byte) (any, error) { return s.export(ctx, body) })

// exportService describes an OTLP collector service: one unary method,
// Export, named fullMethod, whose request arrives raw (rawCodec) and is
// handled by call. The interceptor (the access check, auth.go) runs before
// the request is decoded, so a refused call costs no copy of its body.
func exportService(name, fullMethod, metadata string, call func(s *Server, ctx context.Context, body []byte) (any, error)) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				h := func(ctx context.Context, _ any) (any, error) {
					var in rawRequest
					if err := dec(&in); err != nil {
						return nil, err
					}
					return call(srv.(*Server), ctx, in.b)
				}
				if interceptor == nil {
					panic("server: the gRPC server has no access interceptor (broken invariant)")
				}
				return interceptor(ctx, nil, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, h)
			},
		}},
		Metadata: metadata,
	}
}

// grpcCode is the gRPC status of an ingest refusal.
func grpcCode(ierr *ingestError) codes.Code {
	switch {
	case ierr.status == http.StatusNotImplemented:
		return codes.Unimplemented
	case ierr.status == http.StatusServiceUnavailable:
		return codes.Unavailable
	case ierr.status == http.StatusTooManyRequests:
		return codes.ResourceExhausted
	}
	return codes.InvalidArgument
}

// grpcOutcome counts a logs or metrics Export call under protocol and
// returns its gRPC status error (nil when ierr is).
func (s *Server) grpcOutcome(protocol string, ierr *ingestError) error {
	code := codes.OK
	if ierr != nil {
		s.countRejected(ierr.reason)
		code = grpcCode(ierr)
	}
	s.met.requests.WithLabelValues(protocol, code.String()).Inc()
	if ierr != nil {
		return status.Error(code, ierr.msg)
	}
	return nil
}

// admitExport admits one gRPC export of logs or metrics for the call's
// project, as HTTP ingest does (the project's limits and a full write
// buffer, the bytes in flight, an ingest slot); release gives back what it
// took.
func (s *Server) admitExport(ctx context.Context, body []byte) (project string, release func(), ierr *ingestError) {
	project = projectFrom(ctx)
	if b := s.currentBackend(); b != nil {
		if ierr := s.admitProject(b, project); ierr != nil {
			return project, nil, ierr
		}
	}
	n := int64(len(body))
	if !s.admit(n) {
		return project, nil, overloaded()
	}
	done, ierr := s.ingestSlot(project)
	if ierr != nil {
		s.release(n)
		return project, nil, ierr
	}
	return project, func() { done(); s.release(n) }, nil
}

func newGRPCServer(s *Server) *grpc.Server {
	opts := []grpc.ServerOption{
		// Every call passes the access check (auth.go); a method without a
		// rule in grpcAccess is refused.
		grpc.UnaryInterceptor(s.unaryAuth),
		grpc.StreamInterceptor(s.streamAuth),
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(int(s.opts.MaxBodyBytes)),
		// Each stream holds up to one message in memory before admission
		// sees it; bounding streams bounds that memory per connection.
		grpc.MaxConcurrentStreams(s.opts.GRPCMaxStreams),
		// A connection that does not finish its handshake (TLS and the
		// HTTP/2 preface) in time is closed, as HTTP's read-header timeout
		// does; one with no call for the idle timeout is sent away.
		grpc.ConnectionTimeout(s.opts.ReadHeaderTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.opts.IdleTimeout}),
		grpc.InTapHandle(s.grpcTap),
	}
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls.config())))
	}
	g := grpc.NewServer(opts...)
	g.RegisterService(&traceServiceDesc, s)
	g.RegisterService(&logsServiceDesc, s)
	g.RegisterService(&metricsServiceDesc, s)
	return g
}

// grpcTap runs before a call's stream is created, so before its message is
// received. An Export call its project's limits or a full write buffer
// would refuse (admitProject) is refused here, RESOURCE_EXHAUSTED, so that
// a flood over gRPC costs no message buffers, as HTTP refuses before
// reading the body; a call that fails the access check is left to the
// interceptor, which answers it. Then it bounds the call, receiving its
// message included, by the read timeout, as HTTP bounds a request and its
// body: a client that sends its message slowly is answered
// DEADLINE_EXCEEDED then, and what it sent is let go. The deadline is the
// call's context's (the tap handle's context becomes the stream's, which
// the message reader waits on). gRPC runs it in the connection's reader
// goroutine: it takes no lock for long and does no I/O.
func (s *Server) grpcTap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if be := s.currentBackend(); be != nil && info.FullMethodName == exportMethod {
		first := func(k string) string {
			if v := info.Header.Get(k); len(v) > 0 {
				return v[0]
			}
			return ""
		}
		if project, aerr := s.authorize(accessIngest, first("authorization"), first("x-scope-orgid")); aerr == nil {
			ierr := s.admitProject(be, project)
			if ierr == nil {
				ierr = s.ingestBusy(project)
			}
			if ierr != nil {
				s.countRejected(ierr.reason)
				s.met.requests.WithLabelValues(protoOTLPGRPC, codes.ResourceExhausted.String()).Inc()
				return nil, status.Error(codes.ResourceExhausted, ierr.msg)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
	context.AfterFunc(ctx, cancel) // the call's end (its parent context) stops the timer
	return ctx, nil
}

// export handles one OTLP/gRPC Export call.
func (s *Server) export(ctx context.Context, body []byte) (*coltracepb.ExportTraceServiceResponse, error) {
	b, err := s.exportGRPC(ctx, body)
	code := codes.OK
	if err != nil {
		code = status.Code(err)
	}
	s.met.requests.WithLabelValues(protoOTLPGRPC, code.String()).Inc()
	if err != nil {
		return nil, err
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if b.Rejected > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: int64(b.Rejected), ErrorMessage: b.RejectMsg}
	}
	return resp, nil
}

func (s *Server) exportGRPC(ctx context.Context, body []byte) (ingested, error) {
	be := s.currentBackend()
	if be == nil {
		s.countRejected("not_ready")
		return ingested{}, status.Error(codes.Unavailable, "server is starting: replaying the WAL")
	}
	project := projectFrom(ctx)
	if ierr := s.admitProject(be, project); ierr != nil {
		s.countRejected(ierr.reason)
		return ingested{}, status.Error(codes.ResourceExhausted, ierr.msg)
	}
	n := int64(len(body))
	if !s.admit(n) {
		s.countRejected("overloaded")
		return ingested{}, status.Error(codes.ResourceExhausted, "server is at its in-flight limit; retry later")
	}
	defer s.release(n)
	done, ierr := s.ingestSlot(project)
	if ierr != nil {
		s.countRejected(ierr.reason)
		return ingested{}, status.Error(codes.ResourceExhausted, ierr.msg)
	}
	defer done()
	b, ierr := s.store(ctx, be, project, protoOTLPGRPC, otlp.RecordOTLPProto, body)
	if ierr != nil {
		s.countRejected(ierr.reason)
		c := codes.InvalidArgument
		switch {
		case ierr.reason == "cancelled":
			c = codes.Canceled
		case ierr.status == http.StatusServiceUnavailable:
			c = codes.Unavailable
		case ierr.status == http.StatusTooManyRequests:
			c = codes.ResourceExhausted
		}
		return ingested{}, status.Error(c, ierr.msg)
	}
	return b, nil
}
