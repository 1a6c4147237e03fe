package tracetrim

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// DefaultBudget is the budget, in tokens, used when Options.Budget <= 0.
const DefaultBudget = 8000

// DefaultMaxValue is the longest string value kept, in bytes, when
// Options.MaxValue <= 0.
const DefaultMaxValue = 300

// Options control Trim. The zero value is ready to use.
type Options struct {
	// Budget is the size limit of the result in tokens, counted as bytes/4
	// of json.Marshal of the *Trace. <= 0 means DefaultBudget.
	Budget int
	// Expand lists spans the caller asks to see in full (attributes and all
	// events). They are always shown. Ids not in the trace are reported in
	// Trace.NotFound.
	Expand []model.SpanID
	// MaxValue is the longest string kept (attribute and event values, names,
	// messages), in bytes; longer ones are cut and end in "…(N more bytes)".
	// <= 0 means DefaultMaxValue.
	MaxValue int
}

func (o Options) withDefaults() Options {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.MaxValue <= 0 {
		o.MaxValue = DefaultMaxValue
	}
	return o
}

// Trace is the trimmed view of one trace.
type Trace struct {
	TraceID    string   `json:"trace_id"`
	Spans      int      `json:"spans"` // total spans in the trace
	Shown      int      `json:"shown"` // spans listed in Tree
	Services   []string `json:"services"`
	Errors     int      `json:"errors"`      // spans with status error
	Start      string   `json:"start"`       // RFC 3339 UTC of the earliest start
	DurationMs float64  `json:"duration_ms"` // latest end minus earliest start
	Budget     int      `json:"budget_tokens"`
	Tokens     int      `json:"tokens"` // len(json.Marshal(trace))/4
	// OverBudget says the spans that must be shown (roots, errors, the
	// critical path, expanded spans and their ancestors) do not fit the budget
	// even without attributes; they are all shown regardless.
	OverBudget bool `json:"over_budget,omitempty"`
	// DuplicateIDs counts spans whose id repeats another span's. They are all
	// shown or collapsed like any span; children attach to the earliest.
	DuplicateIDs int `json:"duplicate_span_ids,omitempty"`
	// NotFound lists ids from Options.Expand that are not in the trace.
	NotFound []string `json:"expand_not_found,omitempty"`
	// Note tells the agent what was collapsed and how to see it.
	Note string `json:"note,omitempty"`
	// Tree holds the shown spans in depth-first order, children by start time.
	Tree []Node `json:"tree"`
	// Collapsed summarises every span not shown: Shown plus the counts of
	// Collapsed is Spans.
	Collapsed []Group `json:"collapsed,omitempty"`

	shrunk bool // the size estimate was exceeded and the fill cut back (tests)
}

// Trim returns the view of a trace's spans that fits opt.Budget: see the
// package documentation for what is kept. It never returns nil; an empty
// input gives a Trace with no spans. spans is only read.
func Trim(spans []model.Span, opt Options) *Trace {
	opt = opt.withDefaults()
	tr := newTrimmer(newTree(spans), opt)
	return tr.run()
}

// trimmer holds the state of one Trim call.
type trimmer struct {
	t     *tree
	b     builder
	opt   Options
	limit int // bytes

	why    []uint8 // reason bits per node
	header Trace   // the summary fields, no Tree or Collapsed
	// base bounds the JSON size of the header with an empty tree, no note,
	// and the largest token count and flags it can get.
	base       int
	groupFixed int // see groupFixedBytes
	kindsBy    [numModes]*kinds

	lineSize, fullSize []int32   // measured node sizes without Hidden, comma included; 0 = not yet
	fillOrder          []int32   // spans added by fill, in order (each one's parent is before it)
	mode               groupMode // the grouping trim chose
	score              []float64 // fill priority per node, see scores
	maxWork            int       // see maxFillWork; lowered by tests
	size               int       // JSON size of the last result finish saw

	enc *json.Encoder
	buf bytes.Buffer
}

func newTrimmer(t *tree, opt Options) *trimmer {
	n := len(t.spans)
	tr := &trimmer{
		t:        t,
		b:        builder{t: t, maxValue: opt.MaxValue},
		opt:      opt,
		limit:    opt.Budget * 4,
		why:      make([]uint8, n),
		lineSize: make([]int32, n),
		fullSize: make([]int32, n),
		maxWork:  maxFillWork,
	}
	tr.enc = json.NewEncoder(&tr.buf)
	tr.reasons()
	tr.summarise()
	return tr
}

