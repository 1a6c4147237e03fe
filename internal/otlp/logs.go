package otlp

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rastro-dev/rastro/internal/model"
)

// LogBatch is the result of decoding one logs export request.
type LogBatch struct {
	// Records holds the valid, normalised log records in request order.
	Records []model.LogRecord
	// Rejected counts records dropped because their ids were malformed.
	Rejected int
	// RejectMsg is the first rejection reason, naming the record's position, e.g.
	// "resource_logs[0].scope_logs[0].log_records[3]: trace_id must be empty or 16 bytes, got 15".
	RejectMsg string
	// Problems counts what NormalizeLog, NormalizeResource and NormalizeScope repaired.
	Problems model.Problems
}

func (b *LogBatch) reject(pos func() string, reason string) {
	if b.Rejected == 0 {
		b.RejectMsg = pos() + ": " + reason
	}
	b.Rejected++
}

// checkLogIDs reports why a record's ids make it unstorable, or "" when they
// are fine. Unlike a span's, a log record's ids are optional: absent (or all
// zeros) means the record belongs to no span.
func checkLogIDs(traceLen, spanLen int) string {
	if traceLen != 0 && traceLen != 16 {
		return "trace_id must be empty or 16 bytes, got " + strconv.Itoa(traceLen)
	}
	if spanLen != 0 && spanLen != 8 {
		return "span_id must be empty or 8 bytes, got " + strconv.Itoa(spanLen)
	}
	return ""
}

func logPos(rs, ss, lr int) string {
	return "resource_logs[" + strconv.Itoa(rs) + "].scope_logs[" + strconv.Itoa(ss) + "].log_records[" + strconv.Itoa(lr) + "]"
}

// DecodeLogsProto decodes an ExportLogsServiceRequest in protobuf wire format
// into model log records, with the same rules as DecodeProto: one private copy
// of b that strings alias, protobuf-go's merge semantics (unknown fields
// skipped, the last scalar wins, repeated message fields merge), invalid UTF-8
// repaired and counted. Records whose ids have the wrong length are counted in
// LogBatch.Rejected and left out; other malformed input returns an *Error
// naming the field path and byte offset.
func DecodeLogsProto(b []byte) (LogBatch, error) {
	d := logsProtoDecoder{protoDecoder: protoDecoder{buf: append([]byte(nil), b...)}}
	recs, attrs := countLogs(d.buf)
	d.logs.Records = make([]model.LogRecord, 0, recs)
	d.attrs = make([]model.KeyValue, 0, attrs)
	if err := d.request(); err != nil {
		return LogBatch{}, finish(err, "protobuf")
	}
	return d.logs, nil
}

// countLogs counts a logs request's records and their attributes (a
// malformed request is counted up to where it breaks), so that the decoder
// allocates the records and their attributes once instead of regrowing them.
func countLogs(b []byte) (recs, attrs int) {
	eachField(b, func(num protowire.Number, rl []byte) {
		if num != 1 {
			return
		}
		eachField(rl, func(num protowire.Number, sl []byte) {
			if num != 2 {
				return
			}
			eachField(sl, func(num protowire.Number, lr []byte) {
				if num != 2 {
					return
				}
				recs++
				eachField(lr, func(num protowire.Number, _ []byte) {
					if num == 6 {
						attrs++
					}
				})
			})
		})
	})
	return recs, attrs
}

type logsProtoDecoder struct {
	protoDecoder // for resource, scope, keyValue and anyValue
	logs         LogBatch

	// A request may repeat a resource or a scope in many ResourceLogs and
	// ScopeLogs (an exporter that does not group its records by resource):
	// those whose bytes (sharedKey) are the same as an earlier one's share
	// its decoded, normalised value instead of decoding it again, so that
	// the records of one resource share one pointer. Keyed by sharedKey.
	sharedRes        map[string]sharedResource
	sharedScopes     map[string]sharedScope
	resKey, scopeKey []byte
}

type sharedResource struct {
	res *model.Resource
	bad bool // NormalizeResource repaired it (counted once per ResourceLogs)
}

