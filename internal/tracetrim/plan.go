package tracetrim

import (
	"cmp"
	"slices"
)

// trim builds the result when the whole trace does not fit: must-keep spans
// first, then the greedy fill. detail holds the preferred detail per node
// (roots, errors, expanded) and is updated in place.
func (tr *trimmer) trim(detail []bool) *Trace {
	t := tr.t
	n := len(t.spans)
	shown := make([]bool, n)
	for x := range shown {
		shown[x] = tr.why[x]&rMustKeep != 0
	}
	hidden0 := hiddenCounts(t, shown)

	// Bytes of the header and the must-keep nodes with their preferred
	// detail; choose adds the note and the groups.
	nodes := tr.base
	for x := range shown {
		if shown[x] {
			nodes += tr.nodeSize(int32(x), detail[x]) + hiddenBytes(hidden0[x])
		}
	}
	var groupBytes [numModes]int
	for m := range numModes {
		groupBytes[m] = tr.groupBytes(shown, m)
	}

	mode, dropped, over := tr.choose(shown, detail, nodes, groupBytes)
	for _, x := range dropped {
		nodes -= tr.nodeSize(x, true) - tr.nodeSize(x, false)
		detail[x] = false
	}
	if !over {
		mode = tr.fillBest(shown, mode, len(dropped), nodes, groupBytes)
	}
	tr.mode = mode
	ns := noteState{dropped: len(dropped), mode: mode, budget: tr.opt.Budget}
	if over {
		ns.over = true
		out := tr.finish(tr.assemble(shown, detail, mode, ns))
		// The estimate is an upper bound: without the flag and the note's
		// clause the result may fit after all.
		if tr.size-len(`,"over_budget":true`)-len(overClause(ns.budget)) > tr.limit {
			return out
		}
		ns.over = false
	}
	out := tr.finish(tr.assemble(shown, detail, mode, ns))
	if tr.size <= tr.limit {
		return out
	}
	if over {
		ns.over = true
		return tr.finish(tr.assemble(shown, detail, mode, ns))
	}
	return tr.shrink(shown, detail, mode, ns)
}

// choose picks the group mode and the detailed spans that lose their detail
// so that the must-keep spans fit: the finest grouping that fits with all
// detail (fillBest may then pick a coarser one); else the grouping that needs
// the fewest drops (roots before errors, largest first; expanded spans never
// lose detail); else over budget, with spans grouped by parent and every
// droppable detail dropped.
func (tr *trimmer) choose(shown, detail []bool, nodes int, groupBytes [numModes]int) (groupMode, []int32, bool) {
	for m := range numModes {
		if nodes+groupBytes[m]+tr.noteBytes(noteState{mode: m, budget: tr.opt.Budget}) <= tr.limit {
			return m, nil, false
		}
	}
	var drop []int32
	for x := range shown {
		if shown[x] && detail[x] && tr.why[x]&rExpanded == 0 {
			drop = append(drop, int32(x))
		}
	}
	saving := func(x int32) int { return tr.nodeSize(x, true) - tr.nodeSize(x, false) }
	slices.SortFunc(drop, func(a, b int32) int {
		ea, eb := tr.why[a]&rError != 0, tr.why[b]&rError != 0
		if ea != eb {
			if ea {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(saving(b), saving(a)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	best, bestDrops := byParent, len(drop)+1
	for m := range numModes {
		need := nodes + groupBytes[m] + tr.noteBytes(noteState{mode: m, dropped: 1, budget: tr.opt.Budget}) - tr.limit
		k := 0
		for k < len(drop) && need > 0 {
			need -= saving(drop[k])
			k++
		}
		if need <= 0 && k < bestDrops {
			best, bestDrops = m, k
		}
	}
	if bestDrops > len(drop) {
		return byParent, drop, true
	}
	return best, drop[:bestDrops], false
}

// hiddenCounts returns, per node, how many of its descendants are not shown.
func hiddenCounts(t *tree, shown []bool) []int32 {
	below := make([]int32, len(t.spans)) // shown descendants
	for k := len(t.pre) - 1; k >= 0; k-- {
		x := t.pre[k]
		if p := t.parent[x]; p >= 0 {
			below[p] += below[x]
			if shown[x] {
				below[p]++
			}
		}
	}
	for x := range below {
		below[x] = t.size[x] - 1 - below[x]
	}
	return below
}

// groupBytes bounds the JSON size of the collapsed groups for a shown set.
func (tr *trimmer) groupBytes(shown []bool, m groupMode) int {
	counts := tr.groupCounts(shown, m)
	k := tr.kinds(m)
	total := 0
	for key := range counts {
		total += k.bytes[uint32(key)]
	}
	return total
}

// groupCounts counts the hidden nodes per group key.
func (tr *trimmer) groupCounts(shown []bool, m groupMode) map[uint64]int32 {
	t, k := tr.t, tr.kinds(m)
	anchor := make([]int32, len(t.spans))
	counts := make(map[uint64]int32)
	for _, x := range t.pre {
		if shown[x] {
			anchor[x] = x
			continue
		}
		anchor[x] = anchor[t.parent[x]]
		counts[groupKey(anchor[x], k.of[x])]++
	}
	return counts
}
