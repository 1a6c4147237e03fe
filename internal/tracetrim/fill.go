package tracetrim

import (
	"container/heap"
	"encoding/json"
	"slices"
)

// fillBest runs the fill under mode and every coarser grouping and keeps the
// finest whose result has at least 3/4 as many useful lines as the best one.
// A useful line is a shown span or a group of two or more spans: a group of
// one costs about as much as the span would and says less. So repeated work
// (fifty calls each running the same three queries) keeps its names, while a
// subtree of many distinct names is merged rather than split into a group per
// name. nodes is the size of the header and the must-keep nodes; shown is
// updated to the chosen result.
func (tr *trimmer) fillBest(shown []bool, mode groupMode, dropped int, nodes int, groupBytes [numModes]int) groupMode {
	type run struct {
		mode   groupMode
		shown  []bool
		order  []int32
		useful int
	}
	var runs []run
	best, kept := 0, 0
	for _, s := range shown {
		if s {
			kept++
		}
	}
	for m := mode; m < numModes; m++ {
		cur := nodes + groupBytes[m] + tr.noteBytes(noteState{mode: m, dropped: dropped, budget: tr.opt.Budget})
		if cur > tr.limit {
			continue // cannot happen: coarser groups are smaller
		}
		sh := slices.Clone(shown)
		order, multi := tr.fill(sh, m, cur)
		r := run{m, sh, order, kept + len(order) + multi}
		runs = append(runs, r)
		best = max(best, r.useful)
	}
	for _, r := range runs {
		if 4*r.useful >= 3*best {
			copy(shown, r.shown)
			tr.fillOrder = r.order
			return r.mode
		}
	}
	panic("tracetrim: broken invariant: choose returned a mode whose must-keep spans do not fit")
}

// filler is the state of one fill run.
type filler struct {
	t *tree
	k *kinds
	// counts holds the hidden nodes per group key. It may be too high for an
	// anchor and lack another's entries after an inexact move (see
	// maxFillWork); either way it only hides savings, never invents them.
	counts map[uint64]int32
	gbytes []int   // per shown node, the group bytes charged to it
	hidden []int32 // per shown node, its hidden children
	sub    []int32 // per kind, nodes in the candidate's subtree (exact moves)
	kinds  []int32 // kinds with sub > 0
	work   int     // subtree nodes walked so far
	budget int     // of work, see maxFillWork
}

// maxFillWork bounds the subtree nodes one fill walks to keep group counts
// exact: about a millisecond. Deep hidden chains under a large budget would
// otherwise cost O(shown × n); past the bound, candidates are charged an
// upper bound instead.
const maxFillWork = 1 << 20

// fill adds spans whose parent is shown, best first, while the estimated
// size cur stays within the limit. Showing hidden s under its shown parent p
// moves s's subtree from p's groups to groups of its own: exactly, by walking
// the subtree, while the walks stay within maxFillWork; then by a bound. It
// returns the spans added, in order, and how many groups hold two or more
// spans.
func (tr *trimmer) fill(shown []bool, m groupMode, cur int) (order []int32, multi int) {
	t, k := tr.t, tr.kinds(m)
	f := &filler{
		t:      t,
		k:      k,
		counts: tr.groupCounts(shown, m),
		gbytes: make([]int, len(t.spans)),
		hidden: make([]int32, len(t.spans)),
		sub:    make([]int32, len(k.bytes)),
		budget: tr.maxWork,
	}
	for key := range f.counts {
		f.gbytes[key>>32] += k.bytes[uint32(key)]
	}
	if tr.score == nil {
		tr.score = tr.scores()
	}
	q := &queue{score: tr.score, t: t}
	for x := range shown {
		if !shown[x] {
			continue
		}
		for _, c := range t.children(int32(x)) {
			if !shown[c] {
				q.items = append(q.items, c)
				f.hidden[x]++
			}
		}
	}
	heap.Init(q)

	for q.Len() > 0 {
		s := heap.Pop(q).(int32)
		exact := f.work+int(t.size[s]) <= f.budget
		delta, own := f.delta(s, exact)
		sp := t.spans[s]
		// A cheap lower bound of the node first, to skip measuring hopeless ones.
		lower := minNodeBytes + min(len(sp.Service), tr.opt.MaxValue) + min(len(sp.Name), tr.opt.MaxValue)
		if cur+delta+lower <= tr.limit {
			if d := delta + tr.nodeSize(s, false); cur+d <= tr.limit {
				cur += d
				f.show(s, exact, own)
				shown[s] = true
				order = append(order, s)
				for _, c := range t.children(s) {
					heap.Push(q, c)
					f.hidden[s]++
				}
			}
		}
		for _, kd := range f.kinds {
			f.sub[kd] = 0
		}
		f.kinds = f.kinds[:0]
	}
	for _, c := range f.counts {
		if c > 1 {
			multi++
		}
	}
	return order, multi
}

