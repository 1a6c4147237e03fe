package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

func init() {
	register(&Command{Name: "erase", Short: "erase a trace, or every trace matching a TraceQL filter, for good", Run: runErase})
	register(&Command{Name: "compact", Short: "merge the server's small segments now (background compaction does it over time)", Run: runCompact})
}

// apiErasure is the server's erasure status.
type apiErasure struct {
	ID          uint64 `json:"id"`
	Project     string `json:"project"`
	Query       string `json:"query"`
	TraceID     string `json:"trace_id"`
	State       string `json:"state"`
	Traces      int    `json:"traces"`
	SpansErased int64  `json:"spans_erased"`
}

func runErase(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "erase", `[flags] { 'QUERY' | --trace TRACE_ID }   e.g. rastro erase '{ span.user.id = "u_42" }'`)
	var c clientFlags
	c.register(fs, env)
	trace := fs.String("trace", "", "erase this trace id instead of a query")
	wait := fs.Bool("wait", false, "wait until the spans are physically gone (state done), not only hidden")
	timeout := fs.Duration("timeout", 10*time.Minute, "with --wait, give up after this long")
	all := fs.Bool("all", false, "confirm a query that matches every trace of the project (refused without it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var body []byte
	switch {
	case *trace != "" && fs.NArg() == 0:
		body, _ = json.Marshal(map[string]string{"trace_id": *trace})
	case *trace == "" && fs.NArg() == 1:
		body, _ = json.Marshal(map[string]any{"query": fs.Arg(0), "all": *all})
	default:
		return fmt.Errorf("%w: give one TraceQL query argument, or --trace TRACE_ID", errUsage)
	}
	resp, err := c.do(ctx, http.MethodPost, "/api/v1/erase", nil, body, 10*time.Minute)
	if err != nil {
		return err
	}
	var st apiErasure
	if err := json.Unmarshal(resp, &st); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	if !c.json {
		fmt.Fprintf(env.Stdout, "erasure %d: %s hidden from every query; physical removal follows (state %s)\n", st.ID, plural(st.Traces, "trace"), st.State)
	}
	if *wait {
		stop := newProgress(env).while(fmt.Sprintf("erasure %d: waiting for the physical removal", st.ID))
		defer func() { stop() }() // on the early returns
		deadline := time.Now().Add(*timeout)
		for st.State != "done" {
			if time.Now().After(deadline) {
				return fmt.Errorf("erasure %d still %s after %s (GET /api/v1/erasures/%d follows it)", st.ID, st.State, *timeout, st.ID)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			if resp, err = c.get(ctx, "/api/v1/erasures/"+strconv.FormatUint(st.ID, 10), nil); err != nil {
				return err
			}
			if err := json.Unmarshal(resp, &st); err != nil {
				return fmt.Errorf("decode server response: %w", err)
			}
		}
		stop()
		stop = func() {}
		if !c.json {
			fmt.Fprintf(env.Stdout, "erasure %d done: %s removed from segments, WAL and value store\n", st.ID, plural(st.SpansErased, "span"))
		}
	}
	if c.json {
		_, err := env.Stdout.Write(resp)
		return err
	}
	return nil
}

func runCompact(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "compact", "[flags]")
	var c clientFlags
	c.register(fs, env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "project" })
	if given { // (RASTRO_PROJECT, set for the other commands, is no error)
		return fmt.Errorf("%w: --project does not apply: compaction merges the segments of every project", errUsage)
	}
	stop := newProgress(env).while("compacting (merging segments)")
	resp, err := c.do(ctx, http.MethodPost, "/api/v1/admin/compact", nil, []byte("{}"), 24*time.Hour)
	stop()
	if err != nil {
		return err
	}
	if c.json {
		_, err := env.Stdout.Write(resp)
		return err
	}
	var r struct {
		Merges         int     `json:"merges"`
		SegmentsBefore int     `json:"segments_before"`
		SegmentsAfter  int     `json:"segments_after"`
		BytesWritten   int64   `json:"bytes_written"`
		TookMs         float64 `json:"took_ms"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("decode server response: %w", err)
	}
	fmt.Fprintf(env.Stdout, "%s: %s -> %d, %s written in %.1fs\n", plural(r.Merges, "merge"), plural(r.SegmentsBefore, "segment"), r.SegmentsAfter, plural(r.BytesWritten, "byte"), r.TookMs/1000)
	return nil
}
