package tracetrim

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rastro-dev/rastro/internal/model"
)

// check asserts the guarantees of Trim on a trace with distinct ids and no
// cycles, and returns the result's JSON.
func check(t *testing.T, spans []model.Span, opt Options, out *Trace) []byte {
	t.Helper()
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	budget := opt.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	if out.Budget != budget {
		t.Errorf("budget_tokens = %d, want %d", out.Budget, budget)
	}
	if out.Tokens != len(b)/4 {
		t.Errorf("tokens = %d, want len(json)/4 = %d", out.Tokens, len(b)/4)
	}
	if !out.OverBudget && len(b) > budget*4 {
		t.Errorf("json is %d bytes, over the budget of %d without over_budget", len(b), budget*4)
	}
	if out.shrunk {
		t.Errorf("the size estimate was exceeded and the fill had to shrink")
	}
	if out.Spans != len(spans) {
		t.Errorf("spans = %d, want %d", out.Spans, len(spans))
	}
	if out.Shown != len(out.Tree) {
		t.Errorf("shown = %d, tree has %d", out.Shown, len(out.Tree))
	}
	collapsed := 0
	for _, g := range out.Collapsed {
		collapsed += g.Count
	}
	if out.Shown+collapsed != out.Spans {
		t.Errorf("shown %d + collapsed %d != spans %d", out.Shown, collapsed, out.Spans)
	}

	// Connectivity, order, depth and hidden counts.
	depth := make(map[string]int)
	hiddenBelowRoots := 0
	for _, n := range out.Tree {
		if _, dup := depth[n.SpanID]; dup {
			t.Fatalf("span %s listed twice", n.SpanID)
		}
		if n.Parent == "" {
			if n.Depth != 0 {
				t.Errorf("root %s has depth %d", n.SpanID, n.Depth)
			}
			hiddenBelowRoots += n.Hidden
		} else if d, ok := depth[n.Parent]; !ok {
			t.Errorf("span %s: parent %s is not shown before it", n.SpanID, n.Parent)
		} else if n.Depth != d+1 {
			t.Errorf("span %s: depth %d, parent's %d", n.SpanID, n.Depth, d)
		}
		depth[n.SpanID] = n.Depth
	}
	if hiddenBelowRoots != collapsed {
		t.Errorf("roots' hidden_children sum to %d, %d spans collapsed", hiddenBelowRoots, collapsed)
	}
	for _, g := range out.Collapsed {
		if _, ok := depth[g.Parent]; !ok {
			t.Errorf("group %s/%s: parent %s not shown", g.Service, g.Name, g.Parent)
		}
		if g.Errors != 0 {
			t.Errorf("group %s/%s holds %d errors", g.Service, g.Name, g.Errors)
		}
	}

	// Must-keep spans, computed independently.
	keep, critical := refMustKeep(spans, opt.Expand)
	for id := range keep {
		if _, ok := depth[id.String()]; !ok {
			t.Errorf("must-keep span %s missing from the tree", id)
		}
	}
	why := make(map[string][]string)
	for _, n := range out.Tree {
		why[n.SpanID] = n.Why
	}
	for _, id := range critical {
		if !slices.Contains(why[id.String()], whyCritical) {
			t.Errorf("critical-path span %s not marked (why %v)", id, why[id.String()])
		}
	}
	errs := 0
	for i := range spans {
		if spans[i].StatusCode == model.StatusError {
			errs++
		}
	}
	if out.Errors != errs {
		t.Errorf("errors = %d, want %d", out.Errors, errs)
	}
	if out.OverBudget {
		if len(b) <= budget*4 {
			t.Errorf("over_budget set but the json (%d bytes) fits %d", len(b), budget*4)
		}
		expanded := make(map[string]bool)
		for _, id := range opt.Expand {
			expanded[id.String()] = true
		}
		for _, n := range out.Tree {
			var s model.SpanID
			if _, err := hex.Decode(s[:], []byte(n.SpanID)); err != nil {
				t.Fatalf("span id %q: %v", n.SpanID, err)
			}
			if !keep[s] {
				t.Errorf("over budget, yet span %s was added though not must-keep", n.SpanID)
			}
			if !expanded[n.SpanID] && (n.Attributes != nil || n.Events != nil) {
				t.Errorf("over budget, yet span %s kept attributes", n.SpanID)
			}
		}
	}
	return b
}

