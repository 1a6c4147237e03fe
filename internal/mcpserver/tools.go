package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rastro-dev/rastro/internal/insight"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/tracetrim"
)

// Instructions tell a client's model how to use the tools together.
const Instructions = "Rastro stores OpenTelemetry traces, including LLM and agent calls. Investigate in this order: " +
	"summarize first (one cheap call: per service rates, errors and latency against the previous window, error groups, " +
	"slowest operations, LLM cost, ranked anomalies with next steps); then narrow with search_spans or search_traces " +
	"(TraceQL filters and full-text words), error_groups and llm_stats; then open evidence with get_trace (trimmed to a " +
	"token budget; expand spans by id) and get_span. Cite trace ids and URLs in answers. Times: since/until take RFC 3339, " +
	"Unix time, or a duration ago such as 1h or 7d."

// version is the module's version when built from a tagged module.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// NewServer returns an MCP server whose tools call api. cache, when not
// nil, keeps the tools' JSON schemas between servers (one per request on
// the HTTP transport).
func NewServer(api *API, cache *mcp.SchemaCache) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "rastro", Title: "Rastro traces", Version: version()},
		&mcp.ServerOptions{Instructions: Instructions, SchemaCache: cache})
	t := &tools{api: api}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	add := func(name, title, desc string) *mcp.Tool {
		a := *ro
		a.Title = title
		return &mcp.Tool{Name: name, Description: desc, Annotations: &a}
	}
	mcp.AddTool(s, add("summarize", "Summarize a time window",
		"Start here. One cheap call that says where to look: per service the span rate, error rate and p50/p95/p99 latency "+
			"compared with the previous window of the same length; the top error groups (new ones marked); the slowest operations; "+
			"LLM usage and cost by model; and ranked anomalies, each with its evidence, a TraceQL filter and a trace id to open next. "+
			"Computed from stored aggregates, fast on any window. The text content is a compact rendering; the structured content has every number."),
		t.summarize)
	mcp.AddTool(s, add("anomalies", "List anomalies",
		"Operations whose p95 latency, error rate or traffic moved far from the previous window or their recent baseline (the 4 "+
			"windows before), and error groups new since the baseline, ranked by score with the evidence, how the score was computed "+
			"and a next step. Use sensitivity 2 to see smaller moves, 0.5 for only the strongest."),
		t.anomalies)
	mcp.AddTool(s, add("search_spans", "Search spans",
		"Find spans matching a TraceQL filter and/or full-text words (in prompts, completions, messages, attributes), newest first. "+
			"Use to see examples behind a number: failing spans, slow spans, spans of a user or session. Results are compact; "+
			"open one with get_span or its trace with get_trace. Page with cursor."),
		t.searchSpans)
	mcp.AddTool(s, add("search_traces", "Search traces",
		"Find traces with a span matching a TraceQL filter and/or full-text words; each trace summarised (root, duration, "+
			"spans, errors, services). Use to pick traces to open with get_trace."),
		t.searchTraces)
	mcp.AddTool(s, add("get_trace", "Get a trace (trimmed)",
		"A trace as a span tree trimmed to a token budget: the root, every error span and the critical path are always shown, "+
			"with attributes; LLM spans carry model, tokens and cost; other spans fill the budget by duration, the rest are "+
			"summarised per parent and name. Pass expand=[span ids] to see more spans in full, or use get_span."),
		t.getTrace)
	mcp.AddTool(s, add("get_span", "Get one span in full",
		"One span with all its attributes, events (exceptions with stack traces), links, resource and LLM fields; long values "+
			"are clipped to max_value_bytes."),
		t.getSpan)
	mcp.AddTool(s, add("llm_stats", "LLM usage statistics",
		"LLM calls, tokens, cost, errors and latency grouped by model, provider, service, operation, session, user, agent, day "+
			"or hour. Use to answer 'what did we spend', 'which model is slow', 'who uses the most tokens'."),
		t.llmStats)
	mcp.AddTool(s, add("list_sessions", "List LLM sessions",
		"LLM sessions (conversations) with their calls, tokens, cost and errors; sort by last_seen, cost, tokens, spans or errors; "+
			"find by session id or user."),
		t.listSessions)
	mcp.AddTool(s, add("get_session", "Get a session's conversation",
		"One session's traces in order, each with its LLM calls and their prompts and completions, trimmed to a token budget "+
			"(long messages clipped first, then the middle turns left out; errors, the first and the last turns kept)."),
		t.getSession)
	mcp.AddTool(s, add("list_services", "List services",
		"Services with their span counts, error rates and latency in a window; with service set, that service's operations."),
		t.listServices)
	mcp.AddTool(s, add("error_groups", "List error groups",
		"Failing spans grouped by service, operation, exception type and normalised message, largest first, each with first and "+
			"last seen and a sample trace to open."),
		t.errorGroups)
	return s
}

