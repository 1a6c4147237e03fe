package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

// lifecycleCorpus: random traces plus LLM spans with values stored apart,
// shuffled into batches so that most traces are split over segments, then a
// batch re-sending some spans with a new name (the newest copy must win).
// It returns the batches and the expected content (newest copy per span).
func lifecycleCorpus(seed uint64, batches int) ([][]model.Span, map[string]model.Span) {
	g := newGen(seed)
	all := append(g.spans(150), dedupCorpus(120)...)
	r := rand.New(rand.NewPCG(seed, 99))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	out := make([][]model.Span, batches)
	for i := range all {
		b := r.IntN(batches - 1)
		out[b] = append(out[b], all[i])
	}
	want := map[string]model.Span{}
	for i := range all {
		want[key(&all[i])] = all[i]
	}
	for i := 0; i < 60; i++ {
		s := all[r.IntN(len(all))]
		s.Name = "resent"
		s.Attributes = append(slices.Clone(s.Attributes), model.KeyValue{Key: "copy", Value: model.IntValue(2)})
		out[batches-1] = append(out[batches-1], s)
		want[key(&s)] = s
	}
	return out, want
}

// answers is what a user sees of a store: every trace by id, a filtered
// search, a content search over stored-apart text and LLM totals.
type answers struct {
	traces  map[model.TraceID][]string // span key + name, sorted
	search  []string
	content []string
	llm     string
	spans   int
}

func collectAnswers(t *testing.T, e *Engine, want map[string]model.Span) answers {
	t.Helper()
	ctx := context.Background()
	a := answers{traces: map[model.TraceID][]string{}}
	for _, s := range want {
		if _, done := a.traces[s.TraceID]; done {
			continue
		}
		got, res, err := e.Trace(ctx, "default", s.TraceID)
		if err != nil || len(res.Warnings) > 0 {
			t.Fatalf("trace %s: %v %v", s.TraceID, err, res.Warnings)
		}
		var ks []string
		for i := range got {
			ks = append(ks, key(&got[i])+"/"+got[i].Name+"/"+fmt.Sprint(len(got[i].Attributes)))
		}
		sort.Strings(ks)
		a.traces[s.TraceID] = ks
		a.spans += len(got)
	}
	expr, err := query.ParseTraceQL(`{ span.user = "u3" || span.http.status_code = 500 }`)
	if err != nil {
		t.Fatal(err)
	}
	a.search = keys(searchAll(t, e, "default", &query.Filter{Expr: expr}, 7))
	cq, err := text.ParseQuery("completion 17:")
	if err != nil {
		t.Fatal(err)
	}
	a.content = keys(searchAll(t, e, "default", &query.Filter{Content: cq}, 20))
	st, err := e.LLMStats(ctx, "default", &store.LLMQuery{GroupBy: []string{"model"}})
	if err != nil || len(st.Warnings) > 0 {
		t.Fatalf("llm stats: %v %v", err, st.Warnings)
	}
	for _, g := range st.Groups {
		m := g.M
		a.llm += fmt.Sprintf("%v spans=%d in=%d out=%d cost=%d;", g.Key, m.Spans, m.InputTokens, m.OutputTokens, m.CostNanoUSD)
	}
	return a
}

// reference builds a store holding exactly the newest copies, in one seal,
// and returns its answers: what a compacted store must answer.
func reference(t *testing.T, want map[string]model.Span) answers {
	t.Helper()
	e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 16, NoCompaction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	spans := make([]model.Span, 0, len(want))
	for _, s := range want {
		spans = append(spans, s)
	}
	appendSpans(t, e, "default", spans)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	return collectAnswers(t, e, want)
}

