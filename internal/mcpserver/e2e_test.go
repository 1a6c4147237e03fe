package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rastro-dev/rastro/internal/insight"
	"github.com/rastro-dev/rastro/internal/mcpserver"
)

var toolNames = []string{"anomalies", "error_groups", "get_session", "get_span", "get_trace", "list_services", "list_sessions",
	"llm_stats", "search_spans", "search_traces", "summarize"}

// apiGet fetches a route of the HTTP API and decodes its JSON.
func apiGet(t *testing.T, env *rastroEnv, path string, params url.Values, out any) {
	t.Helper()
	resp, err := http.Get(env.Base + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// call calls a tool and decodes its structured content into out; it fails
// the test on a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error: %v", name, args, contentText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v in %s", name, err, b)
		}
	}
	return res
}

func contentText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestToolsOverBothTransports drives the MCP server with the Go SDK's
// client over stdio (`rastro mcp`) and streamable HTTP (/mcp), lists the
// tools and calls every one, checking the answers against the HTTP API.
func TestToolsOverBothTransports(t *testing.T) {
	env := startRastro(t)
	transports := map[string]func() mcp.Transport{
		"stdio": func() mcp.Transport {
			return &mcp.CommandTransport{Command: exec.Command(env.Bin, "mcp", "--server", env.Base)}
		},
		"http": func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: env.Base + "/mcp", DisableStandaloneSSE: true}
		},
	}
	win := url.Values{"since": {env.Since}, "until": {env.Until}}
	w := map[string]any{"since": env.Since, "until": env.Until}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range w {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, name := range []string{"stdio", "http"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "rastro-test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, transports[name](), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult(); got == nil || got.ServerInfo.Name != "rastro" || !strings.Contains(got.Instructions, "summarize first") {
				t.Fatalf("initialize: %+v", got)
			}
			tl, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tl.Tools {
				names = append(names, tool.Name)
				if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
					t.Errorf("tool %s lacks a description, a schema or the read-only hint: %+v", tool.Name, tool)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, toolNames) {
				t.Fatalf("tools %v, want %v", names, toolNames)
			}

			// summarize and anomalies: the API's figures, and a text rendering.
			var sum, apiSum insight.Summary
			res := call(t, cs, "summarize", w, &sum)
			apiGet(t, env, "/api/v1/summary", win, &apiSum)
			if sum.Totals != apiSum.Totals || len(sum.Services) != len(apiSum.Services) || sum.Totals.Spans < 14000 {
				t.Fatalf("summarize totals %+v, API %+v", sum.Totals, apiSum.Totals)
			}
			if txt := contentText(res); !strings.Contains(txt, "Services (spans/s") || !strings.Contains(txt, "Anomalies (") {
				t.Fatalf("summarize text:\n%s", txt)
			}
			var an insight.AnomalyReport
			call(t, cs, "anomalies", with(map[string]any{"sensitivity": 2}), &an)
			if an.Sensitivity != 2 || an.Method == "" {
				t.Fatalf("anomalies: %+v", an)
			}

			// search_spans and search_traces: the API's ids, in order.
			var spans mcpserver.SearchSpansOut
			call(t, cs, "search_spans", with(map[string]any{"q": "{ status = error }", "limit": 7}), &spans)
			var apiSpans struct {
				Spans []struct {
					SpanID string `json:"span_id"`
				} `json:"spans"`
				NextCursor string `json:"next_cursor"`
			}
			p := url.Values{"since": {env.Since}, "until": {env.Until}, "q": {"{ status = error }"}, "limit": {"7"}}
			apiGet(t, env, "/api/v1/spans", p, &apiSpans)
			if len(spans.Spans) != 7 || len(apiSpans.Spans) != 7 || spans.NextCursor != apiSpans.NextCursor {
				t.Fatalf("search_spans: %d spans, API %d", len(spans.Spans), len(apiSpans.Spans))
			}
			for i, s := range spans.Spans {
				if s.SpanID != apiSpans.Spans[i].SpanID || s.Status != "error" || !strings.HasPrefix(s.TraceURL, env.Base+"/traces/"+s.TraceID) {
					t.Fatalf("search_spans[%d] = %+v, API span %s", i, s, apiSpans.Spans[i].SpanID)
				}
			}
			var next mcpserver.SearchSpansOut
			call(t, cs, "search_spans", with(map[string]any{"q": "{ status = error }", "limit": 7, "cursor": spans.NextCursor}), &next)
			if len(next.Spans) == 0 || next.Spans[0].SpanID == spans.Spans[0].SpanID {
				t.Fatalf("the cursor's page: %+v", next.Spans)
			}
			var traces mcpserver.SearchTracesOut
			call(t, cs, "search_traces", with(map[string]any{"service": "batch"}), &traces)
			if len(traces.Traces) != 1 || traces.Traces[0].TraceID != env.BigTrace || traces.Traces[0].Spans != 5000 {
				t.Fatalf("search_traces: %+v", traces.Traces)
			}

			// get_trace: 5,000 spans within the default budget, errors kept.
			var tr mcpserver.GetTraceOut
			res = call(t, cs, "get_trace", map[string]any{"trace_id": env.BigTrace}, &tr)
			if tr.Trace == nil || tr.Trace.Spans != 5000 || tr.Trace.Tokens > 8000 || tr.Trace.OverBudget || len(contentText(res)) > 8000*4 {
				t.Fatalf("get_trace: %+v (text %d bytes)", tr.Trace, len(contentText(res)))
			}
			shown := map[string]bool{}
			for _, n := range tr.Trace.Tree {
				shown[n.SpanID] = true
			}
			for _, id := range env.BigErrs {
				if !shown[id] {
					t.Fatalf("get_trace dropped error span %s", id)
				}
			}
			// get_span: the API's span, in full.
			var sp mcpserver.GetSpanOut
			call(t, cs, "get_span", map[string]any{"trace_id": env.BigTrace, "span_id": env.BigErrs[0]}, &sp)
			if sp.Span["span_id"] != env.BigErrs[0] || sp.Span["status"] != "error" || !strings.Contains(sp.Span["status_message"].(string), "deadlock") {
				t.Fatalf("get_span: %v", sp.Span)
			}

			// llm_stats, list_sessions, get_session against the API.
			var ls mcpserver.LLMStatsOut
			call(t, cs, "llm_stats", with(map[string]any{"group_by": []string{"model"}}), &ls)
			var apiLLM mcpserver.LLMStatsOut
			apiGet(t, env, "/api/v1/llm/stats", url.Values{"since": {env.Since}, "until": {env.Until}, "group_by": {"model"}, "top": {"20"}}, &apiLLM)
			if len(ls.Groups) == 0 || len(ls.Groups) != len(apiLLM.Groups) || ls.Totals.CostUSD != apiLLM.Totals.CostUSD {
				t.Fatalf("llm_stats: %+v, API %+v", ls.Totals, apiLLM.Totals)
			}
			var sessions mcpserver.ListSessionsOut
			call(t, cs, "list_sessions", with(map[string]any{"sort": "cost", "limit": 3}), &sessions)
			var apiSessions mcpserver.ListSessionsOut
			apiGet(t, env, "/api/v1/sessions", url.Values{"since": {env.Since}, "until": {env.Until}, "sort": {"cost"}, "limit": {"3"}}, &apiSessions)
			if len(sessions.Sessions) != 3 || sessions.Total != apiSessions.Total || sessions.Sessions[0].ID != apiSessions.Sessions[0].ID {
				t.Fatalf("list_sessions: %+v, API %+v", sessions, apiSessions)
			}
			var conv mcpserver.Conversation
			call(t, cs, "get_session", map[string]any{"session_id": sessions.Sessions[0].ID, "budget_tokens": 2000}, &conv)
			var apiConv struct {
				Traces []struct {
					TraceID string `json:"trace_id"`
				} `json:"traces"`
			}
			apiGet(t, env, "/api/v1/sessions/"+url.PathEscape(sessions.Sessions[0].ID), nil, &apiConv)
			if len(conv.Traces) != len(apiConv.Traces) || len(conv.Traces) == 0 || conv.Traces[0].TraceID != apiConv.Traces[0].TraceID || (conv.Tokens > 2000 && !conv.OverBudget) {
				t.Fatalf("get_session: %d traces (API %d), %d tokens", len(conv.Traces), len(apiConv.Traces), conv.Tokens)
			}

			// list_services and error_groups against the API.
			var svcs mcpserver.ListServicesOut
			call(t, cs, "list_services", w, &svcs)
			var red struct {
				Series []struct {
					Service string `json:"service"`
					Calls   int64  `json:"calls"`
				} `json:"series"`
			}
			apiGet(t, env, "/api/v1/red", win, &red)
			if len(svcs.Services) != len(red.Series) || svcs.Services[0].Service != red.Series[0].Service || svcs.Services[0].Calls != red.Series[0].Calls {
				t.Fatalf("list_services: %+v, API %+v", svcs.Services, red.Series)
			}
			var ops mcpserver.ListServicesOut
			call(t, cs, "list_services", with(map[string]any{"service": "batch"}), &ops)
			if len(ops.Services) != 9 || ops.Services[0].Operation == "" {
				t.Fatalf("list_services of batch: %+v", ops.Services)
			}
			var eg mcpserver.ErrorGroupsOut
			call(t, cs, "error_groups", with(map[string]any{"service": "batch"}), &eg)
			if len(eg.Groups) != 1 || eg.Groups[0].Message != "deadlock detected on row <n>" || eg.Groups[0].Count != int64(len(env.BigErrs)) {
				t.Fatalf("error_groups: %+v", eg.Groups)
			}

			// Another project holds nothing; bad input is a tool error naming it.
			var empty mcpserver.SearchSpansOut
			call(t, cs, "search_spans", with(map[string]any{"project": "elsewhere"}), &empty)
			if len(empty.Spans) != 0 {
				t.Fatalf("project elsewhere: %d spans", len(empty.Spans))
			}
			for _, bad := range []struct {
				tool string
				args map[string]any
				want string
			}{
				{"get_trace", map[string]any{"trace_id": "xyz"}, "trace_id"},
				{"get_trace", map[string]any{"trace_id": strings.Repeat("0", 31) + "1"}, "not found"},
				{"get_span", map[string]any{"trace_id": env.BigTrace, "span_id": "0123"}, "span_id"},
				{"search_spans", map[string]any{"q": "{ nonsense"}, "q:"},
				{"anomalies", map[string]any{"sensitivity": -3}, "sensitivity"},
			} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: bad.tool, Arguments: bad.args})
				if err != nil {
					t.Fatalf("%s: protocol error %v, want a tool error", bad.tool, err)
				}
				if !res.IsError || !strings.Contains(contentText(res), bad.want) {
					t.Errorf("%s(%v): isError %v %q, want an error naming %q", bad.tool, bad.args, res.IsError, contentText(res), bad.want)
				}
			}
		})
	}
}
