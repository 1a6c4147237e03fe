package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// maxDependencySpans bounds the spans one Dependencies call holds: beyond
// it the answer covers the newest spans and says so in a warning.
const maxDependencySpans = 2_000_000

// Dependencies counts the calls between services in the window: each span
// whose parent span belongs to another service is one call from the
// parent's service to the span's. A parent outside the window is not
// found, so its call is not counted. Memory is about 60 bytes per span of
// the window, up to maxDependencySpans.
func (e *Engine) Dependencies(ctx context.Context, project string, start, end uint64) ([]store.Dependency, store.Result, error) {
	var res queryResult
	type spanKey struct {
		trace model.TraceID
		span  model.SpanID
	}
	type child struct {
		parent  spanKey
		service string
		failed  bool
	}
	service := map[spanKey]string{}
	var children []child
	truncated := false
	err := e.scan(ctx, project, &query.Filter{Start: start, End: end}, nil, &res, func(s *model.Span, _ shadowCheck) {
		k := spanKey{s.TraceID, s.SpanID}
		if _, seen := service[k]; seen || truncated {
			return // a re-sent copy; or over the bound
		}
		if len(service) >= maxDependencySpans {
			truncated = true
			return
		}
		service[k] = s.Service
		if !s.ParentSpanID.IsZero() {
			children = append(children, child{spanKey{s.TraceID, s.ParentSpanID}, s.Service, s.StatusCode == model.StatusError})
		}
	}, func() (uint64, bool) { return 0, false })
	if err != nil {
		return nil, res.Result, err
	}
	calls := map[[2]string]*store.Dependency{}
	for _, c := range children {
		if p, ok := service[c.parent]; ok && p != c.service {
			d := calls[[2]string{p, c.service}]
			if d == nil {
				d = &store.Dependency{Parent: p, Child: c.service}
				calls[[2]string{p, c.service}] = d
			}
			d.Calls++
			if c.failed {
				d.Errors++
			}
		}
	}
	out := make([]store.Dependency, 0, len(calls))
	for _, d := range calls {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b store.Dependency) int {
		return cmp.Or(strings.Compare(a.Parent, b.Parent), strings.Compare(a.Child, b.Child))
	})
	if truncated {
		res.Warnings = append(res.Warnings, fmt.Sprintf("dependencies counted from the first %d spans of the window only", maxDependencySpans))
	}
	return finish(out, &res)
}