type sharedScope struct {
	sc  *model.Scope
	bad bool
}

// sharedKey is what decides the value of a ResourceLogs' resource (or a
// ScopeLogs' scope) whose message b is: the bytes of its one msgNum field
// and of its last urlNum field (the schema URL), appended to key[:0]. ok is
// false when the message field appears more than once (protobuf merges
// them) or b does not parse (the decoder then reports where).
func sharedKey(key, b []byte, msgNum, urlNum protowire.Number) (out []byte, ok bool) {
	var msg, url []byte
	nMsg := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return key, false
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == msgNum || num == urlNum) {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return key, false
			}
			if num == msgNum {
				msg = v
				nMsg++
			} else {
				url = v
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return key, false
		}
		b = b[m:]
	}
	if nMsg > 1 {
		return key, false
	}
	key = protowire.AppendVarint(key[:0], uint64(len(msg)))
	key = append(key, msg...)
	return append(key, url...), true
}

func (d *logsProtoDecoder) request() error {
	return eachResource(d.buf, "resource_logs", d.resourceLogs)
}

func (d *logsProtoDecoder) resourceLogs(b []byte, base, rsIdx int) error {
	var keyed bool
	d.resKey, keyed = sharedKey(d.resKey, b, 1, 3)
	shared, isShared := d.sharedRes[string(d.resKey)]
	isShared = isShared && keyed
	res, url := shared.res, new(string)
	if !isShared {
		res = &model.Resource{}
		url = &res.SchemaURL
	}
	first := len(d.logs.Records)
	d.scopesOfRes = d.scopesOfRes[:0]
	err := walkGroup(b, base,
		"resource", func(v []byte, vb int) error {
			if isShared {
				return nil
			}
			return d.resource(v, vb, res)
		},
		"scope_logs", func(v []byte, vb, ssIdx int) error { return d.scopeLogs(v, vb, res, rsIdx, ssIdx) },
		url)
	if err != nil {
		return err
	}
	if isShared {
		if shared.bad {
			d.logs.Problems.InvalidUTF8++
		}
		finishLogResource(&d.logs, nil, d.scopesOfRes, first)
		return nil
	}
	bad := d.logs.Problems.InvalidUTF8
	model.NormalizeResource(res, &d.logs.Problems)
	if keyed {
		if d.sharedRes == nil {
			d.sharedRes = map[string]sharedResource{}
		}
		d.sharedRes[string(d.resKey)] = sharedResource{res: res, bad: d.logs.Problems.InvalidUTF8 > bad}
	}
	finishLogResource(&d.logs, nil, d.scopesOfRes, first)
	return nil
}

// finishLogResource normalises a decoded ResourceLogs: the resource (nil:
// the caller has), its scopes, then its records (which read service.name
// from the resource, which may follow them on the wire).
func finishLogResource(out *LogBatch, res *model.Resource, scopes []*model.Scope, first int) {
	if res != nil {
		model.NormalizeResource(res, &out.Problems)
	}
	for _, sc := range scopes {
		model.NormalizeScope(sc, &out.Problems)
	}
	for i := first; i < len(out.Records); i++ {
		model.NormalizeLog(&out.Records[i], &out.Problems)
	}
}

func (d *logsProtoDecoder) scopeLogs(b []byte, base int, res *model.Resource, rsIdx, ssIdx int) error {
	var keyed bool
	d.scopeKey, keyed = sharedKey(d.scopeKey, b, 1, 3)
	shared, isShared := d.sharedScopes[string(d.scopeKey)]
	isShared = isShared && keyed
	sc, url := shared.sc, new(string)
	if !isShared {
		sc = &model.Scope{}
		url = &sc.SchemaURL
	}
	err := walkGroup(b, base,
		"scope", func(v []byte, vb int) error {
			if isShared {
				return nil
			}
			return d.scope(v, vb, sc)
		},
		"log_records", func(v []byte, vb, lrIdx int) error { return d.logRecord(v, vb, res, sc, rsIdx, ssIdx, lrIdx) },
		url)
	if err != nil {
		return err
	}
	// The scope is normalised here, not with its resource, so that a later
	// ScopeLogs can share it.
	if isShared {
		if shared.bad {
			d.logs.Problems.InvalidUTF8++
		}
		return nil
	}
	bad := d.logs.Problems.InvalidUTF8
	model.NormalizeScope(sc, &d.logs.Problems)
	if keyed {
		if d.sharedScopes == nil {
			d.sharedScopes = map[string]sharedScope{}
		}
		d.sharedScopes[string(d.scopeKey)] = sharedScope{sc: sc, bad: d.logs.Problems.InvalidUTF8 > bad}
	}
	return nil
}

