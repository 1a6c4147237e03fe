package segment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// genCorpus builds random spans that exercise every field and value type:
// several projects, traces of 1..maxTrace spans, shared and distinct
// resources and scopes, nil slices and empty values.
func genCorpus(seed uint64, projects, tracesPerProject, maxTrace int) map[string][]model.Span {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := map[string][]model.Span{}
	for p := 0; p < projects; p++ {
		name := fmt.Sprintf("project-%d", p)
		if p == 0 {
			name = "" // the empty project name is valid
		}
		resources := make([]*model.Resource, 5)
		for i := range resources {
			resources[i] = &model.Resource{
				Attributes: []model.KeyValue{
					{Key: "service.name", Value: model.StringValue(fmt.Sprintf("svc-%d", i))},
					{Key: "host.id", Value: model.IntValue(int64(i * 1000))},
					{Key: "deep", Value: randValue(rng, 2)},
				},
				DroppedAttributesCount: uint32(i),
				SchemaURL:              []string{"", "https://opentelemetry.io/schemas/1.21.0"}[i%2],
			}
		}
		// An equal copy under another pointer: the reader may share it.
		resources = append(resources, &model.Resource{Attributes: slices.Clone(resources[0].Attributes)})
		scopes := []*model.Scope{
			{Name: "lib", Version: "1.0"},
			{Name: "other", Version: "", Attributes: []model.KeyValue{{Key: "x", Value: model.BoolValue(true)}}, DroppedAttributesCount: 2, SchemaURL: "s"},
			nil,
		}
		base := uint64(1_700_000_000_000_000_000) + rng.Uint64N(1e12)
		for t := 0; t < tracesPerProject; t++ {
			var tid model.TraceID
			fillRand(rng, tid[:])
			if t%17 == 3 {
				tid[0] = 0 // make some ids sort early
			}
			n := 1 + rng.IntN(maxTrace)
			if rng.IntN(10) == 0 {
				n = 1
			}
			tstart := base + rng.Uint64N(1e11)
			var parents []model.SpanID
			for s := 0; s < n; s++ {
				sp := model.Span{TraceID: tid, Name: fmt.Sprintf("op-%d", rng.IntN(20))}
				fillRand(rng, sp.SpanID[:])
				if s > 0 {
					sp.ParentSpanID = parents[rng.IntN(len(parents))]
				}
				parents = append(parents, sp.SpanID)
				sp.StartTimeUnixNano = tstart + rng.Uint64N(1e9)
				if s == 0 {
					sp.StartTimeUnixNano = tstart
				}
				switch rng.IntN(20) {
				case 0:
					sp.EndTimeUnixNano = sp.StartTimeUnixNano - 5 // unnormalised: must still round-trip
				case 1:
					sp.EndTimeUnixNano = math.MaxUint64
				default:
					sp.EndTimeUnixNano = sp.StartTimeUnixNano + rng.Uint64N(5e9)
				}
				sp.Kind = model.SpanKind(rng.IntN(6))
				if rng.IntN(50) == 0 {
					sp.Kind = model.SpanKind(rng.IntN(20) - 5)
				}
				sp.StatusCode = model.StatusCode(rng.IntN(3))
				if sp.StatusCode == model.StatusError {
					sp.StatusMessage = []string{"", "boom", "timeout: ünïcödé"}[rng.IntN(3)]
				}
				if rng.IntN(4) == 0 {
					sp.TraceState = "vendor=abc"
				}
				sp.Flags = uint32(rng.IntN(3)) << (rng.IntN(2) * 8)
				if rng.IntN(30) == 0 {
					sp.Flags = math.MaxUint32
				}
				if rng.IntN(20) != 0 {
					sp.Resource = resources[rng.IntN(len(resources))]
					if v, ok := model.Lookup(sp.Resource.Attributes, "service.name"); ok {
						sp.Service = v.Str
					}
				}
				if sp.Service == "" {
					sp.Service = model.UnknownService
				}
				sp.Scope = scopes[rng.IntN(len(scopes))]
				na := rng.IntN(6)
				for a := 0; a < na; a++ {
					sp.Attributes = append(sp.Attributes, model.KeyValue{Key: fmt.Sprintf("k%d", rng.IntN(8)), Value: randValue(rng, 3)})
				}
				if rng.IntN(3) == 0 {
					sp.DroppedAttributesCount = rng.Uint32()
					sp.DroppedEventsCount = uint32(rng.IntN(3))
					sp.DroppedLinksCount = uint32(rng.IntN(3))
				}
				for e := rng.IntN(3); e > 0; e-- {
					ev := model.Event{TimeUnixNano: sp.StartTimeUnixNano + rng.Uint64N(1e6), Name: "event"}
					if rng.IntN(5) == 0 {
						ev.TimeUnixNano = rng.Uint64() // far before or after the span
					}
					if rng.IntN(2) == 0 {
						ev.Attributes = []model.KeyValue{{Key: "exception.message", Value: randValue(rng, 1)}}
						ev.DroppedAttributesCount = 1
					}
					sp.Events = append(sp.Events, ev)
				}
				for l := rng.IntN(3) / 2; l > 0; l-- {
					ln := model.Link{TraceState: "a=b", Flags: 1, DroppedAttributesCount: 3}
					fillRand(rng, ln.TraceID[:])
					fillRand(rng, ln.SpanID[:])
					ln.Attributes = []model.KeyValue{{Key: "link.kind", Value: model.StringValue("follows")}}
					sp.Links = append(sp.Links, ln)
				}
				out[name] = append(out[name], sp)
			}
		}
		addLLM(out[name], seed+uint64(p))
		rng.Shuffle(len(out[name]), func(i, j int) { out[name][i], out[name][j] = out[name][j], out[name][i] })
	}
	return out
}

