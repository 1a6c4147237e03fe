package cli

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// TestRenderSnippet: a snippet is one line, "…" where the text goes on,
// its hits highlighted only with color, control characters (line breaks,
// an escape sequence from stored text) shown as spaces.
func TestRenderSnippet(t *testing.T) {
	sn := apiSnippet{Source: "attribute", Key: "gen_ai.prompt.0.content", Text: "my Refund\nof Café Crème\x1b[31m now",
		Offset: 12, CutEnd: true}
	sn.Hits = append(sn.Hits, struct {
		Start int `json:"start"`
		End   int `json:"end"`
	}{3, 9}, struct {
		Start int `json:"start"`
		End   int `json:"end"`
	}{13, 25})
	for _, c := range []struct {
		color bool
		want  string
	}{
		{false, "…my Refund of Café Crème [31m now…"},
		{true, "…my " + hitOn + "Refund" + hitOff + " of " + hitOn + "Café Crème" + hitOff + " [31m now…"},
	} {
		if got := renderSnippet(sn, c.color); got != c.want {
			t.Errorf("color %v:\n got %q\nwant %q", c.color, got, c.want)
		}
	}
	sn.Offset, sn.CutEnd = 0, false
	sn.Hits[1].End = 99 // out of range: ignored, never a crash
	if got, want := renderSnippet(sn, true), "my "+hitOn+"Refund"+hitOff+" of Café Crème [31m now"; got != want {
		t.Errorf("out-of-range hit:\n got %q\nwant %q", got, want)
	}
	for _, c := range []struct {
		sn   apiSnippet
		want string
	}{
		{apiSnippet{Source: "attribute", Key: "input.value"}, "input.value"},
		{apiSnippet{Source: "event", Event: "gen_ai.choice", Key: "message"}, "event gen_ai.choice message"},
		{apiSnippet{Source: "status"}, "status message"},
	} {
		if got := snippetSource(c.sn); got != c.want {
			t.Errorf("snippetSource(%+v) = %q, want %q", c.sn, got, c.want)
		}
	}
}

// TestSearchShowsSnippets runs `rastro search --content` against a real
// server: below the table, each matching span's text around the hits, with
// where it is; plain, since stdout is not a terminal.
func TestSearchShowsSnippets(t *testing.T) {
	base, _ := startTestServer(t)
	at := uint64(time.Now().Add(-time.Minute).UnixNano())
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("agent")}}}
	spans := []model.Span{{
		TraceID: model.TraceID{1, 2, 3}, SpanID: model.SpanID{4, 5, 6}, Name: "chat", Service: "agent", Resource: res,
		Kind: model.KindClient, StartTimeUnixNano: at, EndTimeUnixNano: at + 1e6,
		Attributes: []model.KeyValue{{Key: "gen_ai.prompt.0.content",
			Value: model.StringValue("Hello! Where is my REFUND for order 42? I asked for it a week ago.")}},
		Events: []model.Event{{Name: "gen_ai.choice", TimeUnixNano: at, Attributes: []model.KeyValue{{Key: "message",
			Value: model.StringValue("Your refund was sent.")}}}},
	}, {
		TraceID: model.TraceID{1, 2, 4}, SpanID: model.SpanID{4, 5, 7}, Name: "chat", Service: "agent", Resource: res,
		StartTimeUnixNano: at, EndTimeUnixNano: at + 1e6,
		Attributes: []model.KeyValue{{Key: "gen_ai.prompt.0.content", Value: model.StringValue("no match here")}},
	}}
	resp, err := http.Post(base+"/v1/traces", "application/x-protobuf", bytes.NewReader(otlp.EncodeProto(spans)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }}
	if err := commands["search"].Run(context.Background(), env, []string{"--server", base, "--content", "refund"}); err != nil {
		t.Fatalf("search: %v %s", err, errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"\nMATCHED TEXT\nagent: chat  trace 01020300000000000000000000000000 span 0405060000000000\n",
		"  gen_ai.prompt.0.content: Hello! Where is my REFUND for order 42? I asked for it a week ago.\n",
		"  event gen_ai.choice message: Your refund was sent.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "no match here") {
		t.Errorf("escape codes or a non-matching text in plain output:\n%s", got)
	}
}
