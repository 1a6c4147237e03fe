package chstore

import (
	"encoding/hex"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// where is a conjunction of SQL conditions with their bound parameters.
// Conditions are constant text written here; every value from a request
// is one of args, bound by the driver.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return "1"
	}
	return strings.Join(w.conds, " AND ")
}

// base selects a project's visible spans started in [start, end) (0 =
// unbounded): erased traces and expired spans (retention.go) are left out.
func (s *Store) base(project string, start, end uint64) *where {
	start, end = s.window(project, start, end)
	w := &where{}
	w.add("project = ?", project)
	if start != 0 {
		w.add("start >= ?", start)
	}
	if end != 0 {
		w.add("start < ?", end)
	}
	w.add("trace_id "+s.target.global()+"NOT IN (SELECT trace_id FROM erased_traces WHERE project = ?)", project)
	return w
}

// window raises start to the project's retention cutoff; a window wholly
// before it becomes empty (start = end).
func (s *Store) window(project string, start, end uint64) (uint64, uint64) {
	if c := s.cutoff(project); c != 0 && start < c {
		start = c
		if end != 0 && end <= c {
			end = c
		}
	}
	return start, end
}

// hints adds the filter's necessary conditions (query.Filter.Hints): every
// span the filter matches meets them, so they only narrow the candidates
// that Filter.Match then tests. It reports false when no span can match.
func (w *where) hints(f *query.Filter) bool {
	h := f.Hints()
	if h.Services != nil {
		if len(h.Services) == 0 {
			return false
		}
		w.add("has(?, service)", h.Services)
	}
	if h.Names != nil {
		if len(h.Names) == 0 {
			return false
		}
		w.add("has(?, name)", h.Names)
	}
	if h.MinDuration != 0 {
		w.add("duration >= ?", h.MinDuration)
	}
	if h.MaxDuration != 0 {
		w.add("duration <= ?", h.MaxDuration)
	}
	if h.HasStatus {
		w.add("status = ?", int32(h.Status))
	}
	if h.Kinds != nil {
		if len(h.Kinds) == 0 {
			return false
		}
		kinds := make([]int32, len(h.Kinds))
		for i, k := range h.Kinds {
			kinds[i] = int32(k)
		}
		w.add("has(?, kind)", kinds)
	}
	for _, a := range h.AttrEquals {
		if len(a.Value) > maxHotValue {
			continue // not in the hot column: Match decides
		}
		const span = "arrayExists((k, t, v) -> k = ? AND t = ? AND v = ?, span_attr_keys, span_attr_types, span_attr_str)"
		const res = "arrayExists((k, t, v) -> k = ? AND t = ? AND v = ?, res_attr_keys, res_attr_types, res_attr_str)"
		str := uint8(model.ValueString)
		switch a.Scope {
		case query.ScopeSpan:
			w.add(span, a.Key, str, a.Value)
		case query.ScopeResource:
			w.add(res, a.Key, str, a.Value)
		default:
			w.add("("+span+" OR "+res+")", a.Key, str, a.Value, a.Key, str, a.Value)
		}
	}
	return true
}

// after adds the cursor: spans strictly after c in newest-first order.
func (w *where) after(c *store.Cursor) {
	if c == nil {
		return
	}
	t, s := hex.EncodeToString(c.Trace[:]), hex.EncodeToString(c.Span[:])
	w.add("(start < ? OR start = ? AND (trace_id > unhex(?) OR trace_id = unhex(?) AND span_id > unhex(?)))", c.Start, c.Start, t, t, s)
}

// traceIDs binds a set of trace ids: "trace_id IN (SELECT toFixedString(unhex(arrayJoin(?)), 16))".
func traceIDs(ids []model.TraceID) []string {
	out := make([]string, len(ids))
	for i := range ids {
		out[i] = hex.EncodeToString(ids[i][:])
	}
	return out
}
