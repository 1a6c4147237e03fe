package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

const (
	promptKey     = "gen_ai.prompt.0.content"
	completionKey = "gen_ai.completion.0.content"
	promptWord    = "zanzibarian" // a word found only in the shared system prompt
)

// systemPrompt is 8 KiB of text shared by every LLM span of dedupCorpus.
var systemPrompt = func() string {
	var b strings.Builder
	b.WriteString("You are a careful support agent from the " + promptWord + " office. ")
	r := rand.New(rand.NewPCG(1, 2))
	for b.Len() < 8<<10 {
		b.WriteString(contentWords[r.IntN(len(contentWords))])
		b.WriteString(" policy clause ")
	}
	return b.String()[:8<<10]
}()

// dedupCorpus builds n LLM spans (OpenLLMetry attributes) in traces of 4,
// each with the shared system prompt and a unique completion of about 1.1 KiB.
func dedupCorpus(n int) []model.Span {
	r := rand.New(rand.NewPCG(5, 6))
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("chatbot")}}}
	base := uint64(1_700_000_000_000_000_000)
	out := make([]model.Span, n)
	for i := range out {
		var c strings.Builder
		fmt.Fprintf(&c, "completion %d:", i)
		for c.Len() < 1100 {
			c.WriteByte(' ')
			c.WriteString(contentWords[r.IntN(len(contentWords))])
			fmt.Fprintf(&c, "%d", r.IntN(1000))
		}
		s := &out[i]
		s.TraceID = model.TraceID{1, byte(i / 4 >> 8), byte(i / 4), 9}
		s.SpanID = model.SpanID{2, byte(i >> 8), byte(i), 1}
		s.Name = "chat gpt-4o"
		s.Kind = model.KindClient
		s.StartTimeUnixNano = base + uint64(i)*1_000_000
		s.EndTimeUnixNano = s.StartTimeUnixNano + 500_000
		s.Resource, s.Service = res, "chatbot"
		s.Scope = &model.Scope{Name: "openllmetry"}
		s.Attributes = []model.KeyValue{
			{Key: "gen_ai.system", Value: model.StringValue("openai")},
			{Key: "gen_ai.request.model", Value: model.StringValue("gpt-4o")},
			{Key: "gen_ai.usage.prompt_tokens", Value: model.IntValue(2000)},
			{Key: "gen_ai.usage.completion_tokens", Value: model.IntValue(250)},
			{Key: "session.id", Value: model.StringValue(fmt.Sprintf("sess-%d", i/40))},
			{Key: "gen_ai.prompt.0.role", Value: model.StringValue("system")},
			{Key: promptKey, Value: model.StringValue(systemPrompt)},
			{Key: completionKey, Value: model.StringValue(c.String())},
		}
	}
	return out
}

// requireFullValues checks that got holds the corpus' spans with their full
// strings (no ref left, no placeholder).
func requireFullValues(t *testing.T, what string, got []model.Span, byKey map[string]*model.Span) {
	t.Helper()
	for i := range got {
		if spanHasRefs(&got[i]) {
			t.Fatalf("%s: span %s still holds a stored-value reference", what, got[i].SpanID)
		}
		want := byKey[key(&got[i])]
		if want == nil {
			t.Fatalf("%s: unknown span %s", what, got[i].SpanID)
		}
		if !model.EqualKeyValues(got[i].Attributes, want.Attributes) {
			p, _ := got[i].Attr(promptKey)
			t.Fatalf("%s: span %s attributes differ (prompt %.80q)", what, got[i].SpanID, p.AsString())
		}
	}
}

func indexByKey(spans []model.Span) map[string]*model.Span {
	m := make(map[string]*model.Span, len(spans))
	for i := range spans {
		m[key(&spans[i])] = &spans[i]
	}
	return m
}

