package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/insight"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// insightRoutes serve the first call of an investigation: the summary of a
// window against the one before, and the anomaly list.
func (s *Server) insightRoutes() []route {
	q := s.withBackend
	return []route{
		{method: "GET", pattern: "/api/v1/summary", access: accessRead, name: "summary", handler: q(s.handleSummary), documented: true},
		{method: "GET", pattern: "/api/v1/anomalies", access: accessRead, name: "anomalies", handler: q(s.handleAnomalies), documented: true},
	}
}

// insightParams reads since, until (default: the last 24 hours, like the
// service routes), service, q and the span search's other filters,
// sensitivity and limit.
func (s *Server) insightParams(w http.ResponseWriter, r *http.Request) (p insight.Params, ok bool) {
	v := r.URL.Query()
	now := time.Now()
	defaulted := defaultSince(v, now)
	f, err := query.FromValues(v, now)
	if err != nil {
		writeError(w, http.StatusBadRequest, sinceDefaultHint(err.Error(), defaulted))
		return insight.Params{}, false
	}
	p = insight.Params{Start: f.Start, Service: f.Service}
	if p.End, ok = closeWindow(w, f.Start, f.End); !ok {
		return p, false
	}
	if f.Expr != nil || f.Content != nil || f.Name != "" || f.HasStatus || f.MinDuration != 0 || f.MaxDuration != 0 {
		f.Start, f.End, f.Limit = 0, 0, 0
		p.Filter = &f
	}
	if sv := v.Get("sensitivity"); sv != "" {
		x, err := strconv.ParseFloat(sv, 64)
		if err != nil || !(x > 0 && x <= 100) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("sensitivity: %q is not a number above 0 and at most 100 (1 is the default; 2 reports moves half as strong)", sv))
			return p, false
		}
		p.Sensitivity = x
	}
	if p.Limit, ok = intParam(w, r, "limit", 0, 1, 1000); !ok {
		return p, false
	}
	if s.opts.UI != nil {
		p.UIBase = requestBase(r)
	}
	return p, true
}

// requestBase is the scheme and host the client reached this server at,
// for links back into the web UI.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	host := r.Host
	if h := r.Header.Get("X-Forwarded-Host"); h != "" && !strings.ContainsAny(h, "/ ,") {
		host = h
	}
	return (&url.URL{Scheme: scheme, Host: host}).String()
}

// textFormat reads format: json (the default) or text.
func textFormat(w http.ResponseWriter, r *http.Request) (text, ok bool) {
	switch f := r.URL.Query().Get("format"); f {
	case "", "json":
		return false, true
	case "text":
		return true, true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("format: %q is not one of json, text", f))
		return false, false
	}
}

func (s *Server) insightFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, insight.ErrUnsupported) {
		writeError(w, http.StatusNotImplemented, err.Error())
		return
	}
	s.queryFailed(w, err)
}

// textWriter is an answer with a plain-text rendering.
type textWriter interface{ WriteText(w io.Writer) error }

// handleInsight answers a summary or an anomaly list, as JSON or text.
func (s *Server) handleInsight(w http.ResponseWriter, r *http.Request, compute func(p insight.Params) (textWriter, error)) {
	text, ok := textFormat(w, r)
	if !ok {
		return
	}
	p, ok := s.insightParams(w, r)
	if !ok {
		return
	}
	ans, err := compute(p)
	if err != nil {
		s.insightFailed(w, err)
		return
	}
	if text {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = ans.WriteText(w)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

func (s *Server) handleSummary(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	s.handleInsight(w, r, func(p insight.Params) (textWriter, error) { return insight.Summarize(r.Context(), b, project, p) })
}

func (s *Server) handleAnomalies(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	s.handleInsight(w, r, func(p insight.Params) (textWriter, error) { return insight.Anomalies(r.Context(), b, project, p) })
}
