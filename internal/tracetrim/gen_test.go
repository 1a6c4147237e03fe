package tracetrim

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// sid returns a distinct non-zero span id for i.
func sid(i int) model.SpanID {
	var s model.SpanID
	binary.BigEndian.PutUint64(s[:], uint64(i)+1)
	return s
}

var testTraceID = model.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// shape says how genTrace picks each span's parent.
type shape int

const (
	wide   shape = iota // any earlier span
	deep                // one of the last three spans
	star                // the first span
	chain               // the previous span
	forest              // any earlier span, one in twenty parents missing
	numShapes
)

func (s shape) String() string {
	return [...]string{"wide", "deep", "star", "chain", "forest"}[s]
}

// genTrace builds a random trace of n spans, children inside their parent's
// time most of the time, with errors at errRate, some LLM spans, and
// attributes (some long) and events. The spans come back shuffled.
func genTrace(rng *rand.Rand, n int, sh shape, errRate float64) []model.Span {
	const t0 = uint64(1_700_000_000_000_000_000)
	services := []string{"frontend", "checkout", "payments", "db", "cache"}
	names := []string{"GET /cart", "SELECT orders", "redis GET", "render", "chat gpt-4o", "process"}
	spans := make([]model.Span, n)
	for i := range spans {
		s := &spans[i]
		s.TraceID = testTraceID
		s.SpanID = sid(i)
		s.Service = services[rng.Intn(len(services))]
		s.Name = names[rng.Intn(len(names))]
		if rng.Intn(10) == 0 {
			s.Name = "unique " + strconv.Itoa(i)
		}
		s.Kind = model.SpanKind(rng.Intn(6))
		if i == 0 {
			s.StartTimeUnixNano = t0
			s.EndTimeUnixNano = t0 + uint64(1+rng.Intn(10_000_000_000))
		} else {
			var p int
			switch sh {
			case wide, forest:
				p = rng.Intn(i)
			case deep:
				p = max(0, i-1-rng.Intn(3))
			case star:
				p = 0
			case chain:
				p = i - 1
			}
			ps := &spans[p]
			s.ParentSpanID = ps.SpanID
			if sh == forest && rng.Intn(20) == 0 {
				s.ParentSpanID = sid(n + 1000 + i) // not in the trace
			}
			d := ps.EndTimeUnixNano - ps.StartTimeUnixNano
			s.StartTimeUnixNano = ps.StartTimeUnixNano + uint64(rng.Int63n(int64(d)+1))
			rest := ps.EndTimeUnixNano - s.StartTimeUnixNano
			s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(rng.Int63n(int64(rest)+1))
			if rng.Intn(30) == 0 { // async: outlives its parent
				s.EndTimeUnixNano += uint64(rng.Int63n(1_000_000_000))
			}
		}
		if rng.Float64() < errRate {
			s.StatusCode = model.StatusError
			if rng.Intn(2) == 0 {
				s.StatusMessage = "timeout after " + strconv.Itoa(rng.Intn(5000)) + " ms"
			}
			s.Events = append(s.Events, model.Event{
				TimeUnixNano: s.EndTimeUnixNano,
				Name:         "exception",
				Attributes: []model.KeyValue{
					{Key: "exception.type", Value: model.StringValue("TimeoutError")},
					{Key: "exception.message", Value: model.StringValue("deadline exceeded")},
					{Key: "exception.stacktrace", Value: model.StringValue(strings.Repeat("at frame\n", 100))},
				},
			})
		} else if rng.Intn(5) == 0 {
			s.StatusCode = model.StatusOK
		}
		if rng.Intn(3) == 0 {
			s.Attributes = append(s.Attributes,
				model.KeyValue{Key: "http.route", Value: model.StringValue("/api/v1/items/{id}")},
				model.KeyValue{Key: "http.status_code", Value: model.IntValue(200)},
			)
		}
		if rng.Intn(10) == 0 {
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "db.statement", Value: model.StringValue(strings.Repeat("SELECT * FROM t WHERE x = 1 ", 40))})
		}
		if rng.Intn(15) == 0 {
			s.LLM = &model.LLM{RequestModel: "gpt-4o", Operation: "chat", InputTokens: int64(rng.Intn(5000)), OutputTokens: -1, CostNanoUSD: int64(rng.Intn(1e7))}
		}
		if rng.Intn(20) == 0 {
			for e := range 15 {
				s.Events = append(s.Events, model.Event{TimeUnixNano: s.StartTimeUnixNano + uint64(e), Name: "log"})
			}
		}
	}
	rng.Shuffle(n, func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	return spans
}

// refMustKeep is a direct reading of the rules, independent of the package:
// roots, errors, the critical path, expanded spans and their ancestors. The
// spans must have distinct ids and no cycles.
func refMustKeep(spans []model.Span, expand []model.SpanID) (keep map[model.SpanID]bool, critical []model.SpanID) {
	byID := make(map[model.SpanID]*model.Span)
	for i := range spans {
		byID[spans[i].SpanID] = &spans[i]
	}
	kids := make(map[model.SpanID][]*model.Span)
	var roots []*model.Span
	for i := range spans {
		s := &spans[i]
		if _, ok := byID[s.ParentSpanID]; ok {
			kids[s.ParentSpanID] = append(kids[s.ParentSpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	// later reports whether a ends later than b: ties to the earlier start,
	// then the lower id.
	later := func(a, b *model.Span) bool {
		if a.EndTimeUnixNano != b.EndTimeUnixNano {
			return a.EndTimeUnixNano > b.EndTimeUnixNano
		}
		if a.StartTimeUnixNano != b.StartTimeUnixNano {
			return a.StartTimeUnixNano < b.StartTimeUnixNano
		}
		return bytes.Compare(a.SpanID[:], b.SpanID[:]) < 0
	}
	keep = make(map[model.SpanID]bool)
	mark := func(s *model.Span) {
		for ; s != nil && !keep[s.SpanID]; s = byID[s.ParentSpanID] {
			keep[s.SpanID] = true
		}
	}
	if len(roots) > 0 {
		cur := roots[0]
		for _, r := range roots[1:] {
			if later(r, cur) {
				cur = r
			}
		}
		for cur != nil {
			critical = append(critical, cur.SpanID)
			var next *model.Span
			for _, c := range kids[cur.SpanID] {
				if next == nil || later(c, next) {
					next = c
				}
			}
			cur = next
		}
	}
	for _, r := range roots {
		mark(r)
	}
	for _, id := range critical {
		mark(byID[id])
	}
	for i := range spans {
		if spans[i].StatusCode == model.StatusError {
			mark(&spans[i])
		}
	}
	for _, id := range expand {
		mark(byID[id])
	}
	return keep, critical
}

// offPathChain builds a root with a short child that ends last (the critical
// path) and a chain of n-2 spans beside it.
func offPathChain(n int) []model.Span {
	spans := []model.Span{span(0, -1, 0, 100000, "root"), span(1, 0, 99990, 100000, "late")}
	for i := 2; i < n; i++ {
		p := i - 1
		if i == 2 {
			p = 0
		}
		spans = append(spans, span(i, p, uint64(i), 90000-uint64(i), "step"))
	}
	return spans
}
