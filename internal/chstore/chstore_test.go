package chstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/chstore/chtest"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a Store on a fresh database of the shared test server.
func open(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.URL == "" {
		opts.URL = chtest.URL(t)
	}
	if opts.BatchWindow == 0 {
		opts.BatchWindow = time.Millisecond
	}
	s, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendAll(t *testing.T, b store.Appender, project string, spans []model.Span) {
	t.Helper()
	for len(spans) > 0 {
		n := min(len(spans), 500)
		batch := slices.Clone(spans[:n])
		if err := b.Append(t.Context(), &store.Write{Project: project, Spans: batch}); err != nil {
			t.Fatal(err)
		}
		spans = spans[n:]
	}
}

func TestMigrationsAreVersionedAndIdempotent(t *testing.T) {
	url := chtest.URL(t)
	feat, steps, ran, err := Migrate(t.Context(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	if ran != len(migrations) || len(steps) != len(migrations) || feat.Version == "" {
		t.Fatalf("first run: %d applied, steps %+v, version %q", ran, steps, feat.Version)
	}
	for _, m := range steps {
		if m.AppliedAt.IsZero() {
			t.Fatalf("step %d not recorded: %+v", m.Version, steps)
		}
	}
	if _, _, ran, err := Migrate(t.Context(), url, ""); err != nil || ran != 0 {
		t.Fatalf("second run: %d applied, %v; want 0", ran, err)
	}
	s := open(t, Options{URL: url}) // Open migrates too: nothing left to do
	var n uint64
	if err := s.conn.QueryRow(t.Context(), "SELECT count() FROM schema_migrations").Scan(&n); err != nil || n != uint64(len(migrations)) {
		t.Fatalf("schema_migrations holds %d rows (%v), want %d", n, err, len(migrations))
	}
}

func TestParseVersion(t *testing.T) {
	for v, want := range map[string]Features{
		"18.16.1":    {Version: "18.16.1", Major: 18, Minor: 16},
		"19.6.2.11":  {Version: "19.6.2.11", Major: 19, Minor: 6, LowCardinality: true, TTL: true},
		"24.3.2.23":  {Version: "24.3.2.23", Major: 24, Minor: 3, LowCardinality: true, TTL: true, SkipIndexes: true, MutationsSync: true, LightweightDelete: true},
		"20.1.1.100": {Version: "20.1.1.100", Major: 20, Minor: 1, LowCardinality: true, TTL: true, SkipIndexes: true, MutationsSync: true},
	} {
		got, err := parseVersion(v)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", v, got, err, want)
		}
	}
	if _, err := parseVersion("nonsense"); err == nil {
		t.Error("a version without major.minor was accepted")
	}
}

// rootSpan is the first span with no parent at or after corpus[from]
// (wrapping round): a trace's root, whose service a rootServiceName
// filter can name and find.
func rootSpan(corpus []model.Span, from int) *model.Span {
	for i := range corpus {
		sp := &corpus[(from+i)%len(corpus)]
		if sp.ParentSpanID.IsZero() {
			return sp
		}
	}
	panic("the corpus has no root span")
}

// spanText is a span as the API shows it, to compare backends.
func spanText(sp *model.Span) string { return string(otlp.AppendSpanJSON(nil, sp)) }

// TestAgreesWithEngine: on one corpus, trace by id, span search (walked
// page by page) and trace search answer as the embedded engine does.
func TestAgreesWithEngine(t *testing.T) {
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	corpus, err := bench.Generate(bench.CorpusLLM, bench.CorpusOptions{Seed: 3, Spans: 3000, Start: start, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ch := open(t, Options{})
	appendAll(t, eng, "p", corpus)
	appendAll(t, ch, "p", corpus)
	appendAll(t, ch, "p", corpus[:200]) // re-sent spans: each is answered once

	sample := corpus[len(corpus)/2]
	attr := sample.Attributes[0]
	filters := map[string]url.Values{
		"all":        {},
		"service":    {"service": {sample.Service}},
		"name":       {"name": {sample.Name}},
		"errors":     {"status": {"error"}},
		"durations":  {"min_duration": {"1ms"}, "max_duration": {"800ms"}},
		"window":     {"since": {start.Add(20 * time.Minute).Format(time.RFC3339)}, "until": {start.Add(40 * time.Minute).Format(time.RFC3339)}},
		"attribute":  {"q": {fmt.Sprintf(`{ span.%s = %s }`, attr.Key, quoteValue(attr.Value))}},
		"traceql":    {"q": {`{ kind = client && duration > 10ms } `}},
		"or":         {"q": {fmt.Sprintf(`{ resource.service.name = "%s" || status = error }`, sample.Service)}},
		"not":        {"q": {`{ !(span.gen_ai.request.model = "gpt-4o") }`}},
		"trace-root": {"q": {fmt.Sprintf(`{ rootServiceName = "%s" }`, rootSpan(corpus, len(corpus)/2).Service)}},
		"content":    {"content": {"the"}},
	}
	agree(t, corpus, 97, filters, eng, ch)
}

func quoteValue(v model.Value) string {
	switch v.Type {
	case model.ValueString:
		return fmt.Sprintf("%q", v.Str)
	default:
		return v.AsString()
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// injections are strings that would change a query built by pasting them
// into SQL.
var injections = []string{
	`'`, `\`, `\'`, `' OR 1=1 --`, `x') OR ('1'='1`, `'; DROP TABLE spans; --`, "a\x00b", `?`, `{p:String}`, `%s`,
	"') UNION ALL SELECT * FROM system.tables --", `\\'; SELECT 1; --`, "é漢字🙂", strings.Repeat("'", 300),
}

// TestInjectionThroughEveryParameter: every parameter a request can set
// reaches SQL bound: an injection string is stored and found as itself,
// selects nothing else, and leaves every table as it was.
func TestInjectionThroughEveryParameter(t *testing.T) {
	s := open(t, Options{})
	ctx := t.Context()
	base := uint64(time.Now().Add(-time.Hour).UnixNano())
	var spans []model.Span
	for i, inj := range injections {
		res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(inj)}, {Key: inj, Value: model.StringValue(inj)}}}
		spans = append(spans, model.Span{
			TraceID: model.TraceID{9, byte(i), 1}, SpanID: model.SpanID{9, byte(i), 2}, Name: inj, Service: inj, Resource: res,
			Kind: model.KindServer, StartTimeUnixNano: base + uint64(i)*1e9, EndTimeUnixNano: base + uint64(i)*1e9 + 1e6,
			Attributes: []model.KeyValue{{Key: inj, Value: model.StringValue(inj)}, {Key: "gen_ai.request.model", Value: model.StringValue(inj)},
				{Key: "gen_ai.conversation.id", Value: model.StringValue(inj)}, {Key: "gen_ai.usage.input_tokens", Value: model.IntValue(3)}},
		})
	}
	for _, project := range []string{"plain", injections[3]} {
		appendAll(t, s, project, spans)
	}
	counts := func() string {
		var out []string
		for _, table := range []string{"spans", "trace_index", "erased_traces", "erasures", "schema_migrations"} {
			var n uint64
			if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
				t.Fatalf("count %s: %v", table, err)
			}
			out = append(out, fmt.Sprintf("%s=%d", table, n))
		}
		return strings.Join(out, " ")
	}
	before := counts()
	for i, inj := range injections {
		want := spans[i].SpanID
		one := func(what string, f query.Filter) {
			t.Helper()
			got, _, _, err := s.SearchSpans(ctx, "plain", &f, 100, nil)
			if err != nil {
				t.Fatalf("%s %q: %v", what, inj, err)
			}
			if len(got) != 1 || got[0].SpanID != want {
				t.Errorf("%s %q: %d spans, want exactly its own span", what, inj, len(got))
			}
		}
		one("service", query.Filter{Service: inj})
		one("name", query.Filter{Name: inj})
		lit := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(inj)
		for _, q := range []string{`{ span."` + lit + `" = "` + lit + `" }`, `{ resource.service.name = "` + lit + `" }`, `{ .gen_ai.request.model = "` + lit + `" }`} {
			expr, err := query.ParseTraceQL(q)
			if err != nil {
				continue // a key TraceQL cannot spell; the value is still bound below
			}
			one("TraceQL "+q, query.Filter{Expr: expr})
		}
		// Every other parameter: project, discovery keys, session ids,
		// LLM filters, erasure queries.
		if sp, _, _, err := s.SearchSpans(ctx, inj, &query.Filter{}, 10, nil); err != nil || (inj != injections[3] && len(sp) != 0) {
			t.Errorf("project %q: %d spans, %v", inj, len(sp), err)
		}
		if tr, _, err := s.Trace(ctx, inj, spans[i].TraceID); err != nil || (inj != injections[3] && len(tr) != 0) {
			t.Errorf("trace in project %q: %d spans, %v", inj, len(tr), err)
		}
		if ops, _, err := s.Operations(ctx, "plain", inj, 0, 0); err != nil || len(ops) != 1 || ops[0].Name != inj {
			t.Errorf("operations of service %q: %+v %v", inj, ops, err)
		}
		if vals, _, err := s.AttributeValues(ctx, "plain", inj, 0, 0, 10); err != nil || len(vals) == 0 || vals[0].Name != inj {
			if len(inj) <= 256 {
				t.Errorf("values of key %q: %+v %v", inj, vals, err)
			}
		}
		if _, _, err := s.Services(ctx, inj, 0, 0); err != nil {
			t.Errorf("services of project %q: %v", inj, err)
		}
		if _, _, err := s.AttributeKeys(ctx, inj, 0, 0); err != nil {
			t.Errorf("attribute keys of project %q: %v", inj, err)
		}
		st, err := s.LLMStats(ctx, "plain", &store.LLMQuery{Filter: query.Filter{Service: inj, Name: inj}, GroupBy: []string{"model", "session"}})
		if err != nil || len(st.Groups) != 1 || st.Groups[0].Key["model"] != inj || st.Groups[0].Key["session"] != inj {
			t.Errorf("LLM stats for %q: %+v %v", inj, st.Groups, err)
		}
		if tr, _, err := s.SessionTraces(ctx, "plain", inj, &query.Filter{}); err != nil || len(tr) != 1 || tr[0][0].SpanID != want {
			t.Errorf("session %q: %d traces, %v", inj, len(tr), err)
		}
		if _, err := s.LLMStats(ctx, "plain", &store.LLMQuery{GroupBy: []string{inj}}); !errors.Is(err, store.ErrBadRequest) {
			t.Errorf("group_by %q: %v, want a bad request", inj, err)
		}
		if _, err := s.Erasures(ctx, inj); err != nil {
			t.Errorf("erasures of project %q: %v", inj, err)
		}
		if _, err := s.Erase(ctx, store.EraseRequest{Project: "plain", Query: `{ name = "` + lit + `" && span.nothing = "x" }`}); err != nil {
			t.Errorf("erasure matching nothing, %q: %v", inj, err)
		}
	}
	if after := counts(); strings.Replace(after, "erasures=0", "", 1) != strings.Replace(before, "erasures=0", "", 1) && !sameButErasures(before, after) {
		t.Fatalf("tables changed: before %s, after %s", before, after)
	}
	// The erasure of one injected trace removes that trace only.
	id := spans[5].TraceID
	if e, err := s.Erase(ctx, store.EraseRequest{Project: "plain", TraceID: &id}); err != nil || e.SpansErased != 1 || e.Traces != 1 {
		t.Fatalf("erase one trace of one span: %+v %v", e, err)
	}
	got, _, _, err := s.SearchSpans(ctx, "plain", &query.Filter{}, 100, nil)
	if err != nil || len(got) != len(spans)-1 {
		t.Fatalf("after erasing one trace: %d spans (%v), want %d", len(got), err, len(spans)-1)
	}
}

// sameButErasures: only the erasures table changed (the no-op erasures
// above are recorded, as they are on every backend).
func sameButErasures(before, after string) bool {
	strip := func(s string) string {
		var keep []string
		for _, f := range strings.Fields(s) {
			if !strings.HasPrefix(f, "erasures=") {
				keep = append(keep, f)
			}
		}
		return strings.Join(keep, " ")
	}
	return strip(before) == strip(after)
}

// TestFullQueueAnswersOverloaded: beyond MaxQueuedSpans, Append fails at
// once with store.ErrOverloaded; the queued write still completes.
func TestFullQueueAnswersOverloaded(t *testing.T) {
	s := open(t, Options{MaxQueuedSpans: 10, BatchWindow: 300 * time.Millisecond})
	spans := benchSpans(t, 13)
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() { firstErr = s.Append(context.Background(), &store.Write{Project: "p", Spans: spans[:8]}) })
	for s.w.queued.Load() != 8 {
		time.Sleep(time.Millisecond)
	}
	err := s.Append(t.Context(), &store.Write{Project: "p", Spans: spans[8:]})
	if !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("append past the queue: %v, want ErrOverloaded", err)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("queued append: %v", firstErr)
	}
	got, _, _, err := s.SearchSpans(t.Context(), "p", &query.Filter{}, 100, nil)
	if err != nil || len(got) != 8 {
		t.Fatalf("stored %d spans (%v), want the 8 acknowledged", len(got), err)
	}
}

