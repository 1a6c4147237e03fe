package bench

import (
	"bytes"
	"context"
	"fmt"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/grpc/metadata"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// Encode returns the request body protocol p sends for spans (uncompressed;
// for otlp-grpc the protobuf message bytes).
func Encode(p Protocol, spans []model.Span) ([]byte, error) {
	switch p {
	case ProtoOTLPProto, ProtoOTLPGRPC:
		return otlp.EncodeProto(spans), nil
	case ProtoOTLPJSON:
		return otlp.EncodeJSON(spans), nil
	case ProtoNativeJSON:
		return otlp.EncodeNative(spans), nil
	}
	return nil, fmt.Errorf("encode: unknown protocol %q", p)
}

func preparePayload(spans []model.Span, p Protocol, gz bool) (Payload, error) {
	body, err := Encode(p, spans)
	if err != nil {
		return Payload{}, err
	}
	pl := Payload{Body: body, RawBytes: len(body), Spans: len(spans)}
	if p == ProtoOTLPGRPC {
		return pl, nil // sent as encoded; gRPC compresses per call
	}
	if gz {
		var b bytes.Buffer
		w, err := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
		if err != nil {
			return Payload{}, err
		}
		if _, err := w.Write(body); err != nil {
			return Payload{}, fmt.Errorf("gzip payload: %w", err)
		}
		if err := w.Close(); err != nil {
			return Payload{}, fmt.Errorf("gzip payload: %w", err)
		}
		pl.Body = b.Bytes()
	}
	return pl, nil
}

func metadataContext(ctx context.Context, project string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", project)
}

// tokenContext adds a bearer token to a gRPC call's metadata.
func tokenContext(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}
