package engine

import (
	"bytes"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// rowFilter rules out a chunk's rows before they are decoded, from their
// encodings: a row can match hints only if its encoding holds, for each
// attribute equality, the attribute's encoded key and string value (or its
// resource holds the attribute), one of the services and one of the span
// names, each as the codec writes it. A necessary condition only (the bytes
// may lie elsewhere, in an event's attributes say): the filter decides.
type rowFilter struct {
	attrs    []rowAttr
	services [][]byte
	names    [][]byte
}

type rowAttr struct {
	a       *query.AttrEq
	encoded []byte // the span attribute's encoding: str key, type, str value
}

// newRowFilter returns the row filter of h, nil when h constrains none of
// what it checks.
func newRowFilter(h *query.Hints) *rowFilter {
	if len(h.AttrEquals) == 0 && h.Services == nil && h.Names == nil {
		return nil
	}
	rf := &rowFilter{}
	for i := range h.AttrEquals {
		a := &h.AttrEquals[i]
		if a.Scope != query.ScopeSpan && a.Scope != query.ScopeResource && a.Scope != query.ScopeAny {
			continue
		}
		enc := append(appendStr(nil, a.Key), byte(model.ValueString))
		rf.attrs = append(rf.attrs, rowAttr{a, appendStr(enc, a.Value)})
	}
	if h.Services != nil {
		rf.services = make([][]byte, 0, len(h.Services))
		for _, s := range h.Services {
			rf.services = append(rf.services, appendStr(nil, s))
		}
	}
	if h.Names != nil {
		rf.names = make([][]byte, 0, len(h.Names))
		for _, s := range h.Names {
			rf.names = append(rf.names, appendStr(nil, s))
		}
	}
	return rf
}

// mayMatch reports whether row r may match (nil: no constraint).
func (rf *rowFilter) mayMatch(a *arenaView, r *slot) bool {
	if rf == nil {
		return true
	}
	enc := a.pages[r.page][r.off : r.off+r.size]
	for i := range rf.attrs {
		ra := &rf.attrs[i]
		inSpan := ra.a.Scope != query.ScopeResource && bytes.Contains(enc, ra.encoded)
		if !inSpan && (ra.a.Scope == query.ScopeSpan || !resourceHas(a, enc, ra.a)) {
			return false
		}
	}
	return containsAny(enc, rf.services) && containsAny(enc, rf.names)
}

// containsAny reports whether enc holds one of want (nil: no constraint).
func containsAny(enc []byte, want [][]byte) bool {
	if want == nil {
		return true
	}
	for _, w := range want {
		if bytes.Contains(enc, w) {
			return true
		}
	}
	return false
}

// resourceHas reports whether the resource of the row encoded in enc has
// attribute a.Key with string value a.Value.
func resourceHas(a *arenaView, enc []byte, eq *query.AttrEq) bool {
	rd := reader{b: enc}
	i := rd.uv()
	if i == 0 {
		return false
	}
	for _, kv := range a.resources[i-1].Attributes {
		if kv.Key == eq.Key && kv.Value.Type == model.ValueString && kv.Value.Str == eq.Value {
			return true
		}
	}
	return false
}