func TestRandomTraces(t *testing.T) {
	sizes := []int{1, 5, 40, 300, 1500, 5000}
	budgets := []int{0, 50, 400, 2000, 100000}
	for seed := int64(1); seed <= 2; seed++ {
		for _, n := range sizes {
			if n == 5000 && seed > 1 {
				continue // one seed is enough at this size; keeps the test quick
			}
			for sh := range numShapes {
				for _, budget := range budgets {
					name := fmt.Sprintf("seed%d/n%d/%v/budget%d", seed, n, sh, budget)
					t.Run(name, func(t *testing.T) {
						rng := rand.New(rand.NewSource(seed*1000 + int64(n) + int64(sh)))
						errRate := []float64{0, 0.002, 0.05}[rng.Intn(3)]
						spans := genTrace(rng, n, sh, errRate)
						var expand []model.SpanID
						if n > 3 {
							expand = []model.SpanID{spans[rng.Intn(n)].SpanID, sid(n + 99999)}
						}
						opt := Options{Budget: budget, Expand: expand}
						out := Trim(spans, opt)
						b := check(t, spans, opt, out)

						// Deterministic whatever the input order.
						rev := slices.Clone(spans)
						slices.Reverse(rev)
						b2, _ := json.Marshal(Trim(rev, opt))
						if !bytes.Equal(b, b2) {
							t.Errorf("result depends on the input order")
						}
						if expand != nil && !slices.Equal(out.NotFound, []string{sid(n + 99999).String()}) {
							t.Errorf("expand_not_found = %v", out.NotFound)
						}

						// The bounded fill, as if every walk were over maxFillWork.
						tr := newTrimmer(newTree(spans), opt.withDefaults())
						tr.maxWork = 0
						check(t, spans, opt, tr.run())
					})
				}
			}
		}
	}
}

// A budget that fits the must-keep spans uses the room left: a result is
// not over budget while spans remain that it could have shown.
func TestFillUsesBudget(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	spans := genTrace(rng, 5000, wide, 0.002)
	out := Trim(spans, Options{})
	check(t, spans, Options{}, out)
	if out.Tokens < DefaultBudget*9/10 {
		t.Errorf("used %d of %d tokens", out.Tokens, DefaultBudget)
	}
	if keep, _ := refMustKeep(spans, nil); out.Shown < len(keep)+10 {
		t.Errorf("only %d spans shown in the default budget, %d must be", out.Shown, len(keep))
	}
	if out.Note == "" || !strings.Contains(out.Note, "expand=") {
		t.Errorf("note does not say how to expand: %q", out.Note)
	}
}

func span(id, parent int, start, end uint64, name string) model.Span {
	s := model.Span{TraceID: testTraceID, SpanID: sid(id), Name: name, Service: "svc",
		StartTimeUnixNano: 1_000_000_000 + start*1_000_000, EndTimeUnixNano: 1_000_000_000 + end*1_000_000}
	if parent >= 0 {
		s.ParentSpanID = sid(parent)
	}
	return s
}

func TestSmallTraceWhole(t *testing.T) {
	spans := []model.Span{
		span(0, -1, 0, 100, "root"),
		span(1, 0, 0, 40, "a"),
		span(2, 0, 50, 90, "b"),
		span(3, 2, 60, 70, "c"),
	}
	for i := range spans {
		spans[i].Attributes = []model.KeyValue{{Key: "k", Value: model.StringValue("v")}}
	}
	out := Trim(spans, Options{})
	check(t, spans, Options{}, out)
	if out.Shown != 4 || out.Collapsed != nil || out.Note != "" {
		t.Fatalf("shown %d, collapsed %v, note %q; want the whole trace", out.Shown, out.Collapsed, out.Note)
	}
	for _, n := range out.Tree {
		if n.Attributes["k"] != "v" {
			t.Errorf("span %s lacks its attributes", n.Name)
		}
	}
	if got := []string{out.Tree[0].Name, out.Tree[1].Name, out.Tree[2].Name, out.Tree[3].Name}; !slices.Equal(got, []string{"root", "a", "b", "c"}) {
		t.Errorf("tree order %v", got)
	}
	if out.Tree[3].OffsetMs != 60 || out.Tree[3].DurationMs != 10 || out.DurationMs != 100 {
		t.Errorf("times: offset %v duration %v trace %v", out.Tree[3].OffsetMs, out.Tree[3].DurationMs, out.DurationMs)
	}
	if out.Start != "1970-01-01T00:00:01Z" {
		t.Errorf("start = %q", out.Start)
	}
}

