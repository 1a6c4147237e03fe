package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// clientFlags are the flags every command that talks to a server shares.
type clientFlags struct {
	server  string
	project string
	token   string
	json    bool
	utc     bool
	zone    *time.Location // of the times in tables; set by register
}

// The defaults come from RASTRO_SERVER, RASTRO_PROJECT and RASTRO_TOKEN
// when they are set.
func (c *clientFlags) register(fs *flag.FlagSet, env *Env) {
	server, project := "http://127.0.0.1:4318", ""
	if v, ok := env.LookupEnv("RASTRO_SERVER"); ok && v != "" {
		server = v
	}
	if v, ok := env.LookupEnv("RASTRO_PROJECT"); ok {
		project = v
	}
	fs.StringVar(&c.server, "server", server, "URL of the rastro server (RASTRO_SERVER); https:// for a server with --tls-cert (a private CA: SSL_CERT_FILE)")
	fs.StringVar(&c.project, "project", project, "project (tenant) to query; empty means the server's default, or the token's only project (RASTRO_PROJECT)")
	registerToken(fs, env, &c.token)
	fs.BoolVar(&c.json, "json", false, "print the server's JSON response instead of a table")
	fs.BoolVar(&c.utc, "utc", false, "print times in UTC instead of the local time zone")
	c.zone = env.Zone
}

// tableTimeLayout is the one time format of every table: RFC 3339 to the
// millisecond, with the zone's offset. JSON answers keep nanoseconds.
const tableTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// location is the zone of the times in tables: UTC with --utc, else the
// environment's zone (local by default).
func (c *clientFlags) location() *time.Location {
	switch {
	case c.utc:
		return time.UTC
	case c.zone != nil:
		return c.zone
	}
	return time.Local
}

// fmtTime writes a Unix nanosecond time in the tables' format.
func (c *clientFlags) fmtTime(ns uint64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, int64(ns)).In(c.location()).Format(tableTimeLayout)
}

// fmtRFC3339 rewrites an RFC 3339 time from the API in the tables' format.
func (c *clientFlags) fmtRFC3339(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return c.fmtTime(uint64(t.UnixNano()))
}

// registerToken declares --token, whose default is RASTRO_TOKEN. The
// variable is the better place for it: a flag is visible to every user of
// the machine in the process list.
func registerToken(fs *flag.FlagSet, env *Env, token *string) {
	def, _ := env.LookupEnv("RASTRO_TOKEN")
	fs.StringVar(token, "token", "", "bearer token for a server with --auth-file (default: RASTRO_TOKEN, which keeps it out of the process list)")
	if def != "" {
		*token = def
	}
}

// setAuth adds the request's Authorization and X-Scope-OrgID headers.
func (c *clientFlags) setAuth(h http.Header) {
	if c.project != "" {
		h.Set("X-Scope-OrgID", c.project)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// get fetches path?params from the server and returns the body of a 2xx
// response; other responses become errors carrying the server's message.
func (c *clientFlags) get(ctx context.Context, path string, params url.Values) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, params, nil, 60*time.Second)
}

// fetch gets path?params. With --json it prints the server's answer as is
// and reports printed; otherwise it decodes the answer into out.
func (c *clientFlags) fetch(ctx context.Context, env *Env, path string, params url.Values, out any) (printed bool, err error) {
	body, err := c.get(ctx, path, params)
	if err != nil {
		return false, err
	}
	if c.json {
		_, err := env.Stdout.Write(body)
		return true, err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return false, fmt.Errorf("decode server response: %w", err)
	}
	return false, nil
}

// do sends one request (body: JSON, or nil) and returns the body of a 2xx
// response, like get.
func (c *clientFlags) do(ctx context.Context, method, path string, params url.Values, body []byte, timeout time.Duration) ([]byte, error) {
	u := strings.TrimRight(c.server, "/") + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: --server %q: %v", errUsage, c.server, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.setAuth(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the server at %s (is 'rastro serve' running?): %w", c.server, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, responseError(resp)
	}
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response from %s: %w", u, err)
	}
	return out, nil
}

// responseError turns a non-2xx response into an error carrying the
// server's message.
func responseError(resp *http.Response) error {
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(out, &e) == nil && e.Error != "" {
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("server answered %s: %s (give the token with RASTRO_TOKEN or --token)", resp.Status, e.Error)
		}
		return fmt.Errorf("server answered %s: %s", resp.Status, e.Error)
	}
	return fmt.Errorf("server answered %s", resp.Status)
}

// apiSpan is the subset of the API's span JSON the CLI prints.
type apiSpan struct {
	TraceID      string         `json:"trace_id"`
	SpanID       string         `json:"span_id"`
	ParentSpanID string         `json:"parent_span_id"`
	Name         string         `json:"name"`
	Kind         string         `json:"kind"`
	Service      string         `json:"service"`
	StartTime    string         `json:"start_time"`
	Start        uint64         `json:"start_time_unix_nano"`
	DurationNs   uint64         `json:"duration_ns"`
	Status       string         `json:"status"`
	StatusMsg    string         `json:"status_message"`
	Attributes   map[string]any `json:"attributes"`
}

func fmtDuration(ns uint64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// traceLink is the web UI's page of a trace on this server.
func (c *clientFlags) traceLink(traceID string) string {
	return strings.TrimRight(c.server, "/") + "/traces/" + traceID
}