// delta returns the change in estimated size, apart from its node, when
// hidden s is shown: its hidden_children, the groups it gets (own), and the
// groups of its parent that empty. An exact delta walks s's subtree and
// leaves the counts in f.sub and f.kinds.
func (f *filler) delta(s int32, exact bool) (delta, own int) {
	t, k := f.t, f.k
	p := t.parent[s]
	last := f.hidden[p] == 1 // every group of p empties
	if exact {
		f.work += int(t.size[s])
		for _, kd := range k.pre[t.pos[s] : t.pos[s]+t.size[s]] {
			if f.sub[kd] == 0 {
				f.kinds = append(f.kinds, kd)
			}
			f.sub[kd]++
		}
		for _, kd := range f.kinds {
			if !last && f.counts[groupKey(p, kd)] == f.sub[kd] {
				delta -= k.bytes[kd] // p's group of this kind empties
			}
			if f.sub[kd]-b2i(kd == k.of[s]) > 0 {
				own += k.bytes[kd]
			}
		}
	} else {
		// At most one group per kind, and no group of p counted as emptied
		// unless s is its last hidden child.
		own = min(k.total, int(t.size[s]-1)*k.largest)
	}
	if last {
		delta -= f.gbytes[p]
	}
	return delta + own + hiddenBytes(t.size[s]-1), own
}

// show applies what delta measured.
func (f *filler) show(s int32, exact bool, own int) {
	t, k := f.t, f.k
	p := t.parent[s]
	f.hidden[p]--
	f.gbytes[s] = own
	if !exact {
		if f.hidden[p] == 0 {
			f.gbytes[p] = 0
		}
		return // counts stay too high for p and empty for s
	}
	for _, kd := range f.kinds {
		key := groupKey(p, kd)
		if c, ok := f.counts[key]; ok {
			if c > f.sub[kd] {
				f.counts[key] = c - f.sub[kd]
			} else {
				delete(f.counts, key)
				f.gbytes[p] -= k.bytes[kd]
			}
		}
		if n := f.sub[kd] - b2i(kd == k.of[s]); n > 0 {
			f.counts[groupKey(s, kd)] = n
		}
	}
	if f.hidden[p] == 0 {
		f.gbytes[p] = 0
	}
}

// minNodeBytes is the size of a line node with empty service and name: a
// lower bound of any non-root node.
var minNodeBytes = func() int {
	b, err := json.Marshal(Node{SpanID: zeroID, Parent: zeroID})
	if err != nil {
		panic("tracetrim: marshal of an empty node failed: " + err.Error())
	}
	return len(b) - 2*len(`""`)
}()

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// scores ranks fill candidates: (duration + self time) / (1 + depth/4).
func (tr *trimmer) scores() []float64 {
	t := tr.t
	llm := make([]bool, len(t.spans)) // the span or a descendant is an LLM span
	for k := len(t.pre) - 1; k >= 0; k-- {
		x := t.pre[k]
		llm[x] = llm[x] || tr.why[x]&rLLM != 0
		if p := t.parent[x]; p >= 0 && llm[x] {
			llm[p] = true
		}
	}
	score := make([]float64, len(t.spans))
	for x := range score {
		score[x] = float64(t.duration(int32(x))+t.self[x]) / (1 + float64(t.depth[x])/4)
		if llm[x] {
			score[x] = -1 - score[x] // negative: before every other span
		}
	}
	return score
}

// queue is a heap of candidates: LLM first (negative score, most negative
// first), then highest score, then lowest depth, then lowest node.
type queue struct {
	items []int32
	score []float64
	t     *tree
}

func (q *queue) Len() int { return len(q.items) }
func (q *queue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	sa, sb := q.score[a], q.score[b]
	if (sa < 0) != (sb < 0) {
		return sa < 0
	}
	if sa != sb {
		if sa < 0 {
			return sa < sb
		}
		return sa > sb
	}
	if q.t.depth[a] != q.t.depth[b] {
		return q.t.depth[a] < q.t.depth[b]
	}
	return a < b
}
func (q *queue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *queue) Push(x any)    { q.items = append(q.items, x.(int32)) }
func (q *queue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}
