// Package export writes spans to open file formats that other tools read
// directly. Today that is Parquet: one row per span, in the schema of Row,
// documented column by column in docs/export.md.
//
// Typical use (rastro export does this, one page of the span search API at
// a time):
//
//	w, err := export.NewWriter(f, export.Options{})
//	for each page {
//		rows, err := export.Rows(page.Spans)
//		err = w.Write(rows)
//	}
//	err = w.Close() // writes the footer: the file is readable only after it
//
// The rows are made from the API's span JSON (docs/api.md#span-json), not
// from the storage model, so an export holds exactly what the API shows,
// whichever backend answers it, with the LLM fields the server derived at
// ingest.
package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// SchemaVersion is written to every file's key/value metadata under
// "rastro.export.schema". It changes when a column is removed, renamed or
// changes type; adding a column does not change it.
const SchemaVersion = "1"

// Row is one span in the Parquet schema. The struct tags are the schema:
// column names, logical types (STRING, TIMESTAMP(NANOS, UTC), MAP, JSON) and
// encodings. Optional columns are NULL when the API leaves the field out.
type Row struct {
	TraceID       string  `parquet:"trace_id"`
	SpanID        string  `parquet:"span_id"`
	ParentSpanID  *string `parquet:"parent_span_id,optional"`
	Name          string  `parquet:"name,dict"`
	Service       string  `parquet:"service,dict"`
	Kind          string  `parquet:"kind,dict"`
	StatusCode    string  `parquet:"status_code,dict"`
	StatusMessage *string `parquet:"status_message,optional"`
	TraceState    *string `parquet:"trace_state,optional"`
	StartTime     int64   `parquet:"start_time,timestamp(nanosecond:utc)"`
	EndTime       int64   `parquet:"end_time,timestamp(nanosecond:utc)"`
	DurationNs    int64   `parquet:"duration_ns"`
	ScopeName     *string `parquet:"scope_name,optional,dict"`
	ScopeVersion  *string `parquet:"scope_version,optional,dict"`

	Attributes         map[string]string `parquet:"attributes"`
	ResourceAttributes map[string]string `parquet:"resource_attributes"`
	Events             string            `parquet:"events,json"`
	Links              string            `parquet:"links,json"`

	LLMProvider            *string  `parquet:"llm_provider,optional,dict"`
	LLMModel               *string  `parquet:"llm_model,optional,dict"`
	LLMRequestModel        *string  `parquet:"llm_request_model,optional,dict"`
	LLMResponseModel       *string  `parquet:"llm_response_model,optional,dict"`
	LLMOperation           *string  `parquet:"llm_operation,optional,dict"`
	LLMSessionID           *string  `parquet:"llm_session_id,optional"`
	LLMUserID              *string  `parquet:"llm_user_id,optional"`
	LLMAgent               *string  `parquet:"llm_agent,optional,dict"`
	LLMTool                *string  `parquet:"llm_tool,optional,dict"`
	LLMInputTokens         *int64   `parquet:"llm_input_tokens,optional"`
	LLMOutputTokens        *int64   `parquet:"llm_output_tokens,optional"`
	LLMCacheReadTokens     *int64   `parquet:"llm_cache_read_tokens,optional"`
	LLMCacheCreationTokens *int64   `parquet:"llm_cache_creation_tokens,optional"`
	LLMReasoningTokens     *int64   `parquet:"llm_reasoning_tokens,optional"`
	LLMTimeToFirstTokenNs  *int64   `parquet:"llm_time_to_first_token_ns,optional"`
	LLMCounted             *bool    `parquet:"llm_counted,optional"`
	LLMCostUSD             *float64 `parquet:"llm_cost_usd,optional"`
	LLMCostSource          *string  `parquet:"llm_cost_source,optional,dict"`
}

