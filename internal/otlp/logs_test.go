package otlp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rastro-dev/rastro/internal/model"
)

// logID is gen.id, except that a log record's ids are often absent.
func (g *gen) logID(n int) []byte {
	if g.r.IntN(4) == 0 {
		return nil
	}
	return g.id(n)
}

func (g *gen) logRecord() *logspb.LogRecord {
	lr := &logspb.LogRecord{
		TimeUnixNano: g.u64(), ObservedTimeUnixNano: g.u64(),
		SeverityNumber: logspb.SeverityNumber(g.r.IntN(26)), SeverityText: g.str(), EventName: g.str(),
		Attributes: g.kvs(4, 0), DroppedAttributesCount: g.u32(), Flags: g.u32(),
		TraceId: g.logID(16), SpanId: g.logID(8),
	}
	if g.r.IntN(5) > 0 {
		lr.Body = g.anyValue(0)
	}
	return lr
}

func (g *gen) logsRequest() *collogs.ExportLogsServiceRequest {
	req := &collogs.ExportLogsServiceRequest{}
	for range 1 + g.r.IntN(3) {
		rl := &logspb.ResourceLogs{SchemaUrl: g.str()}
		if g.r.IntN(5) > 0 {
			rl.Resource = &resourcepb.Resource{Attributes: g.kvs(4, 0), DroppedAttributesCount: g.u32()}
			if g.r.IntN(3) > 0 {
				rl.Resource.Attributes = append(rl.Resource.Attributes, &commonpb.KeyValue{Key: "service.name",
					Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "svc-" + g.str()}}})
			}
		}
		for range 1 + g.r.IntN(3) {
			sl := &logspb.ScopeLogs{SchemaUrl: g.str()}
			if g.r.IntN(4) > 0 {
				sl.Scope = &commonpb.InstrumentationScope{Name: g.str(), Version: g.str(), Attributes: g.kvs(2, 0), DroppedAttributesCount: g.u32()}
			}
			for range g.r.IntN(5) {
				sl.LogRecords = append(sl.LogRecords, g.logRecord())
			}
			rl.ScopeLogs = append(rl.ScopeLogs, sl)
		}
		req.ResourceLogs = append(req.ResourceLogs, rl)
	}
	return req
}

// expectedLogs converts an official request to the records the decoders must
// return (normalised, records with malformed ids dropped) and the rejected count.
func expectedLogs(req *collogs.ExportLogsServiceRequest) ([]model.LogRecord, int) {
	var out []model.LogRecord
	rejected := 0
	var p model.Problems
	for _, rl := range req.ResourceLogs {
		res := &model.Resource{SchemaURL: rl.SchemaUrl}
		if rl.Resource != nil {
			res.Attributes = convKVs(rl.Resource.Attributes)
			res.DroppedAttributesCount = rl.Resource.DroppedAttributesCount
		}
		model.NormalizeResource(res, &p)
		for _, sl := range rl.ScopeLogs {
			sc := &model.Scope{SchemaURL: sl.SchemaUrl}
			if sl.Scope != nil {
				sc.Name, sc.Version = sl.Scope.Name, sl.Scope.Version
				sc.Attributes = convKVs(sl.Scope.Attributes)
				sc.DroppedAttributesCount = sl.Scope.DroppedAttributesCount
			}
			model.NormalizeScope(sc, &p)
			for _, lr := range sl.LogRecords {
				if (len(lr.TraceId) != 0 && len(lr.TraceId) != 16) || (len(lr.SpanId) != 0 && len(lr.SpanId) != 8) {
					rejected++
					continue
				}
				rec := model.LogRecord{
					TimeUnixNano: lr.TimeUnixNano, ObservedTimeUnixNano: lr.ObservedTimeUnixNano,
					SeverityNumber: model.SeverityNumber(lr.SeverityNumber), SeverityText: lr.SeverityText,
					EventName: lr.EventName, Body: convValue(lr.Body), Attributes: convKVs(lr.Attributes),
					DroppedAttributesCount: lr.DroppedAttributesCount, Flags: lr.Flags, Resource: res, Scope: sc,
				}
				copy(rec.TraceID[:], lr.TraceId)
				copy(rec.SpanID[:], lr.SpanId)
				model.NormalizeLog(&rec, &p)
				out = append(out, rec)
			}
		}
	}
	return out, rejected
}