// logRecord decodes one LogRecord and appends it unless its ids are malformed.
func (d *logsProtoDecoder) logRecord(b []byte, base int, res *model.Resource, sc *model.Scope, rsIdx, ssIdx, lrIdx int) error {
	rec := model.LogRecord{Resource: res, Scope: sc}
	// The attributes go to the request's slab d.attrs (the record takes a
	// capped sub-slice), as a span's do: a few allocations a request, not
	// one or more a record.
	attr0 := len(d.attrs)
	traceLen, spanLen := 0, 0
	r := newReader(b, base)
	for len(r.b) > 0 {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			if rec.TimeUnixNano, err = r.fixed64("time_unix_nano"); err != nil {
				return err
			}
			continue
		case num == 11 && typ == protowire.Fixed64Type:
			if rec.ObservedTimeUnixNano, err = r.fixed64("observed_time_unix_nano"); err != nil {
				return err
			}
			continue
		case num == 2 && typ == protowire.VarintType:
			x, err := r.varint("severity_number")
			if err != nil {
				return err
			}
			rec.SeverityNumber = model.SeverityNumber(int32(x))
			continue
		case num == 3 && typ == protowire.BytesType:
			if rec.SeverityText, err = r.str("severity_text"); err != nil {
				return err
			}
			continue
		case num == 5 && typ == protowire.BytesType:
			v, vb, err := r.bytes("body")
			if err != nil {
				return err
			}
			if err := d.anyValue(v, vb, &rec.Body, 0); err != nil {
				return wrap(err, "body")
			}
			continue
		case num == 6 && typ == protowire.BytesType:
			if err := d.appendKeyValue(&r, "attributes", &d.attrs, attr0, 0); err != nil {
				return err
			}
			continue
		case num == 7 && typ == protowire.VarintType:
			if rec.DroppedAttributesCount, err = r.u32("dropped_attributes_count"); err != nil {
				return err
			}
			continue
		case num == 8 && typ == protowire.Fixed32Type:
			if rec.Flags, err = r.fixed32("flags"); err != nil {
				return err
			}
			continue
		case num == 9 && typ == protowire.BytesType:
			v, _, err := r.bytes("trace_id")
			if err != nil {
				return err
			}
			traceLen = setTraceID(&rec.TraceID, v)
			continue
		case num == 10 && typ == protowire.BytesType:
			v, _, err := r.bytes("span_id")
			if err != nil {
				return err
			}
			spanLen = setSpanID(&rec.SpanID, v)
			continue
		case num == 12 && typ == protowire.BytesType:
			if rec.EventName, err = r.str("event_name"); err != nil {
				return err
			}
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return err
		}
	}
	if reason := checkLogIDs(traceLen, spanLen); reason != "" {
		d.attrs = d.attrs[:attr0]
		d.logs.reject(func() string { return logPos(rsIdx, ssIdx, lrIdx) }, reason)
		return nil
	}
	if n := len(d.attrs); n > attr0 {
		rec.Attributes = d.attrs[attr0:n:n]
	}
	d.logs.Records = append(d.logs.Records, rec)
	return nil
}

// severityNumberNames are the SeverityNumber enum's names, indexed by value,
// for OTLP/JSON senders that write enums by name.
var severityNumberNames = func() []string {
	names := []string{"SEVERITY_NUMBER_UNSPECIFIED"}
	for n := model.SeverityNumber(1); n <= 24; n++ {
		names = append(names, "SEVERITY_NUMBER_"+n.String())
	}
	return names
}()

