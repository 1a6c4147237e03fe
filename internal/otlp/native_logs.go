package otlp

import (
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// DecodeNativeLogs decodes Rastro's native log body: a JSON array of flat
// records in the shape the API answers with (AppendLogJSON), so that a
// record read from /api/v1/logs can be sent back as it is:
//
//	[{"time": "2026-12-02T10:00:00Z", "severity": "error", "service": "checkout",
//	  "body": "payment declined", "attributes": {"order.id": 42},
//	  "trace_id": "...", "span_id": "..."}]
//
// time (or time_unix_nano) and observed_time_unix_nano are RFC 3339 or
// integer Unix nanoseconds; severity is a name (trace, debug, info, warn or
// warning, error, fatal, any case, with an optional step: info2) or a
// number, as is severity_number; body is any JSON value (objects become
// key/value lists); attributes and resource are JSON objects; service sets
// resource attribute service.name. Records with malformed ids are counted in
// LogBatch.Rejected; anything else malformed returns an *Error.
func DecodeNativeLogs(b []byte) (LogBatch, error) {
	d := nativeLogsDecoder{nativeDecoder: nativeDecoder{jsonDecoder: jsonDecoder{r: newJReader(b)},
		resources: map[string]*model.Resource{}, scopes: map[string]*model.Scope{}}}
	if d.r.peek() != '[' {
		return LogBatch{}, finish(d.r.fail("native log body must be a JSON array of records, got "+d.r.what()), "native-json")
	}
	if err := d.elems("", d.record); err != nil {
		return LogBatch{}, finish(err, "native-json")
	}
	if err := d.r.end(); err != nil {
		return LogBatch{}, finish(err, "native-json")
	}
	d.logs.Problems.Add(d.out.Problems) // what shareResource and shareScope repaired
	return d.logs, nil
}

type nativeLogsDecoder struct {
	nativeDecoder
	logs LogBatch
}

// ParseSeverity reads a severity name (TRACE, DEBUG, INFO, WARN or WARNING,
// ERROR, FATAL, any case, optionally with the step: INFO2) or a number (the
// wire enum is open: any int32).
func ParseSeverity(s string) (model.SeverityNumber, bool) {
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return model.SeverityNumber(n), true
	}
	u := strings.ToUpper(s)
	if u == "WARNING" {
		u = "WARN"
	}
	for n := model.SeverityNumber(0); n <= 24; n++ {
		if n.String() == u {
			return n, true
		}
	}
	return 0, false
}

func (d *nativeLogsDecoder) record(idx int) error {
	r := d.r
	if r.peek() != '{' {
		return r.typeError("object")
	}
	var rec model.LogRecord
	res, sc := &model.Resource{}, &model.Scope{}
	service := ""
	traceLen, spanLen := 0, 0
	problem := ""
	err := d.members(func(k string) error {
		var err error
		var reason string
		switch k {
		case "time", "time_unix_nano":
			rec.TimeUnixNano, _, err = d.time(k)
		case "observed_time_unix_nano":
			rec.ObservedTimeUnixNano, _, err = d.time(k)
		case "severity", "severity_number":
			var v int32
			v, err = d.nameOrInt(k, func(name string) (int32, bool) {
				n, ok := ParseSeverity(name)
				return int32(n), ok
			})
			rec.SeverityNumber = model.SeverityNumber(v)
		case "severity_text":
			err = d.str(&rec.SeverityText, k)
		case "event_name":
			err = d.str(&rec.EventName, k)
		case "service":
			err = d.str(&service, k)
		case "body":
			err = wrap(d.value(&rec.Body, 0), k)
		case "attributes":
			err = d.attrs(&rec.Attributes, k)
		case "dropped_attributes_count":
			err = d.u32(&rec.DroppedAttributesCount, k)
		case "flags":
			err = d.u32(&rec.Flags, k)
		case "trace_id":
			traceLen, reason, err = d.id(rec.TraceID[:], k)
		case "span_id":
			spanLen, reason, err = d.id(rec.SpanID[:], k)
		case "resource":
			err = d.attrs(&res.Attributes, k)
		case "scope":
			err = wrap(d.members(func(k string) error {
				switch k {
				case "name":
					return d.str(&sc.Name, k)
				case "version":
					return d.str(&sc.Version, k)
				}
				return d.r.skip()
			}), "scope")
		default:
			err = d.r.skip()
		}
		if reason != "" && problem == "" {
			problem = reason
		}
		return err
	})
	if err != nil {
		return err
	}
	if problem == "" {
		problem = checkLogIDs(traceLen, spanLen)
	}
	if problem != "" {
		d.logs.reject(func() string { return "[" + strconv.Itoa(idx) + "]" }, problem)
		return nil
	}
	setService(res, service)
	rec.Resource, rec.Scope = d.shareResource(res), d.shareScope(sc)
	model.NormalizeLog(&rec, &d.logs.Problems)
	d.logs.Records = append(d.logs.Records, rec)
	return nil
}