// When attributes on every span do not fit but the spans do, every span is
// shown and only roots, errors and expanded spans carry attributes.
func TestWholeWithoutDetail(t *testing.T) {
	var spans []model.Span
	spans = append(spans, span(0, -1, 0, 100, "root"))
	for i := 1; i < 30; i++ {
		s := span(i, 0, uint64(i), uint64(i+1), "child")
		s.Attributes = []model.KeyValue{{Key: "big", Value: model.StringValue(strings.Repeat("x", 250))}}
		spans = append(spans, s)
	}
	spans[5].StatusCode = model.StatusError
	opt := Options{Budget: 1500}
	out := Trim(spans, opt)
	check(t, spans, opt, out)
	if out.Shown != 30 || out.Note == "" {
		t.Fatalf("shown %d (note %q), want all 30 with a note", out.Shown, out.Note)
	}
	for _, n := range out.Tree {
		if has := n.Attributes != nil; has != (n.SpanID == sid(5).String()) {
			t.Errorf("span %s: attributes %v", n.SpanID, n.Attributes)
		}
	}
}

func TestExpand(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	spans := genTrace(rng, 2000, wide, 0)
	opt := Options{Budget: 1000}
	out := Trim(spans, opt)
	shown := make(map[string]bool)
	for _, n := range out.Tree {
		shown[n.SpanID] = true
	}
	var target model.SpanID
	for i := range spans {
		if !shown[spans[i].SpanID.String()] && len(spans[i].Attributes) > 0 {
			target = spans[i].SpanID
			break
		}
	}
	if target.IsZero() {
		t.Fatal("no hidden span with attributes to expand")
	}
	opt.Expand = []model.SpanID{target}
	out = Trim(spans, opt)
	check(t, spans, opt, out)
	var node *Node
	for i := range out.Tree {
		if out.Tree[i].SpanID == target.String() {
			node = &out.Tree[i]
		}
	}
	if node == nil {
		t.Fatalf("expanded span %s not shown", target)
	}
	if len(node.Attributes) == 0 || !slices.Contains(node.Why, whyExpanded) {
		t.Errorf("expanded span: attributes %v, why %v", node.Attributes, node.Why)
	}
}

func TestTruncation(t *testing.T) {
	s := span(0, -1, 0, 10, "root")
	long := strings.Repeat("é", 400) // 800 bytes
	s.Attributes = []model.KeyValue{
		{Key: "long", Value: model.StringValue(long)},
		{Key: "nan", Value: model.DoubleValue(0)},
		{Key: "list", Value: model.ArrayValue([]model.Value{model.StringValue(long)})},
	}
	s.Attributes[1].Value.Double = math.NaN()
	out := Trim([]model.Span{s}, Options{MaxValue: 101})
	got := out.Tree[0].Attributes["long"].(string)
	if want := strings.Repeat("é", 50) + "…(700 more bytes)"; got != want {
		t.Errorf("truncated to %q", got)
	}
	if !utf8.ValidString(got) {
		t.Error("truncation split a character")
	}
	if out.Tree[0].Attributes["nan"] != "NaN" {
		t.Errorf("NaN became %v", out.Tree[0].Attributes["nan"])
	}
	if l, ok := out.Tree[0].Attributes["list"].(string); !ok || !strings.HasSuffix(l, "more bytes)") {
		t.Errorf("long list became %v", out.Tree[0].Attributes["list"])
	}
	if _, err := json.Marshal(out); err != nil {
		t.Fatal(err)
	}
}

