// Package mcpserver is Rastro's Model Context Protocol server: the tools an
// AI agent uses to investigate traces (summarize, anomalies, search_spans,
// search_traces, get_trace, get_span, llm_stats, list_sessions,
// get_session, list_services, error_groups), built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// Every tool is a call to Rastro's HTTP API, shaped for a model: compact
// fields, values clipped, traces and conversations trimmed to a token
// budget, ids and UI links to cite. The same tools serve both transports:
// `rastro mcp` over stdio reaches a running server over HTTP (--server),
// and the server's own /mcp route (streamable HTTP) reaches the API in
// process, so the two answer alike. Nothing here writes: erasure and admin
// routes are not exposed.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
)

// API is how the tools reach Rastro's HTTP API.
type API struct {
	// Base is the server's URL ("http://127.0.0.1:4318"), used for requests
	// and for the web UI's links.
	Base string
	// Client sends the requests; nil means a client with a 60 s timeout.
	Client *http.Client
	// Project is the default project (X-Scope-OrgID) when a tool call names
	// none; "" is the server's default project.
	Project string
	// Header is added to every request (Authorization, say).
	Header http.Header
	// UI reports whether the server has the web UI: links to its pages are
	// given only then.
	UI bool
	// Prices prices the LLM spans of get_trace (their LLM fields are
	// derived again from the span JSON); nil means the built-in table.
	Prices *llm.Prices
}

// InProcess returns an http.Client whose requests are served by h without a
// network round trip (the server's own /mcp route calls its API this way).
func InProcess(h http.Handler) *http.Client {
	return &http.Client{Transport: handlerTransport{h}}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// apiError is a non-2xx answer of the API, carrying its message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("rastro API: %d: %s", e.status, e.msg) }

// get fetches path?params as project and decodes the JSON answer into out.
func (a *API) get(ctx context.Context, project, path string, params url.Values, out any) error {
	body, err := a.getRaw(ctx, project, path, params)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode the answer of %s: %w", path, err)
	}
	return nil
}

func (a *API) getRaw(ctx context.Context, project, path string, params url.Values) ([]byte, error) {
	u := strings.TrimRight(a.Base, "/") + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range a.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if project == "" {
		project = a.Project
	}
	if project != "" {
		req.Header.Set("X-Scope-OrgID", project)
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the rastro server at %s: %w", a.Base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &apiError{status: resp.StatusCode, msg: msg}
	}
	return bytes.TrimSpace(body), nil
}

// link returns the web UI's URL of a path ("/traces/ID"), or "" without a UI.
func (a *API) link(path string, params url.Values) string {
	if !a.UI {
		return ""
	}
	u := strings.TrimRight(a.Base, "/") + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	return u
}
