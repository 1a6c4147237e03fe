package query

import (
	"math"
	"math/bits"
	"slices"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/text"
)

// Filter selects spans. The zero Filter matches every span. All conditions
// must hold.
type Filter struct {
	Expr        Expr             // parsed TraceQL spanset filter; nil matches all
	Service     string           // exact span Service (resource service.name); "" = any
	Name        string           // exact span name; "" = any
	Status      model.StatusCode // span status, when HasStatus
	HasStatus   bool             // whether Status applies
	MinDuration uint64           // inclusive, nanoseconds; 0 = unbounded
	MaxDuration uint64           // inclusive, nanoseconds; 0 = unbounded
	Start, End  uint64           // window [Start, End) on span start time, unix ns; 0 = unbounded
	Content     *text.Query      // words the span's texts must contain (text.Query.Matches); nil = any
	Limit       int              // result count; 0 = default decided by the caller
}

// Match reports whether s satisfies every condition of f except Limit.
func (f *Filter) Match(s *model.Span) bool {
	if f.Service != "" && s.Service != f.Service {
		return false
	}
	if f.Name != "" && s.Name != f.Name {
		return false
	}
	if f.HasStatus && s.StatusCode != f.Status {
		return false
	}
	if f.MinDuration != 0 || f.MaxDuration != 0 {
		d := s.Duration()
		if d < f.MinDuration || f.MaxDuration != 0 && d > f.MaxDuration {
			return false
		}
	}
	if f.Start != 0 && s.StartTimeUnixNano < f.Start || f.End != 0 && s.StartTimeUnixNano >= f.End {
		return false
	}
	if f.Expr != nil && !f.Expr.Match(s) {
		return false
	}
	return f.Content == nil || f.Content.Matches(s, 0)
}

// Hints are necessary conditions of a Filter: every span the filter matches
// satisfies all of them, so an index may skip data that cannot satisfy one.
// They are not sufficient: callers still run Filter.Match. A nil slice
// leaves its field unconstrained; a non-nil empty slice means no span can
// match. The hints assume spans normalised by model.Normalize (Service
// agrees with the resource's service.name).
type Hints struct {
	Services    []string // span Service is one of these
	Names       []string // span name is one of these
	MinDuration uint64   // duration >= MinDuration; 0 = unbounded
	MaxDuration uint64   // duration <= MaxDuration; 0 = unbounded
	Start, End  uint64   // start time in [Start, End); 0 = unbounded
	Status      model.StatusCode
	HasStatus   bool             // span status is Status
	Kinds       []model.SpanKind // span kind is one of these
	AttrEquals  []AttrEq         // each attribute equals its string value
	AttrAnyOf   []AttrAnyOf      // each attribute equals one of its values
	// ContentHashes are text.Hash values of tokens the span's texts all
	// contain (text.SpanTokens with the default minimum length reports
	// them); nil or empty = unconstrained.
	ContentHashes []uint64
}

// AttrEq says that an attribute, resolved as TraceQL resolves Scope (for
// ScopeAny: the span attribute if present, else the resource attribute), is
// a string equal to Value. It implies that the span or its resource has an
// attribute Key with string value Value.
type AttrEq struct {
	Scope Scope
	Key   string
	Value string
}

// AttrAnyOf says that an attribute, resolved as for AttrEq, is a string in
// Strs or a number equal to an integer in Ints: an int of that value or a
// double equal to it, as TraceQL compares `.a = 200` (Tempo's tag search
// asks `(.a = "200" || .a = 200)` for a value that reads as a number).
// Ints hold only integers of magnitude at most MaxExactInt, which a double
// represents exactly, so a double attribute matches one exactly when its
// value is that integer. A hint of one string alone is an AttrEq instead.
type AttrAnyOf struct {
	Scope Scope
	Key   string
	Strs  []string
	Ints  []int64
}

// MaxExactInt is the largest integer magnitude of AttrAnyOf.Ints: 2^53.
const MaxExactInt = 1 << 53

// attrHint is the composable form of AttrEq and AttrAnyOf.
type attrHint = AttrAnyOf

const (
	allStatuses = 1<<3 - 1
	allKinds    = 1<<6 - 1
)