func TestLargeValuesStoredOnceAndResolved(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	corpus := dedupCorpus(2000)
	byKey := indexByKey(corpus)
	appendSpans(t, e, "default", corpus)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	vs := e.ValueStats()
	pp := len(segment.Pieces(systemPrompt))
	if vs.Values != pp+len(corpus) {
		t.Fatalf("value store holds %d values, want the prompt's %d pieces once plus %d completions", vs.Values, pp, len(corpus))
	}
	if vs.DedupHits < int64(pp*(len(corpus)-1)) {
		t.Fatalf("dedup hits %d, want >= %d", vs.DedupHits, pp*(len(corpus)-1))
	}
	inline := int64(0)
	for i := range corpus {
		p, _ := corpus[i].Attr(promptKey)
		c, _ := corpus[i].Attr(completionKey)
		inline += int64(len(p.Str) + len(c.Str))
	}
	disk := testStats(e, "default").SegmentBytes + vs.DiskBytes
	t.Logf("large values: %d raw bytes, %d bytes on disk (segments %d + values %d)", inline, disk, testStats(e, "default").SegmentBytes, vs.DiskBytes)
	if disk*4 > inline {
		t.Fatalf("disk bytes %d not far below the %d raw bytes of the values", disk, inline)
	}

	check := func(e *Engine) {
		t.Helper()
		ctx := context.Background()
		// Trace lookup.
		for _, i := range []int{0, 777, len(corpus) - 1} {
			got, res, err := e.Trace(ctx, "default", corpus[i].TraceID)
			if err != nil || len(res.Warnings) > 0 || len(got) != 4 {
				t.Fatalf("trace %s: %d spans, %v, %v", corpus[i].TraceID, len(got), res.Warnings, err)
			}
			requireFullValues(t, "trace", got, byKey)
		}
		// Content search on a word found only in the stored prompt.
		cq, err := text.ParseQuery(promptWord)
		if err != nil {
			t.Fatal(err)
		}
		got, _, res, err := e.SearchSpans(ctx, "default", &query.Filter{Content: cq}, 10, nil)
		if err != nil || len(res.Warnings) > 0 || len(got) != 10 {
			t.Fatalf("content search: %d spans, %v, %v", len(got), res.Warnings, err)
		}
		requireFullValues(t, "content search", got, byKey)
		// A TraceQL condition on a stored value's text.
		c, _ := corpus[1234].Attr(completionKey)
		expr, err := query.ParseTraceQL(fmt.Sprintf(`{ span.%s = %q }`, completionKey, c.Str))
		if err != nil {
			t.Fatal(err)
		}
		got, _, res, err = e.SearchSpans(ctx, "default", &query.Filter{Expr: expr}, 10, nil)
		if err != nil || len(res.Warnings) > 0 || len(got) != 1 || got[0].SpanID != corpus[1234].SpanID {
			t.Fatalf("search on a stored value: %d spans, %v, %v", len(got), res.Warnings, err)
		}
		requireFullValues(t, "attribute search", got, byKey)
		// Sessions return whole traces with their values.
		traces, res, err := e.SessionTraces(ctx, "default", "sess-3", &query.Filter{})
		if err != nil || len(res.Warnings) > 0 || len(traces) != 10 {
			t.Fatalf("session traces: %d, %v, %v", len(traces), res.Warnings, err)
		}
		for _, tr := range traces {
			requireFullValues(t, "session trace", tr, byKey)
		}
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openTest(t, dir)
	defer e2.Close()
	if vs2 := e2.ValueStats(); vs2.Values != vs.Values {
		t.Fatalf("after restart the value store holds %d values, before %d", vs2.Values, vs.Values)
	}
	check(e2)
}

// TestSearchOverStoredValuesEqualsBruteForce: with a low threshold most
// texts are stored apart; content and attribute searches must still equal a
// brute-force evaluation over the original spans.
func TestSearchOverStoredValuesEqualsBruteForce(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 64, ValueThreshold: 48, Durability: DurabilityBuffered})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := rand.New(rand.NewPCG(21, 22))
	corpus := appendContentRounds(t, e, r, 100)
	if e.ValueStats().Values == 0 {
		t.Fatal("nothing stored apart")
	}
	byKey := indexByKey(corpus)
	rare := 0
	for i := range corpus {
		if _, ok := corpus[i].Attr(promptKey); ok {
			rare++
		}
	}
	for i := range 80 {
		f := query.Filter{}
		var q string
		if i%4 == 3 {
			q = fmt.Sprintf(`{ span.%s =~ ".*%s.*" }`, promptKey, contentWords[r.IntN(len(contentWords))])
			if f.Expr, err = query.ParseTraceQL(q); err != nil {
				t.Fatalf("parse %s: %v", q, err)
			}
		} else {
			q = randomContentQuery(r, rare)
			if f.Content, err = text.ParseQuery(q); err != nil {
				t.Fatalf("parse %q: %v", q, err)
			}
		}
		want := keys(bruteForce(corpus, &f))
		gotSpans := searchAll(t, e, "default", &f, 50)
		if got := keys(gotSpans); !slices.Equal(got, want) {
			t.Fatalf("%q: got %d spans, want %d", q, len(got), len(want))
		}
		requireFullValues(t, q, gotSpans, byKey)
	}
}