// DecodeLogsJSON decodes an ExportLogsServiceRequest in OTLP/JSON with the
// same mapping rules as DecodeJSON (lowerCamelCase or snake_case keys, hex
// ids, 64-bit integers as numbers or strings, enums as numbers or names,
// unknown keys ignored, null meaning "not set").
func DecodeLogsJSON(b []byte) (LogBatch, error) {
	d := logsJSONDecoder{jsonDecoder: jsonDecoder{r: newJReader(b)}}
	if err := d.request(); err != nil {
		return LogBatch{}, finish(err, "otlp-json")
	}
	return d.logs, nil
}

type logsJSONDecoder struct {
	jsonDecoder // for members, elems, scalars, kvs and anyValue
	logs        LogBatch
}

func (d *logsJSONDecoder) request() error {
	return d.exportRequest("resourceLogs", "resource_logs", d.resourceLogs)
}

func (d *logsJSONDecoder) resourceLogs(rsIdx int) error {
	res := &model.Resource{}
	first := len(d.logs.Records)
	d.scopes = d.scopes[:0]
	err := d.group("resource", func() error { return d.resource(res) },
		"scopeLogs", "scope_logs", func(i int) error { return d.scopeLogs(res, rsIdx, i) },
		&res.SchemaURL)
	if err != nil {
		return err
	}
	finishLogResource(&d.logs, res, d.scopes, first)
	return nil
}

func (d *logsJSONDecoder) scopeLogs(res *model.Resource, rsIdx, ssIdx int) error {
	sc := &model.Scope{}
	d.scopes = append(d.scopes, sc)
	return d.group("scope", func() error { return d.scopeJSON(sc) },
		"logRecords", "log_records", func(i int) error { return d.logRecord(res, sc, rsIdx, ssIdx, i) },
		&sc.SchemaURL)
}

func (d *logsJSONDecoder) logRecord(res *model.Resource, sc *model.Scope, rsIdx, ssIdx, lrIdx int) error {
	rec := model.LogRecord{Resource: res, Scope: sc}
	traceLen, spanLen := 0, 0
	problem := ""
	if d.r.peek() != '{' {
		return d.r.typeError("object")
	}
	err := d.members(func(k string) error {
		var err error
		switch k {
		case "timeUnixNano", "time_unix_nano":
			rec.TimeUnixNano, err = d.uint("timeUnixNano", 64)
		case "observedTimeUnixNano", "observed_time_unix_nano":
			rec.ObservedTimeUnixNano, err = d.uint("observedTimeUnixNano", 64)
		case "severityNumber", "severity_number":
			var v int32
			v, err = d.enum("severityNumber", severityNumberNames)
			rec.SeverityNumber = model.SeverityNumber(v)
		case "severityText", "severity_text":
			err = d.str(&rec.SeverityText, "severityText")
		case "eventName", "event_name":
			err = d.str(&rec.EventName, "eventName")
		case "body":
			err = wrap(d.anyValue(&rec.Body, 0), "body")
		case "attributes":
			err = d.kvs(&rec.Attributes, "attributes", 0)
		case "droppedAttributesCount", "dropped_attributes_count":
			err = d.u32(&rec.DroppedAttributesCount, "droppedAttributesCount")
		case "flags":
			err = d.u32(&rec.Flags, "flags")
		case "traceId", "trace_id":
			err = d.id(rec.TraceID[:], "traceId", &traceLen, &problem)
		case "spanId", "span_id":
			err = d.id(rec.SpanID[:], "spanId", &spanLen, &problem)
		default:
			err = d.r.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	reason := problem
	if reason == "" {
		reason = checkLogIDs(traceLen, spanLen)
	}
	if reason != "" {
		d.logs.reject(func() string {
			return "resourceLogs[" + strconv.Itoa(rsIdx) + "].scopeLogs[" + strconv.Itoa(ssIdx) + "].logRecords[" + strconv.Itoa(lrIdx) + "]"
		}, reason)
		return nil
	}
	d.logs.Records = append(d.logs.Records, rec)
	return nil
}
