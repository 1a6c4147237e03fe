package otlp

import "fmt"

// RecordType says how an ingest request's body is encoded. Its values are
// stored in the WAL's record headers (docs/format/wal.md): never renumber one.
type RecordType uint8

const (
	RecordOTLPProto   RecordType = 1 // OTLP ExportTraceServiceRequest, protobuf
	RecordOTLPJSON    RecordType = 2 // OTLP ExportTraceServiceRequest, JSON
	RecordNative      RecordType = 3 // Rastro's native JSON array of spans
	RecordZipkinJSON  RecordType = 4 // Zipkin v2 JSON array of spans
	RecordZipkinProto RecordType = 5 // Zipkin v2 protobuf ListOfSpans
)

// String names the encoding.
func (t RecordType) String() string {
	switch t {
	case RecordOTLPProto:
		return "otlp-proto"
	case RecordOTLPJSON:
		return "otlp-json"
	case RecordNative:
		return "native-json"
	case RecordZipkinJSON:
		return "zipkin-json"
	case RecordZipkinProto:
		return "zipkin-proto"
	}
	return fmt.Sprintf("record-type-%d", uint8(t))
}

// DecodeOwned is Decode for a caller that hands body over: it is never
// modified again, so the protobuf decoder need not copy it (DecodeProtoOwned).
func DecodeOwned(t RecordType, body []byte) (Batch, error) {
	if t == RecordOTLPProto {
		return DecodeProtoOwned(body)
	}
	return Decode(t, body)
}

// Decode decodes a request body of the given type: WAL replay decodes the
// stored bodies with it (ingest uses DecodeOwned). The caller may reuse body
// once it returns.
func Decode(t RecordType, body []byte) (Batch, error) {
	switch t {
	case RecordOTLPProto:
		return DecodeProto(body)
	case RecordOTLPJSON:
		return DecodeJSON(body)
	case RecordNative:
		return DecodeNative(body)
	case RecordZipkinJSON:
		return DecodeZipkinJSON(body)
	case RecordZipkinProto:
		return DecodeZipkinProto(body)
	}
	return Batch{}, fmt.Errorf("unknown record type %d", t)
}