func diffLogs(got, want []model.LogRecord) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		type f struct {
			name      string
			got, want any
		}
		for _, x := range []f{
			{"TimeUnixNano", g.TimeUnixNano, w.TimeUnixNano}, {"ObservedTimeUnixNano", g.ObservedTimeUnixNano, w.ObservedTimeUnixNano},
			{"SeverityNumber", g.SeverityNumber, w.SeverityNumber}, {"SeverityText", g.SeverityText, w.SeverityText},
			{"EventName", g.EventName, w.EventName}, {"DroppedAttributesCount", g.DroppedAttributesCount, w.DroppedAttributesCount},
			{"Flags", g.Flags, w.Flags}, {"TraceID", g.TraceID, w.TraceID}, {"SpanID", g.SpanID, w.SpanID},
			{"Service", g.Service, w.Service},
		} {
			if x.got != x.want {
				return fmt.Sprintf("record %d: %s = %v, want %v", i, x.name, x.got, x.want)
			}
		}
		if !model.EqualKeyValues([]model.KeyValue{{Value: g.Body}}, []model.KeyValue{{Value: w.Body}}) {
			return fmt.Sprintf("record %d: Body = %v, want %v", i, g.Body, w.Body)
		}
		if !model.EqualKeyValues(g.Attributes, w.Attributes) {
			return fmt.Sprintf("record %d: Attributes = %v, want %v", i, g.Attributes, w.Attributes)
		}
		gr, wr := g.Resource, w.Resource
		if gr.SchemaURL != wr.SchemaURL || gr.DroppedAttributesCount != wr.DroppedAttributesCount || !model.EqualKeyValues(gr.Attributes, wr.Attributes) {
			return fmt.Sprintf("record %d: Resource = %+v, want %+v", i, *gr, *wr)
		}
		gs, ws := g.Scope, w.Scope
		if gs.Name != ws.Name || gs.Version != ws.Version || gs.SchemaURL != ws.SchemaURL ||
			gs.DroppedAttributesCount != ws.DroppedAttributesCount || !model.EqualKeyValues(gs.Attributes, ws.Attributes) {
			return fmt.Sprintf("record %d: Scope = %+v, want %+v", i, *gs, *ws)
		}
	}
	return ""
}

// Both decoders agree with the official protobuf types on random requests
// that use every field and every AnyValue type, including malformed ids.
func TestDecodeLogsDifferential(t *testing.T) {
	g := newGen(11)
	g.badIDs = true
	for iter := range 1500 {
		req := g.logsRequest()
		want, rejected := expectedLogs(req)

		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeLogsProto(b)
		if err != nil {
			t.Fatalf("iter %d: DecodeLogsProto: %v", iter, err)
		}
		if d := diffLogs(got.Records, want); d != "" {
			t.Fatalf("iter %d: protobuf: %s", iter, d)
		}
		if got.Rejected != rejected || (rejected > 0 && !strings.HasPrefix(got.RejectMsg, "resource_logs[")) {
			t.Fatalf("iter %d: protobuf: Rejected = %d (%q), want %d naming the position", iter, got.Rejected, got.RejectMsg, rejected)
		}

		pj, err := protojson.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		in := hexIDs(t, pj)
		if iter%2 == 1 { // enum numbers instead of names, numbers instead of strings
			in = rewriteJSON(t, in, func(obj map[string]any) {
				if s, ok := obj["severityNumber"].(string); ok {
					for i, n := range severityNumberNames {
						if n == s {
							obj["severityNumber"] = i
						}
					}
				}
				for _, k := range []string{"timeUnixNano", "observedTimeUnixNano"} {
					if s, ok := obj[k].(string); ok {
						obj[k] = json.Number(s)
					}
				}
			})
		}
		gotJ, err := DecodeLogsJSON(in)
		if err != nil {
			t.Fatalf("iter %d: DecodeLogsJSON: %v\n%.2000s", iter, err, in)
		}
		if d := diffLogs(gotJ.Records, want); d != "" {
			t.Fatalf("iter %d: otlp-json: %s\n%.2000s", iter, d, in)
		}
		if gotJ.Rejected != rejected {
			t.Fatalf("iter %d: otlp-json: Rejected = %d (%q), want %d", iter, gotJ.Rejected, gotJ.RejectMsg, rejected)
		}
	}
}

func TestDecodeLogsErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     string // substring of the error
	}{
		{"json body not an AnyValue", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":"plain"}]}]}]}`,
			"resourceLogs[0].scopeLogs[0].logRecords[0].body"},
		{"json bad severity name", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"LOUD"}]}]}]}`,
			`severityNumber: unknown enum value "LOUD"`},
		{"json time not a number", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"soon"}]}]}]}`,
			"logRecords[0].timeUnixNano"},
		{"json trailing garbage", `{"resourceLogs":[]} x`, "otlp-json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeLogsJSON([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeLogsJSON(%s) = %v, want an error containing %q", c.in, err, c.want)
			}
		})
	}
	// A record whose body's string claims more bytes than it has: the error
	// names the record, the field and the offset.
	body := protowire.AppendTag(nil, 1, protowire.BytesType)
	body = append(protowire.AppendVarint(body, 50), "short"...)
	rec := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), body)
	sl := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{})
	sl = append(sl, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), rec)...)
	rl := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), sl)
	b := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rl)
	_, err := DecodeLogsProto(b)
	var e *Error
	if !asError(err, &e) || e.Format != "protobuf" || e.Path != "resource_logs[0].scope_logs[0].log_records[1].body.string_value" {
		t.Fatalf("malformed body: error %v does not name the record's field", err)
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

func TestDecodeLogsIDsOptionalAndRejected(t *testing.T) {
	in := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}}]},
	  "scopeLogs":[{"logRecords":[
	    {"body":{"stringValue":"no ids"}},
	    {"body":{"stringValue":"linked"},"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b174"},
	    {"body":{"stringValue":"short id"},"traceId":"5b8efff7"},
	    {"body":{"stringValue":"not hex"},"spanId":"zzzzzzzzzzzzzzzz"}]}]}]}`
	b, err := DecodeLogsJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Records) != 2 || b.Rejected != 2 {
		t.Fatalf("got %d records and %d rejected, want 2 and 2", len(b.Records), b.Rejected)
	}
	if want := "resourceLogs[0].scopeLogs[0].logRecords[2]: trace_id must be empty or 16 bytes, got 4"; b.RejectMsg != want {
		t.Fatalf("RejectMsg = %q, want %q", b.RejectMsg, want)
	}
	if !b.Records[0].TraceID.IsZero() || b.Records[1].TraceID.String() != "5b8efff798038103d269b633813fc60c" ||
		b.Records[1].SpanID.String() != "eee19b7ec3c1b174" || b.Records[1].Service != "api" {
		t.Fatalf("records decoded wrongly: %+v", b.Records)
	}
}

func TestSeverityNumberString(t *testing.T) {
	for n, want := range map[model.SeverityNumber]string{0: "UNSPECIFIED", 1: "TRACE", 4: "TRACE4", 9: "INFO", 10: "INFO2",
		13: "WARN", 17: "ERROR", 20: "ERROR4", 21: "FATAL", 24: "FATAL4", 25: "25", -1: "-1"} {
		if got := n.String(); got != want {
			t.Errorf("SeverityNumber(%d) = %q, want %q", n, got, want)
		}
		// The JSON enum names are the upstream ones.
		if n >= 0 && n <= 24 {
			if got, want := severityNumberNames[n], logspb.SeverityNumber(n).String(); got != want {
				t.Errorf("severityNumberNames[%d] = %q, upstream %q", n, got, want)
			}
		}
	}
}

func logsRequestDepth(req *collogs.ExportLogsServiceRequest) int {
	deepest := 0
	kvs := func(l []*commonpb.KeyValue) {
		for _, kv := range l {
			deepest = max(deepest, anyDepth(kv.GetValue()))
		}
	}
	for _, rl := range req.GetResourceLogs() {
		kvs(rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			kvs(sl.GetScope().GetAttributes())
			for _, lr := range sl.GetLogRecords() {
				kvs(lr.GetAttributes())
				deepest = max(deepest, anyDepth(lr.GetBody()))
			}
		}
	}
	return deepest
}

// FuzzDecodeLogsProto: DecodeLogsProto agrees with proto.Unmarshal on every
// input that decoder accepts, and never accepts what it refuses (except
// invalid UTF-8, which we repair, and the value-depth limit, which we add).
func FuzzDecodeLogsProto(f *testing.F) {
	g := newGen(21)
	g.badIDs = true
	for range 8 {
		b, err := proto.Marshal(g.logsRequest())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeLogsProto(data)
		var req collogs.ExportLogsServiceRequest
		officialErr := proto.Unmarshal(data, &req)
		if officialErr == nil && logsRequestDepth(&req) > maxValueDepth {
			var de *Error
			if !asError(err, &de) || de.Reason != valueDepthReason {
				t.Fatalf("value nested %d levels: DecodeLogsProto returned %v, want a depth error", logsRequestDepth(&req), err)
			}
			return
		}
		if officialErr == nil {
			if err != nil {
				t.Fatalf("proto.Unmarshal accepts, DecodeLogsProto fails: %v", err)
			}
			want, rejected := expectedLogs(&req)
			if d := diffLogs(got.Records, want); d != "" {
				t.Fatalf("disagrees with proto.Unmarshal: %s", d)
			}
			if got.Rejected != rejected {
				t.Fatalf("Rejected = %d, proto.Unmarshal-based count %d", got.Rejected, rejected)
			}
		} else if err == nil && !strings.Contains(officialErr.Error(), "UTF-8") && !strings.Contains(officialErr.Error(), "recursion") {
			t.Fatalf("DecodeLogsProto accepts input proto.Unmarshal rejects: %v", officialErr)
		}
	})
}

// FuzzDecodeLogsJSON: no input crashes the decoder; an error names a format
// and an offset inside the input; accepted records are normalised.
func FuzzDecodeLogsJSON(f *testing.F) {
	g := newGen(22)
	for range 8 {
		pj, err := protojson.Marshal(g.logsRequest())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(hexIDs(f, pj))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeLogsJSON(data)
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Format != "otlp-json" || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		for i := range got.Records {
			r := &got.Records[i]
			if r.Service == "" || r.Resource == nil || r.Scope == nil {
				t.Fatalf("record %d not normalised: %+v", i, r)
			}
			if !validKVs(r.Attributes) || !validValue(r.Body) || !utf8.ValidString(r.SeverityText) || !utf8.ValidString(r.EventName) {
				t.Fatalf("record %d holds invalid UTF-8", i)
			}
		}
	})
}

// EncodeLogsProto and the payload, resource and scope helpers round-trip
// every field through the decoders.
func TestEncodeLogsProtoRoundTrip(t *testing.T) {
	g := newGen(12)
	for iter := range 500 {
		b, err := proto.Marshal(g.logsRequest())
		if err != nil {
			t.Fatal(err)
		}
		first, err := DecodeLogsProto(b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeLogsProto(EncodeLogsProto(first.Records))
		if err != nil {
			t.Fatalf("iter %d: decoding EncodeLogsProto's output: %v", iter, err)
		}
		if d := diffLogs(again.Records, first.Records); d != "" {
			t.Fatalf("iter %d: EncodeLogsProto round trip: %s", iter, d)
		}
		for i := range first.Records {
			r := &first.Records[i]
			got := model.LogRecord{Resource: r.Resource, Scope: r.Scope, Service: r.Service, TimeUnixNano: r.TimeUnixNano,
				ObservedTimeUnixNano: r.ObservedTimeUnixNano, SeverityNumber: r.SeverityNumber, TraceID: r.TraceID, SpanID: r.SpanID}
			if err := DecodeLogPayloadProto(AppendLogPayloadProto(nil, r), &got); err != nil {
				t.Fatal(err)
			}
			res, err := DecodeResourceProto(AppendResourceProto(nil, r.Resource))
			if err != nil {
				t.Fatal(err)
			}
			sc, err := DecodeScopeProto(AppendScopeProto(nil, r.Scope))
			if err != nil {
				t.Fatal(err)
			}
			res.SchemaURL, sc.SchemaURL = r.Resource.SchemaURL, r.Scope.SchemaURL
			got.Resource, got.Scope = res, sc
			if d := diffLogs([]model.LogRecord{got}, first.Records[i:i+1]); d != "" {
				t.Fatalf("iter %d: payload round trip: %s", iter, d)
			}
		}
	}
}

func logsJSONArray(recs []model.LogRecord) []byte {
	b := []byte{'['}
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendLogJSON(b, &recs[i])
	}
	return append(b, ']')
}

// The native log shape is the API's: records read from /api/v1/logs decode
// back to the same records (a fixed point after one round, which settles
// what the shape cannot say, such as a resource without service.name).
func TestNativeLogsRoundTrip(t *testing.T) {
	g := newGen(13)
	for iter := range 300 {
		b, err := proto.Marshal(g.logsRequest())
		if err != nil {
			t.Fatal(err)
		}
		first, err := DecodeLogsProto(b)
		if err != nil {
			t.Fatal(err)
		}
		j1 := logsJSONArray(first.Records)
		second, err := DecodeNativeLogs(j1)
		if err != nil || len(second.Records) != len(first.Records) {
			t.Fatalf("iter %d: DecodeNativeLogs: %d records, %v\n%.2000s", iter, len(second.Records), err, j1)
		}
		j2 := logsJSONArray(second.Records)
		third, err := DecodeNativeLogs(j2)
		if err != nil {
			t.Fatal(err)
		}
		if j3 := logsJSONArray(third.Records); !bytes.Equal(j2, j3) {
			t.Fatalf("iter %d: not a fixed point:\n%s\n%s", iter, j2, j3)
		}
		for i := range first.Records {
			a, b := &first.Records[i], &second.Records[i]
			if a.TimeUnixNano != b.TimeUnixNano || a.ObservedTimeUnixNano != b.ObservedTimeUnixNano || a.SeverityNumber != b.SeverityNumber ||
				a.TraceID != b.TraceID || a.SpanID != b.SpanID || a.Service != b.Service || a.SeverityText != b.SeverityText {
				t.Fatalf("iter %d record %d: %+v came back as %+v", iter, i, a, b)
			}
		}
	}
	// A hand-written body: names, severities by word, a structured body.
	in := `[{"time":"2026-12-02T10:00:00Z","severity":"warning","service":"checkout","body":{"msg":"slow","ms":950},
	  "attributes":{"order.id":42},"trace_id":"5b8efff798038103d269b633813fc60c"},
	 {"time_unix_nano":5,"severity":"Info2","body":"plain"},
	 {"span_id":"12","body":"bad id"}]`
	got, err := DecodeNativeLogs([]byte(in))
	if err != nil || len(got.Records) != 2 || got.Rejected != 1 || got.RejectMsg != "[2]: span_id must be empty or 8 bytes, got 1" {
		t.Fatalf("DecodeNativeLogs: %+v, %v", got, err)
	}
	r := got.Records[0]
	if r.Service != "checkout" || r.SeverityNumber != 13 || r.Body.Type != model.ValueKvList || r.TimeUnixNano != 1796205600000000000 ||
		r.TraceID.String() != "5b8efff798038103d269b633813fc60c" || got.Records[1].SeverityNumber != 10 {
		t.Fatalf("decoded %+v", got.Records)
	}
	for _, bad := range []string{`{}`, `[{"severity":"loud"}]`, `[{"time":"yesterday"}]`, `[1]`} {
		if _, err := DecodeNativeLogs([]byte(bad)); err == nil {
			t.Errorf("DecodeNativeLogs(%s) accepted", bad)
		}
	}
}

// FuzzDecodeNativeLogs: no input crashes the native log decoder; errors
// name a format and an offset inside the input; accepted records are
// normalised and encode back to a body that decodes.
func FuzzDecodeNativeLogs(f *testing.F) {
	g := newGen(23)
	for range 4 {
		b, _ := proto.Marshal(g.logsRequest())
		first, err := DecodeLogsProto(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(logsJSONArray(first.Records))
	}
	f.Add([]byte(`[{"time":"2026-12-02T10:00:00Z","severity":"warning","service":"s","body":{"a":[1,2.5,"x",null]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeNativeLogs(data)
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Format != "native-json" || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		for i := range got.Records {
			if r := &got.Records[i]; r.Service == "" || !validValue(r.Body) || !validKVs(r.Attributes) {
				t.Fatalf("record %d not normalised: %+v", i, r)
			}
		}
		if _, err := DecodeNativeLogs(logsJSONArray(got.Records)); err != nil {
			t.Fatalf("the records' own JSON does not decode: %v", err)
		}
	})
}

