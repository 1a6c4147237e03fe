package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// projectSpans makes an LLM trace of two spans whose every name, service,
// model and session carries tag, so that a response holding tag shows the
// project's data.
func projectSpans(tag string, id byte) []model.Span {
	at := uint64(time.Now().Add(-2 * time.Minute).UnixNano())
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("svc-" + tag)}}}
	trace := model.TraceID{id, 0xee, 1}
	llm := []model.KeyValue{
		{Key: "gen_ai.system", Value: model.StringValue("openai")},
		{Key: "gen_ai.operation.name", Value: model.StringValue("chat")},
		{Key: "gen_ai.request.model", Value: model.StringValue("model-" + tag)},
		{Key: "gen_ai.usage.input_tokens", Value: model.IntValue(10)},
		{Key: "gen_ai.usage.output_tokens", Value: model.IntValue(5)},
		{Key: "session.id", Value: model.StringValue("session-" + tag)},
	}
	return []model.Span{
		{TraceID: trace, SpanID: model.SpanID{id, 1}, Name: "agent-" + tag, Service: "svc-" + tag, Resource: res, Kind: model.KindServer,
			StartTimeUnixNano: at, EndTimeUnixNano: at + 5e6, Attributes: []model.KeyValue{{Key: "session.id", Value: model.StringValue("session-" + tag)}}},
		{TraceID: trace, SpanID: model.SpanID{id, 2}, ParentSpanID: model.SpanID{id, 1}, Name: "chat-" + tag, Service: "svc-" + tag, Resource: res,
			Kind: model.KindClient, StartTimeUnixNano: at + 1e6, EndTimeUnixNano: at + 4e6, Attributes: llm},
	}
}

