package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "sessions", Short: "list LLM sessions (conversations), or show one as a conversation", Run: runSessions})
}

func runSessions(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "sessions", "[flags] [SESSION_ID]   (with an id: that session as a conversation)")
	var c clientFlags
	c.register(fs, env)
	sortBy := fs.String("sort", "last_seen", "order: last_seen, first_seen, cost, tokens, spans or errors (descending)")
	limit := fs.Int("limit", 50, "most sessions to list (1-1000)")
	var win windowFlags
	win.register(fs)
	full := fs.Bool("full", false, "with SESSION_ID: print messages whole (default: the first 300 characters)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{}
	win.set(params)
	switch fs.NArg() {
	case 0:
	case 1:
		return showSession(ctx, env, &c, fs.Arg(0), params, *full)
	default:
		return fmt.Errorf("%w: give at most one session id", errUsage)
	}
	params.Set("sort", *sortBy)
	params.Set("limit", strconv.Itoa(*limit))
	var resp struct {
		Sessions []struct {
			ID    string   `json:"session_id"`
			Users []string `json:"users"`
			llmMeasures
		} `json:"sessions"`
		Total int `json:"total"`
		listingWindow
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/sessions", params, &resp); err != nil || printed {
		return err
	}
	if len(resp.Sessions) == 0 {
		return resp.empty(env.Stdout, "sessions")
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tUSERS\tLAST SEEN\tTRACES\tSPANS\tERRORS\tTOKENS IN/OUT\tCOST USD")
	for _, s := range resp.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d/%d\t%.4f\n", s.ID, strings.Join(s.Users, ","), c.fmtRFC3339(s.LastSeen),
			s.Traces, s.Spans, s.Errors, s.InputTokens, s.OutputTokens, s.CostUSD)
	}
	fmt.Fprintf(tw, "(%d of %s)\n", len(resp.Sessions), plural(resp.Total, "session"))
	return tw.Flush()
}

// apiMessage and apiLLMCall are the parts of a session's page the CLI prints.
type apiMessage struct {
	Role     string `json:"role"`
	Content  string `json:"content"`
	ToolName string `json:"tool_name"`
}

type apiLLMCall struct {
	Name           string       `json:"name"`
	StartTime      string       `json:"start_time"`
	DurationNs     uint64       `json:"duration_ns"`
	Status         string       `json:"status"`
	Model          string       `json:"model"`
	Counted        bool         `json:"counted"`
	InputTokens    int64        `json:"input_tokens"`
	OutputTokens   int64        `json:"output_tokens"`
	CostUSD        float64      `json:"cost_usd"`
	InputMessages  []apiMessage `json:"input_messages"`
	OutputMessages []apiMessage `json:"output_messages"`
}

// showSession prints one session as a conversation: each trace, its LLM
// calls, and the messages each call added. Chat clients resend the whole
// history with every call, so a call's input messages that repeat what the
// previous call sent and received are left out.
func showSession(ctx context.Context, env *Env, c *clientFlags, id string, params url.Values, full bool) error {
	var resp struct {
		SessionID string `json:"session_id"`
		Traces    []struct {
			TraceID     string       `json:"trace_id"`
			StartTime   string       `json:"start_time"`
			Duration    uint64       `json:"duration_ns"`
			RootService string       `json:"root_service"`
			RootName    string       `json:"root_name"`
			Spans       int          `json:"span_count"`
			Errors      int          `json:"error_count"`
			LLMSpans    []apiLLMCall `json:"llm_spans"`
		} `json:"traces"`
		Warnings []string `json:"warnings"`
	}
	if printed, err := c.fetch(ctx, env, "/api/v1/sessions/"+url.PathEscape(id), params, &resp); err != nil || printed {
		return err
	}
	w := env.Stdout
	var cost float64
	var in, out int64
	var seen []apiMessage // what the conversation holds so far
	for _, t := range resp.Traces {
		root := t.RootService + ": " + t.RootName
		if t.RootName == "" {
			root = "(root not received)"
		}
		fmt.Fprintf(w, "%s  trace %s  %s  %s  %s, %s\n", c.fmtRFC3339(t.StartTime), t.TraceID, root, fmtDuration(t.Duration), plural(t.Spans, "span"), plural(t.Errors, "error"))
		for _, call := range t.LLMSpans {
			line := fmt.Sprintf("  %s  %s  %s", c.fmtRFC3339(call.StartTime), call.Name, fmtDuration(call.DurationNs))
			if call.Model != "" {
				line += "  " + call.Model
			}
			if call.Counted {
				line += fmt.Sprintf("  %d in / %d out tokens  $%.5f", call.InputTokens, call.OutputTokens, call.CostUSD)
				cost += call.CostUSD
				in += call.InputTokens
				out += call.OutputTokens
			}
			if call.Status == "error" {
				line += "  ERROR"
			}
			fmt.Fprintln(w, line)
			msgs := call.InputMessages
			if len(seen) > 0 && len(msgs) >= len(seen) && slices.Equal(msgs[:len(seen)], seen) {
				msgs = msgs[len(seen):]
			}
			for _, m := range msgs {
				printMessage(w, m, full)
			}
			for _, m := range call.OutputMessages {
				printMessage(w, m, full)
			}
			if len(call.InputMessages)+len(call.OutputMessages) > 0 {
				seen = append(slices.Clone(call.InputMessages), call.OutputMessages...)
			}
		}
	}
	fmt.Fprintf(w, "session %s: %s, %d in / %d out tokens, $%.5f (%s)\n", resp.SessionID, plural(len(resp.Traces), "trace"), in, out, cost,
		strings.TrimRight(c.server, "/")+"/sessions/"+url.PathEscape(resp.SessionID))
	for _, warning := range resp.Warnings {
		fmt.Fprintln(env.Stderr, "warning:", warning)
	}
	return nil
}

func printMessage(w io.Writer, m apiMessage, full bool) {
	role := m.Role
	if m.ToolName != "" {
		role += " -> " + m.ToolName
	}
	text := strings.TrimSpace(m.Content)
	if r := []rune(text); !full && len(r) > 300 {
		text = string(r[:300]) + "..."
	}
	text = strings.ReplaceAll(text, "\n", "\n      ")
	fmt.Fprintf(w, "      %s: %s\n", role, text)
}
