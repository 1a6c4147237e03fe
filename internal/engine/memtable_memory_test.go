package engine_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// telemetrygenLike makes spans shaped as the OpenTelemetry Collector's load
// generator sends them: a root and a child per trace, one service, a few
// short attributes.
func telemetrygenLike(n int) []model.Span {
	rng := rand.New(rand.NewPCG(1, 2))
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("telemetrygen")}}}
	scope := &model.Scope{Name: "telemetrygen"}
	start := uint64(time.Now().Add(-time.Minute).UnixNano())
	spans := make([]model.Span, 0, n)
	for len(spans) < n {
		var tid model.TraceID
		for i := range tid {
			tid[i] = byte(rng.IntN(256))
		}
		root := model.Span{TraceID: tid, Name: "lets-go", Kind: model.KindClient, Resource: res, Scope: scope,
			StartTimeUnixNano: start, EndTimeUnixNano: start + 123_000, Service: "telemetrygen",
			Attributes: []model.KeyValue{
				{Key: "network.peer.address", Value: model.StringValue("1.2.3.4")},
				{Key: "peer.service", Value: model.StringValue("telemetrygen-server")},
			}}
		// Span ids are random, as the SDK's id generator makes them.
		for i := range root.SpanID {
			root.SpanID[i] = byte(rng.IntN(256))
		}
		child := root
		child.Name, child.Kind, child.ParentSpanID = "okey-dokey-0", model.KindServer, root.SpanID
		for i := range child.SpanID {
			child.SpanID[i] = byte(rng.IntN(256))
		}
		child.Attributes = []model.KeyValue{
			{Key: "network.peer.address", Value: model.StringValue("1.2.3.4")},
			{Key: "peer.service", Value: model.StringValue("telemetrygen-client")},
		}
		spans = append(spans, root, child)
		start += 1000
	}
	return spans[:n]
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestBufferBytesMatchHeap: the write buffer's size estimate, which drives
// --seal-bytes and --max-buffer-bytes, is within 25% of the heap the buffer
// really holds: rows, the request bodies its strings point into, the
// decoder's arrays and the lookup maps, for three shapes of spans.
func TestBufferBytesMatchHeap(t *testing.T) {
	const total = 60_000
	corpora := map[string]func() ([]model.Span, error){
		"telemetrygen": func() ([]model.Span, error) { return telemetrygenLike(total), nil },
	}
	for _, c := range []string{bench.CorpusCanonical, bench.CorpusLLM} {
		corpora[c] = func() ([]model.Span, error) {
			return bench.Generate(c, bench.CorpusOptions{Seed: 1, Spans: total, Start: time.Now().Add(-time.Hour), Window: 30 * time.Minute})
		}
	}
	for name, gen := range corpora {
		t.Run(name, func(t *testing.T) {
			corpus, err := gen()
			if err != nil {
				t.Fatal(err)
			}
			for _, prev := range []bool{false, true} {
				var p *engine.Buffer
				if prev {
					// A buffer sized after a full previous one: its maps are
					// allocated up front.
					p = fill(t, nil, corpus)
				}
				before := heapAlloc()
				m := fill(t, p, corpus)
				used := int64(heapAlloc()) - int64(before)
				runtime.KeepAlive(p)
				est := m.Bytes()
				ratio := float64(est) / float64(used)
				t.Logf("%s (sized after a previous buffer: %v): estimate %d B, heap %d B (%.0f B/span), ratio %.2f",
					name, prev, est, used, float64(used)/total, ratio)
				if ratio < 0.75 || ratio > 1.25 {
					t.Errorf("%s: the estimate %d B is %.2f x the heap the buffer holds (%d B); want within 25%%", name, est, ratio, used)
				}
				runtime.KeepAlive(m)
			}
			runtime.KeepAlive(corpus)
		})
	}
}

// fill inserts the corpus into a new memtable as the engine does: encoded
// and decoded in requests of 1,000 spans, enriched, then inserted.
func fill(t *testing.T, prev *engine.Buffer, corpus []model.Span) *engine.Buffer {
	m := engine.NewBuffer(prev)
	for i := 0; i < len(corpus); i += 1000 {
		body := otlp.EncodeProto(corpus[i:min(i+1000, len(corpus))])
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		llm.Enrich(b.Spans, nil)
		m.Insert("default", b.Spans, int64(cap(body)))
	}
	if m.Live() != int64(len(corpus)) {
		t.Fatal(fmt.Sprintf("%d live rows, want %d", m.Live(), len(corpus)))
	}
	return m
}