// Critical path on a hand-built trace:
//
//	r1 0-100 ─┬─ a 0-40
//	          ├─ b 10-95 ─┬─ d 10-50
//	          │           ├─ e 20-80 ── g 30-60
//	          │           └─ f 60-80 (ties with e on end; e starts first)
//	          └─ c 50-90
//	r2 0-99 (another root, ends earlier)
func TestCriticalPath(t *testing.T) {
	spans := []model.Span{
		span(1, -1, 0, 100, "r1"),
		span(2, 1, 0, 40, "a"),
		span(3, 1, 10, 95, "b"),
		span(4, 1, 50, 90, "c"),
		span(5, 3, 10, 50, "d"),
		span(6, 3, 20, 80, "e"),
		span(7, 3, 60, 80, "f"),
		span(8, 6, 30, 60, "g"),
		span(9, 100, 0, 99, "r2"), // parent missing: a root
	}
	tr := newTree(spans)
	var got []string
	for _, x := range tr.criticalPath() {
		got = append(got, tr.spans[x].Name)
	}
	if want := []string{"r1", "b", "e", "g"}; !slices.Equal(got, want) {
		t.Errorf("critical path %v, want %v", got, want)
	}
	_, ref := refMustKeep(spans, nil)
	if len(ref) != 4 || ref[1] != sid(3) || ref[2] != sid(6) {
		t.Errorf("reference critical path %v", ref)
	}

	// Trim marks exactly those, and keeps them under a tiny budget.
	opt := Options{Budget: 1}
	out := Trim(spans, opt)
	check(t, spans, opt, out)
	var marked []string
	for _, n := range out.Tree {
		if slices.Contains(n.Why, whyCritical) {
			marked = append(marked, n.Name)
		}
		if n.Name == "r2" && n.MissingParent != sid(100).String() {
			t.Errorf("r2 missing_parent = %q", n.MissingParent)
		}
	}
	if !slices.Equal(marked, []string{"r1", "b", "e", "g"}) {
		t.Errorf("marked %v", marked)
	}
	if !out.OverBudget {
		t.Error("a 1-token budget should be over")
	}
}

func TestMalformed(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		for _, in := range [][]model.Span{nil, {}} {
			out := Trim(in, Options{})
			b, err := json.Marshal(out)
			if err != nil || out.Spans != 0 || out.Shown != 0 || len(out.Tree) != 0 {
				t.Fatalf("empty input: %s, %v", b, err)
			}
			if !bytes.Contains(b, []byte(`"tree":[]`)) || out.Tokens != len(b)/4 {
				t.Errorf("empty input: %s", b)
			}
		}
	})
	t.Run("self parent", func(t *testing.T) {
		spans := []model.Span{span(1, 1, 0, 10, "self"), span(2, 1, 1, 5, "child")}
		out := Trim(spans, Options{})
		check(t, spans, Options{}, out)
		if out.Shown != 2 || out.Tree[0].Name != "self" || out.Tree[0].Parent != "" || out.Tree[0].MissingParent != sid(1).String() {
			t.Errorf("self-parented span: %+v", out.Tree)
		}
		if out.Tree[1].Parent != sid(1).String() {
			t.Errorf("child's parent %q", out.Tree[1].Parent)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		spans := []model.Span{
			span(1, 3, 0, 10, "a"), span(2, 1, 1, 9, "b"), span(3, 2, 2, 8, "c"),
			span(4, 2, 3, 4, "d"), span(5, 6, 0, 1, "e"), span(6, 5, 0, 1, "f"),
		}
		for _, budget := range []int{1, 0} {
			out := Trim(spans, Options{Budget: budget})
			collapsed := 0
			for _, g := range out.Collapsed {
				collapsed += g.Count
			}
			if out.Shown+collapsed != 6 {
				t.Errorf("budget %d: shown %d + collapsed %d != 6", budget, out.Shown, collapsed)
			}
			var roots []string
			for _, n := range out.Tree {
				if n.Parent == "" {
					roots = append(roots, n.Name)
				}
			}
			// Each cycle is cut at its earliest span (ties by id).
			if !slices.Equal(roots, []string{"a", "e"}) {
				t.Errorf("budget %d: roots %v, want [a e]", budget, roots)
			}
		}
	})
	t.Run("duplicate ids", func(t *testing.T) {
		spans := []model.Span{span(1, -1, 0, 10, "first"), span(1, -1, 5, 10, "second"), span(2, 1, 1, 2, "child")}
		spans[1].StatusCode = model.StatusError
		for _, budget := range []int{1, 0} {
			out := Trim(spans, Options{Budget: budget, Expand: []model.SpanID{sid(1)}})
			collapsed := 0
			for _, g := range out.Collapsed {
				collapsed += g.Count
			}
			if out.Spans != 3 || out.Shown+collapsed != 3 || out.DuplicateIDs != 1 {
				t.Errorf("budget %d: spans %d shown %d collapsed %d dups %d", budget, out.Spans, out.Shown, collapsed, out.DuplicateIDs)
			}
			if out.Tree[0].Name != "first" || out.Tree[1].Name != "child" || out.Tree[1].Parent != sid(1).String() {
				t.Errorf("budget %d: tree %+v", budget, out.Tree)
			}
		}
	})
	t.Run("end before start", func(t *testing.T) {
		spans := []model.Span{span(1, -1, 10, 0, "r")}
		out := Trim(spans, Options{})
		check(t, spans, Options{}, out)
		if out.Tree[0].DurationMs != 0 {
			t.Errorf("duration %v", out.Tree[0].DurationMs)
		}
	})
}

