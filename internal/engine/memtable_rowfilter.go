package engine

import (
	"bytes"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
)

// rowFilter rules out a chunk's rows before they are decoded: a row can
// match hints only if its signature (slot.sig) has the bits of every entry
// it must hold itself (a span attribute equality, the service and the span
// name when one is wanted), and its encoding holds, for each attribute
// equality, the attribute's encoded key and string value (or its resource
// holds the attribute), one of the services and one of the span names,
// each as the codec writes it. A necessary condition only (the bytes may
// lie elsewhere, in an event's attributes say): the filter decides.
type rowFilter struct {
	attrs    []rowAttr
	services [][]byte
	names    [][]byte
	sig      uint64 // the signature bits every row that may match has
}

type rowAttr struct {
	a       *query.AttrEq
	encoded []byte // the span attribute's encoding: str key, type, str value
	sig     uint64 // the span attribute entry's signature bits
}

// newRowFilter returns the row filter of h over the rows of project pid
// (its number in the buffer), nil when h constrains none of what it
// checks.
func newRowFilter(h *query.Hints, pid uint32) *rowFilter {
	if len(h.AttrEquals) == 0 && h.Services == nil && h.Names == nil {
		return nil
	}
	rf := &rowFilter{}
	var buf []byte
	entrySig := func(tag byte, v string) uint64 {
		buf = append(append(entryStart(buf, pid), tag), v...)
		return rowSigBits(entryHash(buf))
	}
	for i := range h.AttrEquals {
		a := &h.AttrEquals[i]
		if a.Scope != query.ScopeSpan && a.Scope != query.ScopeResource && a.Scope != query.ScopeAny {
			continue
		}
		enc := append(appendStr(nil, a.Key), byte(model.ValueString))
		buf = attrEntry(entryStart(buf, pid), false, a.Key, a.Value)
		ra := rowAttr{a, appendStr(enc, a.Value), rowSigBits(entryHash(buf))}
		if a.Scope == query.ScopeSpan {
			rf.sig |= ra.sig
		}
		rf.attrs = append(rf.attrs, ra)
	}
	if h.Services != nil {
		rf.services = make([][]byte, 0, len(h.Services))
		for _, s := range h.Services {
			rf.services = append(rf.services, appendStr(nil, s))
		}
		if len(h.Services) == 1 {
			rf.sig |= entrySig(entryService, h.Services[0])
		}
	}
	if h.Names != nil {
		rf.names = make([][]byte, 0, len(h.Names))
		for _, s := range h.Names {
			rf.names = append(rf.names, appendStr(nil, s))
		}
		if len(h.Names) == 1 {
			rf.sig |= entrySig(entryName, h.Names[0])
		}
	}
	return rf
}

// mayMatch reports whether row r may match (nil: no constraint).
func (rf *rowFilter) mayMatch(a *arenaView, r *slot) bool {
	if rf == nil {
		return true
	}
	if r.sig&rf.sig != rf.sig {
		return false
	}
	enc := a.pages[r.page][r.off : r.off+r.size]
	for i := range rf.attrs {
		ra := &rf.attrs[i]
		inSpan := ra.a.Scope != query.ScopeResource && r.sig&ra.sig == ra.sig && bytes.Contains(enc, ra.encoded)
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
