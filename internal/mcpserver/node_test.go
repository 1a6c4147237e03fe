package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests drive both MCP transports (`rastro mcp` over stdio and /mcp
// over streamable HTTP) with clients nobody here wrote: the official
// TypeScript SDK's Client (testdata/node/client.mjs) and the MCP Inspector's
// CLI. They need Node.js 20 or later and npm on PATH; the npm packages,
// pinned in testdata/node/package-lock.json, are installed there with
// `npm ci` when node_modules is missing or older than the lock file.

// nodeDir holds client.mjs, package.json and package-lock.json.
const nodeDir = "testdata/node"

// nodeTimeout bounds every node or npm run.
const nodeTimeout = 3 * time.Minute

// mcpCall is one tools/call for client.mjs; As keys its result (default
// Name).
type mcpCall struct {
	Name string         `json:"name"`
	As   string         `json:"as,omitempty"`
	Args map[string]any `json:"arguments"`
}

func (c mcpCall) key() string {
	if c.As != "" {
		return c.As
	}
	return c.Name
}

// toolInfo is a listed tool as client.mjs reports it.
type toolInfo struct {
	Name            string `json:"name"`
	HasOutputSchema bool   `json:"hasOutputSchema"`
	ReadOnly        bool   `json:"readOnly"`
}

// callResult is one call's result as client.mjs reports it; Error is set
// when the SDK rejected the result (a protocol error, or structured content
// that does not match the tool's output schema).
type callResult struct {
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Text              string          `json:"text"`
	Error             string          `json:"error"`
}

type clientOutput struct {
	Server  struct{ Name, Version string } `json:"server"`
	Tools   []toolInfo                     `json:"tools"`
	Results map[string]callResult          `json:"results"`
}

func TestNodeClients(t *testing.T) {
	dir := nodeModules(t)
	env := startRastro(t)
	if len(env.BigErrs) == 0 {
		t.Fatal("the 5,000-span trace has no error spans")
	}

	var sessions struct {
		Sessions []struct {
			ID string `json:"session_id"`
		} `json:"sessions"`
	}
	getJSON(t, env.Base+"/api/v1/sessions", url.Values{"since": {env.Since}, "until": {env.Until}, "limit": {"1"}}, &sessions)
	if len(sessions.Sessions) == 0 {
		t.Fatal("the seeded data has no LLM session")
	}
	session := sessions.Sessions[0].ID
	var summary struct {
		Totals struct {
			Spans int64 `json:"spans"`
		} `json:"totals"`
	}
	getJSON(t, env.Base+"/api/v1/summary", url.Values{"since": {env.Since}, "until": {env.Until}}, &summary)

	window := func(m map[string]any) map[string]any {
		m["since"], m["until"] = env.Since, env.Until
		return m
	}
	calls := []mcpCall{
		{Name: "summarize", Args: window(map[string]any{})},
		{Name: "anomalies", Args: window(map[string]any{"sensitivity": 2})},
		{Name: "search_spans", Args: window(map[string]any{"q": "{ status = error }", "limit": 10})},
		{Name: "search_traces", Args: window(map[string]any{"service": "batch", "limit": 5})},
		{Name: "get_trace", Args: map[string]any{"trace_id": env.BigTrace, "budget_tokens": 8000}},
		{Name: "get_span", Args: map[string]any{"trace_id": env.BigTrace, "span_id": env.BigErrs[0]}},
		{Name: "llm_stats", Args: window(map[string]any{"group_by": []string{"model"}})},
		{Name: "list_sessions", Args: window(map[string]any{"limit": 5})},
		{Name: "get_session", Args: map[string]any{"session_id": session, "budget_tokens": 4000}},
		{Name: "list_services", Args: window(map[string]any{})},
		{Name: "error_groups", Args: window(map[string]any{"limit": 5})},
		{Name: "get_trace", As: "get_trace_bad_id", Args: map[string]any{"trace_id": "xyz"}},
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}

	// Each transport's arguments for client.mjs and for the Inspector.
	transports := []struct {
		name           string
		sdk, inspector []string
	}{
		{"stdio", []string{"stdio", env.Bin, env.Base}, []string{env.Bin, "mcp"}},
		{"http", []string{"http", env.Base + "/mcp"}, []string{env.Base + "/mcp", "--transport", "http"}},
	}
	sdk := map[string]*clientOutput{}
	for _, tr := range transports {
		t.Run("sdk/"+tr.name, func(t *testing.T) {
			stdout := runNode(t, dir, nil, append(append([]string{"client.mjs"}, tr.sdk...), string(callsJSON))...)
			var out clientOutput
			if err := json.Unmarshal(stdout, &out); err != nil {
				t.Fatalf("client.mjs printed no JSON document: %v\n%s", err, stdout)
			}
			if out.Server.Name != "rastro" {
				t.Errorf("server name %q, want rastro", out.Server.Name)
			}
			checkTools(t, out.Tools)
			checkResults(t, env, calls, &out, session, summary.Totals.Spans)
			sdk[tr.name] = &out
		})
	}
	// The transports run the same tools over the same API: every answer
	// must be the same. (Over stdio the tools run in the rastro binary, built
	// after this test binary: sources edited in between show up here too.)
	if overStdio, overHTTP := sdk["stdio"], sdk["http"]; overStdio != nil && overHTTP != nil {
		for _, c := range calls {
			a, b := overStdio.Results[c.key()], overHTTP.Results[c.key()]
			if d := jsonDiff(a.StructuredContent, b.StructuredContent); d != "" {
				t.Errorf("%s: the structured content over stdio and over http differ: %s", c.key(), d)
			} else if a.IsError != b.IsError || a.Text != b.Text {
				t.Errorf("%s: the text over stdio and over http differ:\nstdio: %.600s\nhttp:  %.600s", c.key(), a.Text, b.Text)
			}
		}
	}

	// The Inspector's CLI lists the tools. Its launcher spawns build/index.js,
	// which finds its own package.json at "../package.json" relative to the
	// working directory (inspector-cli 1.0.3 reads the path with the working
	// directory but imports it relative to the module), so it must run from
	// its build directory.
	inspectorDir := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
	for _, tr := range transports {
		t.Run("inspector/"+tr.name, func(t *testing.T) {
			// The Inspector gives a stdio server its whole environment, and
			// its launcher takes --server for itself: the server URL goes in
			// RASTRO_SERVER.
			extraEnv := []string{"RASTRO_SERVER=" + env.Base, "RASTRO_PROJECT="}
			args := append(append([]string{"cli.js", "--cli"}, tr.inspector...), "--method", "tools/list")
			stdout := runNode(t, inspectorDir, extraEnv, args...)
			var out struct {
				Tools []struct {
					Name         string          `json:"name"`
					OutputSchema json.RawMessage `json:"outputSchema"`
					Annotations  struct {
						ReadOnlyHint bool `json:"readOnlyHint"`
					} `json:"annotations"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(stdout, &out); err != nil {
				t.Fatalf("the Inspector printed no JSON document: %v\n%s", err, stdout)
			}
			var tools []toolInfo
			for _, tool := range out.Tools {
				tools = append(tools, toolInfo{Name: tool.Name, HasOutputSchema: len(tool.OutputSchema) > 0, ReadOnly: tool.Annotations.ReadOnlyHint})
			}
			checkTools(t, tools)
		})
	}
}

// checkTools checks that exactly toolNames are listed, each with an output
// schema and marked read-only.
func checkTools(t *testing.T, tools []toolInfo) {
	t.Helper()
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if !tool.HasOutputSchema {
			t.Errorf("tool %s has no output schema", tool.Name)
		}
		if !tool.ReadOnly {
			t.Errorf("tool %s is not annotated readOnlyHint: true", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, toolNames) {
		t.Errorf("tools listed: %v\nwant: %v", names, toolNames)
	}
}

// checkResults checks every call's result against the seeded data.
func checkResults(t *testing.T, env *rastroEnv, calls []mcpCall, out *clientOutput, session string, summarySpans int64) {
	t.Helper()
	for _, c := range calls {
		r, ok := out.Results[c.key()]
		switch {
		case !ok:
			t.Errorf("%s: no result", c.key())
		case r.Error != "":
			t.Errorf("%s: the SDK client rejected the result: %s", c.key(), r.Error)
		case c.key() == "get_trace_bad_id":
			if !r.IsError || !strings.Contains(r.Text, "trace_id") {
				t.Errorf("get_trace with trace_id xyz: isError %v, text %q; want an error naming trace_id", r.IsError, r.Text)
			}
		case r.IsError:
			t.Errorf("%s: isError: %s", c.key(), r.Text)
		case r.Text == "":
			t.Errorf("%s: no text content", c.key())
		}
	}
	if t.Failed() {
		return
	}
	structured := func(key string, v any) {
		t.Helper()
		if err := json.Unmarshal(out.Results[key].StructuredContent, v); err != nil {
			t.Fatalf("%s: structured content: %v", key, err)
		}
	}

	var sum struct {
		Totals struct {
			Spans int64 `json:"spans"`
		} `json:"totals"`
	}
	structured("summarize", &sum)
	if sum.Totals.Spans != summarySpans || sum.Totals.Spans == 0 {
		t.Errorf("summarize: totals.spans %d, the API's summary says %d", sum.Totals.Spans, summarySpans)
	}

	var spans struct {
		Spans []struct {
			SpanID string `json:"span_id"`
			Status string `json:"status"`
		} `json:"spans"`
	}
	structured("search_spans", &spans)
	if len(spans.Spans) == 0 {
		t.Error("search_spans { status = error }: no spans")
	}
	for _, s := range spans.Spans {
		if s.Status != "error" {
			t.Errorf("search_spans { status = error }: span %s has status %q", s.SpanID, s.Status)
		}
	}

	var traces struct {
		Traces []struct {
			TraceID string `json:"trace_id"`
			Spans   int    `json:"span_count"`
		} `json:"traces"`
	}
	structured("search_traces", &traces)
	found := false
	for _, tr := range traces.Traces {
		found = found || tr.TraceID == env.BigTrace && tr.Spans == 5000
	}
	if !found {
		t.Errorf("search_traces service=batch: want trace %s with 5000 spans in %+v", env.BigTrace, traces.Traces)
	}

	var trace struct {
		Trace struct {
			TraceID    string `json:"trace_id"`
			Spans      int    `json:"spans"`
			Budget     int    `json:"budget_tokens"`
			Tokens     int    `json:"tokens"`
			OverBudget bool   `json:"over_budget"`
			Tree       []struct {
				SpanID string `json:"span_id"`
			} `json:"tree"`
		} `json:"trace"`
	}
	structured("get_trace", &trace)
	tr := trace.Trace
	if tr.TraceID != env.BigTrace || tr.Spans != 5000 || tr.Budget != 8000 {
		t.Errorf("get_trace: trace %s, %d spans, budget %d; want %s, 5000, 8000", tr.TraceID, tr.Spans, tr.Budget, env.BigTrace)
	}
	if !tr.OverBudget && tr.Tokens > 8000 {
		t.Errorf("get_trace: %d tokens, over the budget of 8000 without over_budget", tr.Tokens)
	}
	shown := map[string]bool{}
	for _, n := range tr.Tree {
		shown[n.SpanID] = true
	}
	for _, id := range env.BigErrs {
		if !shown[id] {
			t.Errorf("get_trace: error span %s is not in the tree (%d spans shown)", id, len(tr.Tree))
		}
	}

	var span struct {
		Span map[string]any `json:"span"`
	}
	structured("get_span", &span)
	if span.Span["span_id"] != env.BigErrs[0] || span.Span["status"] != "error" {
		t.Errorf("get_span %s: span_id %v, status %v", env.BigErrs[0], span.Span["span_id"], span.Span["status"])
	}

	var llm struct {
		Groups []struct {
			Key map[string]string `json:"key"`
		} `json:"groups"`
		Totals struct {
			Spans int64 `json:"spans"`
		} `json:"totals"`
	}
	structured("llm_stats", &llm)
	if len(llm.Groups) == 0 || llm.Totals.Spans == 0 || llm.Groups[0].Key["model"] == "" {
		t.Errorf("llm_stats by model: %d groups, %d spans", len(llm.Groups), llm.Totals.Spans)
	}

	var listed struct {
		Sessions []struct {
			ID string `json:"session_id"`
		} `json:"sessions"`
	}
	structured("list_sessions", &listed)
	found = false
	for _, s := range listed.Sessions {
		found = found || s.ID == session
	}
	if !found {
		t.Errorf("list_sessions: the newest session %s is not listed in %+v", session, listed.Sessions)
	}

	var conv struct {
		SessionID string            `json:"session_id"`
		Traces    []json.RawMessage `json:"traces"`
	}
	structured("get_session", &conv)
	if conv.SessionID != session || len(conv.Traces) == 0 {
		t.Errorf("get_session %s: session %q with %d traces", session, conv.SessionID, len(conv.Traces))
	}

	var services struct {
		Services []struct {
			Service string `json:"service"`
		} `json:"services"`
	}
	structured("list_services", &services)
	found = false
	for _, s := range services.Services {
		found = found || s.Service == "batch"
	}
	if !found || len(services.Services) < 2 {
		t.Errorf("list_services: want batch and the seeded services, got %+v", services.Services)
	}

	var groups struct {
		Groups []struct {
			Count int64 `json:"count"`
		} `json:"groups"`
	}
	structured("error_groups", &groups)
	if len(groups.Groups) == 0 || groups.Groups[0].Count == 0 {
		t.Errorf("error_groups: %+v", groups.Groups)
	}
}

// nodeModules checks that node (20 or later) and npm are on PATH and
// installs testdata/node's packages when node_modules is missing or older
// than package-lock.json. It returns testdata/node's absolute path.
func nodeModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: these tests run MCP clients on Node.js 20 or later with npm (%v)", tool, err)
		}
	}
	v, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < 20 {
		t.Fatalf("node is %s; these tests need Node.js 20 or later", bytes.TrimSpace(v))
	}

	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	// npm ci writes node_modules/.package-lock.json last.
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci --no-audit --no-fund in %s: %v\n%s", nodeDir, err, out)
	}
	t.Logf("npm ci in %s took %v", nodeDir, time.Since(start).Round(time.Millisecond))
	return dir
}

// runNode runs node with args in dir, its environment extended with env,
// and returns its stdout; it fails the test, showing stderr, if node fails.
func runNode(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// A stdio server the client spawned may hold stderr open after node is
	// killed; stop waiting for it after a while.
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v (context: %v)\nstderr:\n%s\nstdout:\n%.2000s", strings.Join(args[:min(len(args), 4)], " "), err, ctx.Err(), stderr.Bytes(), stdout.Bytes())
	}
	return stdout.Bytes()
}

// getJSON decodes the JSON answer to GET base?params into v.
func getJSON(t *testing.T, base string, params url.Values, v any) {
	t.Helper()
	u := base + "?" + params.Encode()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", u, err)
	}
}

// jsonDiff describes the first difference between JSON documents a and b,
// or returns "" when they hold the same value.
func jsonDiff(a, b json.RawMessage) string {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return "stdio: " + err.Error()
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return "http: " + err.Error()
	}
	return valueDiff("$", x, y)
}

func valueDiff(path string, x, y any) string {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Sorted(maps.Keys(x))
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if d := valueDiff(path+"."+k, x[k], y[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := y.([]any)
		if !ok {
			break
		}
		for i := range min(len(x), len(y)) {
			if d := valueDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
				return d
			}
		}
		if len(x) == len(y) {
			return ""
		}
		return fmt.Sprintf("%s: %d elements over stdio, %d over http", path, len(x), len(y))
	default:
		if x == y {
			return ""
		}
	}
	return fmt.Sprintf("%s: %.300s over stdio, %.300s over http", path, marshal(x), marshal(y))
}

func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