// hintSet is the composable form of Hints. nil string sets are
// unconstrained; masks hold one bit per status or kind.
type hintSet struct {
	services, names []string
	status, kinds   uint8
	minDur, maxDur  uint64
	attrs           []attrHint
	content         []uint64 // token hashes every span contains
}

func unconstrained() hintSet { return hintSet{status: allStatuses, kinds: allKinds} }

// Hints returns conditions every span matched by f satisfies, taken from the
// shortcut fields and from Expr: conditions joined by && all count; a ||
// counts only for what both sides constrain (the union); nothing under a
// negation counts.
func (f *Filter) Hints() Hints {
	h := unconstrained()
	if f.Service != "" {
		h.services = []string{f.Service}
	}
	if f.Name != "" {
		h.names = []string{f.Name}
	}
	if f.HasStatus {
		h.status = statusBit(f.Status)
	}
	h.minDur, h.maxDur = f.MinDuration, f.MaxDuration
	if f.Content != nil {
		h.content = f.Content.Hashes()
	}
	if n, ok := f.Expr.(node); ok {
		h = andHints(h, exprHints(n))
	}
	out := Hints{
		Services:    h.services,
		Names:       h.names,
		MinDuration: h.minDur,
		MaxDuration: h.maxDur,
		Start:       f.Start,
		End:         f.End,
	}
	for _, a := range h.attrs {
		if len(a.Strs) == 1 && len(a.Ints) == 0 {
			out.AttrEquals = append(out.AttrEquals, AttrEq{Scope: a.Scope, Key: a.Key, Value: a.Strs[0]})
		} else {
			out.AttrAnyOf = append(out.AttrAnyOf, a)
		}
	}
	if len(h.content) > 0 {
		out.ContentHashes = h.content
	}
	if bits.OnesCount8(h.status) == 1 {
		out.Status, out.HasStatus = model.StatusCode(bits.TrailingZeros8(h.status)), true
	}
	if h.kinds != allKinds {
		out.Kinds = []model.SpanKind{}
		for k := range 6 {
			if h.kinds&(1<<k) != 0 {
				out.Kinds = append(out.Kinds, model.SpanKind(k))
			}
		}
	}
	if h.status == 0 || h.kinds == 0 || isEmptySet(h.services) || isEmptySet(h.names) || h.maxDur != 0 && h.minDur > h.maxDur ||
		f.End != 0 && f.Start >= f.End {
		// Nothing can match; say so through the set fields.
		out.Services, out.Names = []string{}, []string{}
	}
	return out
}

func isEmptySet(s []string) bool { return s != nil && len(s) == 0 }

// statusBit maps a status to its mask bit; unknown codes leave the status
// unconstrained.
func statusBit(c model.StatusCode) uint8 {
	if c < 0 || c > 2 {
		return allStatuses
	}
	return 1 << c
}

func exprHints(n node) hintSet {
	switch e := n.(type) {
	case boundExpr:
		return exprHints(e.node)
	case andExpr:
		return andHints(exprHints(e.l), exprHints(e.r))
	case orExpr:
		return orHints(exprHints(e.l), exprHints(e.r))
	case *cond:
		return condHints(e)
	}
	return unconstrained() // allExpr, notExpr
}

