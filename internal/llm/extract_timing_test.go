package llm

import (
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// plainSpan looks like an ordinary HTTP server span: the common case at
// ingest, which must cost next to nothing.
func plainSpan() *model.Span {
	return &model.Span{
		Name: "GET /api/orders/{id}",
		Attributes: []model.KeyValue{
			kv("http.request.method", "GET"), kv("url.path", "/api/orders/42"), kv("url.scheme", "https"),
			kv("http.route", "/api/orders/{id}"), kv("http.response.status_code", 200), kv("server.address", "api.internal"),
			kv("server.port", 443), kv("user_agent.original", "Mozilla/5.0"), kv("network.protocol.version", "1.1"),
			kv("client.address", "10.0.0.7"), kv("session.id", "web-1"), kv("user.id", "u-9"),
		},
		Resource: &model.Resource{Attributes: []model.KeyValue{kv("service.name", "api"), kv("telemetry.sdk.language", "go")}},
	}
}

func llmSpan() *model.Span {
	s := spanWith(
		kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"),
		kv("gen_ai.request.model", "gpt-4o"), kv("gen_ai.response.model", "gpt-4o-2024-08-06"),
		kv("gen_ai.request.temperature", 0.7), kv("gen_ai.usage.input_tokens", 1200), kv("gen_ai.usage.output_tokens", 300),
		kv("gen_ai.usage.cache_read.input_tokens", 1024), kv("gen_ai.conversation.id", "sess-1"), kv("user.id", "u-1"),
		kv("server.address", "api.openai.com"), kv("gen_ai.response.id", "chatcmpl-123"),
	)
	s.Resource = &model.Resource{Attributes: []model.KeyValue{kv("service.name", "agent")}}
	return s
}

func BenchmarkExtract(b *testing.B) {
	prices := DefaultPrices()
	for _, c := range []struct {
		name string
		span *model.Span
	}{{"plain", plainSpan()}, {"llm", llmSpan()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Extract(c.span, prices)
			}
		})
	}
}

func BenchmarkMessagesOpenInference(b *testing.B) {
	var attrs []model.KeyValue
	for i := 0; i < 6; i++ {
		attrs = append(attrs, kv("llm.input_messages."+string(rune('0'+i))+".message.role", "user"),
			kv("llm.input_messages."+string(rune('0'+i))+".message.content", "hello there"))
	}
	s := spanWith(attrs...)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Messages(s)
	}
}

func BenchmarkCost(b *testing.B) {
	p := DefaultPrices()
	at := time.Unix(0, int64(llmSpan().StartTimeUnixNano))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = p.Cost("anthropic", "claude-3-5-sonnet-20241022", at, 1000, 100, 500, 0)
	}
}