func benchSpans(t testing.TB, n int) []model.Span {
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 1, Spans: n, Start: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

// TestClickHouseDownFailsWrites: with the server gone, a write fails (the
// API answers 503) instead of being acknowledged, and so do queries; Close
// still returns.
func TestClickHouseDownFailsWrites(t *testing.T) {
	srv, err := chtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	s, err := Open(t.Context(), Options{URL: srv.URL("default") + "?dial_timeout=500ms", BatchWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	spans := benchSpans(t, 20)
	if err := s.Append(t.Context(), &store.Write{Project: "p", Spans: spans[:10]}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	err = s.Append(t.Context(), &store.Write{Project: "p", Spans: spans[10:]})
	if err == nil || errors.Is(err, store.ErrOverloaded) || errors.Is(err, store.ErrBadRequest) {
		t.Fatalf("append with ClickHouse down: %v, want an internal failure (503)", err)
	}
	if _, _, _, err := s.SearchSpans(t.Context(), "p", &query.Filter{}, 10, nil); err == nil {
		t.Fatal("search with ClickHouse down succeeded")
	}
}

// TestTailSeesThisProcessWrites: a tail receives the spans this Store
// acknowledged, filtered.
func TestTailSeesThisProcessWrites(t *testing.T) {
	s := open(t, Options{})
	spans := benchSpans(t, 30)
	f := &query.Filter{Service: spans[3].Service}
	tail, err := s.Tail(t.Context(), "p", f)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	appendAll(t, s, "p", spans)
	want := 0
	for i := range spans {
		if f.Match(&spans[i]) {
			want++
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := 0
	for got < want {
		batch, dropped, err := tail.Next(ctx)
		if err != nil || dropped != 0 {
			t.Fatalf("tail after %d of %d spans: %v (dropped %d)", got, want, err, dropped)
		}
		for i := range batch {
			if batch[i].Service != f.Service {
				t.Fatalf("tail sent a span of %q", batch[i].Service)
			}
		}
		got += len(batch)
	}
}

func chtestURL(t testing.TB) string { return chtest.URL(t) }

func appendAllB(b *testing.B, s *Store, spans []model.Span) {
	for len(spans) > 0 {
		n := min(len(spans), 5000)
		if err := s.Append(b.Context(), &store.Write{Project: "p", Spans: slices.Clone(spans[:n])}); err != nil {
			b.Fatal(err)
		}
		spans = spans[n:]
	}
}

// TestErasure: requests are checked as on the engine; the traces a query
// covers are hidden at once and their rows removed later (done).
func TestErasure(t *testing.T) {
	s := open(t, Options{})
	ctx := t.Context()
	spans := benchSpans(t, 2000)
	appendAll(t, s, "p", spans)
	id := spans[0].TraceID
	for _, req := range []store.EraseRequest{
		{Project: "p"}, {Project: "p", TraceID: &id, Query: `{ status = error }`}, {Project: "p", Query: "{ }"},
		{Project: "p", Query: "{ nope"}, {Project: "p", Query: `{ duration >= 0 }`},
	} {
		if _, err := s.Erase(ctx, req); !errors.Is(err, store.ErrBadRequest) {
			t.Errorf("%+v: %v, want a bad request", req, err)
		}
	}
	q := fmt.Sprintf(`{ resource.service.name = "%s" }`, spans[1].Service)
	f, err := query.FromValues(url.Values{"q": {q}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	traces, rows := map[model.TraceID]bool{}, 0
	for i := range spans {
		if f.Match(&spans[i]) {
			traces[spans[i].TraceID] = true
		}
	}
	for i := range spans {
		if traces[spans[i].TraceID] {
			rows++
		}
	}
	e, err := s.Erase(ctx, store.EraseRequest{Project: "p", Query: q})
	if err != nil || e.State != store.EraseHidden || e.Traces != len(traces) || e.SpansErased != int64(rows) {
		t.Fatalf("erase: %+v %v, want hidden, %d traces, %d spans", e, err, len(traces), rows)
	}
	left, _, _, err := s.SearchSpans(ctx, "p", &query.Filter{}, 5000, nil)
	if err != nil || len(left) != len(spans)-rows {
		t.Fatalf("after the erasure %d spans are found (%v), want %d", len(left), err, len(spans)-rows)
	}
	for i := range left {
		if traces[left[i].TraceID] {
			t.Fatalf("a span of an erased trace is found: %s", left[i].TraceID)
		}
	}
	waitErasureDone(t, s, e.ID, uint64(len(spans)-rows))
}

// waitErasureDone waits until erasure id, the project's only one, is done
// and recorded so by the erasure pass (within 20 s), with the done time
// Erasures reported first; then checks that the spans table holds left
// rows.
func waitErasureDone(t *testing.T, s *Store, id uint64, left uint64) {
	t.Helper()
	ctx := t.Context()
	var doneAt *time.Time
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list, err := s.Erasures(ctx, "p")
		if err != nil || len(list) != 1 || list[0].ID != id {
			t.Fatalf("erasures: %+v %v, want erasure %d alone", list, err, id)
		}
		if e := list[0]; e.State == store.EraseDone {
			if e.DoneAt == nil || (doneAt != nil && !e.DoneAt.Equal(*doneAt)) {
				t.Fatalf("erasure reported done at %v, then at %v", doneAt, e.DoneAt)
			}
			doneAt = e.DoneAt
			if recorded(t, s, "p", id).State == store.EraseDone {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasure not done and recorded so after 20s: %+v, recorded %+v", list[0], recorded(t, s, "p", id))
		}
	}
	if r := recorded(t, s, "p", id); r.DoneAt == nil || !r.DoneAt.Equal(*doneAt) {
		t.Fatalf("erasure reported done at %v, recorded done at %v", doneAt, r.DoneAt)
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM spans").Scan(&n); err != nil || n != left {
		t.Fatalf("%d rows left (%v), want %d", n, err, left)
	}
}

// TestTwoProcessesShareOneDatabase: two Stores on one database, as two
// rastro serve processes behind a load balancer: what one acknowledges, the
// other finds at once (trace by id, search), and an erasure through one is
// hidden from the other at once.
func TestTwoProcessesShareOneDatabase(t *testing.T) {
	dsn := chtest.URL(t)
	a, b := open(t, Options{URL: dsn}), open(t, Options{URL: dsn})
	spans := benchSpans(t, 300)
	appendAll(t, a, "p", spans)
	byTrace := map[model.TraceID]int{}
	for i := range spans {
		byTrace[spans[i].TraceID]++
	}
	for id, n := range byTrace {
		got, _, err := b.Trace(t.Context(), "p", id)
		if err != nil || len(got) != n {
			t.Fatalf("trace %s written through a, read through b: %d spans, %v; want %d", id, len(got), err, n)
		}
	}
	var total int
	var cur *store.Cursor
	for {
		page, next, _, err := b.SearchSpans(t.Context(), "p", &query.Filter{}, 100, cur)
		if err != nil {
			t.Fatal(err)
		}
		total += len(page)
		if next == nil {
			break
		}
		cur = next
	}
	if total != len(spans) {
		t.Fatalf("b's search finds %d of the %d spans a acknowledged", total, len(spans))
	}
	victim := spans[0].TraceID
	if _, err := a.Erase(t.Context(), store.EraseRequest{Project: "p", TraceID: &victim}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Trace(t.Context(), "p", victim); err != nil || len(got) != 0 {
		t.Fatalf("a trace erased through a is served by b: %d spans, %v", len(got), err)
	}
}

// TestClickHouseRestartDuringIngest: ClickHouse restarts while writes go
// on. Writes during the outage fail (503, nothing acknowledged); every write
// acknowledged before, during or after it is stored exactly once.
func TestClickHouseRestartDuringIngest(t *testing.T) {
	srv, err := chtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	s, err := Open(t.Context(), Options{URL: srv.URL("default") + "?dial_timeout=500ms", BatchWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	spans := benchSpans(t, 4000)
	acked := map[model.SpanID]bool{}
	failed := 0
	restarted := make(chan error, 1)
	for i := 0; i < len(spans); i += 50 {
		batch := slices.Clone(spans[i : i+50])
		switch i {
		case 1000:
			go func() { restarted <- srv.Restart() }()
		case 2000: // the rest is written once the restart is over
			if err := <-restarted; err != nil {
				t.Fatalf("restart: %v", err)
			}
		}
		if err := s.Append(t.Context(), &store.Write{Project: "p", Spans: batch}); err != nil {
			if errors.Is(err, store.ErrBadRequest) {
				t.Fatal(err)
			}
			failed++
			continue
		}
		for _, sp := range batch {
			acked[sp.SpanID] = true
		}
	}
	t.Logf("%d spans acknowledged, %d writes refused during the outage", len(acked), failed)
	seen := storedSpans(t, s, "p")
	for id := range acked {
		if !seen[id] {
			t.Fatalf("acknowledged span %s lost across the restart (%d acknowledged, %d found, %d writes failed)", id, len(acked), len(seen), failed)
		}
	}
	if len(acked) < len(spans)/2 {
		t.Fatalf("only %d of %d spans acknowledged: writes did not resume after the restart", len(acked), len(spans))
	}
}

// TestErasureResumesPending: an Erase that failed after recording its
// request (pending), having hidden some of its traces (as one shard of a
// cluster may have before the other refused), is carried out, under its
// id, by the same request sent again: every trace of the query hidden and
// then removed, one erasure listed. Another request starts its own.
func TestErasureResumesPending(t *testing.T) {
	s := open(t, Options{})
	ctx := t.Context()
	spans := benchSpans(t, 1000)
	appendAll(t, s, "p", spans)
	q := fmt.Sprintf(`{ resource.service.name = "%s" }`, spans[1].Service)
	f, err := query.FromValues(url.Values{"q": {q}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	traces, rows := map[model.TraceID]bool{}, 0
	var first model.TraceID
	for i := range spans {
		if f.Match(&spans[i]) {
			traces[spans[i].TraceID], first = true, spans[i].TraceID
		}
	}
	for i := range spans {
		if traces[spans[i].TraceID] {
			rows++
		}
	}
	// The failed attempt: recorded, one of its traces hidden.
	at := time.Now().Add(-time.Minute).UTC()
	failed := store.Erasure{ID: uint64(at.UnixMicro()), Project: "p", Query: q, State: store.ErasePending, RequestedAt: at}
	if err := s.saveErasure(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if err := insertRow(ctx, s.conn, 0, "INSERT INTO erased_traces (project, trace_id, erasure)", "p", string(first[:]), failed.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := s.Erasures(ctx, "p"); err != nil || len(list) != 1 || list[0].State != store.ErasePending {
		t.Fatalf("a pending erasure is listed as pending (not done: nothing of it is removed): %+v %v", list, err)
	}
	e, err := s.Erase(ctx, store.EraseRequest{Project: "p", Query: q})
	if err != nil || e.ID != failed.ID || e.State != store.EraseHidden || e.Traces != len(traces) || len(e.TraceIDs) != len(traces) || e.SpansErased != int64(rows) {
		t.Fatalf("the same request again: %+v %v, want erasure %d hidden, %d traces, %d spans", e, err, failed.ID, len(traces), rows)
	}
	waitErasureDone(t, s, failed.ID, uint64(len(spans)-rows))
	var other model.TraceID
	for i := range spans {
		if !traces[spans[i].TraceID] {
			other = spans[i].TraceID
			break
		}
	}
	e2, err := s.Erase(ctx, store.EraseRequest{Project: "p", TraceID: &other})
	if err != nil || e2.ID == failed.ID || e2.Traces != 1 {
		t.Fatalf("another request: %+v %v, want a new erasure of 1 trace", e2, err)
	}
}
