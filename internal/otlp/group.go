package otlp

import "github.com/rastro-dev/rastro/internal/model"

// group is one ResourceSpans of an encoded request.
type group struct {
	res    *model.Resource
	scopes []scopeGroup
	byPtr  map[*model.Scope]int
	byKey  map[string]int
}

type scopeGroup struct {
	scope *model.Scope
	spans []int // indexes into the input slice, in input order
}

// groupSpans groups spans by resource then scope, in order of first
// appearance. Spans whose resources (or scopes) are the same pointer, or are
// equal, land in the same group; equality is decided by their protobuf
// encoding, which is deterministic.
func groupSpans(spans []model.Span) []group {
	var groups []group
	resByPtr := map[*model.Resource]int{}
	resByKey := map[string]int{}
	for i := range spans {
		s := &spans[i]
		gi, ok := resByPtr[s.Resource]
		if !ok {
			key := string(appendResourceKey(nil, s.Resource))
			gi, ok = resByKey[key]
			if !ok {
				gi = len(groups)
				groups = append(groups, group{res: s.Resource, byPtr: map[*model.Scope]int{}, byKey: map[string]int{}})
				resByKey[key] = gi
			}
			resByPtr[s.Resource] = gi
		}
		g := &groups[gi]
		si, ok := g.byPtr[s.Scope]
		if !ok {
			key := string(appendScopeKey(nil, s.Scope))
			si, ok = g.byKey[key]
			if !ok {
				si = len(g.scopes)
				g.scopes = append(g.scopes, scopeGroup{scope: s.Scope})
				g.byKey[key] = si
			}
			g.byPtr[s.Scope] = si
		}
		g.scopes[si].spans = append(g.scopes[si].spans, i)
	}
	return groups
}

func appendResourceKey(b []byte, r *model.Resource) []byte {
	if r == nil {
		return b
	}
	b = appendResource(b, r)
	return appendStringField(b, 3, r.SchemaURL)
}

func appendScopeKey(b []byte, s *model.Scope) []byte {
	if s == nil {
		return b
	}
	b = appendScope(b, s)
	return appendStringField(b, 15, s.SchemaURL) // 15: a field number appendScope never writes
}
