package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

func init() {
	register(&Command{Name: "tail", Short: "follow spans matching a filter as they arrive", Run: runTail})
}

func runTail(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "tail", "[flags] [TRACEQL]")
	var c clientFlags
	c.register(fs, env)
	fs.Lookup("json").Usage = "print each span as one line of JSON (the API's span shape) instead of a table row"
	var sf spanFilterFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{}
	sf.set(params, fs.Args())
	u := strings.TrimRight(c.server, "/") + "/api/v1/tail?" + params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: --server %q: %v", errUsage, c.server, err)
	}
	c.setAuth(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot reach the server at %s (is 'rastro serve' running?): %w", c.server, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	w := bufio.NewWriter(env.Stdout)
	defer w.Flush()
	if !c.json {
		fmt.Fprintf(w, "%-29s  %-16s  %-32s  %9s  %-6s  %s\n", "START", "SERVICE", "NAME", "DURATION", "STATUS", "TRACE ID")
		w.Flush()
	}
	// An idle tail prints nothing more: say what it waits for (on
	// stderr, so that the rows alone go to a pipe).
	fmt.Fprintf(env.Stderr, "rastro tail: waiting for new spans %s at %s; Ctrl-C to stop\n", tailWhat(params, c.project), c.server)
	err = readEvents(resp.Body, func(event, data string) error {
		switch event {
		case "dropped":
			var d struct{ Dropped int64 }
			json.Unmarshal([]byte(data), &d)
			w.Flush()
			fmt.Fprintf(env.Stderr, "rastro tail: the server skipped %s of the project (matching the filter or not) because this client read too slowly\n", plural(d.Dropped, "span"))
		case "spans":
			var b struct{ Spans []json.RawMessage }
			if err := json.Unmarshal([]byte(data), &b); err != nil {
				return fmt.Errorf("decode server event: %w", err)
			}
			for _, raw := range b.Spans {
				if c.json {
					w.Write(raw)
					w.WriteByte('\n')
					continue
				}
				var s apiSpan
				if err := json.Unmarshal(raw, &s); err != nil {
					return fmt.Errorf("decode server event: %w", err)
				}
				fmt.Fprintf(w, "%-29s  %-16s  %-32s  %9s  %-6s  %s\n", c.fmtTime(s.Start), s.Service, s.Name, fmtDuration(s.DurationNs), s.Status, s.TraceID)
			}
		}
		return w.Flush()
	})
	switch {
	case ctx.Err() != nil:
		return nil // interrupted: the normal way to stop
	case err != nil:
		return err
	}
	return errors.New("the server ended the stream (shutting down?)")
}

// readEvents calls fn for each server-sent event of r until r ends.
func readEvents(r io.Reader, fn func(event, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event != "" || data != "" {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[len("data:"):], " ")
		}
	}
	return sc.Err()
}

// tailWhat words a tail's filter and project: `matching { status = error }
// and service=api in project "shop"`, or "of every service".
func tailWhat(params url.Values, project string) string {
	var conds []string
	if q := params.Get("q"); q != "" {
		conds = append(conds, q)
	}
	for _, k := range []string{"service", "name", "status", "min_duration", "max_duration", "content"} {
		if v := params.Get(k); v != "" {
			conds = append(conds, k+"="+v)
		}
	}
	what := "of every service"
	if len(conds) > 0 {
		what = "matching " + strings.Join(conds, " and ")
	}
	if project != "" {
		what += fmt.Sprintf(" in project %q", project)
	}
	return what
}
