package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestLLMStatsTop: rastro llm stats --top N prints the N costliest groups,
// one OTHERS row with how many groups it sums and their spans, and the
// totals of every group.
func TestLLMStatsTop(t *testing.T) {
	base, _ := startTestServer(t)
	var spans []string
	for i := range 5 {
		spans = append(spans, fmt.Sprintf(`{"traceId":"5b8efff798038103d269b633813fc6%02d","spanId":"eee19b7ec3c1b1%02d","name":"chat gpt-4o","kind":3,
		  "startTimeUnixNano":"17644608%02d000000000","endTimeUnixNano":"17644608%02d500000000",
		  "attributes":[
		    {"key":"gen_ai.system","value":{"stringValue":"openai"}},
		    {"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}},
		    {"key":"gen_ai.usage.input_tokens","value":{"intValue":"%d"}},
		    {"key":"session.id","value":{"stringValue":"conv-%d"}}]}`, i, i, i, i, 1000*(i+1), i))
	}
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"bot"}}]},"scopeSpans":[{"spans":[` +
		strings.Join(spans, ",") + `]}]}]}`
	resp, err := http.Post(base+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %s", resp.Status)
	}
	var out, errb lockedBuffer
	if c := Main(context.Background(), []string{"llm", "--server", base, "stats", "--by", "session", "--top", "2", "--since", "1764460700"}, &out, &errb); c != 0 {
		t.Fatalf("exit %d: %s", c, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[1], "conv-4") || !strings.Contains(lines[2], "conv-3") ||
		!strings.HasPrefix(strings.Fields(lines[3])[0], "OTHERS") || strings.Fields(lines[3])[2] != "3" ||
		strings.Fields(lines[4])[0] != "TOTAL" || strings.Fields(lines[4])[1] != "5" {
		t.Fatalf("--top 2:\n%s", out.String())
	}
}