// When the must-keep spans fit only without attributes, the root's
// attributes go first, then the errors'; errors keep their message.
func TestDetailDropped(t *testing.T) {
	var spans []model.Span
	root := span(0, -1, 0, 100, "root")
	for i := range 40 {
		root.Attributes = append(root.Attributes, model.KeyValue{Key: fmt.Sprint("k", i), Value: model.StringValue(strings.Repeat("r", 200))})
	}
	spans = append(spans, root)
	for i := 1; i <= 20; i++ {
		s := span(i, 0, uint64(i), uint64(i+1), "err")
		s.StatusCode = model.StatusError
		s.StatusMessage = "boom"
		s.Attributes = []model.KeyValue{{Key: "detail", Value: model.StringValue(strings.Repeat("e", 100))}}
		spans = append(spans, s)
	}
	for i := 21; i < 300; i++ {
		spans = append(spans, span(i, 0, uint64(i%100), uint64(i%100+1), "ok"))
	}
	opt := Options{Budget: 2500}
	out := Trim(spans, opt)
	check(t, spans, opt, out)
	if out.OverBudget {
		t.Fatal("over budget, though the must-keep spans fit without the root's attributes")
	}
	withAttrs := 0
	for _, n := range out.Tree {
		if n.Name == "root" && n.Attributes != nil {
			t.Error("root kept its attributes")
		}
		if n.Name == "err" {
			if n.Message != "boom" {
				t.Errorf("error lost its message: %q", n.Message)
			}
			if n.Attributes != nil {
				withAttrs++
			}
		}
	}
	if withAttrs != 20 {
		t.Errorf("%d of 20 errors kept attributes; only the root's should have gone", withAttrs)
	}
	if !strings.Contains(out.Note, "lost their attributes") {
		t.Errorf("note: %q", out.Note)
	}
}

func TestOverBudget(t *testing.T) {
	var spans []model.Span
	spans = append(spans, span(0, -1, 0, 100, "root"))
	for i := 1; i < 400; i++ {
		s := span(i, 0, uint64(i%100), uint64(i%100+1), "err")
		s.StatusCode = model.StatusError
		s.Attributes = []model.KeyValue{{Key: "a", Value: model.StringValue("b")}}
		spans = append(spans, s)
	}
	opt := Options{Budget: 500, Expand: []model.SpanID{sid(7)}}
	out := Trim(spans, opt)
	check(t, spans, opt, out)
	if !out.OverBudget || out.Shown != 400 {
		t.Fatalf("over %v shown %d", out.OverBudget, out.Shown)
	}
	for _, n := range out.Tree {
		if (n.Attributes != nil) != (n.SpanID == sid(7).String()) {
			t.Errorf("span %s attributes %v", n.SpanID, n.Attributes)
		}
	}
}