// TestUnreadableStoredValueGivesPlaceholder: a value missing from the store
// does not fail the query: the span comes back with a placeholder, the
// result carries a warning, and the failure is counted.
func TestUnreadableStoredValueGivesPlaceholder(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	corpus := dedupCorpus(8)
	appendSpans(t, e, "default", corpus)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Lose every stored value (as a botched restore would).
	packs, _ := filepath.Glob(filepath.Join(dir, "values", "*"))
	for _, p := range packs {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	e = openTest(t, dir)
	defer e.Close()
	got, res, err := e.Trace(context.Background(), "default", corpus[0].TraceID)
	if err != nil || len(got) != 4 {
		t.Fatalf("trace: %d spans, %v", len(got), err)
	}
	p, _ := got[0].Attr(promptKey)
	if p.Type != model.ValueString || !strings.HasPrefix(p.Str, "<stored value ") || !strings.Contains(p.Str, "sha256:") || !strings.HasSuffix(p.Str, fmt.Sprintf(", %d bytes>", len(systemPrompt))) {
		t.Fatalf("unreadable value rendered as %.100q", p.Str)
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "stored value") {
		t.Fatalf("no warning: %v", res.Warnings)
	}
	if e.Counters().ValueErrors == 0 {
		t.Fatalf("failure not counted")
	}
	cq, _ := text.ParseQuery(promptWord)
	spans, _, res, err := e.SearchSpans(context.Background(), "default", &query.Filter{Content: cq}, 10, nil)
	if err != nil || len(spans) != 0 || len(res.Warnings) == 0 {
		t.Fatalf("content search over lost values: %d spans, %v, %v", len(spans), res.Warnings, err)
	}
}

// resolvedSpansAllocs guards the common case: matching a span without refs
// through the resolver allocates nothing.
func TestMatchWithoutRefsDoesNotAllocate(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	spans := newGen(3).spans(5)
	expr, err := query.ParseTraceQL(`{ span.http.status_code >= 200 }`)
	if err != nil {
		t.Fatal(err)
	}
	f := &query.Filter{Expr: expr}
	var res store.Result
	rv := e.newResolver(&res)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range spans {
			rv.match(f, &spans[i])
		}
	})
	if allocs != 0 {
		t.Fatalf("match of spans without refs allocates %.1f times", allocs)
	}
}

// TestResolveDoesNotModifySharedSpans: resolution copies; block-cache spans
// keep their refs.
func TestResolveDoesNotModifySharedSpans(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	appendSpans(t, e, "default", dedupCorpus(4))
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	v := e.view()
	cached, err := e.readBlock(v.segs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if !spanHasRefs(&cached[0]) {
		t.Fatal("block spans hold no refs")
	}
	if _, _, err := e.Trace(context.Background(), "default", cached[0].TraceID); err != nil {
		t.Fatal(err)
	}
	again, _ := e.readBlock(v.segs[0], 0)
	if &again[0] != &cached[0] || !spanHasRefs(&again[0]) {
		t.Fatal("resolution modified the cached block spans")
	}
}
