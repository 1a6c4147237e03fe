package text

import (
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

const (
	prompt60     = "Hello, I ordered a pair of running shoes last week and the package arrived damaged. The box was crushed and one shoe has a torn sole. I would like a refund to my original payment method, or a replacement in size 42 if it is in stock. My order number is 7781-2231. Can you help me today please?"
	completion60 = "I'm sorry to hear that your shoes arrived damaged. I have checked order 7781-2231 and it is eligible for a full refund. However, the card on file has expired, so the refund will be issued as store credit unless you update your payment details within seven days. Would you like me to send a replacement pair instead?"
)

// llmSpan is an OTel GenAI chat span carrying a prompt and a completion of
// about 60 words each, in JSON message attributes.
func llmSpan() *model.Span {
	str := func(k, v string) model.KeyValue { return model.KeyValue{Key: k, Value: model.StringValue(v)} }
	return &model.Span{
		Name: "chat gpt-4o",
		Kind: model.KindClient,
		Attributes: []model.KeyValue{
			str("gen_ai.operation.name", "chat"), str("gen_ai.provider.name", "openai"),
			str("gen_ai.request.model", "gpt-4o"), str("gen_ai.response.model", "gpt-4o-2024-08-06"),
			{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(120)},
			{Key: "gen_ai.usage.output_tokens", Value: model.IntValue(90)},
			str("gen_ai.conversation.id", "sess-0001"), str("user.id", "user-17"),
			str("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"`+prompt60+`"}]}]`),
			str("gen_ai.output.messages", `[{"role":"assistant","finish_reason":"stop","parts":[{"type":"text","content":"`+completion60+`"}]}]`),
		},
		Service: "support-agent",
	}
}

// plainSpan is an HTTP server span with no text worth searching.
func plainSpan() *model.Span {
	str := func(k, v string) model.KeyValue { return model.KeyValue{Key: k, Value: model.StringValue(v)} }
	return &model.Span{
		Name: "GET /api/v1/orders/{id}",
		Kind: model.KindServer,
		Attributes: []model.KeyValue{
			str("http.request.method", "GET"), str("http.route", "/api/v1/orders/{id}"), str("url.path", "/api/v1/orders/4242"),
			str("url.scheme", "https"), {Key: "http.response.status_code", Value: model.IntValue(200)},
			str("user_id", "usr_00042"), str("account_id", "acct_0007"), str("server.address", "api-orders"),
		},
		Service: "orders",
	}
}

func BenchmarkTokens(b *testing.B) {
	for _, c := range []struct{ name, text string }{
		{"english", strings.Repeat(prompt60+" ", 4)},
		{"accented", strings.Repeat("Le café était très agréable, mais la crème brûlée était déjà épuisée. ", 16)},
		{"cyrillic", strings.Repeat("Возврат средств по заказу будет выполнен в течение пяти рабочих дней. ", 16)},
		{"cjk", strings.Repeat("您的退款申请已经提交，我们会在五个工作日内处理。注文の払い戻しを受け付けました。", 16)},
		// Scripts whose words carry combining marks (composed text, NFC).
		{"thai", strings.Repeat("การคืนเงินสำหรับคำสั่งซื้อนี้จะดำเนินการภายในห้าวันทำการ ขอบคุณที่ใช้บริการ ", 8)},
		{"hindi", strings.Repeat("आपका रिफंड पाँच कार्य दिवसों में संसाधित किया जाएगा। धन्यवाद। ", 8)},
		// Crafted: runs of 30 marks (linear, not quadratic, in the run).
		{"mark-runs", strings.Repeat("ป"+strings.Repeat("\u0e48", 30)+" ", 16)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				Tokens(c.text, func(string) { n++ })
			}
		})
	}
}

func BenchmarkSpanTokens(b *testing.B) {
	for _, c := range []struct {
		name string
		span *model.Span
	}{{"llm", llmSpan()}, {"plain", plainSpan()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				SpanTokens(c.span, 0, func(uint64) { n++ })
			}
		})
	}
}

func BenchmarkMatches(b *testing.B) {
	for _, c := range []struct {
		name, q string
		span    *model.Span
		want    bool
	}{
		{"llm/word", "refund", llmSpan(), true},
		{"llm/phrase", `refund "card on file has expired"`, llmSpan(), true},
		{"llm/absent", "lighthouse", llmSpan(), false},
		{"plain/absent", "lighthouse", plainSpan(), false},
	} {
		q, err := ParseQuery(c.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if q.Matches(c.span, 0) != c.want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
