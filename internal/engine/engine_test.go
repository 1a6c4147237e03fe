package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gen makes random spans in traces of 1..12 spans over a few services,
// names and attribute values, so that filters select varied subsets.
type gen struct {
	r    *rand.Rand
	base uint64
	res  map[string]*model.Resource
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), base: 1_700_000_000_000_000_000, res: map[string]*model.Resource{}}
}

var (
	services = []string{"api", "db", "auth", "llm"}
	names    = []string{"GET /a", "GET /b", "POST /c", "query", "chat"}
	regions  = []string{"eu", "us", "ap"}
)

func (g *gen) resource(svc string) *model.Resource {
	if r, ok := g.res[svc]; ok {
		return r
	}
	r := &model.Resource{Attributes: []model.KeyValue{
		{Key: "service.name", Value: model.StringValue(svc)},
		{Key: "region", Value: model.StringValue(regions[len(g.res)%len(regions)])},
	}}
	g.res[svc] = r
	return r
}

func (g *gen) trace() []model.Span {
	var t model.TraceID
	for i := range t {
		t[i] = byte(g.r.IntN(256))
	}
	t[0] |= 1
	n := 1 + g.r.IntN(12)
	start := g.base + uint64(g.r.Int64N(3_600_000_000_000))
	out := make([]model.Span, n)
	for i := range out {
		s := &out[i]
		s.TraceID = t
		s.SpanID = model.SpanID{byte(i + 1), byte(g.r.IntN(256)), byte(g.r.IntN(256)), 7}
		if i > 0 {
			s.ParentSpanID = out[g.r.IntN(i)].SpanID
		}
		svc := services[g.r.IntN(len(services))]
		s.Resource = g.resource(svc)
		s.Service = svc
		s.Scope = &model.Scope{Name: "test"}
		s.Name = names[g.r.IntN(len(names))]
		s.Kind = model.SpanKind(1 + g.r.IntN(5))
		s.StartTimeUnixNano = start + uint64(g.r.Int64N(1_000_000_000))
		s.EndTimeUnixNano = s.StartTimeUnixNano + uint64(g.r.Int64N(2_000_000_000))
		if g.r.IntN(10) == 0 {
			s.StatusCode = model.StatusError
			s.StatusMessage = "boom"
		}
		s.Attributes = []model.KeyValue{
			{Key: "http.status_code", Value: model.IntValue(int64([]int{200, 201, 404, 500}[g.r.IntN(4)]))},
			{Key: "user", Value: model.StringValue(fmt.Sprintf("u%d", g.r.IntN(20)))},
		}
		if g.r.IntN(3) == 0 {
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "ratio", Value: model.DoubleValue(g.r.Float64())})
		}
		// size is an int or a double (an integer, or a fraction now and
		// then), taken from the span id so that the random stream stays
		// as it was: number equalities must find both types.
		switch b := s.SpanID[1]; {
		case b%16 == 15:
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "size", Value: model.DoubleValue(2.5)})
		case b%2 == 0:
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "size", Value: model.IntValue(int64(b % 8))})
		default:
			s.Attributes = append(s.Attributes, model.KeyValue{Key: "size", Value: model.DoubleValue(float64(b % 8))})
		}
	}
	return out
}

func (g *gen) spans(traces int) []model.Span {
	var out []model.Span
	for range traces {
		out = append(out, g.trace()...)
	}
	return out
}

func openTest(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := Open(Options{Dir: dir, BlockSpans: 64})
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	return e
}

func appendSpans(t *testing.T, e *Engine, project string, spans []model.Span) {
	t.Helper()
	for len(spans) > 0 {
		n := min(len(spans), 50)
		body := otlp.EncodeProto(spans[:n])
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatalf("decode own encoding: %v", err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: project, Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}); err != nil {
			t.Fatalf("append: %v", err)
		}
		spans = spans[n:]
	}
}

func key(s *model.Span) string { return s.TraceID.String() + s.SpanID.String() }

