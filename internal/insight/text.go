package insight

import (
	"fmt"
	"io"
	"strings"
)

// WriteText renders a summary compactly for a model (or a person) to read:
// one line per item, numbers with units, changes against the previous
// window in brackets.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Summary of %s to %s (%s), compared with the window before.\n", s.Window.Since, s.Window.Until, human(s.Window.Seconds))
	t := s.Totals
	fmt.Fprintf(&b, "All services: %d spans (%.4g/s%s), %d errors (%s%s).\n", t.Spans, t.RatePerSec, pct(t.RatePct),
		t.Errors, rate(t.ErrorRate), points(t.ErrorRatePoints, t.PreviousSpans > 0))

	fmt.Fprintf(&b, "\nAnomalies (%d", len(s.Anomalies))
	if s.MoreAnomalies > 0 {
		fmt.Fprintf(&b, " of %d", len(s.Anomalies)+s.MoreAnomalies)
	}
	b.WriteString("):\n")
	if len(s.Anomalies) == 0 {
		b.WriteString("  none above the threshold.\n")
	}
	writeWhere(&b, s.AnomalyServices)
	for _, a := range s.Anomalies {
		writeAnomaly(&b, &a)
	}

	b.WriteString("\nServices (spans/s, error rate, p50/p95/p99; [change vs previous window]):\n")
	if len(s.Services) == 0 {
		b.WriteString("  no spans in this window.\n")
	}
	for _, sv := range s.Services {
		writeSeries(&b, "  "+sv.Service, &sv)
	}

	fmt.Fprintf(&b, "\nTop error groups (%d", len(s.ErrorGroups))
	if s.MoreErrorGroups > 0 {
		fmt.Fprintf(&b, " of %d", len(s.ErrorGroups)+s.MoreErrorGroups)
	}
	b.WriteString("):\n")
	if len(s.ErrorGroups) == 0 {
		b.WriteString("  none.\n")
	}
	for _, g := range s.ErrorGroups {
		fmt.Fprintf(&b, "  %s %s: %q x%d", g.Service, g.Operation, errText(&g), g.Count)
		if g.New {
			b.WriteString(" [new]")
		} else {
			fmt.Fprintf(&b, " [baseline %d]", g.BaselineCount)
		}
		fmt.Fprintf(&b, " last %s; trace %s\n", g.Last, g.Links.TraceID)
	}

	b.WriteString("\nSlowest operations by p95:\n")
	if len(s.SlowestOperations) == 0 {
		b.WriteString("  none.\n")
	}
	for _, op := range s.SlowestOperations {
		writeSeries(&b, "  "+op.Service+" "+op.Operation, &op)
	}

	if u := s.LLM; u != nil {
		fmt.Fprintf(&b, "\nLLM usage: %d calls, %d input + %d output tokens, $%.4g (previous window $%.4g).\n",
			u.Calls, u.InputTokens, u.OutputTokens, u.CostUSD, u.PreviousCost)
		for _, m := range u.Models {
			fmt.Fprintf(&b, "  %s", m.Model)
			if m.Provider != "" {
				fmt.Fprintf(&b, " (%s)", m.Provider)
			}
			fmt.Fprintf(&b, ": %d calls%s, %d in / %d out tokens, $%.4g%s, p95 %s, %d errors\n", m.Calls, pct(m.CallsPct),
				m.InputTokens, m.OutputTokens, m.CostUSD, pct(m.CostPct), fmtMs(m.P95Ms*1e6), m.Errors)
		}
		if u.MoreModels > 0 {
			fmt.Fprintf(&b, "  ... and %d more models\n", u.MoreModels)
		}
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(&b, "\nWarning: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText renders an anomaly report like the summary's anomaly section.
func (r *AnomalyReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Anomalies of %s to %s (%s), sensitivity %g (reported at score >= %.3g): %d",
		r.Window.Since, r.Window.Until, human(r.Window.Seconds), r.Sensitivity, r.Threshold, len(r.Anomalies))
	if r.More > 0 {
		fmt.Fprintf(&b, " of %d", len(r.Anomalies)+r.More)
	}
	b.WriteString(".\n")
	writeWhere(&b, r.Services)
	for _, a := range r.Anomalies {
		writeAnomaly(&b, &a)
	}
	fmt.Fprintf(&b, "Method: %s\n", r.Method)
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeWhere names the services the anomalies concentrate in.
func writeWhere(b *strings.Builder, svcs []ServiceAnomalies) {
	if len(svcs) == 0 {
		return
	}
	b.WriteString("  by service:")
	for i, sv := range svcs {
		if i > 0 {
			b.WriteByte(';')
		}
		kinds := make([]string, 0, len(sv.Kinds))
		for _, k := range []string{KindLatency, KindErrorRate, KindTrafficDrop, KindNewError} {
			if n := sv.Kinds[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(b, " %s %d (%s, top score %.3g)", sv.Service, sv.Count, strings.Join(kinds, ", "), sv.TopScore)
	}
	b.WriteString("\n")
}

func writeAnomaly(b *strings.Builder, a *Anomaly) {
	fmt.Fprintf(b, "  %d. [%s, score %.3g] %s.\n", a.Rank, a.Kind, a.Score, a.Summary)
	fmt.Fprintf(b, "     why: %s.\n", a.Why)
	fmt.Fprintf(b, "     next: %s\n", a.NextStep)
	if a.Next.Filter != "" {
		fmt.Fprintf(b, "     filter: %s\n", a.Next.Filter)
	}
	if a.Next.TraceURL != "" {
		fmt.Fprintf(b, "     trace: %s\n", a.Next.TraceURL)
	} else if a.Next.TraceID != "" {
		fmt.Fprintf(b, "     trace: %s\n", a.Next.TraceID)
	}
}

func writeSeries(b *strings.Builder, label string, s *Series) {
	c := s.Current
	fmt.Fprintf(b, "%s: %.4g/s, %s, %s/%s/%s", label, c.RatePerSec, rate(c.ErrorRate), fmtMs(c.P50Ms*1e6), fmtMs(c.P95Ms*1e6), fmtMs(c.P99Ms*1e6))
	if ch := s.Change; ch != nil {
		fmt.Fprintf(b, " [rate%s, errors%s, p95%s]", orNA(pct(ch.RatePct)), points(ch.ErrorRatePoints, true), orNA(pct(ch.P95Pct)))
	} else {
		b.WriteString(" [new: no spans before]")
	}
	b.WriteByte('\n')
}

func errText(g *ErrorGroup) string {
	if g.Type != "" {
		return g.Type + ": " + clip(g.Message, 160)
	}
	return clip(g.Message, 160)
}

func pct(p *float64) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" %+.3g%%", *p)
}

func orNA(s string) string {
	if s == "" {
		return " n/a"
	}
	return s
}

func points(p float64, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf(" %+.3gpt", p)
}

func rate(r float64) string { return fmt.Sprintf("%.3g%% errors", 100*r) }

func human(secs float64) string {
	switch {
	case secs >= 86400 && int64(secs)%86400 == 0:
		return fmt.Sprintf("%dd", int64(secs)/86400)
	case secs >= 3600 && int64(secs)%3600 == 0:
		return fmt.Sprintf("%dh", int64(secs)/3600)
	case secs >= 60 && int64(secs)%60 == 0:
		return fmt.Sprintf("%dm", int64(secs)/60)
	}
	return fmt.Sprintf("%.0fs", secs)
}
