package mcpserver

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rastro-dev/rastro/internal/llm"
)

// Handler serves MCP's streamable HTTP transport for a Rastro server whose
// API is api (its root handler, called in process). Each request's
// X-Scope-OrgID is the tools' default project and its Authorization header
// is passed on to the API. ui says whether the server has the web UI;
// prices is its LLM price table (nil: the built-in one).
//
// The handler is stateless (no session is kept between requests), so any
// of several rastro processes behind a load balancer can answer.
func Handler(api http.Handler, ui bool, prices *llm.Prices) http.Handler {
	client := InProcess(api)
	cache := mcp.NewSchemaCache()
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		a := &API{Base: base(r), Client: client, Project: r.Header.Get("X-Scope-OrgID"), UI: ui, Prices: prices}
		if auth := r.Header.Get("Authorization"); auth != "" {
			a.Header = http.Header{"Authorization": {auth}}
		}
		return NewServer(a, cache)
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// base is the scheme and host the client reached the server at.
func base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