// LLM spans come before other spans in the fill and carry their brief.
func TestLLMBrief(t *testing.T) {
	var spans []model.Span
	spans = append(spans, span(0, -1, 0, 1000, "agent"))
	for i := 1; i < 500; i++ {
		spans = append(spans, span(i, 0, uint64(i), uint64(i+500), "slow work"))
	}
	l := span(500, 0, 1, 2, "chat")
	l.LLM = &model.LLM{RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024", Operation: "chat", InputTokens: 120, OutputTokens: -1, CostNanoUSD: 1_500_000}
	spans = append(spans, l)
	opt := Options{Budget: 600}
	out := Trim(spans, opt)
	check(t, spans, opt, out)
	for _, n := range out.Tree {
		if n.Name == "chat" {
			want := LLMBrief{Model: "gpt-4o-2024", Operation: "chat", InputTokens: 120, CostUSD: 0.0015}
			if n.LLM == nil || *n.LLM != want || !slices.Contains(n.Why, whyLLM) {
				t.Errorf("llm node %+v, brief %+v", n, n.LLM)
			}
			return
		}
	}
	t.Error("the LLM span was not shown")
}

func TestJSONStrLen(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "\"", "\\", "\n", "\x01", "<", "&", "é", "\u2028", "\xff", "日本", " "}
	for range 2000 {
		var b strings.Builder
		for range rng.Intn(20) {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		s := b.String()
		enc, _ := json.Marshal(s)
		if got := jsonStrLen(s); got < len(enc) {
			t.Fatalf("jsonStrLen(%q) = %d < %d", s, got, len(enc))
		}
	}
	if got := jsonStrLen("plain text"); got != len(`"plain text"`) {
		t.Errorf("plain: %d", got)
	}
}

// Random parent links over a small id pool: self parents, cycles, duplicate
// ids and missing parents together. Trim must finish, account for every
// span, keep the tree connected and respect the budget.
func TestRandomMalformed(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for iter := range 300 {
		n := 1 + rng.Intn(60)
		pool := 1 + rng.Intn(n+5)
		spans := make([]model.Span, n)
		for i := range spans {
			start := uint64(rng.Intn(100))
			spans[i] = span(rng.Intn(pool), -1, start, start+uint64(rng.Intn(50)), fmt.Sprint("s", rng.Intn(4)))
			if rng.Intn(5) > 0 {
				spans[i].ParentSpanID = sid(rng.Intn(pool + 3))
			}
			if rng.Intn(8) == 0 {
				spans[i].StatusCode = model.StatusError
			}
		}
		opt := Options{Budget: []int{1, 100, 400, 0}[rng.Intn(4)]}
		out := Trim(spans, opt)
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		collapsed := 0
		for _, g := range out.Collapsed {
			collapsed += g.Count
		}
		if out.Spans != n || out.Shown+collapsed != n || out.Tokens != len(b)/4 {
			t.Fatalf("iter %d: spans %d shown %d collapsed %d tokens %d len %d", iter, out.Spans, out.Shown, collapsed, out.Tokens, len(b))
		}
		if !out.OverBudget && len(b) > out.Budget*4 {
			t.Fatalf("iter %d: %d bytes over %d", iter, len(b), out.Budget*4)
		}
		if out.shrunk {
			t.Fatalf("iter %d: estimate exceeded", iter)
		}
		seen := make(map[string]bool)
		errs := 0
		for _, nd := range out.Tree {
			if nd.Parent != "" && !seen[nd.Parent] {
				t.Fatalf("iter %d: %s's parent %s not shown before it", iter, nd.SpanID, nd.Parent)
			}
			seen[nd.SpanID] = true
			if nd.Status == "error" {
				errs++
			}
		}
		if errs != out.Errors {
			t.Fatalf("iter %d: %d errors shown of %d", iter, errs, out.Errors)
		}
	}
}

// The size estimate is an upper bound, so shrink never runs in practice;
// force it by lowering the limit after the fill.
func TestShrinkFallback(t *testing.T) {
	spans := genTrace(rand.New(rand.NewSource(5)), 3000, wide, 0)
	tr := newTrimmer(newTree(spans), Options{Budget: DefaultBudget, MaxValue: DefaultMaxValue})
	detail := make([]bool, len(spans))
	for x := range detail {
		detail[x] = tr.why[x]&(rRoot|rError|rExpanded) != 0
	}
	full := tr.trim(detail)
	if len(tr.fillOrder) < 10 {
		t.Fatalf("only %d spans filled", len(tr.fillOrder))
	}
	shown := make([]bool, len(spans))
	for x := range shown {
		shown[x] = tr.why[x]&rMustKeep != 0
	}
	for _, x := range tr.fillOrder {
		shown[x] = true
	}
	tr.limit -= 2000
	out := tr.shrink(shown, detail, tr.mode, noteState{mode: tr.mode})
	b, _ := json.Marshal(out)
	if !out.shrunk || len(b) > tr.limit || out.Shown >= full.Shown {
		t.Fatalf("shrunk %v: %d bytes for a limit of %d, shown %d (was %d)", out.shrunk, len(b), tr.limit, out.Shown, full.Shown)
	}
	if out.Shown < full.Shown-len(tr.fillOrder) {
		t.Fatalf("shrink dropped must-keep spans")
	}
	check(t, spans, Options{}, full)
}

// A long chain off the critical path under a large budget: the case the
// work bound of the fill exists for. The result must stay correct and use
// most of the budget.
func TestDeepChainLargeBudget(t *testing.T) {
	spans := offPathChain(5000)
	for _, budget := range []int{8000, 100000} {
		opt := Options{Budget: budget}
		out := Trim(spans, opt)
		check(t, spans, opt, out)
		if out.Tokens < budget*9/10 {
			t.Errorf("budget %d: used %d tokens", budget, out.Tokens)
		}
	}
}
