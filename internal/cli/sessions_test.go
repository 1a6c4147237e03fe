package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestSessionsCommandShowsAConversation: `rastro sessions ID` prints a
// session's LLM calls and their messages, each message once although the
// client resent the history with the second call. RASTRO_SERVER names the
// server.
func TestSessionsCommandShowsAConversation(t *testing.T) {
	base, _ := startTestServer(t)
	call := func(span, start, in, out string) string {
		return `{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"` + span + `","name":"chat gpt-4o","kind":3,
		  "startTimeUnixNano":"` + start + `000000000","endTimeUnixNano":"` + start + `500000000",
		  "attributes":[
		    {"key":"gen_ai.system","value":{"stringValue":"openai"}},
		    {"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}},
		    {"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
		    {"key":"gen_ai.usage.input_tokens","value":{"intValue":"100"}},
		    {"key":"gen_ai.usage.output_tokens","value":{"intValue":"20"}},
		    {"key":"session.id","value":{"stringValue":"conv-7"}},
		    {"key":"gen_ai.input.messages","value":{"stringValue":` + in + `}},
		    {"key":"gen_ai.output.messages","value":{"stringValue":` + out + `}}]}`
	}
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
	hello := `{"role":"user","parts":[{"type":"text","content":"Where is my parcel?"}]}`
	answer := `{"role":"assistant","parts":[{"type":"text","content":"It left Lisbon today."}]}`
	thanks := `{"role":"user","parts":[{"type":"text","content":"When will it arrive?"}]}`
	final := `{"role":"assistant","parts":[{"type":"text","content":"Tomorrow before noon."}]}`
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"bot"}}]},"scopeSpans":[{"spans":[` +
		call("eee19b7ec3c1b174", "1764460800", q("["+hello+"]"), q("["+answer+"]")) + "," +
		call("eee19b7ec3c1b175", "1764460810", q("["+hello+","+answer+","+thanks+"]"), q("["+final+"]")) + `]}]}]}`
	resp, err := http.Post(base+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %s", resp.Status)
	}

	var out, errb lockedBuffer
	t.Setenv("RASTRO_SERVER", base) // the client commands' default --server
	if c := Main(context.Background(), []string{"sessions", "conv-7"}, &out, &errb); c != 0 {
		t.Fatalf("exit %d: %s", c, errb.String())
	}
	got := out.String()
	for _, want := range []string{"Where is my parcel?", "It left Lisbon today.", "When will it arrive?", "Tomorrow before noon.",
		"session conv-7: 1 trace, 200 in / 40 out tokens"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("output has %q %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
	if i, j := strings.Index(got, "When will it arrive?"), strings.Index(got, "It left Lisbon today."); i < j {
		t.Errorf("messages out of order:\n%s", got)
	}
	if c := Main(context.Background(), []string{"sessions", "--server", base, "nope"}, &out, &errb); c != 1 || !strings.Contains(errb.String(), "404") {
		t.Fatalf("unknown session: exit %d, stderr %q", c, errb.String())
	}
	if c := Main(context.Background(), []string{"sessions", "a", "b"}, &out, &errb); c != 2 {
		t.Fatalf("two ids: exit %d", c)
	}
}

// TestLLMStatsCommandLine: the subcommand may follow flags; a flag value is
// never taken for it; --help is help.
func TestLLMStatsCommandLine(t *testing.T) {
	base, _ := startTestServer(t)
	var out, errb lockedBuffer
	if c := Main(context.Background(), []string{"llm", "--server", base, "stats", "--by", "model"}, &out, &errb); c != 0 || !strings.Contains(out.String(), "no spans in the last 24h") {
		t.Fatalf("flags before stats: exit %d, stdout %q, stderr %q", c, out.String(), errb.String())
	}
	if c := Main(context.Background(), []string{"llm", "--server", base, "--by", "stats"}, &out, &errb); c != 2 {
		t.Fatalf("--by stats with no subcommand: exit %d, want 2", c)
	}
	if c := Main(context.Background(), []string{"llm", "--help"}, &out, &errb); c != 0 {
		t.Fatalf("llm --help: exit %d", c)
	}
}
