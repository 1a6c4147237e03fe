package chstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// TestBodyEqualsEncodeProto: the body an insert writes for a span is what
// otlp.EncodeProto writes for that span alone, byte for byte, for the
// canonical and LLM corpora and for spans with every field set, with a
// resource and scope with and without schema URLs, and with neither; and
// it decodes back to the span.
func TestBodyEqualsEncodeProto(t *testing.T) {
	canon, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 3, Spans: 3000, Start: time.Unix(1_700_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	llmSpans, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 4, Spans: 1000, Start: time.Unix(1_700_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	kv := func(k string, v model.Value) model.KeyValue { return model.KeyValue{Key: k, Value: v} }
	res := &model.Resource{Attributes: []model.KeyValue{kv("service.name", model.StringValue("svc"))}, DroppedAttributesCount: 2, SchemaURL: "https://r"}
	scope := &model.Scope{Name: "lib", Version: "1.2", Attributes: []model.KeyValue{kv("a", model.IntValue(1))}, DroppedAttributesCount: 1, SchemaURL: "https://s"}
	full := model.Span{
		TraceID: model.TraceID{1, 2, 3}, SpanID: model.SpanID{4}, ParentSpanID: model.SpanID{5}, TraceState: "k=v", Flags: 257,
		Name: "op", Kind: model.SpanKind(2), StartTimeUnixNano: 10, EndTimeUnixNano: 30,
		Attributes: []model.KeyValue{kv("s", model.StringValue("x")), kv("d", model.DoubleValue(0.5)), kv("b", model.BoolValue(true)),
			kv("arr", model.ArrayValue([]model.Value{model.IntValue(1), model.StringValue("two")})),
			kv("kvl", model.KvListValue([]model.KeyValue{kv("in", model.BytesValue([]byte{0, 1}))})), kv("empty", model.Value{})},
		DroppedAttributesCount: 3,
		Events:                 []model.Event{{TimeUnixNano: 20, Name: "ev", Attributes: []model.KeyValue{kv("e", model.StringValue("y"))}, DroppedAttributesCount: 1}},
		DroppedEventsCount:     4,
		Links:                  []model.Link{{TraceID: model.TraceID{9}, SpanID: model.SpanID{8}, TraceState: "t", Attributes: []model.KeyValue{kv("l", model.IntValue(-7))}, DroppedAttributesCount: 1, Flags: 1}},
		DroppedLinksCount:      5,
		StatusCode:             model.StatusCode(2), StatusMessage: "bad",
		Resource: res, Scope: scope, Service: "svc",
	}
	bare := full
	bare.Resource, bare.Scope = nil, nil
	noURL := full
	noURL.Resource = &model.Resource{Attributes: res.Attributes}
	noURL.Scope = &model.Scope{Name: "lib"}
	emptyParts := full
	emptyParts.Resource, emptyParts.Scope = &model.Resource{}, &model.Scope{}
	spans := append(append(append([]model.Span{}, canon...), llmSpans...), full, bare, noURL, emptyParts, full)
	var enc bodyEncoder
	var buf []byte
	for i := range spans {
		sp := &spans[i]
		want := otlp.EncodeProto([]model.Span{*sp})
		buf = enc.append(buf[:0], sp)
		if !bytes.Equal(buf, want) {
			t.Fatalf("span %d (%s): body\n%x\nwant\n%x", i, sp.Name, buf, want)
		}
	}
	b, err := otlp.DecodeProto(enc.append(nil, &full))
	if err != nil || len(b.Spans) != 1 || b.Spans[0].Name != "op" || len(b.Spans[0].Links) != 1 || b.Spans[0].Scope.SchemaURL != "https://s" {
		t.Fatalf("decoded %+v, %v", b.Spans, err)
	}
}

// BenchmarkSpanBlock: the Go side of an insert into spans alone: a block
// of 4,000 canonical spans (rastro bench's 4 workers of 1,000 spans)
// built for a real server's batch, then dropped unsent.
func BenchmarkSpanBlock(b *testing.B) {
	spans := benchSpans(b, 4000)
	s, err := Open(b.Context(), Options{URL: chtestURL(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sb, err := s.conn.PrepareBatch(b.Context(), "INSERT INTO spans ("+spanColumns+")")
		if err != nil {
			b.Fatal(err)
		}
		blk := spanBlocks.Get().(*spanBlock)
		for i := range spans {
			if err := blk.add(sb, "p", &spans[i], 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := blk.flush(sb); err != nil {
			b.Fatal(err)
		}
		if err := sb.Abort(); err != nil {
			b.Fatal(err)
		}
		blk.reset()
		spanBlocks.Put(blk)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
}