// appendRequest appends spans as one request.
func appendRequest(t *testing.T, e *Engine, project string, spans []model.Span) {
	t.Helper()
	body := otlp.EncodeProto(spans)
	b, err := otlp.DecodeProto(body)
	if err != nil {
		t.Fatalf("decode own encoding: %v", err)
	}
	if err := e.Append(context.Background(), &store.Write{Project: project, Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func keys(spans []model.Span) []string {
	out := make([]string, len(spans))
	for i := range spans {
		out[i] = key(&spans[i])
	}
	return out
}

// bruteForce returns the spans of corpus matching f in result order.
func bruteForce(corpus []model.Span, f *query.Filter) []model.Span {
	var out []model.Span
	for i := range corpus {
		if f.Match(&corpus[i]) {
			out = append(out, corpus[i])
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		return before(a.StartTimeUnixNano, a.TraceID, a.SpanID, b.StartTimeUnixNano, b.TraceID, b.SpanID)
	})
	return out
}

// searchAll pages through every result of f.
func searchAll(t *testing.T, e *Engine, project string, f *query.Filter, page int) []model.Span {
	t.Helper()
	var out []model.Span
	var cur *store.Cursor
	for {
		spans, next, res, err := e.SearchSpans(context.Background(), project, f, page, cur)
		if err != nil {
			t.Fatalf("search: %v", err)
		}
		if len(res.Warnings) > 0 {
			t.Fatalf("unexpected warnings: %v", res.Warnings)
		}
		out = append(out, spans...)
		if next == nil {
			return out
		}
		cur = next
	}
}

// randomFilter builds a random TraceQL filter over the generator's vocabulary.
func randomFilter(r *rand.Rand) string {
	conds := []func() string{
		func() string { return fmt.Sprintf(`resource.service.name = %q`, services[r.IntN(len(services))]) },
		func() string { return fmt.Sprintf(`name = %q`, names[r.IntN(len(names))]) },
		func() string { return fmt.Sprintf(`span.http.status_code >= %d`, []int{200, 300, 404, 500}[r.IntN(4)]) },
		func() string { return fmt.Sprintf(`duration > %dms`, r.IntN(2000)) },
		func() string { return "status = error" },
		func() string { return fmt.Sprintf(`.user = "u%d"`, r.IntN(20)) },
		func() string { return fmt.Sprintf(`resource.region != %q`, regions[r.IntN(3)]) },
		func() string { return fmt.Sprintf(`kind = %s`, []string{"server", "client", "internal"}[r.IntN(3)]) },
		func() string { return `name =~ "GET .*"` },
		func() string { return `span.ratio < 0.5` },
		func() string { return fmt.Sprintf(`span.size = %d`, r.IntN(10)) },
		func() string { return fmt.Sprintf(`(.size = "%d" || .size = %d)`, r.IntN(10), r.IntN(10)) },
		func() string {
			return []string{`span.size = 2.5`, `.size = 3.0`, `span.http.status_code = 404`, `span.http.status_code = 299`}[r.IntN(4)]
		},
	}
	pick := func() string { return conds[r.IntN(len(conds))]() }
	switch r.IntN(4) {
	case 0:
		return "{ " + pick() + " }"
	case 1:
		return "{ " + pick() + " && " + pick() + " }"
	case 2:
		return "{ " + pick() + " || " + pick() + " }"
	}
	return "{ (" + pick() + " || " + pick() + ") && " + pick() + " }"
}

// TestSearchEqualsBruteForce checks every search against a brute-force
// evaluation over all spans, with data spread over sealed segments, a frozen
// memtable and the active memtable, across pages of results.
func TestSearchEqualsBruteForce(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	defer e.Close()
	g := newGen(1)
	var corpus []model.Span
	for round := range 4 {
		spans := g.spans(150)
		corpus = append(corpus, spans...)
		appendSpans(t, e, "p1", spans)
		if round < 3 {
			if err := e.Seal(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another project's spans must never appear.
	appendSpans(t, e, "p2", newGen(99).spans(50))
	if got := testStats(e, "p1").Segments; got < 3 {
		t.Fatalf("want >= 3 segments, got %d", got)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 100 {
		q := randomFilter(r)
		expr, err := query.ParseTraceQL(q)
		if err != nil {
			t.Fatalf("parse %s: %v", q, err)
		}
		f := query.Filter{Expr: expr}
		if i%3 == 0 {
			f.Start = g.base + uint64(r.Int64N(1_800_000_000_000))
			f.End = f.Start + uint64(r.Int64N(1_800_000_000_000))
		}
		want := keys(bruteForce(corpus, &f))
		page := []int{7, 50, 1000}[r.IntN(3)]
		got := keys(searchAll(t, e, "p1", &f, page))
		if !slices.Equal(got, want) {
			t.Fatalf("filter %s (window %d..%d, page %d): got %d spans, want %d", q, f.Start, f.End, page, len(got), len(want))
		}
		// Trace search returns exactly the traces having a matching span.
		wantTraces := map[model.TraceID]bool{}
		for _, k := range bruteForce(corpus, &f) {
			wantTraces[k.TraceID] = true
		}
		sums, _, err := e.SearchTraces(context.Background(), "p1", &f, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if len(sums) != len(wantTraces) {
			t.Fatalf("filter %s: %d traces, want %d", q, len(sums), len(wantTraces))
		}
		for _, s := range sums {
			if !wantTraces[s.TraceID] {
				t.Fatalf("filter %s: trace %s has no matching span", q, s.TraceID)
			}
		}
	}
}

func TestTraceLookupAcrossSourcesAndRestart(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	g := newGen(2)
	traces := [][]model.Span{}
	for range 60 {
		traces = append(traces, g.trace())
	}
	// Split every trace in two halves: one sealed into a segment, one left in the WAL.
	for _, tr := range traces {
		appendSpans(t, e, "default", tr[:len(tr)/2])
	}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	for _, tr := range traces {
		appendSpans(t, e, "default", tr[len(tr)/2:])
	}
	check := func(e *Engine) {
		t.Helper()
		for _, tr := range traces {
			got, _, err := e.Trace(context.Background(), "default", tr[0].TraceID)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tr)
			sortByStart(want)
			if !slices.Equal(keys(got), keys(want)) {
				t.Fatalf("trace %s: got %v want %v", tr[0].TraceID, keys(got), keys(want))
			}
			for i := range got {
				if !spanEqual(&got[i], &want[i]) {
					t.Fatalf("trace %s span %d differs:\n got %+v\nwant %+v", tr[0].TraceID, i, got[i], want[i])
				}
			}
		}
		if got, _, _ := e.Trace(context.Background(), "other", traces[0][0].TraceID); len(got) != 0 {
			t.Fatalf("trace visible from another project")
		}
	}
	check(e)
	// Simulate a crash: drop the engine without Close (no final seal) and reopen.
	e.stopForTest()
	e2 := openTest(t, dir)
	defer e2.Close()
	check(e2)
}

// stopForTest stops background work and closes files without sealing,
// leaving the data directory as a crash would (everything acknowledged is in
// the WAL or a segment).
func (e *Engine) stopForTest() {
	e.closed.Store(true)
	close(e.stop)
	e.wg.Wait()
	e.wal.Close()
	e.closeSegments()
	e.lock.Close()
}

func spanEqual(a, b *model.Span) bool {
	return a.TraceID == b.TraceID && a.SpanID == b.SpanID && a.ParentSpanID == b.ParentSpanID &&
		a.Name == b.Name && a.Kind == b.Kind && a.StartTimeUnixNano == b.StartTimeUnixNano &&
		a.EndTimeUnixNano == b.EndTimeUnixNano && a.StatusCode == b.StatusCode && a.StatusMessage == b.StatusMessage &&
		a.Service == b.Service && model.EqualKeyValues(a.Attributes, b.Attributes) &&
		model.EqualKeyValues(a.Resource.Attributes, b.Resource.Attributes)
}

func TestResentSpansAppearOnce(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	defer e.Close()
	spans := newGen(3).spans(30)
	appendSpans(t, e, "default", spans)
	appendSpans(t, e, "default", spans) // duplicate inside the write buffer
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", spans) // duplicate across a segment and the buffer
	all := searchAll(t, e, "default", &query.Filter{}, 13)
	if len(all) != len(spans) {
		t.Fatalf("search returned %d spans, want %d (one copy each)", len(all), len(spans))
	}
	seen := map[string]bool{}
	for _, k := range keys(all) {
		if seen[k] {
			t.Fatalf("span %s returned twice", k)
		}
		seen[k] = true
	}
	got, _, _ := e.Trace(context.Background(), "default", spans[0].TraceID)
	n := 0
	for i := range spans {
		if spans[i].TraceID == spans[0].TraceID {
			n++
		}
	}
	if len(got) != n {
		t.Fatalf("trace has %d spans, want %d", len(got), n)
	}
	sums, _, _ := e.SearchTraces(context.Background(), "default", &query.Filter{}, 1000)
	for _, s := range sums {
		want := 0
		for i := range spans {
			if spans[i].TraceID == s.TraceID {
				want++
			}
		}
		if s.Spans != want {
			t.Fatalf("trace %s summary counts %d spans, want %d", s.TraceID, s.Spans, want)
		}
	}
}

func TestCorruptSegmentIsIsolated(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	g := newGen(4)
	a, b := g.spans(40), g.spans(40)
	appendSpans(t, e, "default", a)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", b)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 2 {
		t.Fatalf("want 2 segments, got %v", segs)
	}
	sort.Strings(segs)
	// Damage the middle of the first segment's data: block reads must fail
	// with a corruption warning while the second segment is still served.
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(data)/3; i += 97 {
		data[i] ^= 0x5a
	}
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	e = openTest(t, dir)
	defer e.Close()
	spans, _, res, err := e.SearchSpans(context.Background(), "default", &query.Filter{}, 100000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) == 0 {
		t.Fatalf("no warning about the damaged segment")
	}
	got := map[string]bool{}
	for _, k := range keys(spans) {
		got[k] = true
	}
	for _, k := range keys(b) {
		if !got[k] {
			t.Fatalf("span %s of the intact segment is missing", k)
		}
	}
	if e.Counters().Corruptions == 0 {
		t.Fatalf("corruption not counted")
	}
	// A segment damaged in its footer is quarantined at open; the rest is served.
	e.Close()
	data, _ = os.ReadFile(segs[1])
	data[len(data)-3] ^= 0xff
	os.WriteFile(segs[1], data, 0o644)
	e2 := openTest(t, dir)
	defer e2.Close()
	if q := testStats(e2, "default").Quarantined; len(q) != 1 {
		t.Fatalf("want one quarantined segment, got %v", q)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	defer e.Close()
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open of the same directory: %v", err)
	}
}

// TestBufferFullRefusesUntilSealed: with seals stalled, appends are refused
// with ErrBufferFull once the buffer limit is reached, nothing refused is
// stored, and appends resume after a seal.
func TestBufferFullRefusesUntilSealed(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), SealBytes: 64 << 10, MaxBufferBytes: 64 << 10, SealAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Stall the seal loop (as a slow disk would), keeping Close working.
	close(e.stop)
	e.wg.Wait()
	e.stop = make(chan struct{})
	defer e.Close()
	g := newGen(5)
	var accepted []model.Span
	full := false
	for i := 0; i < 10000 && !full; i++ {
		tr := g.trace()
		body := otlp.EncodeProto(tr)
		err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: body, Spans: tr})
		switch {
		case errors.Is(err, ErrBufferFull):
			full = true
		case err != nil:
			t.Fatal(err)
		default:
			accepted = append(accepted, tr...)
		}
	}
	if !full {
		t.Fatal("buffer limit never reached")
	}
	if got := testStats(e, "default").Spans; got != int64(len(accepted)) {
		t.Fatalf("stored %d spans, accepted %d", got, len(accepted))
	}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	tr := g.trace()
	if err := e.Append(context.Background(), &store.Write{Project: "default", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(tr), Spans: tr}); err != nil {
		t.Fatalf("append after seal: %v", err)
	}
}

func TestMissingManifestWithSegmentsIsRefused(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	appendSpans(t, e, "default", newGen(6).spans(5))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, manifestName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "MANIFEST is missing") {
		t.Fatalf("open without manifest: %v", err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) == 0 {
		t.Fatal("segments were deleted")
	}
}

// TestCrashBeforeFirstManifest: a segment file left by a crash before the
// store's first seal was published is removed, not mistaken for a lost
// manifest.
func TestCrashBeforeFirstManifest(t *testing.T) {
	dir := t.TempDir()
	e := openTest(t, dir)
	spans := newGen(7).spans(5)
	appendSpans(t, e, "default", spans)
	e.stopForTest()
	// What a crash between writing the first segment and publishing it leaves.
	if err := os.WriteFile(filepath.Join(dir, "segments", "0000000000000001.seg"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	e2 := openTest(t, dir)
	defer e2.Close()
	if got := testStats(e2, "default").Spans; got != int64(len(spans)) {
		t.Fatalf("after restart %d spans, want %d", got, len(spans))
	}
}

// testStats is e.Stats for tests (it fails only on a closed engine).
func testStats(e *Engine, project string) store.Stats {
	st, err := e.Stats(context.Background(), project)
	if err != nil {
		panic(err)
	}
	return st
}

// testErasures is every erasure the engine records, of every project.
func testErasures(e *Engine) []store.Erasure {
	e.erMu.Lock()
	projects := map[string]bool{}
	for _, r := range e.erasures.Erasures {
		projects[r.Project] = true
	}
	e.erMu.Unlock()
	var out []store.Erasure
	for p := range projects {
		st, err := e.Erasures(context.Background(), p)
		if err != nil {
			panic(err)
		}
		out = append(out, st...)
	}
	slices.SortFunc(out, func(a, b store.Erasure) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
