package otlp

// Zipkin v2 spans (POST /api/v2/spans), JSON and protobuf ListOfSpans
// (openzipkin/zipkin-api zipkin.proto), mapped to the span model as the
// OpenTelemetry Collector's Zipkin receiver maps them
// (opentelemetry-collector-contrib pkg/translator/zipkin/zipkinv2
// to_translator.go): the local endpoint's service is the resource's
// service.name; kind CLIENT/SERVER/PRODUCER/CONSUMER, else a span.kind tag of
// "internal", else unspecified; tags become string attributes, except the
// ones that carry the OTLP status (otel.status_code,
// otel.status_description, error), the scope (otel.library.name and
// .version, otel.scope.name and .version) and the trace state
// (w3c.tracestate); the endpoints' addresses and ports become net.host.ip,
// net.host.port, net.peer.ip, net.peer.port and the remote service
// peer.service; annotations become events. Two choices of Rastro's own:
//
//   - An "error" tag marks the span as an error whatever its value; a value
//     other than "true" (Zipkin instrumentation puts the message there) is
//     also the status message.
//   - A shared SERVER span (shared: true: it reuses its client's span id)
//     gets a span id of its own, derived from the shared one, with the
//     client span as its parent: (trace id, span id) is a span's identity
//     here, and the server side must not replace the client side. The spans
//     of the server's service in the same request whose parent is the shared
//     id move under the server span (Jaeger re-points them the same way at
//     read time); children sent in a later request stay under the client.
//   - Resource tags (the resource semantic conventions: host.name,
//     service.version, telemetry.sdk.*, ...) go to the resource, as the
//     receiver moves them. Short hex ids are left-padded with zeros.

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
)

// zipkinSpan is a Zipkin v2 span, as both encodings carry it.
type zipkinSpan struct {
	TraceID, ID, ParentID []byte // 16 or 8, 8, 8 bytes (nil when absent)
	Kind                  string // CLIENT, SERVER, PRODUCER, CONSUMER or ""
	Name                  string
	Timestamp, Duration   uint64 // microseconds
	Local, Remote         *zipkinEndpoint
	Annotations           []zipkinAnnotation
	Tags                  map[string]string
	Shared                bool
}

type zipkinEndpoint struct {
	ServiceName string
	IPv4, IPv6  string
	Port        int64
}

type zipkinAnnotation struct {
	Timestamp uint64 // microseconds
	Value     string
}