func fillRand(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
}

func randValue(rng *rand.Rand, depth int) model.Value {
	top := 8
	if depth <= 0 {
		top = 6 // scalars only
	}
	switch rng.IntN(top) {
	case 0:
		return model.StringValue([]string{"", "a", "hello world", "日本語", "value-" + fmt.Sprint(rng.IntN(100))}[rng.IntN(5)])
	case 1:
		return model.BoolValue(rng.IntN(2) == 0)
	case 2:
		return model.IntValue([]int64{0, -1, 42, math.MinInt64, math.MaxInt64, rng.Int64()}[rng.IntN(6)])
	case 3:
		return model.DoubleValue([]float64{0, math.Copysign(0, -1), 1.5, math.Inf(-1),
			math.Float64frombits(0x7ff8000000000abc), math.Float64frombits(0xfff0000000000001)}[rng.IntN(6)])
	case 4:
		switch rng.IntN(3) {
		case 0:
			return model.Value{Type: model.ValueBytes}
		case 1:
			return model.BytesValue([]byte{0, 1, 2, 255})
		}
		return model.BytesValue([]byte("\x00"))
	case 5:
		return model.Value{}
	case 6:
		var elems []model.Value
		for i := rng.IntN(4); i > 0; i-- {
			elems = append(elems, randValue(rng, depth-1))
		}
		return model.ArrayValue(elems)
	default:
		var fields []model.KeyValue
		for i := rng.IntN(4); i > 0; i-- {
			fields = append(fields, model.KeyValue{Key: fmt.Sprintf("n%d", i), Value: randValue(rng, depth-1)})
		}
		return model.KvListValue(fields)
	}
}