// A request that repeats a resource (or a scope) in several ResourceLogs,
// as an exporter that does not group its records does: the records of equal
// resources share one decoded value, a resource that differs only in its
// schema URL is its own, and what normalising repairs is counted once per
// ResourceLogs and ScopeLogs, as if each were decoded on its own.
func TestDecodeLogsProtoSharesRepeatedResources(t *testing.T) {
	res := func(svc, host string) *resourcepb.Resource {
		return &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strKV("service.name", svc), strKV("host.name", host)}}
	}
	scope := &commonpb.InstrumentationScope{Name: "app.logger", Version: "BADUTF"}
	rl := func(r *resourcepb.Resource, url, body string) *logspb.ResourceLogs {
		return &logspb.ResourceLogs{Resource: r, SchemaUrl: url, ScopeLogs: []*logspb.ScopeLogs{{Scope: scope,
			LogRecords: []*logspb.LogRecord{{TimeUnixNano: 1, Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: body}}}}}}}
	}
	req := &collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		rl(res("api", "BADUTF"), "", "zero"), rl(res("db", "h1"), "", "one"), rl(res("api", "BADUTF"), "", "two"),
		rl(res("api", "BADUTF"), "https://opentelemetry.io/schemas/1.26.0", "three"), rl(res("api", "BADUTF"), "", "four"),
	}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// Invalid UTF-8 (which proto.Marshal refuses to write), same length.
	b = bytes.ReplaceAll(b, []byte("BADUTF"), []byte("bad\xff\xfe!"))
	got, err := DecodeLogsProto(b)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Records
	if len(r) != 5 {
		t.Fatalf("%d records, want 5", len(r))
	}
	if r[0].Resource != r[2].Resource || r[0].Resource != r[4].Resource {
		t.Fatal("records of equal resources do not share one")
	}
	if r[1].Resource == r[0].Resource || r[3].Resource == r[0].Resource || r[3].Resource.SchemaURL != "https://opentelemetry.io/schemas/1.26.0" || r[0].Resource.SchemaURL != "" {
		t.Fatalf("different resources shared: %+v %+v", r[1].Resource, r[3].Resource)
	}
	if r[0].Scope != r[1].Scope || r[0].Scope.Version != "bad\uFFFD!" {
		t.Fatalf("scopes: %p %p %q", r[0].Scope, r[1].Scope, r[0].Scope.Version)
	}
	for i, want := range []string{"api", "db", "api", "api", "api"} {
		if r[i].Service != want || r[i].Body.Str != []string{"zero", "one", "two", "three", "four"}[i] {
			t.Fatalf("record %d: service %q body %q", i, r[i].Service, r[i].Body.Str)
		}
	}
	if h, _ := model.Lookup(r[2].Resource.Attributes, "host.name"); h.Str != "bad\uFFFD!" {
		t.Fatalf("shared resource not normalised: host.name %q", h.Str)
	}
	// Each ResourceLogs decoded alone: the repairs add up to the same count.
	var want model.Problems
	for _, one := range req.ResourceLogs {
		ob, err := proto.Marshal(&collogs.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{one}})
		if err != nil {
			t.Fatal(err)
		}
		lb, err := DecodeLogsProto(bytes.ReplaceAll(ob, []byte("BADUTF"), []byte("bad\xff\xfe!")))
		if err != nil {
			t.Fatal(err)
		}
		want.Add(lb.Problems)
	}
	if got.Problems != want || want.InvalidUTF8 != 9 {
		t.Fatalf("Problems = %+v, want %+v (4 resources and 5 scopes repaired)", got.Problems, want)
	}
}

// Random requests in which later ResourceLogs and ScopeLogs repeat earlier
// resources and scopes (the decoder shares those) decode as the official
// types say, each record with its own ResourceLogs' schema URL.
func TestDecodeLogsProtoRepeatedResourcesDifferential(t *testing.T) {
	g := newGen(31)
	for iter := range 300 {
		req := g.logsRequest()
		rls := req.ResourceLogs
		for i := 1; i < len(rls); i++ {
			if i%2 == 1 {
				rls[i].Resource = rls[0].Resource
			}
			if i%3 == 0 {
				rls[i].SchemaUrl = rls[0].SchemaUrl
			}
			for j, sl := range rls[i].ScopeLogs {
				if len(rls[0].ScopeLogs) > 0 && j%2 == 0 {
					sl.Scope, sl.SchemaUrl = rls[0].ScopeLogs[0].Scope, rls[0].ScopeLogs[0].SchemaUrl
				}
			}
		}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeLogsProto(b)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		want, rejected := expectedLogs(req)
		if d := diffLogs(got.Records, want); d != "" || got.Rejected != rejected {
			t.Fatalf("iter %d: %s (rejected %d, want %d)", iter, d, got.Rejected, rejected)
		}
	}
}