// DecodeZipkinJSON decodes a JSON array of Zipkin v2 spans.
func DecodeZipkinJSON(body []byte) (Batch, error) {
	var raw []struct {
		TraceID        string            `json:"traceId"`
		ID             string            `json:"id"`
		ParentID       string            `json:"parentId"`
		Kind           string            `json:"kind"`
		Name           string            `json:"name"`
		Timestamp      json.RawMessage   `json:"timestamp"`
		Duration       json.RawMessage   `json:"duration"`
		LocalEndpoint  *jsonEndpoint     `json:"localEndpoint"`
		RemoteEndpoint *jsonEndpoint     `json:"remoteEndpoint"`
		Annotations    []jsonAnnotation  `json:"annotations"`
		Tags           map[string]string `json:"tags"`
		Shared         bool              `json:"shared"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Batch{}, &Error{Format: "zipkin-json", Reason: "want a JSON array of Zipkin v2 spans: " + err.Error()}
	}
	var b Batch
	spans := make([]zipkinSpan, 0, len(raw))
	for i, r := range raw {
		pos := func() string { return fmt.Sprintf("[%d]", i) }
		zs := zipkinSpan{Kind: r.Kind, Name: r.Name, Tags: r.Tags, Shared: r.Shared}
		var err error
		if zs.TraceID, err = hexID(r.TraceID, 16); err != nil {
			b.reject(pos, "traceId: "+err.Error())
			continue
		}
		if zs.ID, err = hexID(r.ID, 8); err != nil {
			b.reject(pos, "id: "+err.Error())
			continue
		}
		if zeroID(zs.TraceID) || zeroID(zs.ID) {
			b.reject(pos, "traceId and id must not be all zero")
			continue
		}
		if r.ParentID != "" {
			if zs.ParentID, err = hexID(r.ParentID, 8); err != nil {
				b.reject(pos, "parentId: "+err.Error())
				continue
			}
		}
		if zs.Timestamp, err = micros(r.Timestamp); err != nil {
			return Batch{}, &Error{Format: "zipkin-json", Path: pos() + ".timestamp", Reason: err.Error()}
		}
		if zs.Duration, err = micros(r.Duration); err != nil {
			return Batch{}, &Error{Format: "zipkin-json", Path: pos() + ".duration", Reason: err.Error()}
		}
		zs.Local, zs.Remote = r.LocalEndpoint.endpoint(), r.RemoteEndpoint.endpoint()
		for _, a := range r.Annotations {
			ts, err := micros(a.Timestamp)
			if err != nil {
				return Batch{}, &Error{Format: "zipkin-json", Path: pos() + ".annotations", Reason: err.Error()}
			}
			zs.Annotations = append(zs.Annotations, zipkinAnnotation{ts, a.Value})
		}
		spans = append(spans, zs)
	}
	zipkinToModel(spans, &b)
	return b, nil
}

type jsonEndpoint struct {
	ServiceName string `json:"serviceName"`
	IPv4        string `json:"ipv4"`
	IPv6        string `json:"ipv6"`
	Port        int64  `json:"port"`
}

func (e *jsonEndpoint) endpoint() *zipkinEndpoint {
	if e == nil {
		return nil
	}
	return &zipkinEndpoint{e.ServiceName, e.IPv4, e.IPv6, e.Port}
}

type jsonAnnotation struct {
	Timestamp json.RawMessage `json:"timestamp"`
	Value     string          `json:"value"`
}

// micros reads a whole number of microseconds (absent or null: 0).
func micros(n json.RawMessage) (uint64, error) {
	if len(n) == 0 || string(n) == "null" {
		return 0, nil
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a whole number of microseconds", n)
	}
	return v, nil
}

// zeroID reports whether an id is all zero (invalid, as in OTLP).
func zeroID(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// hexID decodes a hex id of at most n bytes, left-padded with zeros as
// Zipkin does for shorter ids.
func hexID(s string, n int) ([]byte, error) {
	if s == "" || len(s) > 2*n {
		return nil, fmt.Errorf("%q is not 1 to %d hex digits", s, 2*n)
	}
	padded := make([]byte, 2*n)
	for i := range padded {
		padded[i] = '0'
	}
	copy(padded[2*n-len(s):], s)
	b, err := hex.DecodeString(string(padded))
	if err != nil {
		return nil, fmt.Errorf("%q is not hex", s)
	}
	if n == 16 && len(s) <= 16 {
		return b[8:], nil // a 64-bit trace id
	}
	return b, nil
}

// DecodeZipkinProto decodes a protobuf ListOfSpans.
func DecodeZipkinProto(body []byte) (Batch, error) {
	var b Batch
	var spans []zipkinSpan
	bad := func(path, reason string) (Batch, error) {
		return Batch{}, &Error{Format: "zipkin-protobuf", Path: path, Reason: reason}
	}
	for i := 0; len(body) > 0; {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return bad("", "malformed field tag")
		}
		body = body[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, body); n < 0 {
				return bad("", "malformed field")
			}
			body = body[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(body)
		if n < 0 {
			return bad(fmt.Sprintf("spans[%d]", i), "truncated span")
		}
		body = body[n:]
		zs, err := decodeZipkinProtoSpan(msg)
		if err != nil {
			return bad(fmt.Sprintf("spans[%d]", i), err.Error())
		}
		pos := func() string { return fmt.Sprintf("spans[%d]", i) }
		switch {
		case len(zs.TraceID) != 16 && len(zs.TraceID) != 8:
			b.reject(pos, fmt.Sprintf("trace_id must be 8 or 16 bytes, got %d", len(zs.TraceID)))
		case len(zs.ID) != 8:
			b.reject(pos, fmt.Sprintf("id must be 8 bytes, got %d", len(zs.ID)))
		case zs.ParentID != nil && len(zs.ParentID) != 8:
			b.reject(pos, fmt.Sprintf("parent_id must be 8 bytes, got %d", len(zs.ParentID)))
		case zeroID(zs.TraceID) || zeroID(zs.ID):
			b.reject(pos, "trace_id and id must not be all zero")
		default:
			spans = append(spans, zs)
		}
		i++
	}
	zipkinToModel(spans, &b)
	return b, nil
}

var zipkinProtoKinds = map[uint64]string{1: "CLIENT", 2: "SERVER", 3: "PRODUCER", 4: "CONSUMER"}

func decodeZipkinProtoSpan(b []byte) (zipkinSpan, error) {
	var zs zipkinSpan
	err := zipkinFields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case 1:
			zs.TraceID = v
		case 2:
			if len(v) > 0 {
				zs.ParentID = v
			}
		case 3:
			zs.ID = v
		case 4:
			zs.Kind = zipkinProtoKinds[x]
		case 5:
			zs.Name = string(v)
		case 6:
			zs.Timestamp = x
		case 7:
			zs.Duration = x
		case 8, 9:
			ep, err := decodeZipkinEndpoint(v)
			if err != nil {
				return err
			}
			if num == 8 {
				zs.Local = ep
			} else {
				zs.Remote = ep
			}
		case 10:
			var a zipkinAnnotation
			if err := zipkinFields(v, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
				switch num {
				case 1:
					a.Timestamp = x
				case 2:
					a.Value = string(v)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("annotation: %w", err)
			}
			zs.Annotations = append(zs.Annotations, a)
		case 11:
			var k, val string
			if err := zipkinFields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				switch num {
				case 1:
					k = string(v)
				case 2:
					val = string(v)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("tag: %w", err)
			}
			if zs.Tags == nil {
				zs.Tags = map[string]string{}
			}
			zs.Tags[k] = val
		case 13:
			zs.Shared = x != 0
		}
		return nil
	})
	return zs, err
}

func decodeZipkinEndpoint(b []byte) (*zipkinEndpoint, error) {
	ep := &zipkinEndpoint{}
	err := zipkinFields(b, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
		switch num {
		case 1:
			ep.ServiceName = string(v)
		case 2, 3:
			if len(v) != 4 && len(v) != 16 {
				return fmt.Errorf("ip address of %d bytes", len(v))
			}
			if ip := net.IP(v); ip.To4() != nil {
				ep.IPv4 = ip.To4().String()
			} else {
				ep.IPv6 = ip.String()
			}
		case 4:
			ep.Port = int64(int32(x))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	return ep, nil
}

// zipkinFields calls f with every field of a message: the bytes of a
// length-delimited field, or the value of a varint or fixed one.
func zipkinFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("malformed field tag")
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d is truncated", num)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// zipkinKinds maps Zipkin's kinds.
var zipkinKinds = map[string]model.SpanKind{"CLIENT": model.KindClient, "SERVER": model.KindServer,
	"PRODUCER": model.KindProducer, "CONSUMER": model.KindConsumer}

// zipkinResourceTags are the tags that describe the process rather than
// the span: the Collector's receiver moves tags named by the resource
// semantic conventions to the resource, and so does Rastro.
var zipkinResourceTags = map[string]bool{
	"service.version": true, "service.namespace": true, "service.instance.id": true,
	"host.name": true, "host.id": true, "host.type": true, "host.arch": true,
	"os.type": true, "os.description": true, "process.pid": true, "process.executable.name": true,
	"process.command_line": true, "process.runtime.name": true, "process.runtime.version": true,
	"telemetry.sdk.name": true, "telemetry.sdk.language": true, "telemetry.sdk.version": true, "telemetry.auto.version": true,
	"container.id": true, "container.name": true, "k8s.pod.name": true, "k8s.namespace.name": true,
	"k8s.deployment.name": true, "k8s.node.name": true, "cloud.provider": true, "cloud.region": true,
	"cloud.availability_zone": true, "deployment.environment": true, "deployment.environment.name": true,
}

// sharedSpanID is the span id Rastro gives the server side of a shared span
// (Zipkin's shared flag: a SERVER span reusing its client's span id).
func sharedSpanID(client []byte) (id model.SpanID) {
	h := fnv.New64a()
	h.Write(client)
	h.Write([]byte("shared"))
	binary.BigEndian.PutUint64(id[:], h.Sum64()|1)
	return id
}

// zipkinToModel appends the spans to b in the span model, one resource per
// local service and resource tags.
func zipkinToModel(spans []zipkinSpan, b *Batch) {
	resources := map[string]*model.Resource{}
	scopes := map[[2]string]*model.Scope{}
	// The server side of a shared span gets an id of its own; the spans of
	// its service in this request whose parent is the shared id are its
	// children, and follow it (as Jaeger's span-id uniquifier re-points
	// them at read time). Children sent in a later request stay under the
	// client span.
	type sharedKey struct {
		trace   string
		id      string
		service string
	}
	renamed := map[sharedKey]model.SpanID{}
	for i := range spans {
		zs := &spans[i]
		if zs.Shared && zs.Kind == "SERVER" {
			svc := ""
			if zs.Local != nil {
				svc = zs.Local.ServiceName
			}
			renamed[sharedKey{string(zs.TraceID), string(zs.ID), svc}] = sharedSpanID(zs.ID)
		}
	}
	for i := range spans {
		zs := &spans[i]
		tags := make(map[string]string, len(zs.Tags))
		for k, v := range zs.Tags {
			tags[k] = v
		}
		service := ""
		if zs.Local != nil {
			service = zs.Local.ServiceName
		}
		var s model.Span
		copy(s.TraceID[16-len(zs.TraceID):], zs.TraceID)
		copy(s.SpanID[:], zs.ID)
		copy(s.ParentSpanID[:], zs.ParentID)
		if zs.Shared && zs.Kind == "SERVER" {
			s.ParentSpanID, s.SpanID = s.SpanID, sharedSpanID(zs.ID)
		} else if id, ok := renamed[sharedKey{string(zs.TraceID), string(zs.ParentID), service}]; ok && zs.ParentID != nil {
			s.ParentSpanID = id
		}
		if s.ParentSpanID == s.SpanID {
			s.ParentSpanID = model.SpanID{}
		}
		s.Name = zs.Name
		if k, ok := zipkinKinds[zs.Kind]; ok {
			s.Kind = k
		} else if v, ok := tags["span.kind"]; ok {
			if v == "internal" {
				s.Kind = model.KindInternal
			}
			delete(tags, "span.kind")
		}
		s.StartTimeUnixNano = zs.Timestamp * 1000
		s.EndTimeUnixNano = (zs.Timestamp + zs.Duration) * 1000
		switch tags["otel.status_code"] {
		case "ERROR", "STATUS_CODE_ERROR":
			s.StatusCode = model.StatusError
		case "OK", "STATUS_CODE_OK":
			s.StatusCode = model.StatusOK
		}
		if _, ok := tags["otel.status_code"]; ok {
			s.StatusMessage = tags["otel.status_description"]
			delete(tags, "otel.status_code")
			delete(tags, "otel.status_description")
		}
		if v, ok := tags["error"]; ok {
			s.StatusCode = model.StatusError
			if v != "true" && v != "" && s.StatusMessage == "" {
				s.StatusMessage = v
			}
			delete(tags, "error")
		}
		if v, ok := tags["w3c.tracestate"]; ok {
			s.TraceState = v
			delete(tags, "w3c.tracestate")
		}
		k := [2]string{takeTag(tags, "otel.scope.name", "otel.library.name"), takeTag(tags, "otel.scope.version", "otel.library.version")}
		if scopes[k] == nil {
			scopes[k] = &model.Scope{Name: k[0], Version: k[1]}
			model.NormalizeScope(scopes[k], &b.Problems)
		}
		s.Scope = scopes[k]
		var resAttrs []model.KeyValue
		if service != "" {
			resAttrs = append(resAttrs, model.KeyValue{Key: "service.name", Value: model.StringValue(service)})
		}
		resKey := service
		for _, k := range sortedKeys(tags) {
			if zipkinResourceTags[k] {
				resAttrs = append(resAttrs, model.KeyValue{Key: k, Value: model.StringValue(tags[k])})
				resKey += "\x00" + k + "=" + tags[k]
				delete(tags, k)
			}
		}
		res := resources[resKey]
		if res == nil {
			res = &model.Resource{Attributes: resAttrs}
			model.NormalizeResource(res, &b.Problems)
			resources[resKey] = res
		}
		s.Resource = res
		s.Attributes = make([]model.KeyValue, 0, len(tags)+4)
		for _, k := range sortedKeys(tags) {
			s.Attributes = append(s.Attributes, model.KeyValue{Key: k, Value: model.StringValue(tags[k])})
		}
		if ep := zs.Local; ep != nil {
			s.Attributes = appendEndpoint(s.Attributes, ep, "net.host.ip", "net.host.port")
		}
		if ep := zs.Remote; ep != nil {
			if ep.ServiceName != "" {
				s.Attributes = append(s.Attributes, model.KeyValue{Key: "peer.service", Value: model.StringValue(ep.ServiceName)})
			}
			s.Attributes = appendEndpoint(s.Attributes, ep, "net.peer.ip", "net.peer.port")
		}
		for _, a := range zs.Annotations {
			s.Events = append(s.Events, model.Event{TimeUnixNano: a.Timestamp * 1000, Name: a.Value})
		}
		model.Normalize(&s, &b.Problems)
		b.Spans = append(b.Spans, s)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// takeTag removes and returns the first of the keys present.
func takeTag(tags map[string]string, keys ...string) string {
	for _, k := range keys {
		if v, ok := tags[k]; ok {
			delete(tags, k)
			return v
		}
	}
	return ""
}

func appendEndpoint(kvs []model.KeyValue, ep *zipkinEndpoint, ipKey, portKey string) []model.KeyValue {
	if ep.IPv4 != "" {
		kvs = append(kvs, model.KeyValue{Key: ipKey, Value: model.StringValue(ep.IPv4)})
	} else if ep.IPv6 != "" {
		kvs = append(kvs, model.KeyValue{Key: ipKey, Value: model.StringValue(ep.IPv6)})
	}
	if ep.Port > 0 {
		kvs = append(kvs, model.KeyValue{Key: portKey, Value: model.IntValue(ep.Port)})
	}
	return kvs
}