// reasons sets the reason bits of every node: why it must be kept, and the
// llm and slow marks.
func (tr *trimmer) reasons() {
	t := tr.t
	for _, r := range t.roots {
		tr.why[r] |= rRoot
	}
	for _, x := range t.criticalPath() {
		tr.why[x] |= rCritical
	}
	slow := (t.traceEnd - t.traceStart) / 10
	for x, s := range t.spans {
		if s.StatusCode == model.StatusError {
			tr.why[x] |= rError
		}
		if s.LLM != nil {
			tr.why[x] |= rLLM
		}
		if t.self[x] > 0 && t.self[x] >= slow {
			tr.why[x] |= rSlow
		}
	}
	if len(tr.opt.Expand) > 0 {
		want := make(map[model.SpanID]bool, len(tr.opt.Expand))
		for _, id := range tr.opt.Expand {
			want[id] = false
		}
		for x, s := range t.spans {
			if _, ok := want[s.SpanID]; ok {
				tr.why[x] |= rExpanded
				want[s.SpanID] = true
			}
		}
		for _, id := range tr.opt.Expand {
			if found, ok := want[id]; ok && !found {
				tr.header.NotFound = append(tr.header.NotFound, id.String())
				delete(want, id)
			}
		}
	}
	// Ancestors, walking up until a node already known to be kept.
	for x := range t.spans {
		if tr.why[x]&rMustKeep == 0 {
			continue
		}
		for p := t.parent[x]; p >= 0 && tr.why[p]&rMustKeep == 0; p = t.parent[p] {
			tr.why[p] |= rAncestor
		}
	}
}

// summarise fills the header and the size bounds that depend only on the
// trace.
func (tr *trimmer) summarise() {
	t, h := tr.t, &tr.header
	n := len(t.spans)
	h.Spans = n
	h.Budget = tr.opt.Budget
	h.DuplicateIDs = t.dups
	h.Services = []string{}
	h.Tree = []Node{}
	var maxNs, totalNs float64
	if n > 0 {
		h.TraceID = t.spans[0].TraceID.String()
		h.Start = time.Unix(0, int64(min(t.traceStart, 1<<63-1))).UTC().Format(time.RFC3339Nano)
		h.DurationMs = ms(t.traceEnd - t.traceStart)
		seen := make(map[string]bool)
		for x, s := range t.spans {
			if !seen[s.Service] {
				seen[s.Service] = true
				h.Services = append(h.Services, s.Service)
			}
			if tr.why[x]&rError != 0 {
				h.Errors++
			}
			d := float64(t.duration(int32(x)))
			maxNs = max(maxNs, d)
			totalNs += d
		}
		slices.Sort(h.Services)
	}
	tr.groupFixed = groupFixedBytes(n, maxNs, totalNs)

	worst := *h
	worst.OverBudget = true
	worst.Tokens = tr.opt.Budget // a fitting result has at most this many digits
	tr.base = tr.measure(&worst) + len(`,"collapsed":[]`)
}

// measure returns the JSON size of v.
func (tr *trimmer) measure(v any) int {
	tr.buf.Reset()
	if err := tr.enc.Encode(v); err != nil {
		panic("tracetrim: marshal failed, a value escaped sanitising: " + err.Error())
	}
	return tr.buf.Len() - 1 // Encode adds a newline
}

// nodeSize is the JSON size of x's node without Hidden, plus its comma.
func (tr *trimmer) nodeSize(x int32, detail bool) int {
	cache := tr.lineSize
	if detail {
		cache = tr.fullSize
	}
	if cache[x] == 0 {
		n := tr.node(x, detail)
		cache[x] = int32(tr.measure(&n) + 1)
	}
	return int(cache[x])
}

func (tr *trimmer) node(x int32, detail bool) Node {
	return tr.b.node(x, tr.why[x], detail, tr.why[x]&rExpanded != 0)
}

// hiddenBytes is the size of the hidden_children field holding h.
func hiddenBytes(h int32) int {
	if h <= 0 {
		return 0
	}
	return len(`,"hidden_children":`) + len(strconv.Itoa(int(h)))
}

func (tr *trimmer) run() *Trace {
	t := tr.t
	n := len(t.spans)
	all := make([]bool, n)
	for i := range all {
		all[i] = true
	}
	if tr.wholeFits(0, func(int32) bool { return true }) {
		return tr.finish(tr.assemble(all, all, byName, noteState{}))
	}
	detail := make([]bool, n)
	for x := range detail {
		detail[x] = tr.why[x]&(rRoot|rError|rExpanded) != 0
	}
	if tr.wholeFits(tr.noteBytes(noteState{whole: true}), func(x int32) bool { return detail[x] }) {
		return tr.finish(tr.assemble(all, detail, byName, noteState{whole: true}))
	}
	return tr.trim(detail)
}

// wholeFits reports whether every span fits with a note of note bytes, those
// for which detail is true with attributes and events. It stops measuring
// once over the limit.
func (tr *trimmer) wholeFits(note int, detail func(int32) bool) bool {
	size := tr.base + note
	for x := range tr.t.spans {
		size += tr.nodeSize(int32(x), detail(int32(x)))
		if size > tr.limit {
			return false
		}
	}
	return true
}

// finish sets Tokens and records the exact JSON size in tr.size. It is the
// one marshal of the whole result.
func (tr *trimmer) finish(out *Trace) *Trace {
	size := tr.measure(out)
	// Tokens is part of the JSON it counts: grow it until it is stable.
	base := size - len(strconv.Itoa(out.Tokens))
	for {
		tok := (base + len(strconv.Itoa(out.Tokens))) / 4
		if tok == out.Tokens {
			break
		}
		out.Tokens = tok
	}
	tr.size = base + len(strconv.Itoa(out.Tokens))
	return out
}
