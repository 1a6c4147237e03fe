package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

func init() {
	register(&Command{Name: "status", Short: "how the running server is doing: data held, disk, WAL, rates, seals, merges, warnings", Run: runStatus})
}

// apiStatus is GET /api/v1/status (docs/api.md#status).
type apiStatus struct {
	Version       string  `json:"version"`
	Started       string  `json:"started"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Storage       string  `json:"storage"`
	Projects      []struct {
		Name   string `json:"name"`
		Spans  int64  `json:"spans"`
		Traces int64  `json:"traces"`
	} `json:"projects"`
	Segments struct {
		Count int   `json:"count"`
		Bytes int64 `json:"bytes"`
		Tiers []struct {
			Tier     int   `json:"tier"`
			Segments int   `json:"segments"`
			Bytes    int64 `json:"bytes"`
		} `json:"tiers"`
	} `json:"segments"`
	DiskBytes  int64 `json:"disk_bytes"`
	ValueBytes int64 `json:"value_bytes"`
	WAL        struct {
		Bytes          int64   `json:"bytes"`
		OldestUnsealed string  `json:"oldest_unsealed"`
		AgeSeconds     float64 `json:"age_seconds"`
		ReplayedSpans  int64   `json:"replayed_spans"`
	} `json:"wal"`
	Buffer struct {
		Spans    int64   `json:"spans"`
		Bytes    int64   `json:"bytes"`
		MaxBytes int64   `json:"max_bytes"`
		Fill     float64 `json:"fill"`
	} `json:"buffer"`
	RatesSeconds float64 `json:"rates_over_seconds"`
	Ingest       struct {
		SpansTotal     int64   `json:"spans_total"`
		SpansPerSecond float64 `json:"spans_per_second"`
		Refused429     int64   `json:"refused_429_total"`
		BufferFull     int64   `json:"buffer_full_total"`
		ProjectLimited int64   `json:"project_limited_total"`
		Rejected       int64   `json:"rejected_total"`
	} `json:"ingest"`
	Queries struct {
		Total      int64   `json:"total"`
		PerSecond  float64 `json:"per_second"`
		Refused429 int64   `json:"refused_429_total"`
		Timeouts   int64   `json:"timeouts_total"`
	} `json:"queries"`
	Seals    apiLifecycle `json:"seals"`
	Merges   apiLifecycle `json:"merges"`
	Warnings struct {
		Corruptions int64    `json:"corruptions_total"`
		IOErrors    int64    `json:"io_errors_total"`
		ValueErrors int64    `json:"value_errors_total"`
		Quarantined []string `json:"quarantined"`
	} `json:"warnings"`
	Retention struct {
		Default  string            `json:"default"`
		Projects map[string]string `json:"projects"`
	} `json:"retention"`
	Erasures struct {
		Pending int `json:"pending"`
		Hidden  int `json:"hidden"`
	} `json:"erasures"`
}

type apiLifecycle struct {
	Total  int64  `json:"total"`
	Errors int64  `json:"errors_total"`
	Last   string `json:"last"`
	Error  string `json:"error"`
}

func runStatus(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "status", "[flags]")
	var c clientFlags
	c.register(fs, env)
	watch := fs.Duration("watch", 0, "refresh every this long (e.g. 2s) until interrupted; 0: print once")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: status takes no arguments", errUsage)
	}
	if *watch < 0 || (*watch > 0 && *watch < 100*time.Millisecond) {
		return fmt.Errorf("%w: --watch %s: give 0 (once) or at least 100ms", errUsage, *watch)
	}
	for {
		body, err := c.get(ctx, "/api/v1/status", nil)
		if err != nil {
			if *watch > 0 && ctx.Err() != nil {
				return nil // interrupted: the normal way to stop watching
			}
			return err
		}
		if c.json {
			if _, err := env.Stdout.Write(body); err != nil {
				return err
			}
		} else {
			var st apiStatus
			if err := json.Unmarshal(body, &st); err != nil {
				return fmt.Errorf("decode server response: %w", err)
			}
			var b bytes.Buffer
			if *watch > 0 && isTerminal(env.Stdout) {
				b.WriteString("\x1b[H\x1b[2J") // redraw in place
			}
			c.printStatus(&b, &st)
			if _, err := env.Stdout.Write(b.Bytes()); err != nil {
				return err
			}
		}
		if *watch == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*watch):
		}
		if !c.json && !isTerminal(env.Stdout) {
			fmt.Fprintln(env.Stdout)
		}
	}
}

// printStatus writes the report on one screen.
func (c *clientFlags) printStatus(w io.Writer, st *apiStatus) {
	fmt.Fprintf(w, "rastro %s at %s, up %s (since %s)\n", st.Version, c.server, fmtSeconds(st.UptimeSeconds), c.fmtRFC3339(st.Started))
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "  %-10s "+format+"\n", append([]any{k}, a...)...) }
	if len(st.Projects) == 0 {
		row("data", "no spans stored")
	}
	for _, p := range st.Projects {
		row("data", "%s: %s, %s", p.Name, plural(p.Spans, "span"), plural(p.Traces, "trace"))
	}
	tiers := make([]string, 0, len(st.Segments.Tiers))
	for _, t := range st.Segments.Tiers {
		tiers = append(tiers, fmt.Sprintf("tier %d: %d (%s)", t.Tier, t.Segments, fmtBytes(t.Bytes)))
	}
	seg := plural(st.Segments.Count, "segment") + " (" + fmtBytes(st.Segments.Bytes) + ")"
	if len(tiers) > 0 {
		seg += "; " + strings.Join(tiers, ", ")
	}
	row("segments", "%s", seg)
	row("disk", "%s (segments, WAL and %s of values stored apart)", fmtBytes(st.DiskBytes), fmtBytes(st.ValueBytes))
	wal := fmtBytes(st.WAL.Bytes)
	if st.WAL.OldestUnsealed != "" {
		wal += fmt.Sprintf(", oldest unsealed data %s old", fmtSeconds(st.WAL.AgeSeconds))
	} else {
		wal += ", everything sealed"
	}
	row("WAL", "%s; %s recovered at start", wal, plural(st.WAL.ReplayedSpans, "span"))
	row("buffer", "%s, %s of %s (%.1f%% full)", plural(st.Buffer.Spans, "span"), fmtBytes(st.Buffer.Bytes), fmtBytes(st.Buffer.MaxBytes), 100*st.Buffer.Fill)
	over := "over the last " + fmtSeconds(st.RatesSeconds)
	row("ingest", "%.1f spans/s %s; %s in all; %s refused with 429", st.Ingest.SpansPerSecond, over,
		plural(st.Ingest.SpansTotal, "span"), plural(st.Ingest.Refused429, "request"))
	row("queries", "%.2f/s %s; %s in all; %s refused with 429, %s", st.Queries.PerSecond, over,
		plural(st.Queries.Total, "query", "queries"), plural(st.Queries.Refused429, "query", "queries"), plural(st.Queries.Timeouts, "timeout"))
	row("seals", "%s", c.lifecycle(st.Seals, "seal"))
	row("merges", "%s", c.lifecycle(st.Merges, "merge"))
	var warn []string
	if n := st.Warnings.Corruptions; n > 0 {
		warn = append(warn, plural(n, "corruption")+" found")
	}
	if n := st.Warnings.IOErrors; n > 0 {
		warn = append(warn, plural(n, "I/O error"))
	}
	if n := st.Warnings.ValueErrors; n > 0 {
		warn = append(warn, plural(n, "unreadable stored value"))
	}
	if n := len(st.Warnings.Quarantined); n > 0 {
		warn = append(warn, plural(n, "quarantined segment")+": "+strings.Join(st.Warnings.Quarantined, ", "))
	}
	if len(warn) == 0 {
		warn = append(warn, "none")
	}
	row("warnings", "%s", strings.Join(warn, "; "))
	ret := st.Retention.Default
	if len(st.Retention.Projects) > 0 {
		names := make([]string, 0, len(st.Retention.Projects))
		for p := range st.Retention.Projects {
			names = append(names, p)
		}
		sort.Strings(names)
		for _, p := range names {
			ret += fmt.Sprintf(", %s: %s", p, st.Retention.Projects[p])
		}
	}
	row("retention", "%s", ret)
	row("erasures", "%d pending, %d hidden and waiting for removal", st.Erasures.Pending, st.Erasures.Hidden)
}

func (c *clientFlags) lifecycle(l apiLifecycle, noun string) string {
	s := plural(l.Total, noun) + " since start"
	if l.Last != "" {
		s += ", last " + c.fmtRFC3339(l.Last)
	}
	if l.Errors > 0 {
		s += "; " + plural(l.Errors, "failure")
	}
	if l.Error != "" {
		s += "; failing now: " + l.Error
	}
	return s
}

// fmtBytes writes a size in binary units: 512 B, 1.5 KiB, 64.0 MiB.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %s", f, []string{"", "KiB", "MiB", "GiB", "TiB"}[u])
}

// fmtSeconds writes a length of time rounded for reading: 45s, 3m20s, 2h5m.
func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return strings.TrimSuffix(d.Round(time.Second).String(), "0s")
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
