package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
)

// maxEraseBody bounds the JSON body of POST /api/v1/erase.
const maxEraseBody = 64 << 10

// eraseBody is the JSON body of POST /api/v1/erase.
type eraseBody struct {
	Query   string `json:"query"`
	TraceID string `json:"trace_id"`
	All     bool   `json:"all"` // confirms a query that covers every trace of the project
}

func (s *Server) handleEraseTrace(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	id, err := model.ParseTraceID(r.PathValue("trace_id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.erase(w, r, e, engine.EraseRequest{Project: project, TraceID: &id})
}

func (s *Server) handleErase(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEraseBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v (at most %d bytes)", err, maxEraseBody))
		return
	}
	var body eraseBody
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `body: want JSON {"query": "{ span.user.id = \"u_42\" }"} or {"trace_id": "..."}: `+err.Error())
		return
	}
	req := engine.EraseRequest{Project: project, Query: body.Query, All: body.All}
	if body.TraceID != "" {
		id, err := model.ParseTraceID(body.TraceID)
		if err != nil {
			writeError(w, http.StatusBadRequest, "trace_id: "+err.Error())
			return
		}
		req.TraceID = &id
	}
	s.erase(w, r, e, req)
}

// erase answers 202 Accepted once the request is durable and its traces
// hidden; the body is the erasure's status (GET /api/v1/erasures/{id}
// follows it to "done").
func (s *Server) erase(w http.ResponseWriter, r *http.Request, e *engine.Engine, req engine.EraseRequest) {
	st, err := e.Erase(r.Context(), req)
	if err != nil {
		if errors.Is(err, engine.ErrEraseRequest) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.queryFailed(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/erasures/"+strconv.FormatUint(st.ID, 10))
	writeJSON(w, http.StatusAccepted, st)
}

func (s *Server) handleErasures(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	out := []engine.Erasure{}
	for _, st := range e.Erasures() {
		if st.Project == project {
			out = append(out, st)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"erasures": out})
}

func (s *Server) handleErasure(w http.ResponseWriter, r *http.Request, e *engine.Engine, project string) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("erasure id %q is not a number", r.PathValue("id")))
		return
	}
	for _, st := range e.Erasures() {
		if st.ID == id && st.Project == project {
			writeJSON(w, http.StatusOK, st)
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no erasure %d in project %q", id, project))
}

// handleCompact runs compaction to completion (all projects: segments hold
// every project's spans).
func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request, e *engine.Engine, _ string) {
	res, err := e.Compact(r.Context())
	if err != nil {
		s.queryFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"merges": res.Merges, "segments_before": res.SegmentsBefore, "segments_after": res.SegmentsAfter,
		"bytes_written": res.BytesWritten, "took_ms": float64(res.Took.Microseconds()) / 1000,
	})
}
