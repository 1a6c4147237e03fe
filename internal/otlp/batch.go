package otlp

import (
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// Batch is the result of decoding one export request.
type Batch struct {
	// Spans holds the valid, normalised spans in request order.
	Spans []model.Span
	// Rejected counts spans dropped because their ids were invalid.
	Rejected int
	// RejectMsg is the first rejection reason, naming the span's position, e.g.
	// "resource_spans[0].scope_spans[1].spans[3]: trace_id must be 16 bytes, got 15".
	RejectMsg string
	// Problems counts what model.Normalize, NormalizeResource and NormalizeScope repaired.
	Problems model.Problems

	slabs *slabs // what Spans live in, for Release; nil unless protobuf-decoded
}

func (b *Batch) reject(pos func() string, reason string) {
	if b.Rejected == 0 {
		b.RejectMsg = pos() + ": " + reason
	}
	b.Rejected++
}

// Error is returned for malformed input: the request cannot be decoded at all
// and nothing in it should be stored. Every error returned by the Decode
// functions is an *Error.
type Error struct {
	// Format is "protobuf", "otlp-json" or "native-json".
	Format string
	// Path names the field being decoded, e.g. "resource_spans[0].scope_spans[0].spans[2].name";
	// empty when the problem is at the top level.
	Path string
	// Offset is the byte offset into the input where the problem was found.
	Offset int
	// Reason says what is wrong, e.g. "truncated length-delimited field".
	Reason string

	segs []string // innermost first, while the error travels up the decoder
}

func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString(e.Format)
	sb.WriteString(": ")
	if e.Path != "" {
		sb.WriteString(e.Path)
		sb.WriteString(": ")
	}
	sb.WriteString(e.Reason)
	sb.WriteString(" at offset ")
	sb.WriteString(strconv.Itoa(e.Offset))
	return sb.String()
}

func newError(off int, reason string) *Error {
	return &Error{Offset: off, Reason: reason}
}

// wrap prefixes a path segment to a decode error on its way up. Segments that
// start with '[' attach to the previous one without a dot.
func wrap(err error, seg string) error {
	if e, ok := err.(*Error); ok {
		e.segs = append(e.segs, seg)
	}
	return err
}

func wrapIdx(err error, field string, i int) error {
	if e, ok := err.(*Error); ok {
		e.segs = append(e.segs, field+"["+strconv.Itoa(i)+"]")
	}
	return err
}

// maxPathSegs bounds the length of an error path for deeply nested values.
const maxPathSegs = 40

func finish(err error, format string) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	e.Format = format
	segs := e.segs
	e.segs = nil
	var sb strings.Builder
	n := 0
	for i := len(segs) - 1; i >= 0; i-- {
		// keep the outermost and innermost segments of very deep paths
		if len(segs) > maxPathSegs && i < len(segs)-maxPathSegs/2 && i >= maxPathSegs/2 {
			if i == len(segs)-maxPathSegs/2-1 {
				sb.WriteString("...")
				n++
			}
			continue
		}
		s := segs[i]
		if n > 0 && !strings.HasPrefix(s, "[") {
			sb.WriteByte('.')
		}
		sb.WriteString(s)
		n++
	}
	e.Path = sb.String()
	return e
}

func spanPos(rs, ss, sp int) string {
	return "resource_spans[" + strconv.Itoa(rs) + "].scope_spans[" + strconv.Itoa(ss) + "].spans[" + strconv.Itoa(sp) + "]"
}

// checkIDs reports why a span's ids make it unstorable, or "" when they are fine.
// Lengths are those found on the wire (or after hex decoding).
func checkIDs(traceLen, spanLen, parentLen int, s *model.Span) string {
	if traceLen != 16 {
		return "trace_id must be 16 bytes, got " + strconv.Itoa(traceLen)
	}
	if s.TraceID.IsZero() {
		return "trace_id is all zeros"
	}
	if spanLen != 8 {
		return "span_id must be 8 bytes, got " + strconv.Itoa(spanLen)
	}
	if s.SpanID.IsZero() {
		return "span_id is all zeros"
	}
	if parentLen != 0 && parentLen != 8 {
		return "parent_span_id must be empty or 8 bytes, got " + strconv.Itoa(parentLen)
	}
	return ""
}

func checkLinkIDs(i, traceLen, spanLen int, l *model.Link) string {
	p := "links[" + strconv.Itoa(i) + "]."
	if traceLen != 16 {
		return p + "trace_id must be 16 bytes, got " + strconv.Itoa(traceLen)
	}
	if l.TraceID.IsZero() {
		return p + "trace_id is all zeros"
	}
	if spanLen != 8 {
		return p + "span_id must be 8 bytes, got " + strconv.Itoa(spanLen)
	}
	if l.SpanID.IsZero() {
		return p + "span_id is all zeros"
	}
	return ""
}
