package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// maxEraseBody bounds the JSON body of POST /api/v1/erase.
const maxEraseBody = 64 << 10

// eraseBody is the JSON body of POST /api/v1/erase.
type eraseBody struct {
	Query   string `json:"query"`
	TraceID string `json:"trace_id"`
	All     bool   `json:"all"` // confirms a query that covers every trace of the project
}

func (s *Server) handleEraseTrace(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	id, err := model.ParseTraceID(r.PathValue("trace_id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.erase(w, r, b, store.EraseRequest{Project: project, TraceID: &id})
}

func (s *Server) handleErase(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEraseBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v (at most %d bytes)", err, maxEraseBody))
		return
	}
	var body eraseBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `body: want JSON {"query": "{ span.user.id = \"u_42\" }"} or {"trace_id": "..."}: `+err.Error())
		return
	}
	req := store.EraseRequest{Project: project, Query: body.Query, All: body.All}
	if body.TraceID != "" {
		id, err := model.ParseTraceID(body.TraceID)
		if err != nil {
			writeError(w, http.StatusBadRequest, "trace_id: "+err.Error())
			return
		}
		req.TraceID = &id
	}
	s.erase(w, r, b, req)
}

// erase answers 202 Accepted once the request is durable and its traces
// hidden; the body is the erasure's status (GET /api/v1/erasures/{id}
// follows it to "done").
func (s *Server) erase(w http.ResponseWriter, r *http.Request, b store.Backend, req store.EraseRequest) {
	st, err := b.Erase(r.Context(), req)
	if err != nil {
		s.queryFailed(w, err) // a refused request (store.ErrBadRequest) is a 400
		return
	}
	// The traces' log records go with them (docs/logs.md); the log store
	// removes them before answering.
	if a := s.logs.Load(); a != nil {
		traces := st.TraceIDs
		if traces == nil && req.TraceID != nil {
			traces = []model.TraceID{*req.TraceID}
		}
		if _, err := a.EraseTraces(req.Project, traces); err != nil {
			s.log.Error("erasing the traces' logs failed", "err", err, "erasure", st.ID)
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the spans are being erased (erasure %d), but erasing the log records of its %d traces failed: %v; send the same request again", st.ID, len(traces), err))
			return
		}
	}
	w.Header().Set("Location", "/api/v1/erasures/"+strconv.FormatUint(st.ID, 10))
	writeJSON(w, http.StatusAccepted, erasureJSON(st))
}

// erasureJSON is the API shape of an erasure's status.
type erasureJSON struct {
	ID          uint64          `json:"id"`
	Project     string          `json:"project"`
	Query       string          `json:"query,omitempty"`
	TraceID     string          `json:"trace_id,omitempty"`
	State       string          `json:"state"`
	RequestedAt time.Time       `json:"requested_at"`
	HiddenAt    *time.Time      `json:"hidden_at,omitempty"`
	DoneAt      *time.Time      `json:"done_at,omitempty"`
	Traces      int             `json:"traces"`
	SpansErased int64           `json:"spans_erased"`
	Error       string          `json:"error,omitempty"`
	TraceIDs    []model.TraceID `json:"-"`
}

func (s *Server) handleErasures(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	all, err := b.Erasures(r.Context(), project)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := make([]erasureJSON, len(all))
	for i, st := range all {
		out[i] = erasureJSON(st)
	}
	writeJSON(w, http.StatusOK, map[string]any{"erasures": out})
}

func (s *Server) handleErasure(w http.ResponseWriter, r *http.Request, b store.Backend, project string) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("erasure id %q is not a number", r.PathValue("id")))
		return
	}
	all, err := b.Erasures(r.Context(), project)
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	for _, st := range all {
		if st.ID == id {
			writeJSON(w, http.StatusOK, erasureJSON(st))
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no erasure %d in project %q", id, project))
}

// handleCompact runs compaction to completion (all projects: segments hold
// every project's spans).
func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request, b store.Backend, _ string) {
	c, ok := b.(store.Compactor)
	if !ok {
		notSupported(w, "compaction on request")
		return
	}
	res, err := c.Compact(r.Context())
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	out := map[string]any{
		"merges": res.Merges, "segments_before": res.SegmentsBefore, "segments_after": res.SegmentsAfter,
		"bytes_written": res.BytesWritten, "took_ms": float64(res.Took.Microseconds()) / 1000,
	}
	// The log store's segments too (internal/logstore), reported apart.
	if l := s.logs.Load(); l != nil {
		if lc, ok := l.LogBackend.(interface {
			Compact(context.Context, bool) (store.CompactResult, error)
		}); ok {
			lres, err := lc.Compact(r.Context(), true)
			if err != nil {
				s.queryFailed(w, err)
				return
			}
			out["log_merges"], out["log_segments_before"], out["log_segments_after"] = lres.Merges, lres.SegmentsBefore, lres.SegmentsAfter
		}
	}
	writeJSON(w, http.StatusOK, out)
}
