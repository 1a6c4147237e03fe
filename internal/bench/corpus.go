package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// Corpus names accepted by Generate.
const (
	CorpusCanonical = "canonical"
	CorpusLLM       = "llm"
	// CorpusLLMSessions is conversations that resend their history on every
	// call (issue 17's "sessions" shape of the llm corpus).
	CorpusLLMSessions = "llm-sessions"
	CorpusAPI         = "api"
)

// Corpora lists the corpus names in a stable order.
var Corpora = []string{CorpusCanonical, CorpusLLM, CorpusAPI, CorpusLLMSessions}

// CorpusOptions says what to generate. The same options always produce the
// same spans, byte for byte once encoded.
type CorpusOptions struct {
	// Seed selects the pseudo-random stream (PCG, math/rand/v2).
	Seed uint64
	// Spans is the exact number of spans to return. The last trace may be
	// cut short; spans come parent first, so a cut never leaves an orphan.
	Spans int
	// Start is the earliest trace start time.
	Start time.Time
	// Window spreads trace start times over [Start, Start+Window).
	// Zero means one hour.
	Window time.Duration
}

// Validate reports options Generate cannot honour.
func (o CorpusOptions) Validate() error {
	if o.Spans < 0 {
		return fmt.Errorf("corpus: spans must be >= 0, got %d", o.Spans)
	}
	if o.Window < 0 {
		return fmt.Errorf("corpus: window must be >= 0, got %s", o.Window)
	}
	if o.Start.IsZero() {
		return fmt.Errorf("corpus: start time is required (determinism needs an explicit clock)")
	}
	return nil
}

func (o CorpusOptions) window() time.Duration {
	if o.Window == 0 {
		return time.Hour
	}
	return o.Window
}

// Generate builds the named corpus. Spans are grouped by trace, each trace
// in parent-first order, traces in start-time order; spans of one service
// share one *model.Resource and one *model.Scope.
func Generate(corpus string, o CorpusOptions) ([]model.Span, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	switch corpus {
	case CorpusCanonical:
		return genCanonical(o), nil
	case CorpusLLM:
		return genLLM(o), nil
	case CorpusAPI:
		return genAPI(o), nil
	case CorpusLLMSessions:
		return genLLMSessions(o), nil
	}
	return nil, fmt.Errorf("corpus: unknown corpus %q (want one of %v)", corpus, Corpora)
}

// Batches cuts spans into consecutive batches of at most size spans. Inside a
// batch spans are stably grouped by service, the way an SDK exporter or a
// Collector sends them (one ResourceSpans per service per request). The input
// is not modified; batches do not alias it.
func Batches(spans []model.Span, size int) [][]model.Span {
	if size <= 0 {
		size = len(spans)
	}
	var out [][]model.Span
	for i := 0; i < len(spans); i += size {
		b := slices.Clone(spans[i:min(i+size, len(spans))])
		sort.SliceStable(b, func(x, y int) bool { return b[x].Service < b[y].Service })
		out = append(out, b)
	}
	return out
}

// gen is the state shared by every corpus generator.
type gen struct {
	r   *rand.Rand
	ids *idGen
	o   CorpusOptions
	out []model.Span
	// sink, when set, is handed out whenever it holds chunk spans (and the
	// rest by flush), so that a corpus larger than memory can be streamed;
	// flushed counts the spans handed over, err is the sink's first error
	// (it ends the corpus).
	sink    func([]model.Span) error
	chunk   int
	flushed int
	err     error
}

func newGen(o CorpusOptions, stream uint64) *gen {
	return &gen{
		r:   rand.New(rand.NewPCG(o.Seed, stream)),
		ids: newIDGen(o.Seed ^ stream),
		o:   o,
		out: make([]model.Span, 0, o.Spans),
	}
}

func (g *gen) full() bool { return g.err != nil || g.flushed+len(g.out) >= g.o.Spans }

// emit appends a span unless the corpus is full; it reports whether it did.
func (g *gen) emit(s model.Span) bool {
	if g.full() {
		return false
	}
	g.out = append(g.out, s)
	if g.sink != nil && len(g.out) >= g.chunk {
		g.flush()
	}
	return true
}

