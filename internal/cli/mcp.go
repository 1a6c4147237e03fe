package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/mcpserver"
)

func init() {
	register(&Command{Name: "mcp", Short: "MCP server for AI agents over stdio, reading a running rastro server (see docs/agents.md)", Run: runMCP})
}

func runMCP(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "mcp", "[flags]")
	var c clientFlags
	c.register(fs, env)
	pricesFile := fs.String("prices", "", "the server's --prices file, if it has one: get_trace prices LLM spans with it (default: the built-in table)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	api := &mcpserver.API{Base: strings.TrimRight(c.server, "/"), Project: c.project, UI: hasUI(ctx, c.server)}
	if c.token != "" {
		api.Header = http.Header{"Authorization": {"Bearer " + c.token}}
	}
	if *pricesFile != "" {
		p, err := llm.LoadPrices(*pricesFile)
		if err != nil {
			return err
		}
		api.Prices = p
	}
	s := mcpserver.NewServer(api, nil)
	// stdout carries the protocol; anything else goes to stderr.
	t := &mcp.IOTransport{Reader: io.NopCloser(os.Stdin), Writer: nopWriteCloser{env.Stdout}}
	return s.Run(ctx, t)
}

// hasUI reports whether the server answers / with the web UI's page, so
// that tools give links to it. An unreachable server gets no links (tools
// still try it on every call).
func hasUI(ctx context.Context, server string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html")
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
