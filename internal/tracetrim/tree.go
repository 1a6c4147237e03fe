package tracetrim

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
)

// tree is the span forest of one trace. Nodes are numbered by the span order
// (start, span id, end, input position), so a lower node number means an
// earlier start, and every per-node slice is indexed by node number.
type tree struct {
	spans  []*model.Span // node → span
	start  []uint64
	end    []uint64 // never before start
	parent []int32  // -1 for roots
	// orphan marks a root whose ParentSpanID is set: the parent is missing
	// from the trace, is the span itself, or the link was cut to break a cycle.
	orphan   []bool
	childOff []int32 // children of x are child[childOff[x]:childOff[x+1]], in node order
	child    []int32
	roots    []int32 // in node order
	pre      []int32 // nodes in depth-first order, children by start time
	pos      []int32 // node → index in pre; its subtree is pre[pos[x] : pos[x]+size[x]]
	size     []int32 // subtree size, the node included
	depth    []int32
	self     []uint64 // duration not covered by any child (children clipped to the span)
	dups     int      // spans whose id repeats an earlier span's

	traceStart, traceEnd uint64
}

func newTree(in []model.Span) *tree {
	n := len(in)
	t := &tree{
		spans:  make([]*model.Span, n),
		start:  make([]uint64, n),
		end:    make([]uint64, n),
		parent: make([]int32, n),
		orphan: make([]bool, n),
		pos:    make([]int32, n),
		size:   make([]int32, n),
		depth:  make([]int32, n),
		self:   make([]uint64, n),
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		sa, sb := &in[a], &in[b]
		if c := cmp.Compare(sa.StartTimeUnixNano, sb.StartTimeUnixNano); c != 0 {
			return c
		}
		if c := bytes.Compare(sa.SpanID[:], sb.SpanID[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(sa.EndTimeUnixNano, sb.EndTimeUnixNano); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	byID := make(map[model.SpanID]int32, n)
	for x, i := range order {
		s := &in[i]
		t.spans[x] = s
		t.start[x] = s.StartTimeUnixNano
		t.end[x] = max(s.EndTimeUnixNano, s.StartTimeUnixNano)
		if _, ok := byID[s.SpanID]; ok {
			t.dups++
		} else {
			byID[s.SpanID] = int32(x)
		}
	}
	for x, s := range t.spans {
		t.parent[x] = -1
		if s.ParentSpanID.IsZero() {
			continue
		}
		if p, ok := byID[s.ParentSpanID]; ok && p != int32(x) {
			t.parent[x] = p
		} else {
			t.orphan[x] = true
		}
	}
	t.breakCycles()
	t.link()
	if n > 0 {
		t.traceStart = t.start[0]
		t.traceEnd = slices.Max(t.end)
	}
	return t
}

// breakCycles makes every node reach a root by following parents: a cycle is
// cut at its lowest node, which becomes an orphan root. Each node is walked
// once, so this is O(n).
func (t *tree) breakCycles() {
	const (
		unknown = iota
		onPath
		done
	)
	state := make([]uint8, len(t.parent))
	var path []int32
	for i := range t.parent {
		if state[i] == done {
			continue
		}
		path = path[:0]
		x := int32(i)
		for x >= 0 && state[x] == unknown {
			state[x] = onPath
			path = append(path, x)
			x = t.parent[x]
		}
		if x >= 0 && state[x] == onPath {
			k := slices.Index(path, x)
			cut := slices.Min(path[k:])
			t.parent[cut] = -1
			t.orphan[cut] = true
		}
		for _, y := range path {
			state[y] = done
		}
	}
}

// link builds the child lists, the depth-first order, subtree sizes, depths
// and self times. The parent links must already form a forest.
func (t *tree) link() {
	n := len(t.parent)
	t.childOff = make([]int32, n+1)
	for _, p := range t.parent {
		if p >= 0 {
			t.childOff[p+1]++
		}
	}
	for i := 1; i <= n; i++ {
		t.childOff[i] += t.childOff[i-1]
	}
	t.child = make([]int32, t.childOff[n])
	fill := slices.Clone(t.childOff[:n])
	for x, p := range t.parent {
		if p < 0 {
			t.roots = append(t.roots, int32(x))
			continue
		}
		t.child[fill[p]] = int32(x)
		fill[p]++
	}

	t.pre = make([]int32, 0, n)
	stack := make([]int32, 0, 64)
	for i := len(t.roots) - 1; i >= 0; i-- {
		stack = append(stack, t.roots[i])
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t.pos[x] = int32(len(t.pre))
		t.pre = append(t.pre, x)
		kids := t.children(x)
		for i := len(kids) - 1; i >= 0; i-- {
			t.depth[kids[i]] = t.depth[x] + 1
			stack = append(stack, kids[i])
		}
	}
	for k := n - 1; k >= 0; k-- {
		x := t.pre[k]
		t.size[x]++
		if p := t.parent[x]; p >= 0 {
			t.size[p] += t.size[x]
		}
	}

	for x := range n {
		s, e := t.start[x], t.end[x]
		cur, covered := s, uint64(0)
		for _, c := range t.children(int32(x)) { // by start time
			cs, ce := max(t.start[c], cur), min(t.end[c], e)
			if ce > cs {
				covered += ce - cs
				cur = ce
			}
		}
		t.self[x] = e - s - covered
	}
}

func (t *tree) children(x int32) []int32 { return t.child[t.childOff[x]:t.childOff[x+1]] }

func (t *tree) duration(x int32) uint64 { return t.end[x] - t.start[x] }

// criticalPath returns the chain from the root that ends last down to a leaf,
// moving each time to the child that ends last. Ties go to the lower node
// (the earlier start, then the lower span id).
func (t *tree) criticalPath() []int32 {
	if len(t.roots) == 0 {
		return nil
	}
	best := t.roots[0]
	for _, r := range t.roots[1:] {
		if t.end[r] > t.end[best] {
			best = r
		}
	}
	path := []int32{best}
	for x := best; ; {
		kids := t.children(x)
		if len(kids) == 0 {
			return path
		}
		b := kids[0]
		for _, c := range kids[1:] {
			if t.end[c] > t.end[b] {
				b = c
			}
		}
		path = append(path, b)
		x = b
	}
}