func condHints(c *cond) hintSet {
	h := unconstrained()
	switch c.f.intr {
	case intrName:
		if c.op == opEq {
			h.names = []string{c.lit.s}
		}
	// != contributes nothing for status and kind: a span may carry a code
	// outside the known range, which no mask can name.
	case intrStatus:
		if c.op == opEq {
			h.status = statusBit(model.StatusCode(c.lit.i))
		}
	case intrKind:
		if c.op == opEq {
			h.kinds = 1 << c.lit.i
		}
	case intrDuration:
		v := c.lit.i
		switch c.op {
		case opEq:
			if v < 0 {
				h.status = 0 // no duration is negative: nothing matches
			} else {
				h.minDur, h.maxDur = uint64(v), uint64(v)
			}
		case opGt:
			if v >= 0 {
				h.minDur = uint64(v) + 1
			}
		case opGe:
			if v > 0 {
				h.minDur = uint64(v)
			}
		case opLt:
			if v > 1 {
				h.maxDur = uint64(v) - 1
			}
		case opLe:
			if v > 0 {
				h.maxDur = uint64(v)
			}
		}
	case intrContent:
		h.content = c.txt.Hashes()
	case intrNone:
		// Segment filters know span and resource attributes only.
		if c.op != opEq || c.f.scope > ScopeResource {
			break
		}
		if i, ok := exactInt(c.lit); ok && c.f.key != "service.name" {
			h.attrs = []attrHint{{Scope: c.f.scope, Key: c.f.key, Ints: []int64{i}}}
			break
		}
		if c.lit.kind != litString {
			break
		}
		if c.f.key == "service.name" {
			// Only resource scope pins Service; an empty service.name
			// normalises to model.UnknownService, so "" pins nothing. No
			// AttrEq: the value may come from the Service fallback.
			if c.f.scope == ScopeResource && c.lit.s != "" {
				h.services = []string{c.lit.s}
			}
			break
		}
		h.attrs = []attrHint{{Scope: c.f.scope, Key: c.f.key, Strs: []string{c.lit.s}}}
	}
	return h
}

// exactInt returns the integer a number literal equals, when it is one of
// magnitude at most MaxExactInt (see AttrAnyOf).
func exactInt(l literal) (int64, bool) {
	switch l.kind {
	case litInt, litDuration:
		return l.i, l.i >= -MaxExactInt && l.i <= MaxExactInt
	case litFloat:
		if l.f == math.Trunc(l.f) && math.Abs(l.f) <= MaxExactInt {
			return int64(l.f), true
		}
	}
	return 0, false
}

func andHints(a, b hintSet) hintSet {
	return hintSet{
		services: intersect(a.services, b.services),
		names:    intersect(a.names, b.names),
		status:   a.status & b.status,
		kinds:    a.kinds & b.kinds,
		minDur:   max(a.minDur, b.minDur),
		maxDur:   minBound(a.maxDur, b.maxDur),
		attrs:    append(slices.Clip(a.attrs), b.attrs...),
		content:  unionHashes(a.content, b.content),
	}
}

func orHints(a, b hintSet) hintSet {
	h := hintSet{
		services: union(a.services, b.services),
		names:    union(a.names, b.names),
		status:   a.status | b.status,
		kinds:    a.kinds | b.kinds,
		minDur:   min(a.minDur, b.minDur),
	}
	if a.maxDur != 0 && b.maxDur != 0 {
		h.maxDur = max(a.maxDur, b.maxDur)
	}
	// An attribute both sides constrain is one of the values of either.
	for _, x := range a.attrs {
		for _, y := range b.attrs {
			if x.Scope != y.Scope || x.Key != y.Key {
				continue
			}
			m := attrHint{Scope: x.Scope, Key: x.Key, Strs: unionOf(x.Strs, y.Strs), Ints: unionOf(x.Ints, y.Ints)}
			if !slices.ContainsFunc(h.attrs, func(z attrHint) bool { return sameAttrHint(z, m) }) {
				h.attrs = append(h.attrs, m)
			}
		}
	}
	// A token both sides require is required.
	for _, x := range a.content {
		if slices.Contains(b.content, x) && !slices.Contains(h.content, x) {
			h.content = append(h.content, x)
		}
	}
	return h
}

func sameAttrHint(a, b attrHint) bool {
	return a.Scope == b.Scope && a.Key == b.Key && slices.Equal(a.Strs, b.Strs) && slices.Equal(a.Ints, b.Ints)
}

// unionOf returns the distinct values of a and b (nil when both are empty).
func unionOf[T comparable](a, b []T) []T {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// unionHashes returns the distinct hashes of a and b (both required).
func unionHashes(a, b []uint64) []uint64 {
	out := slices.Clip(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// minBound is the smaller of two upper bounds where 0 means unbounded.
func minBound(a, b uint64) uint64 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	return min(a, b)
}

func intersect(a, b []string) []string {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := []string{}
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func union(a, b []string) []string {
	if a == nil || b == nil {
		return nil
	}
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