// realisticCorpus mimics production traces: about 10 spans per trace, 8
// services, 50 span names, 5 attributes drawn from at most 100 short values.
func realisticCorpus(seed uint64, spans int) []model.Span {
	rng := rand.New(rand.NewPCG(seed, 7))
	resources := make([]*model.Resource, 8)
	services := make([]string, 8)
	for i := range resources {
		services[i] = fmt.Sprintf("service-%d", i)
		resources[i] = &model.Resource{Attributes: []model.KeyValue{
			{Key: "service.name", Value: model.StringValue(services[i])},
			{Key: "service.version", Value: model.StringValue("1.4.2")},
			{Key: "host.name", Value: model.StringValue(fmt.Sprintf("host-%d", i%3))},
			{Key: "telemetry.sdk.language", Value: model.StringValue("go")},
		}}
	}
	scope := &model.Scope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.49.0"}
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("GET /api/v1/resource%d/{id}", i)
	}
	keys := []string{"http.method", "http.route", "http.status_code", "user.id", "db.system"}
	values := make([]string, 100)
	for i := range values {
		values[i] = fmt.Sprintf("val%d", i)
	}
	out := make([]model.Span, 0, spans)
	t0 := uint64(1_700_000_000_000_000_000)
	for len(out) < spans {
		var tid model.TraceID
		fillRand(rng, tid[:])
		start := t0 + uint64(len(out))*1_000_000 + rng.Uint64N(1_000_000)
		n := min(5+rng.IntN(11), spans-len(out))
		var root model.SpanID
		for s := 0; s < n; s++ {
			svc := rng.IntN(8)
			sp := model.Span{TraceID: tid, Name: names[rng.IntN(50)], Kind: model.SpanKind(1 + rng.IntN(3)),
				Resource: resources[svc], Scope: scope, Service: services[svc]}
			fillRand(rng, sp.SpanID[:])
			if s == 0 {
				root = sp.SpanID
			} else {
				sp.ParentSpanID = root
			}
			sp.StartTimeUnixNano = start + uint64(s)*rng.Uint64N(2_000_000)
			sp.EndTimeUnixNano = sp.StartTimeUnixNano + 1000 + rng.Uint64N(50_000_000)
			if rng.IntN(50) == 0 {
				sp.StatusCode = model.StatusError
			}
			sp.Attributes = make([]model.KeyValue, 5)
			for a := range sp.Attributes {
				sp.Attributes[a] = model.KeyValue{Key: keys[a], Value: model.StringValue(values[rng.IntN(20)+a*16])}
			}
			sp.Attributes[2].Value = model.IntValue(int64(200 + rng.IntN(4)*100))
			out = append(out, sp)
		}
	}
	return out
}

// addLLM gives about a third of the spans LLM fields, from a random stream of
// its own (so the rest of a corpus does not depend on it). Every trace of
// some blocks has none, some fields take extreme values, and sessions,
// models and users repeat so that aggregates group several spans.
func addLLM(spans []model.Span, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x11a))
	models := []string{"", "gpt-4o", "gpt-4o-2024-08-06", "claude-sonnet-4", "日本語-model"}
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	for i := range spans {
		if spans[i].TraceID[1]%3 != 0 { // whole traces with or without LLM spans
			continue
		}
		if rng.IntN(4) == 0 {
			continue
		}
		l := &model.LLM{
			Provider:      pick("openai", "anthropic", "aws.bedrock", ""),
			RequestModel:  models[rng.IntN(len(models))],
			ResponseModel: models[rng.IntN(len(models))],
			Operation:     pick("chat", "embeddings", "execute_tool", "invoke_agent"),
			InputTokens:   rng.Int64N(5000) - 1, OutputTokens: rng.Int64N(800) - 1,
			CacheReadTokens: rng.Int64N(100) - 1, CacheCreationTokens: rng.Int64N(50) - 1,
			ReasoningTokens: rng.Int64N(30) - 1,
			CostNanoUSD:     rng.Int64N(1e7),
			CostSource:      model.CostSource(rng.IntN(3)),
			SessionID:       fmt.Sprintf("sess-%d", rng.IntN(6)),
			UserID:          pick("", "alice", "bob"),
			AgentName:       pick("", "planner"),
			ToolName:        pick("", "search", "calculator"),
			Counted:         rng.IntN(3) != 0,
		}
		if rng.IntN(2) == 0 {
			l.TimeToFirstTokenNanos = rng.Uint64N(2e9)
		}
		switch rng.IntN(40) {
		case 0:
			l.InputTokens, l.CostNanoUSD, l.TimeToFirstTokenNanos = math.MaxInt64, math.MinInt64, math.MaxUint64
			l.CostSource = 255
		case 1:
			*l = model.LLM{} // present but empty
		}
		spans[i].LLM = l
	}
}