func requireSameAnswers(t *testing.T, what string, got, want answers) {
	t.Helper()
	if got.spans != want.spans {
		t.Fatalf("%s: %d spans by trace lookup, want %d", what, got.spans, want.spans)
	}
	for id, ks := range want.traces {
		if !slices.Equal(got.traces[id], ks) {
			t.Fatalf("%s: trace %s:\n got  %v\n want %v", what, id, got.traces[id], ks)
		}
	}
	if !slices.Equal(got.search, want.search) {
		t.Fatalf("%s: search: %d spans, want %d", what, len(got.search), len(want.search))
	}
	if !slices.Equal(got.content, want.content) || len(want.content) == 0 {
		t.Fatalf("%s: content search: %d spans, want %d (> 0)", what, len(got.content), len(want.content))
	}
	if got.llm != want.llm {
		t.Fatalf("%s: llm stats:\n got  %s\n want %s", what, got.llm, want.llm)
	}
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCompactionKeepsEverySpanOnce: merging segments that split traces and
// hold re-sent spans changes no answer, drops the older copies, keeps stored
// values (also across a restart and a value collection) and leaves one
// segment file.
func TestCompactionKeepsEverySpanOnce(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, BlockSpans: 16, NoCompaction: true}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	batches, want := lifecycleCorpus(1, 7)
	for _, b := range batches {
		appendSpans(t, e, "default", b)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.segmentCount(); n != 7 {
		t.Fatalf("%d segments before compaction, want 7", n)
	}
	ref := reference(t, want)
	before := collectAnswers(t, e, want)
	if before.llm == ref.llm {
		t.Fatalf("test premise: LLM totals count re-sent copies twice before compaction")
	}
	before.llm = ref.llm
	requireSameAnswers(t, "before compaction", before, ref)
	if st := testStats(e, "default"); st.Spans == int64(len(want)) {
		t.Fatalf("stats should count re-sent copies twice before compaction (test premise)")
	}
	res, err := e.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Merges != 1 || res.SegmentsBefore != 7 || res.SegmentsAfter != 1 {
		t.Fatalf("compact: %+v, want one merge from 7 segments to 1", res)
	}
	if files := segFiles(t, dir); len(files) != 1 {
		t.Fatalf("segment files after compaction: %v", files)
	}
	if st := testStats(e, "default"); st.Spans != int64(len(want)) {
		t.Fatalf("stats after compaction: %d spans, want %d (older copies dropped)", st.Spans, len(want))
	}
	requireSameAnswers(t, "after compaction", collectAnswers(t, e, want), ref)

	// A filter on a value stored apart still finds its span (the merged
	// segment's attribute filters were built from the resolved text).
	var long model.Span
	for _, s := range want {
		if len(s.Attributes) > 7 && s.Name != "resent" {
			long = s
			break
		}
	}
	lit := strings.ReplaceAll(long.Attributes[7].Value.Str, `"`, `\"`)
	expr, err := query.ParseTraceQL(fmt.Sprintf(`{ span.%s = "%s" }`, completionKey, lit))
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(searchAll(t, e, "default", &query.Filter{Expr: expr}, 5)); !slices.Equal(got, []string{key(&long)}) {
		t.Fatalf("filter on a stored-apart value after compaction: %v, want [%s]", got, key(&long))
	}

	if _, err := e.CollectValues(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	requireSameAnswers(t, "after restart", collectAnswers(t, e, want), ref)
}

// TestQueriesDuringCompactionSeeNoGapOrDuplicate: while merges run (and
// ingest goes on into another project), every query answers exactly what the
// store holds.
func TestQueriesDuringCompactionSeeNoGapOrDuplicate(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, BlockSpans: 16, NoCompaction: true, CompactionFanout: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batches, want := lifecycleCorpus(2, 9)
	for _, b := range batches {
		appendSpans(t, e, "default", b)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	before := collectAnswers(t, e, want)
	ids := make([]model.TraceID, 0, len(before.traces))
	for id := range before.traces {
		ids = append(ids, id)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(2)
	go func() { // readers
		defer wg.Done()
		r := rand.New(rand.NewPCG(3, 4))
		for !stop.Load() {
			id := ids[r.IntN(len(ids))]
			got, res, err := e.Trace(context.Background(), "default", id)
			if err != nil || len(res.Warnings) > 0 {
				errs <- fmt.Errorf("trace during compaction: %v %v", err, res.Warnings)
				return
			}
			if len(got) != len(before.traces[id]) {
				errs <- fmt.Errorf("trace %s during compaction: %d spans, want %d", id, len(got), len(before.traces[id]))
				return
			}
			all, _, res, err := e.SearchSpans(context.Background(), "default", &query.Filter{}, 10_000, nil)
			if err != nil || len(res.Warnings) > 0 {
				errs <- fmt.Errorf("search during compaction: %v %v", err, res.Warnings)
				return
			}
			if len(all) != before.spans {
				errs <- fmt.Errorf("search during compaction: %d spans, want %d", len(all), before.spans)
				return
			}
		}
	}()
	go func() { // ingest elsewhere never waits on a merge
		defer wg.Done()
		g := newGen(77)
		for !stop.Load() {
			spans := g.spans(5)
			body := otlpBody(t, spans)
			if err := e.Append(context.Background(), &store.Write{Project: "other", Type: otlp.RecordOTLPProto, Body: body.raw, Spans: body.spans}); err != nil {
				errs <- err
				return
			}
		}
	}()
	res, err := e.Compact(context.Background())
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Merges < 2 {
		t.Fatalf("compact with fan-out 2 over 9 segments: %+v, want several merges", res)
	}
	requireSameAnswers(t, "after compaction", collectAnswers(t, e, want), reference(t, want))
}

// TestMergedAwaySegmentsCloseWithTheirLastView: a query that took its view
// before a merge still reads the merged-away segments (unlinked, still open);
// they are closed as soon as that view is released, not after a timer, so
// merges do not keep their inputs' indexes resident.
func TestMergedAwaySegmentsCloseWithTheirLastView(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, BlockSpans: 16, NoCompaction: true, CompactionFanout: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batches, _ := lifecycleCorpus(4, 4)
	for _, b := range batches {
		appendSpans(t, e, "default", b)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	held := e.view()
	if len(held.segs) != 4 {
		t.Fatalf("view holds %d segments, want 4", len(held.segs))
	}
	// A segment no view holds closes when it is merged away.
	unheld, release := e.segments()
	release()
	if res, err := e.Compact(context.Background()); err != nil || res.SegmentsAfter != 1 {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	for _, h := range held.segs {
		if _, err := os.Stat(filepath.Join(dir, "segments", h.name)); !os.IsNotExist(err) {
			t.Fatalf("merged-away segment %s: stat err %v, want it unlinked", h.name, err)
		}
		if _, err := h.r.ReadBlock(0); err != nil {
			t.Fatalf("segment %s held by a view: read after the merge: %v", h.name, err)
		}
	}
	held.release()
	for _, h := range held.segs {
		if _, err := h.r.ReadBlock(0); err == nil {
			t.Fatalf("segment %s: still readable after its last view was released, want it closed", h.name)
		}
	}
	if len(unheld) != 4 || unheld[0] != held.segs[3] {
		t.Fatalf("segments() and view() disagree: %d segments", len(unheld))
	}
	// The merged segment answers, and is not closed by the old views.
	after := e.view()
	defer after.release()
	if _, err := after.segs[0].r.ReadBlock(0); err != nil {
		t.Fatalf("merged segment: %v", err)
	}
}

// TestBackgroundCompactionMerges: with compaction on, the lifecycle loop
// merges sealed segments by itself.
func TestBackgroundCompactionMerges(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, BlockSpans: 16, CompactionFanout: 2, LifecycleInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	batches, want := lifecycleCorpus(3, 5)
	for _, b := range batches {
		appendSpans(t, e, "default", b)
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.segmentCount() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("background compaction left %d segments after 20s", e.segmentCount())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c := e.Counters(); c.Merges == 0 || c.SegmentsMerged < 2 {
		t.Fatalf("counters after background merges: %+v", c)
	}
	if got := collectAnswers(t, e, want); got.spans != len(want) {
		t.Fatalf("after background compaction: %d spans, want %d", got.spans, len(want))
	}
}

type protoBody struct {
	raw   []byte
	spans []model.Span
}

func otlpBody(t *testing.T, spans []model.Span) protoBody {
	t.Helper()
	raw := otlp.EncodeProto(spans)
	b, err := otlp.Decode(otlp.RecordOTLPProto, raw)
	if err != nil {
		t.Fatal(err)
	}
	return protoBody{raw, b.Spans}
}

// TestRetentionHidesThenRemoves: spans older than the retention are hidden
// from every query at once; the sweep drops wholly expired segments without
// reading them and rewrites a straddling one; a project's own retention
// overrides the default.
func TestRetentionHidesThenRemoves(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	opts := Options{Dir: dir, BlockSpans: 8, NoCompaction: true, Retention: 7 * 24 * time.Hour,
		ProjectRetention: map[string]time.Duration{"keep": 0},
		now:              func() time.Time { return time.Unix(0, clock.Load()) }}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	mk := func(seed uint64, age time.Duration, traces int) []model.Span {
		g := newGen(seed)
		g.base = uint64(now.Add(-age).UnixNano())
		return g.spans(traces)
	}
	old, fresh := mk(1, 10*24*time.Hour, 30), mk(2, time.Hour*24*3, 30)
	// Acknowledged while not yet expired: spans 6.9 days old.
	aging := mk(3, 7*24*time.Hour-2*time.Hour, 30)
	appendSpans(t, e, "default", old) // sealed alone: expired whole
	appendSpans(t, e, "keep", old)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", fresh)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", aging)
	appendSpans(t, e, "default", fresh[:40])
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if len(segFiles(t, dir)) != 3 {
		t.Fatalf("want 3 segments")
	}
	count := func(project string) int {
		return len(searchAll(t, e, project, &query.Filter{}, 1000))
	}
	if got, want := count("default"), len(fresh)+len(aging); got != want {
		t.Fatalf("default project: %d spans visible, want %d (the expired ones hidden)", got, want)
	}
	if got := count("keep"); got != len(old) {
		t.Fatalf("project with retention 0: %d spans, want %d", got, len(old))
	}
	if got, _, _ := e.Trace(context.Background(), "default", old[0].TraceID); len(got) != 0 {
		t.Fatalf("expired trace still returned: %d spans", len(got))
	}
	// The segment holding "keep"'s old spans is not wholly expired: kept.
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := count("keep"); got != len(old) {
		t.Fatalf("after sweep, project with retention 0: %d spans, want %d", got, len(old))
	}
	// Three hours later the aging spans expire: the third segment is mostly
	// expired and is rewritten; a segment holding only default's expired
	// spans would be dropped whole.
	clock.Add(int64(3 * time.Hour))
	if got, want := count("default"), len(fresh); got != want {
		t.Fatalf("after the clock moved: %d spans visible, want %d", got, want)
	}
	before := e.Counters()
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := e.Counters()
	if c.RetentionRewritten-before.RetentionRewritten < 1 {
		t.Fatalf("no straddling segment rewritten: %+v", c)
	}
	st := testStats(e, "default")
	if st.Spans != int64(len(fresh)+40) {
		t.Fatalf("stored spans after the sweep: %d, want %d (expired ones removed, the re-sent fresh copies kept)", st.Spans, len(fresh)+40)
	}
	// Expire everything of default but keep "keep": the first segment holds
	// both projects, so it stays; a default-only old segment goes whole.
	appendSpans(t, e, "default", mk(9, 30*24*time.Hour, 10))
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	n := len(segFiles(t, dir))
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The seal itself left the expired spans out: nothing new was written.
	if got := len(segFiles(t, dir)); got != n {
		t.Fatalf("segment files %d -> %d", n, got)
	}
}

// TestRetentionDropsExpiredSegmentWhole: a segment whose spans all expired
// is dropped from the manifest without being rewritten.
func TestRetentionDropsExpiredSegmentWhole(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	e, err := Open(Options{Dir: dir, BlockSpans: 8, NoCompaction: true, Retention: 24 * time.Hour,
		now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g := newGen(4)
	g.base = uint64(now.Add(-2 * time.Hour).UnixNano())
	appendSpans(t, e, "default", append(g.spans(20), dedupCorpusAt(8, now.Add(-2*time.Hour))...))
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if e.ValueStats().Values == 0 {
		t.Fatal("test premise: values stored apart")
	}
	clock.Add(int64(48 * time.Hour))
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := e.Counters(); c.RetentionDropped != 1 || c.RetentionRewritten != 0 {
		t.Fatalf("counters: dropped %d rewritten %d, want 1 and 0", c.RetentionDropped, c.RetentionRewritten)
	}
	if files := segFiles(t, dir); len(files) != 0 {
		t.Fatalf("segment files left: %v", files)
	}
	if v := e.ValueStats().Values; v != 0 {
		t.Fatalf("%d stored values left after their last segment expired", v)
	}
}

// dedupCorpusAt is dedupCorpus with span starts moved to at.
func dedupCorpusAt(n int, at time.Time) []model.Span {
	spans := dedupCorpus(n)
	for i := range spans {
		d := spans[i].EndTimeUnixNano - spans[i].StartTimeUnixNano
		spans[i].StartTimeUnixNano = uint64(at.UnixNano()) + uint64(i)
		spans[i].EndTimeUnixNano = spans[i].StartTimeUnixNano + d
	}
	return spans
}