// flush hands the spans held to the sink and starts a new chunk in the
// same memory.
func (g *gen) flush() {
	if g.err == nil && len(g.out) > 0 {
		g.err = g.sink(g.out)
	}
	g.flushed += len(g.out)
	g.out = g.out[:0]
}

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

// logNormal returns a duration with the given median and shape sigma.
func (g *gen) logNormal(median time.Duration, sigma float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(g.r.NormFloat64()*sigma))
}

// startTimes draws n trace start times in [Start, Start+Window) following the
// relative rate curve (nil = flat), sorted ascending.
func (g *gen) startTimes(n int, curve func(time.Time) float64) []time.Time {
	w := g.o.window()
	ts := make([]time.Time, 0, n)
	for len(ts) < n {
		t := g.o.Start.Add(time.Duration(g.r.Int64N(int64(w))))
		if curve != nil && g.r.Float64() > curve(t) {
			continue
		}
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// service is one emitting service: its shared resource and scope.
type service struct {
	name  string
	res   *model.Resource
	scope *model.Scope
}

func newService(name, version, lang, scopeName string, extra ...model.KeyValue) *service {
	attrs := []model.KeyValue{
		{Key: "service.name", Value: model.StringValue(name)},
		{Key: "service.version", Value: model.StringValue(version)},
		{Key: "service.namespace", Value: model.StringValue("shop")},
		{Key: "deployment.environment.name", Value: model.StringValue("production")},
		{Key: "host.name", Value: model.StringValue(name + "-" + strconv.Itoa(len(name)%3+1))},
		{Key: "telemetry.sdk.name", Value: model.StringValue("opentelemetry")},
		{Key: "telemetry.sdk.language", Value: model.StringValue(lang)},
		{Key: "telemetry.sdk.version", Value: model.StringValue("1.38.0")},
	}
	attrs = append(attrs, extra...)
	return &service{
		name:  name,
		res:   &model.Resource{Attributes: attrs, SchemaURL: "https://opentelemetry.io/schemas/1.37.0"},
		scope: &model.Scope{Name: scopeName, Version: "0.52.0"},
	}
}

// span starts a span of svc in trace t under parent (zero for a root).
func (g *gen) span(svc *service, t model.TraceID, parent model.SpanID, name string, kind model.SpanKind, start time.Time, d time.Duration) model.Span {
	if d < time.Microsecond {
		d = time.Microsecond
	}
	return model.Span{
		TraceID:           t,
		SpanID:            g.ids.spanID(),
		ParentSpanID:      parent,
		Flags:             1,
		Name:              name,
		Kind:              kind,
		StartTimeUnixNano: uint64(start.UnixNano()),
		EndTimeUnixNano:   uint64(start.Add(d).UnixNano()),
		Resource:          svc.res,
		Scope:             svc.scope,
		Service:           svc.name,
	}
}

func str(k, v string) model.KeyValue { return model.KeyValue{Key: k, Value: model.StringValue(v)} }
func integer(k string, v int64) model.KeyValue {
	return model.KeyValue{Key: k, Value: model.IntValue(v)}
}
func float(k string, v float64) model.KeyValue {
	return model.KeyValue{Key: k, Value: model.DoubleValue(v)}
}

// numbered returns prefix000 .. prefix(n-1), zero padded to width digits.
func numbered(prefix string, n, width int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%0*d", prefix, width, i)
	}
	return out
}

// Moved returns copies of spans with every time (start, end, events) moved
// by d: a corpus generated once at a fixed start, then placed where a test
// needs it. What a corpus holds depends on the hour it starts at (its
// services follow a day's cycle), so a test that generates at time.Now()
// sees different data at different hours.
func Moved(spans []model.Span, d time.Duration) []model.Span {
	out := make([]model.Span, len(spans))
	for i, sp := range spans {
		sp.StartTimeUnixNano = uint64(int64(sp.StartTimeUnixNano) + int64(d))
		sp.EndTimeUnixNano = uint64(int64(sp.EndTimeUnixNano) + int64(d))
		sp.Events = slices.Clone(sp.Events)
		for j := range sp.Events {
			sp.Events[j].TimeUnixNano = uint64(int64(sp.Events[j].TimeUnixNano) + int64(d))
		}
		out[i] = sp
	}
	return out
}