// TestCrossProjectReads: a read token of project b, through every read
// path (search, trace by id, tail, LLM statistics, sessions, discovery,
// MCP, the Tempo and Jaeger APIs), is refused project a when it names it
// and sees none of a's data when it does not.
func TestCrossProjectReads(t *testing.T) {
	ts := startAuthServer(t, Options{})
	a, b := projectSpans("alpha", 0xa1), projectSpans("bravo", 0xb2)
	for _, c := range []struct {
		tok   testToken
		spans []model.Span
	}{{tokIngestA, a}, {tokIngestB, b}} {
		if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(c.spans), "Authorization", bearerHdr(c.tok)); code != 200 {
			t.Fatalf("ingest with %s: %d %s", c.tok.name, code, body)
		}
	}
	idA, idB := a[0].TraceID.String(), b[0].TraceID.String()
	paths := []string{
		"/api/v1/spans?since=1h", "/api/v1/traces?since=1h", "/api/v1/spans?since=1h&q=" + url.QueryEscape(`{ span.session.id = "session-alpha" }`),
		"/api/v1/traces/" + idA, "/api/v1/stats",
		"/api/v1/llm/stats?since=1h&group_by=model", "/api/v1/llm/timeseries?since=1h",
		"/api/v1/sessions?since=1h", "/api/v1/sessions/session-alpha",
		"/api/v1/services", "/api/v1/services/svc-alpha/operations", "/api/v1/attributes", "/api/v1/attributes/service.name/values",
		"/api/v1/red?since=1h", "/api/v1/dependencies?since=1h", "/api/v1/summary?since=1h",
		// Tempo
		"/api/search?tags=" + url.QueryEscape("service.name=svc-alpha"), "/api/traces/" + idA, "/api/v2/traces/" + idA,
		"/api/search/tags", "/api/v2/search/tag/resource.service.name/values", "/api/search/tag/service.name/values",
		// Jaeger
		"/api/services", "/api/services/svc-alpha/operations", "/api/traces?service=svc-alpha",
		"/api/v3/services", "/api/v3/traces/" + idA, "/api/v3/operations?service=svc-alpha",
	}
	sawB := 0
	for _, p := range paths {
		code, _, body := ts.request("GET", p, nil, "Authorization", bearerHdr(tokReadB), "X-Scope-OrgID", "a")
		if code != http.StatusForbidden {
			t.Errorf("GET %s with b's token naming project a: %d %s, want 403", p, code, body)
		}
		code, _, body = ts.request("GET", p, nil, "Authorization", bearerHdr(tokReadB))
		if code >= 500 || code == 401 || code == 403 {
			t.Errorf("GET %s with b's token: %d %s", p, code, body)
		}
		// (A 404 may echo the id asked for: only answers with data count.)
		if code == 200 && (strings.Contains(string(body), "alpha") || strings.Contains(string(body), idA)) {
			t.Errorf("GET %s with b's token shows project a's data: %s", p, body)
		}
		if strings.Contains(string(body), "bravo") {
			sawB++
		}
		// The path does show a's data to a's token (so the check above is
		// not vacuous for list paths).
		if code, _, body := ts.request("GET", p, nil, "Authorization", bearerHdr(tokReadA)); code == 200 && !strings.Contains(string(body), "alpha") && !strings.Contains(string(body), idA) &&
			!slices.Contains([]string{"/api/v1/stats", "/api/search/tags", "/api/v1/attributes", "/api/v1/llm/timeseries?since=1h", "/api/v1/dependencies?since=1h"}, p) {
			t.Errorf("GET %s with a's token does not show a's data: %s", p, body)
		}
	}
	if sawB < 10 {
		t.Errorf("only %d of %d paths showed b's own data to b's token", sawB, len(paths))
	}
	if code, _, body := ts.request("GET", "/api/v1/traces/"+idB, nil, "Authorization", bearerHdr(tokReadB)); code != 200 || !strings.Contains(string(body), "bravo") {
		t.Errorf("b's trace with b's token: %d %s", code, body)
	}

	t.Run("tail", func(t *testing.T) {
		if code, _, body := ts.request("GET", "/api/v1/tail", nil, "Authorization", bearerHdr(tokReadB), "X-Scope-OrgID", "a"); code != http.StatusForbidden {
			t.Fatalf("tail of a with b's token: %d %s", code, body)
		}
		events, _ := openTail(t, ts, url.Values{}, "Authorization", bearerHdr(tokReadB))
		// a's span is acknowledged before b's is sent: were it delivered,
		// it would come first.
		for _, c := range []struct {
			tok   testToken
			spans []model.Span
		}{{tokIngestA, projectSpans("alpha", 0xa3)}, {tokIngestB, projectSpans("bravo", 0xb4)}} {
			if code, body := ts.post("/v1/traces", "application/x-protobuf", otlp.EncodeProto(c.spans), "Authorization", bearerHdr(c.tok)); code != 200 {
				t.Fatalf("ingest: %d %s", code, body)
			}
		}
		names := nextSpans(t, events)
		for _, n := range names {
			if strings.Contains(n, "alpha") {
				t.Fatalf("b's tail received a's span %q", n)
			}
		}
		if !slices.Contains(names, "svc-bravo/chat-bravo") {
			t.Fatalf("b's tail: %v, want b's spans", names)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil)
		hc := &http.Client{Transport: headerTransport{"Authorization": bearerHdr(tokReadB)}}
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"search_spans", map[string]any{"since": "1h"}},
			{"search_traces", map[string]any{"since": "1h"}},
			{"get_trace", map[string]any{"trace_id": idA}},
			{"list_services", map[string]any{"since": "1h"}},
			{"llm_stats", map[string]any{"since": "1h"}},
			{"list_sessions", map[string]any{"since": "1h"}},
		} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			if out := mcpText(res); strings.Contains(out, "alpha") {
				t.Errorf("%s with b's token shows a's data: %s", c.tool, out)
			}
			withA := map[string]any{"project": "a"}
			for k, v := range c.args {
				withA[k] = v
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: withA})
			if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			if out := mcpText(res); !res.IsError || strings.Contains(out, "alpha") || !strings.Contains(out, "403") {
				t.Errorf("%s naming project a with b's token: error %v: %s", c.tool, res.IsError, out)
			}
		}
	})
}

// mcpText is a tool result's text and structured content.
func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	sc, _ := json.Marshal(res.StructuredContent)
	b.Write(sc)
	return b.String()
}

// headerTransport adds headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
