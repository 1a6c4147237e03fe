package tracetrim

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Group summarises collapsed spans that share their nearest shown ancestor
// (Parent) and, depending on how tight the budget is, their service and name.
// A Service or Name of "*" means the group merges several.
type Group struct {
	Parent  string  `json:"parent"`
	Service string  `json:"service"`
	Name    string  `json:"name"`
	Count   int     `json:"count"`
	TotalMs float64 `json:"total_ms"` // sum of the durations
	MaxMs   float64 `json:"max_ms"`
	Errors  int     `json:"errors,omitempty"` // always 0 today: error spans are never collapsed
	Sample  string  `json:"sample_span_id"`   // the longest span, to expand
}

// groupMode says what collapsed spans are grouped by, besides their nearest
// shown ancestor. Coarser modes are used when the finer groups do not fit.
type groupMode uint8

const (
	byName    groupMode = iota // service and span name
	byService                  // service; Name is "*"
	byParent                   // nothing; Service and Name are "*"
	numModes
)

const anyName = "*"

// kinds maps every node to its group kind under one mode, and bounds the
// JSON size of a group of each kind.
type kinds struct {
	of      []int32  // node → kind
	pre     []int32  // kinds in depth-first order: pre[i] = of[tree.pre[i]]
	service []string // kind → Group.Service
	name    []string // kind → Group.Name
	bytes   []int    // kind → upper bound of the group's JSON size, comma included
	total   int      // sum of bytes
	largest int      // max of bytes
}

func (tr *trimmer) kinds(m groupMode) *kinds {
	if k := tr.kindsBy[m]; k != nil {
		return k
	}
	t := tr.t
	k := &kinds{of: make([]int32, len(t.spans))}
	add := func(svc, name string) {
		k.service = append(k.service, svc)
		k.name = append(k.name, name)
		b := tr.groupFixed + jsonStrLen(svc) + jsonStrLen(name) + 1
		k.bytes = append(k.bytes, b)
		k.total += b
		k.largest = max(k.largest, b)
	}
	switch m {
	case byParent:
		add(anyName, anyName)
	default:
		ids := make(map[[2]string]int32)
		for x, s := range t.spans {
			key := [2]string{s.Service, s.Name}
			if m == byService {
				key[1] = ""
			}
			id, ok := ids[key]
			if !ok {
				id = int32(len(k.service))
				ids[key] = id
				if m == byService {
					add(tr.b.str(s.Service), anyName)
				} else {
					add(tr.b.str(s.Service), tr.b.str(s.Name))
				}
			}
			k.of[x] = id
		}
	}
	k.pre = make([]int32, len(t.pre))
	for i, x := range t.pre {
		k.pre[i] = k.of[x]
	}
	tr.kindsBy[m] = k
	return k
}

// groupFixedBytes bounds the JSON size of a group apart from its service and
// name strings (quotes included in those): the ids are 16 hex digits, Count is
// at most n, and the milliseconds at most maxMs and totalMs.
func groupFixedBytes(n int, maxNs, totalNs float64) int {
	b, err := json.Marshal(Group{Parent: zeroID, Sample: zeroID})
	if err != nil {
		panic("tracetrim: marshal of a fixed group failed: " + err.Error())
	}
	// Remove the two empty strings and the three zeros, add the widest values.
	return len(b) - 2*len(`""`) - 3*len("0") + len(strconv.Itoa(n)) + msWidth(maxNs) + msWidth(totalNs)
}

const zeroID = "0000000000000000"

// msWidth bounds the JSON length of ms(x) for any x <= ns: the integer
// digits, a point and three decimals.
func msWidth(ns float64) int {
	return len(strconv.FormatFloat(ns/1e6+1, 'f', 0, 64)) + 4
}

// jsonStrLen bounds the length of s as a JSON string by encoding/json
// (quotes included): escapes are counted at their longest, six bytes, except
// for the quote and backslash.
func jsonStrLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// groupAcc accumulates one group while assembling the result.
type groupAcc struct {
	anchor, kind int32
	count        int
	totalNs      uint64
	sample       int32
	errors       int
}

// collapse summarises every node that is not shown under its nearest shown
// ancestor. Groups are ordered by their ancestor's position in the tree, then
// by total duration (largest first), then by kind. Roots are always shown, so
// every hidden node has a shown ancestor.
func (tr *trimmer) collapse(shown []bool, m groupMode) []Group {
	t, k := tr.t, tr.kinds(m)
	anchor := make([]int32, len(t.spans))
	index := make(map[uint64]int)
	var accs []groupAcc
	for _, x := range t.pre {
		if shown[x] {
			anchor[x] = x
			continue
		}
		a := anchor[t.parent[x]]
		anchor[x] = a
		kind := k.of[x]
		key := groupKey(a, kind)
		i, ok := index[key]
		if !ok {
			i = len(accs)
			index[key] = i
			accs = append(accs, groupAcc{anchor: a, kind: kind, sample: x})
		}
		g := &accs[i]
		g.count++
		g.totalNs += t.duration(x)
		if d, best := t.duration(x), t.duration(g.sample); d > best || d == best && x < g.sample {
			g.sample = x
		}
		if tr.why[x]&rError != 0 {
			g.errors++
		}
	}
	slices.SortFunc(accs, func(a, b groupAcc) int {
		if c := cmp.Compare(t.pos[a.anchor], t.pos[b.anchor]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.totalNs, a.totalNs); c != 0 {
			return c
		}
		return cmp.Compare(a.kind, b.kind)
	})
	out := make([]Group, len(accs))
	for i, g := range accs {
		out[i] = Group{
			Parent:  t.spans[g.anchor].SpanID.String(),
			Service: k.service[g.kind],
			Name:    k.name[g.kind],
			Count:   g.count,
			TotalMs: ms(g.totalNs),
			MaxMs:   ms(t.duration(g.sample)),
			Errors:  g.errors,
			Sample:  t.spans[g.sample].SpanID.String(),
		}
	}
	return out
}

func groupKey(anchor, kind int32) uint64 { return uint64(uint32(anchor))<<32 | uint64(uint32(kind)) }