// APISpan is a span in the API's JSON shape (docs/api.md#span-json), as
// GET /api/v1/spans returns it: the members Row is made of.
type APISpan struct {
	TraceID       string                     `json:"trace_id"`
	SpanID        string                     `json:"span_id"`
	ParentSpanID  string                     `json:"parent_span_id"`
	Name          string                     `json:"name"`
	Kind          json.RawMessage            `json:"kind"` // a name, or the number of an unknown kind
	Service       string                     `json:"service"`
	Start         uint64                     `json:"start_time_unix_nano"`
	End           uint64                     `json:"end_time_unix_nano"`
	DurationNs    uint64                     `json:"duration_ns"`
	Status        json.RawMessage            `json:"status"` // likewise
	StatusMessage string                     `json:"status_message"`
	TraceState    string                     `json:"trace_state"`
	Attributes    map[string]json.RawMessage `json:"attributes"`
	Resource      map[string]json.RawMessage `json:"resource"`
	Scope         *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"scope"`
	Events json.RawMessage `json:"events"`
	Links  json.RawMessage `json:"links"`
	LLM    *APILLM         `json:"llm"`
}

// APILLM is the span JSON's "llm" member: the fields the server derived at
// ingest from whichever attribute dialect the client used (docs/llm.md).
type APILLM struct {
	Provider            string   `json:"provider"`
	Model               string   `json:"model"`
	RequestModel        string   `json:"request_model"`
	ResponseModel       string   `json:"response_model"`
	Operation           string   `json:"operation"`
	SessionID           string   `json:"session_id"`
	UserID              string   `json:"user_id"`
	Agent               string   `json:"agent"`
	Tool                string   `json:"tool"`
	InputTokens         *int64   `json:"input_tokens"`
	OutputTokens        *int64   `json:"output_tokens"`
	CacheReadTokens     *int64   `json:"cache_read_tokens"`
	CacheCreationTokens *int64   `json:"cache_creation_tokens"`
	ReasoningTokens     *int64   `json:"reasoning_tokens"`
	TimeToFirstTokenNs  *int64   `json:"time_to_first_token_ns"`
	Counted             bool     `json:"counted"`
	CostUSD             *float64 `json:"cost_usd"`
	CostSource          string   `json:"cost_source"`
}

// Rows converts API spans to rows. It fails, naming the span, only on a
// span the API would not send (a bad enum, a start time past 2262, an
// attribute value that is not JSON).
func Rows(spans []APISpan) ([]Row, error) {
	rows := make([]Row, len(spans))
	for i := range spans {
		if err := spans[i].row(&rows[i]); err != nil {
			return nil, fmt.Errorf("span %s of trace %s: %w", spans[i].SpanID, spans[i].TraceID, err)
		}
	}
	return rows, nil
}

func (s *APISpan) row(r *Row) error {
	var err error
	*r = Row{
		TraceID:       s.TraceID,
		SpanID:        s.SpanID,
		ParentSpanID:  optString(s.ParentSpanID),
		Name:          s.Name,
		Service:       s.Service,
		StatusMessage: optString(s.StatusMessage),
		TraceState:    optString(s.TraceState),
		Events:        jsonOr(s.Events, "[]"),
		Links:         jsonOr(s.Links, "[]"),
	}
	if r.Kind, err = enum(s.Kind); err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	if r.StatusCode, err = enum(s.Status); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, t := range []struct {
		name string
		v    uint64
		dst  *int64
	}{{"start_time_unix_nano", s.Start, &r.StartTime}, {"end_time_unix_nano", s.End, &r.EndTime}, {"duration_ns", s.DurationNs, &r.DurationNs}} {
		if t.v > 1<<63-1 {
			return fmt.Errorf("%s %d does not fit a Parquet INT64", t.name, t.v)
		}
		*t.dst = int64(t.v)
	}
	if s.Scope != nil {
		r.ScopeName, r.ScopeVersion = optString(s.Scope.Name), optString(s.Scope.Version)
	}
	if r.Attributes, err = stringMap(s.Attributes); err != nil {
		return fmt.Errorf("attributes: %w", err)
	}
	if r.ResourceAttributes, err = stringMap(s.Resource); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	if l := s.LLM; l != nil {
		r.LLMProvider, r.LLMModel = optString(l.Provider), optString(l.Model)
		r.LLMRequestModel, r.LLMResponseModel = optString(l.RequestModel), optString(l.ResponseModel)
		r.LLMOperation, r.LLMSessionID, r.LLMUserID = optString(l.Operation), optString(l.SessionID), optString(l.UserID)
		r.LLMAgent, r.LLMTool = optString(l.Agent), optString(l.Tool)
		r.LLMInputTokens, r.LLMOutputTokens = l.InputTokens, l.OutputTokens
		r.LLMCacheReadTokens, r.LLMCacheCreationTokens, r.LLMReasoningTokens = l.CacheReadTokens, l.CacheCreationTokens, l.ReasoningTokens
		r.LLMTimeToFirstTokenNs = l.TimeToFirstTokenNs
		counted := l.Counted
		r.LLMCounted = &counted
		r.LLMCostUSD, r.LLMCostSource = l.CostUSD, optString(l.CostSource)
	}
	return nil
}

// AttributeString is how an attribute value is written in a MAP column: a
// string value as itself, any other value as its API JSON (42, 0.5, true,
// ["a","b"], {"k":"v"}, {"bytes":"AAE="}, null), compacted. v must be
// valid JSON, as encoding/json hands a json.RawMessage over.
func AttributeString(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		if len(v) >= 2 && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 {
			return string(v[1 : len(v)-1]), nil // no escapes: the bytes between the quotes
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	if !bytes.ContainsAny(v, " \t\r\n") {
		return string(v), nil // the server writes compact JSON
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return "", fmt.Errorf("value %q is not JSON: %w", v, err)
	}
	return b.String(), nil
}

func stringMap(m map[string]json.RawMessage) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, err := AttributeString(v)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
}

// enum is a kind or status: its name, or the number of a value the API
// does not name.
func enum(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	}
	if _, err := strconv.ParseInt(string(v), 10, 32); err != nil {
		return "", fmt.Errorf("%q is neither a name nor an integer", v)
	}
	return string(v), nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func jsonOr(v json.RawMessage, empty string) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return empty
	}
	return string(v)
}
