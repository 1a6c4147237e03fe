package tracetrim

import "slices"

// assemble builds the result for a shown set from scratch.
func (tr *trimmer) assemble(shown, detail []bool, m groupMode, ns noteState) *Trace {
	t := tr.t
	out := tr.header
	hidden := hiddenCounts(t, shown)
	for _, x := range t.pre {
		if shown[x] {
			nd := tr.node(x, detail[x])
			nd.Hidden = int(hidden[x])
			out.Tree = append(out.Tree, nd)
		}
	}
	out.Tree = slices.Clip(out.Tree)
	out.Shown = len(out.Tree)
	if out.Shown < out.Spans {
		out.Collapsed = tr.collapse(shown, m)
	}
	ns.total, ns.shown, ns.hidden, ns.groups = out.Spans, out.Shown, out.Spans-out.Shown, len(out.Collapsed)
	out.OverBudget = ns.over
	if ns.whole || ns.hidden > 0 || ns.dropped > 0 || ns.over {
		out.Note = ns.String()
	}
	return &out
}

// shrink is the safety net behind the size estimate: it finds the longest
// prefix of the fill order that fits by binary search.
func (tr *trimmer) shrink(shown, detail []bool, m groupMode, ns noteState) *Trace {
	for _, x := range tr.fillOrder {
		shown[x] = false
	}
	build := func(k int) *Trace {
		for _, x := range tr.fillOrder[:k] {
			shown[x] = true
		}
		out := tr.finish(tr.assemble(shown, detail, m, ns))
		for _, x := range tr.fillOrder[:k] {
			shown[x] = false
		}
		return out
	}
	lo, hi := 0, len(tr.fillOrder) // prefix lo fits (the must-keep set does); hi does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if build(mid); tr.size <= tr.limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	out := build(lo)
	out.shrunk = true
	return out
}