type tools struct{ api *API }

// Window is the project and time window every tool takes.
type Window struct {
	Project string `json:"project,omitempty" jsonschema:"project (tenant) to read; default: the connection's project"`
	Since   string `json:"since,omitempty" jsonschema:"window start: RFC 3339, Unix time, or a duration ago (1h, 7d)"`
	Until   string `json:"until,omitempty" jsonschema:"window end (default now)"`
}

func (w *Window) params() url.Values {
	v := url.Values{}
	set(v, "since", w.Since)
	set(v, "until", w.Until)
	return v
}

func set(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

func setInt(v url.Values, k string, n int) {
	if n != 0 {
		v.Set(k, strconv.Itoa(n))
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// --- summarize, anomalies

type SummarizeIn struct {
	Window
	Service string `json:"service,omitempty" jsonschema:"only this service"`
	Q       string `json:"q,omitempty" jsonschema:"a TraceQL filter the spans must match, e.g. { span.http.route = \"/pay\" } (reads spans: slower)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"entries per list (default 5; anomalies 10)"`
}

func (t *tools) summarize(ctx context.Context, _ *mcp.CallToolRequest, in SummarizeIn) (*mcp.CallToolResult, insight.Summary, error) {
	v := in.params()
	set(v, "service", in.Service)
	set(v, "q", in.Q)
	setInt(v, "limit", in.Limit)
	var s insight.Summary
	if err := t.api.get(ctx, in.Project, "/api/v1/summary", v, &s); err != nil {
		return nil, s, err
	}
	var b bytes.Buffer
	_ = s.WriteText(&b)
	return text(b.String()), s, nil
}

type AnomaliesIn struct {
	Window
	Service     string  `json:"service,omitempty" jsonschema:"only this service"`
	Sensitivity float64 `json:"sensitivity,omitempty" jsonschema:"1 by default; 2 reports moves half as strong, 0.5 only twice as strong"`
	Limit       int     `json:"limit,omitempty" jsonschema:"most anomalies to list (default 10)"`
}

func (t *tools) anomalies(ctx context.Context, _ *mcp.CallToolRequest, in AnomaliesIn) (*mcp.CallToolResult, insight.AnomalyReport, error) {
	v := in.params()
	set(v, "service", in.Service)
	if in.Sensitivity != 0 {
		v.Set("sensitivity", strconv.FormatFloat(in.Sensitivity, 'g', -1, 64))
	}
	setInt(v, "limit", in.Limit)
	var r insight.AnomalyReport
	if err := t.api.get(ctx, in.Project, "/api/v1/anomalies", v, &r); err != nil {
		return nil, r, err
	}
	var b bytes.Buffer
	_ = r.WriteText(&b)
	return text(b.String()), r, nil
}

// --- search

type SearchIn struct {
	Window
	Q           string `json:"q,omitempty" jsonschema:"TraceQL: a spanset filter ({ resource.service.name = \"checkout\" && status = error && duration > 500ms }), structural operators ({ .a } >> { status = error }) or a pipeline ({ } | count() > 20)"`
	Content     string `json:"content,omitempty" jsonschema:"full-text words or a \"quoted phrase\" the span's texts (prompts, completions, messages, string attributes) must contain"`
	Service     string `json:"service,omitempty" jsonschema:"exact service name"`
	Name        string `json:"name,omitempty" jsonschema:"exact span name (operation)"`
	Status      string `json:"status,omitempty" jsonschema:"error, ok or unset"`
	MinDuration string `json:"min_duration,omitempty" jsonschema:"at least this long, e.g. 250ms"`
	MaxDuration string `json:"max_duration,omitempty" jsonschema:"at most this long"`
	Limit       int    `json:"limit,omitempty" jsonschema:"most results (default 20, at most 200)"`
}

func (in *SearchIn) params() (url.Values, error) {
	v := in.Window.params()
	set(v, "q", in.Q)
	set(v, "content", in.Content)
	set(v, "service", in.Service)
	set(v, "name", in.Name)
	set(v, "status", in.Status)
	set(v, "min_duration", in.MinDuration)
	set(v, "max_duration", in.MaxDuration)
	if in.Limit < 0 || in.Limit > 200 {
		return nil, fmt.Errorf("limit: %d is not from 1 to 200", in.Limit)
	}
	v.Set("limit", strconv.Itoa(cmp.Or(in.Limit, 20)))
	return v, nil
}

type SearchSpansIn struct {
	SearchIn
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
}

// SpanBrief is a span in search results: what a model needs to choose.
type SpanBrief struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	ParentID   string         `json:"parent_span_id,omitempty"`
	Service    string         `json:"service"`
	Name       string         `json:"name"`
	Kind       string         `json:"kind,omitempty"`
	Start      string         `json:"start_time"`
	DurationMs float64        `json:"duration_ms"`
	Status     string         `json:"status"`
	Message    string         `json:"status_message,omitempty"`
	Exception  string         `json:"exception,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	LLM        map[string]any `json:"llm,omitempty"`
	TraceURL   string         `json:"trace_url,omitempty"`
}

type SearchSpansOut struct {
	Spans      []SpanBrief `json:"spans"`
	NextCursor string      `json:"next_cursor,omitempty"`
	SearchURL  string      `json:"search_url,omitempty"`
}

// apiSpan is the API's span JSON, as far as the tools read it.
type apiSpan struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	ParentID   string         `json:"parent_span_id"`
	Name       string         `json:"name"`
	Kind       any            `json:"kind"`
	Service    string         `json:"service"`
	Start      string         `json:"start_time"`
	DurationNs float64        `json:"duration_ns"`
	Status     any            `json:"status"`
	Message    string         `json:"status_message"`
	Attributes map[string]any `json:"attributes"`
	Events     []struct {
		Name       string         `json:"name"`
		Attributes map[string]any `json:"attributes"`
	} `json:"events"`
	LLM map[string]any `json:"llm"`
}

func (t *tools) brief(s *apiSpan, maxValue int) SpanBrief {
	b := SpanBrief{TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentID, Service: s.Service, Name: s.Name,
		Kind: fmt.Sprint(s.Kind), Start: s.Start, DurationMs: ms(s.DurationNs), Status: fmt.Sprint(s.Status), Message: clip(s.Message, maxValue),
		Attributes: clipMap(s.Attributes, maxValue), LLM: s.LLM, TraceURL: t.api.link("/traces/"+s.TraceID, url.Values{"span": {s.SpanID}})}
	if b.Kind == "internal" || b.Kind == "unspecified" {
		b.Kind = ""
	}
	for _, ev := range s.Events {
		if ev.Name == "exception" {
			b.Exception = clip(strings.TrimSpace(fmt.Sprintf("%v: %v", ev.Attributes["exception.type"], ev.Attributes["exception.message"])), maxValue)
			break
		}
	}
	return b
}

func (t *tools) searchSpans(ctx context.Context, _ *mcp.CallToolRequest, in SearchSpansIn) (*mcp.CallToolResult, SearchSpansOut, error) {
	out := SearchSpansOut{Spans: []SpanBrief{}}
	v, err := in.SearchIn.params()
	if err != nil {
		return nil, out, err
	}
	set(v, "cursor", in.Cursor)
	var resp struct {
		Spans      []apiSpan `json:"spans"`
		NextCursor string    `json:"next_cursor"`
	}
	if err := t.api.get(ctx, in.Project, "/api/v1/spans", v, &resp); err != nil {
		return nil, out, err
	}
	for i := range resp.Spans {
		out.Spans = append(out.Spans, t.brief(&resp.Spans[i], 200))
	}
	out.NextCursor = resp.NextCursor
	ui := in.Window.params()
	set(ui, "q", in.Q)
	set(ui, "content", in.Content)
	set(ui, "service", in.Service)
	set(ui, "name", in.Name)
	set(ui, "status", in.Status)
	ui.Set("view", "spans")
	out.SearchURL = t.api.link("/search", ui)
	return nil, out, nil
}

type TraceBrief struct {
	TraceID     string   `json:"trace_id"`
	RootService string   `json:"root_service"`
	RootName    string   `json:"root_name"`
	Start       string   `json:"start_time"`
	DurationMs  float64  `json:"duration_ms"`
	Spans       int      `json:"span_count"`
	Errors      int      `json:"error_count"`
	Matched     int      `json:"matched_spans"`
	Services    []string `json:"services"`
	TraceURL    string   `json:"trace_url,omitempty"`
}

type SearchTracesOut struct {
	Traces []TraceBrief `json:"traces"`
}

func (t *tools) searchTraces(ctx context.Context, _ *mcp.CallToolRequest, in SearchIn) (*mcp.CallToolResult, SearchTracesOut, error) {
	out := SearchTracesOut{Traces: []TraceBrief{}}
	v, err := in.params()
	if err != nil {
		return nil, out, err
	}
	var resp struct {
		Traces []struct {
			TraceBrief
			DurationNs float64 `json:"duration_ns"`
		} `json:"traces"`
	}
	if err := t.api.get(ctx, in.Project, "/api/v1/traces", v, &resp); err != nil {
		return nil, out, err
	}
	for _, tr := range resp.Traces {
		b := tr.TraceBrief
		b.DurationMs = ms(tr.DurationNs)
		b.TraceURL = t.api.link("/traces/"+b.TraceID, nil)
		out.Traces = append(out.Traces, b)
	}
	return nil, out, nil
}

// --- traces and spans

type GetTraceIn struct {
	Project      string   `json:"project,omitempty" jsonschema:"project (tenant); default: the connection's project"`
	TraceID      string   `json:"trace_id" jsonschema:"32 hex digits"`
	BudgetTokens int      `json:"budget_tokens,omitempty" jsonschema:"token budget of the answer (bytes/4); default 8000"`
	Expand       []string `json:"expand,omitempty" jsonschema:"span ids to show in full (attributes and events)"`
}

type GetTraceOut struct {
	Trace    *tracetrim.Trace `json:"trace"`
	TraceURL string           `json:"trace_url,omitempty"`
}

// fetchTrace returns a trace's spans, decoded from the API's span JSON
// (which is also the native ingest shape), and the raw JSON array.
func (t *tools) fetchTrace(ctx context.Context, project, id string) ([]model.Span, []byte, error) {
	if _, err := model.ParseTraceID(id); err != nil {
		return nil, nil, fmt.Errorf("trace_id: %w", err)
	}
	body, err := t.api.getRaw(ctx, project, "/api/v1/traces/"+id, nil)
	if err != nil {
		return nil, nil, err
	}
	// The answer is {"trace_id":"...","spans":[...]}: the array is cut out
	// rather than scanned by encoding/json first (a third of the time on a
	// 5,000-span trace); the native decoder checks it.
	i := bytes.Index(body, []byte(`"spans":`))
	if i < 0 || body[len(body)-1] != '}' {
		return nil, nil, fmt.Errorf("decode trace %s: the answer has no spans array", id)
	}
	arr := body[i+len(`"spans":`) : len(body)-1]
	batch, err := otlp.DecodeNative(arr)
	if err != nil {
		return nil, nil, fmt.Errorf("decode trace %s: %w", id, err)
	}
	// The LLM fields are derived again from the attributes, as at ingest,
	// with the server's price table when known.
	prices := t.api.Prices
	if prices == nil {
		prices = llm.DefaultPrices()
	}
	llm.Enrich(batch.Spans, prices)
	return batch.Spans, arr, nil
}

func (t *tools) getTrace(ctx context.Context, _ *mcp.CallToolRequest, in GetTraceIn) (*mcp.CallToolResult, GetTraceOut, error) {
	var out GetTraceOut
	if in.BudgetTokens < 0 || in.BudgetTokens > 1_000_000 {
		return nil, out, fmt.Errorf("budget_tokens: %d is not from 1 to 1000000", in.BudgetTokens)
	}
	var expand []model.SpanID
	for _, s := range in.Expand {
		id, err := parseSpanID(s)
		if err != nil {
			return nil, out, fmt.Errorf("expand: %w", err)
		}
		expand = append(expand, id)
	}
	spans, _, err := t.fetchTrace(ctx, in.Project, in.TraceID)
	if err != nil {
		return nil, out, err
	}
	out.Trace = tracetrim.Trim(spans, tracetrim.Options{Budget: in.BudgetTokens, Expand: expand})
	out.TraceURL = t.api.link("/traces/"+strings.ToLower(in.TraceID), nil)
	return nil, out, nil
}

func parseSpanID(s string) (model.SpanID, error) {
	var id model.SpanID
	if len(s) != 16 {
		return id, fmt.Errorf("span id %q must be 16 hex digits", s)
	}
	for i := range id {
		b, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return id, fmt.Errorf("span id %q is not hex", s)
		}
		id[i] = byte(b)
	}
	return id, nil
}

type GetSpanIn struct {
	Project       string `json:"project,omitempty" jsonschema:"project (tenant); default: the connection's project"`
	TraceID       string `json:"trace_id" jsonschema:"32 hex digits"`
	SpanID        string `json:"span_id" jsonschema:"16 hex digits"`
	MaxValueBytes int    `json:"max_value_bytes,omitempty" jsonschema:"longest string value kept before clipping (default 4000)"`
}

type GetSpanOut struct {
	Span     map[string]any `json:"span" jsonschema:"the span in the API's span JSON: attributes, resource, events, links, llm"`
	Clipped  int            `json:"clipped_values,omitempty" jsonschema:"string values cut to max_value_bytes"`
	TraceURL string         `json:"trace_url,omitempty"`
}

func (t *tools) getSpan(ctx context.Context, _ *mcp.CallToolRequest, in GetSpanIn) (*mcp.CallToolResult, GetSpanOut, error) {
	var out GetSpanOut
	if _, err := parseSpanID(in.SpanID); err != nil {
		return nil, out, fmt.Errorf("span_id: %w", err)
	}
	if _, err := model.ParseTraceID(in.TraceID); err != nil {
		return nil, out, fmt.Errorf("trace_id: %w", err)
	}
	var resp struct {
		Spans []json.RawMessage `json:"spans"`
	}
	if err := t.api.get(ctx, in.Project, "/api/v1/traces/"+in.TraceID, nil, &resp); err != nil {
		return nil, out, err
	}
	want := strings.ToLower(in.SpanID)
	for _, r := range resp.Spans {
		var m map[string]any
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, out, err
		}
		if m["span_id"] == want {
			limit := in.MaxValueBytes
			if limit <= 0 {
				limit = 4000
			}
			out.Span = clipAll(m, limit, &out.Clipped)
			out.TraceURL = t.api.link("/traces/"+strings.ToLower(in.TraceID), url.Values{"span": {want}})
			return nil, out, nil
		}
	}
	return nil, out, fmt.Errorf("span %s is not in trace %s", in.SpanID, in.TraceID)
}

// --- LLM and sessions

type LLMStatsIn struct {
	Window
	GroupBy []string `json:"group_by,omitempty" jsonschema:"dimensions: model, provider, service, operation, session, user, agent, day, hour"`
	Q       string   `json:"q,omitempty" jsonschema:"TraceQL filter on the LLM spans"`
	Service string   `json:"service,omitempty" jsonschema:"exact service name"`
	Top     int      `json:"top,omitempty" jsonschema:"keep the N largest groups (default 20)"`
	Sort    string   `json:"sort,omitempty" jsonschema:"rank groups by cost (default), tokens, calls, spans or errors"`
}

type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type LLMMeasures struct {
	Spans        int64    `json:"spans"`
	Counted      int64    `json:"counted_spans"`
	Errors       int64    `json:"errors"`
	Traces       int64    `json:"traces"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CacheRead    int64    `json:"cache_read_tokens"`
	Reasoning    int64    `json:"reasoning_tokens"`
	CostUSD      float64  `json:"cost_usd"`
	FirstSeen    string   `json:"first_seen,omitempty"`
	LastSeen     string   `json:"last_seen,omitempty"`
	LatencyMs    *Latency `json:"latency_ms,omitempty"`
	TTFTMs       *Latency `json:"time_to_first_token_ms,omitempty"`
	// FromMetrics is the part that came from the GenAI client metrics
	// (calls without a span), when there is one.
	FromMetrics *LLMFromMetrics `json:"from_metrics,omitempty"`
}

type LLMFromMetrics struct {
	Calls          int64    `json:"calls"`
	Errors         int64    `json:"errors"`
	InputTokens    int64    `json:"input_tokens"`
	OutputTokens   int64    `json:"output_tokens"`
	CostUSD        float64  `json:"cost_usd"`
	DurationMeanMs *float64 `json:"duration_mean_ms,omitempty"`
	// DurationMs: p50, p95, p99 estimated from the histogram's buckets.
	DurationMs *struct {
		P50 float64 `json:"p50"`
		P95 float64 `json:"p95"`
		P99 float64 `json:"p99"`
	} `json:"duration_ms,omitempty"`
}

type LLMGroup struct {
	Key map[string]string `json:"key"`
	LLMMeasures
}

type LLMStatsOut struct {
	GroupBy     []string    `json:"group_by"`
	Groups      []LLMGroup  `json:"groups"`
	TotalGroups int         `json:"total_groups,omitempty"`
	Totals      LLMMeasures `json:"totals"`
}

func (t *tools) llmStats(ctx context.Context, _ *mcp.CallToolRequest, in LLMStatsIn) (*mcp.CallToolResult, LLMStatsOut, error) {
	var out LLMStatsOut
	v := in.params()
	if len(in.GroupBy) > 0 {
		v.Set("group_by", strings.Join(in.GroupBy, ","))
		v.Set("top", strconv.Itoa(cmp.Or(in.Top, 20)))
		set(v, "sort", in.Sort)
	}
	set(v, "q", in.Q)
	set(v, "service", in.Service)
	err := t.api.get(ctx, in.Project, "/api/v1/llm/stats", v, &out)
	if out.Groups == nil {
		out.Groups = []LLMGroup{}
	}
	if out.GroupBy == nil {
		out.GroupBy = []string{}
	}
	return nil, out, err
}

type ListSessionsIn struct {
	Window
	Find   string `json:"find,omitempty" jsonschema:"keep sessions whose id or user contains this text"`
	Sort   string `json:"sort,omitempty" jsonschema:"last_seen (default), first_seen, cost, tokens, spans or errors; descending"`
	Limit  int    `json:"limit,omitempty" jsonschema:"sessions per page (default 20, at most 200)"`
	Offset int    `json:"offset,omitempty" jsonschema:"sessions to skip (next_offset of the previous page)"`
}

type SessionBrief struct {
	ID    string   `json:"session_id"`
	Users []string `json:"users"`
	LLMMeasures
	SessionURL string `json:"session_url,omitempty"`
}

type ListSessionsOut struct {
	Sessions   []SessionBrief `json:"sessions"`
	Total      int            `json:"total"`
	NextOffset int            `json:"next_offset,omitempty"`
}

func (t *tools) listSessions(ctx context.Context, _ *mcp.CallToolRequest, in ListSessionsIn) (*mcp.CallToolResult, ListSessionsOut, error) {
	out := ListSessionsOut{Sessions: []SessionBrief{}}
	if in.Limit < 0 || in.Limit > 200 {
		return nil, out, fmt.Errorf("limit: %d is not from 1 to 200", in.Limit)
	}
	v := in.params()
	set(v, "find", in.Find)
	set(v, "sort", in.Sort)
	v.Set("limit", strconv.Itoa(cmp.Or(in.Limit, 20)))
	setInt(v, "offset", in.Offset)
	if err := t.api.get(ctx, in.Project, "/api/v1/sessions", v, &out); err != nil {
		return nil, out, err
	}
	for i := range out.Sessions {
		out.Sessions[i].SessionURL = t.api.link("/sessions/"+url.PathEscape(out.Sessions[i].ID), nil)
	}
	return nil, out, nil
}

type GetSessionIn struct {
	Project      string `json:"project,omitempty" jsonschema:"project (tenant); default: the connection's project"`
	SessionID    string `json:"session_id" jsonschema:"the exact session id"`
	BudgetTokens int    `json:"budget_tokens,omitempty" jsonschema:"token budget of the answer (bytes/4); default 8000"`
}

func (t *tools) getSession(ctx context.Context, _ *mcp.CallToolRequest, in GetSessionIn) (*mcp.CallToolResult, Conversation, error) {
	var out Conversation
	if in.SessionID == "" {
		return nil, out, fmt.Errorf("session_id is required")
	}
	if in.BudgetTokens < 0 || in.BudgetTokens > 1_000_000 {
		return nil, out, fmt.Errorf("budget_tokens: %d is not from 1 to 1000000", in.BudgetTokens)
	}
	var resp apiSession
	if err := t.api.get(ctx, in.Project, "/api/v1/sessions/"+url.PathEscape(in.SessionID), nil, &resp); err != nil {
		return nil, out, err
	}
	out = trimSession(&resp, cmp.Or(in.BudgetTokens, tracetrim.DefaultBudget), t.api)
	return nil, out, nil
}

// --- services and errors

type ListServicesIn struct {
	Window
	Service string `json:"service,omitempty" jsonschema:"list this service's operations instead"`
}

type ServiceStat struct {
	Service    string  `json:"service"`
	Operation  string  `json:"operation,omitempty"`
	Calls      int64   `json:"calls"`
	Errors     int64   `json:"errors"`
	ErrorRate  float64 `json:"error_rate"`
	RatePerSec float64 `json:"rate_per_second"`
	P50Ms      float64 `json:"p50_ms"`
	P95Ms      float64 `json:"p95_ms"`
	P99Ms      float64 `json:"p99_ms"`
}

type ListServicesOut struct {
	Since    string        `json:"since"`
	Services []ServiceStat `json:"services"`
}

func (t *tools) listServices(ctx context.Context, _ *mcp.CallToolRequest, in ListServicesIn) (*mcp.CallToolResult, ListServicesOut, error) {
	out := ListServicesOut{Services: []ServiceStat{}}
	v := in.params()
	if in.Service != "" {
		v.Set("service", in.Service)
		v.Set("group", "operation")
	}
	v.Set("step", "1440m") // few buckets: only the totals are read
	var resp struct {
		Since  string `json:"since"`
		Series []struct {
			Service   string  `json:"service"`
			Operation string  `json:"operation"`
			Calls     int64   `json:"calls"`
			Errors    int64   `json:"errors"`
			ErrorRate float64 `json:"error_rate"`
			Rate      float64 `json:"rate_per_second"`
			P50       float64 `json:"p50_ns"`
			P95       float64 `json:"p95_ns"`
			P99       float64 `json:"p99_ns"`
		} `json:"series"`
	}
	if err := t.api.get(ctx, in.Project, "/api/v1/red", v, &resp); err != nil {
		return nil, out, err
	}
	out.Since = resp.Since
	for _, s := range resp.Series {
		out.Services = append(out.Services, ServiceStat{Service: s.Service, Operation: s.Operation, Calls: s.Calls, Errors: s.Errors,
			ErrorRate: s.ErrorRate, RatePerSec: s.Rate, P50Ms: ms(s.P50), P95Ms: ms(s.P95), P99Ms: ms(s.P99)})
	}
	return nil, out, nil
}

type ErrorGroupsIn struct {
	Window
	Service string `json:"service,omitempty" jsonschema:"exact service name"`
	Name    string `json:"name,omitempty" jsonschema:"exact span name (operation)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"most groups (default 20)"`
}

type ErrorGroup struct {
	Service   string `json:"service"`
	Operation string `json:"operation"`
	Type      string `json:"exception_type,omitempty"`
	Message   string `json:"message"`
	Count     int64  `json:"count"`
	FirstSeen string `json:"first_seen"`
	LastSeen  string `json:"last_seen"`
	TraceID   string `json:"sample_trace_id"`
	SpanID    string `json:"sample_span_id"`
	TraceURL  string `json:"trace_url,omitempty"`
}

type ErrorGroupsOut struct {
	Since  string       `json:"since"`
	Groups []ErrorGroup `json:"groups"`
}

func (t *tools) errorGroups(ctx context.Context, _ *mcp.CallToolRequest, in ErrorGroupsIn) (*mcp.CallToolResult, ErrorGroupsOut, error) {
	out := ErrorGroupsOut{Groups: []ErrorGroup{}}
	v := in.params()
	set(v, "service", in.Service)
	set(v, "name", in.Name)
	v.Set("limit", strconv.Itoa(cmp.Or(in.Limit, 20)))
	if err := t.api.get(ctx, in.Project, "/api/v1/errors", v, &out); err != nil {
		return nil, out, err
	}
	for i := range out.Groups {
		g := &out.Groups[i]
		g.TraceURL = t.api.link("/traces/"+g.TraceID, url.Values{"span": {g.SpanID}})
	}
	return nil, out, nil
}

// --- helpers

func ms(ns float64) float64 {
	v := ns / 1e6
	if v >= 100 {
		return float64(int64(v*10+0.5)) / 10
	}
	return float64(int64(v*1000+0.5)) / 1000
}

// clip cuts s to n bytes on a character boundary, saying how much was cut.
func clip(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…(%d more bytes)", len(s)-cut)
}

func clipMap(m map[string]any, n int) map[string]any {
	if len(m) == 0 {
		return nil
	}
	var dropped int
	return clipAll(m, n, &dropped)
}

// clipAll clips every string in a decoded JSON value, counting the cuts.
func clipAll[T any](v T, n int, clipped *int) T {
	var walk func(x any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case string:
			if len(x) > n {
				*clipped++
				return clip(x, n)
			}
			return x
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
			return x
		}
		return x
	}
	return walk(v).(T)
}
