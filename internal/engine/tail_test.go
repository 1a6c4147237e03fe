package engine

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// collect reads from t until it holds n spans (or fails the test after 10 s).
func collect(t *testing.T, tl store.TailStream, n int) []model.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []model.Span
	for len(got) < n {
		spans, dropped, err := tl.Next(ctx)
		if err != nil {
			t.Fatalf("tail: %d of %d spans, then %v", len(got), n, err)
		}
		if dropped != 0 {
			t.Fatalf("tail dropped %d spans though its reader kept up", dropped)
		}
		got = append(got, spans...)
	}
	return got
}

// TestTailSeesExactlyTheMatchingAcknowledgedSpans: a tail gets every span of
// its project acknowledged after it opened that its filter matches, and
// nothing else: not earlier spans, not other projects, not erased traces.
func TestTailSeesExactlyTheMatchingAcknowledgedSpans(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	g := newGen(3)
	appendSpans(t, e, "p1", g.spans(40)) // before the tail: never seen by it
	for _, q := range []string{`{ status = error }`, `{ resource.service.name = "llm" || span.http.status_code >= 404 }`, `{ }`} {
		expr, err := query.ParseTraceQL(q)
		if err != nil {
			t.Fatal(err)
		}
		f := &query.Filter{Expr: expr}
		tl, err := e.Tail(context.Background(), "p1", f)
		if err != nil {
			t.Fatal(err)
		}
		// An erased trace stays hidden, late spans included.
		erased := g.trace()
		if _, err := e.Erase(context.Background(), store.EraseRequest{Project: "p1", TraceID: &erased[0].TraceID}); err != nil {
			t.Fatal(err)
		}
		appendSpans(t, e, "p1", erased)
		corpus := g.spans(150)
		appendSpans(t, e, "p2", g.spans(30))
		appendSpans(t, e, "p1", corpus)
		// A marker matched by every filter, acknowledged last: once it is
		// in, every earlier batch has been handed to the tail.
		marker := g.trace()[:1]
		marker[0].Resource, marker[0].Service, marker[0].StatusCode = g.resource("llm"), "llm", model.StatusError
		appendSpans(t, e, "p1", marker)
		want := keys(bruteForce(append(corpus, marker...), f))
		got := collect(t, tl, len(want))
		tl.Close()
		gk := keys(got)
		sort.Strings(gk)
		sort.Strings(want)
		if !slices.Equal(gk, want) {
			t.Fatalf("%s: tail got %d spans, want %d", q, len(gk), len(want))
		}
	}
	if n := e.Counters().Tails; n != 0 {
		t.Fatalf("%d tails open after every one was closed", n)
	}
}

// TestTailDropsRatherThanBlockIngest: a tail nobody reads never slows an
// append; it keeps TailBuffer batches and reports how many spans it dropped.
func TestTailDropsRatherThanBlockIngest(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	tl, err := e.Tail(context.Background(), "p", &query.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	g := newGen(5)
	spans := g.spans(TailBuffer) // at least one span per trace
	const extra = 37
	for i := range TailBuffer + extra {
		one := spans[i : i+1]
		b, err := otlp.DecodeProto(otlp.EncodeProto(one))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Append(context.Background(), &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: otlp.EncodeProto(one), Spans: b.Spans}); err != nil {
			t.Fatal(err)
		}
	}
	got, dropped, err := tl.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != TailBuffer || dropped != extra {
		t.Fatalf("got %d spans and %d dropped, want %d and %d", len(got), dropped, TailBuffer, extra)
	}
	if c := e.Counters().TailDropped; c != extra {
		t.Fatalf("dropped counter %d, want %d", c, extra)
	}
	// Having caught up, the reader gets new spans again and no stale drops.
	appendSpans(t, e, "p", spans[TailBuffer+extra:TailBuffer+extra+3])
	if got := collect(t, tl, 3); len(got) != 3 {
		t.Fatalf("after catching up: %d spans, want 3", len(got))
	}
}

// TestTailNextReturnsOnClose: a reader blocked in Next is released by the
// tail's Close and by the engine's.
func TestTailNextReturnsOnClose(t *testing.T) {
	e := openTest(t, t.TempDir())
	for _, closeEngine := range []bool{false, true} {
		tl, err := e.Tail(context.Background(), "p", &query.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := tl.Next(context.Background())
			done <- err
		}()
		if closeEngine {
			e.Close()
		} else {
			tl.Close()
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("Next returned %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Next still blocked 10 s after Close (engine: %v)", closeEngine)
		}
		tl.Close() // idempotent
	}
}

// TestTailHoldsBoundedMemory: a tail nobody reads holds at most
// TailBufferBytes of requests (beyond one); a reader catching up gets its
// backlog in parts; at most MaxTails are open.
func TestTailHoldsBoundedMemory(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 64, ValueThreshold: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tl, err := e.Tail(context.Background(), "p", &query.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(9)
	n := TailBufferBytes>>20 + 6 // 1 MiB requests: more than a tail holds
	big := g.spans(n)[:n]
	for i := range big {
		big[i].Attributes = append(big[i].Attributes, model.KeyValue{Key: "blob", Value: model.StringValue(strings.Repeat("x", 1<<20))})
		body := otlp.EncodeProto(big[i : i+1])
		b, _ := otlp.DecodeProto(body)
		if err := e.Append(context.Background(), &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}); err != nil {
			t.Fatal(err)
		}
	}
	got, dropped, err := tl.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got)+int(dropped) != n || len(got) > TailBufferBytes>>20 || dropped == 0 {
		t.Fatalf("%d requests of 1 MiB: a tail nobody read kept %d and dropped %d, want at most %d kept", n, len(got), dropped, TailBufferBytes>>20)
	}
	tl.Close()

	tl, err = e.Tail(context.Background(), "p", &query.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	appendSpans(t, e, "p", g.spans(600)) // batches of 50 spans, several thousand spans
	first, _, err := tl.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(first) < tailMaxSpans || len(first) >= tailMaxSpans+50 {
		t.Fatalf("catching up: first part %d spans, want %d to %d", len(first), tailMaxSpans, tailMaxSpans+49)
	}

	var open []store.TailStream
	defer func() {
		for _, o := range open {
			o.Close()
		}
	}()
	for len(open) < MaxTails-1 { // tl is open too
		o, err := e.Tail(context.Background(), "q", &query.Filter{})
		if err != nil {
			t.Fatalf("tail %d: %v", len(open)+2, err)
		}
		open = append(open, o)
	}
	if _, err := e.Tail(context.Background(), "q", &query.Filter{}); !errors.Is(err, ErrTooManyTails) {
		t.Fatalf("tail %d: err %v, want ErrTooManyTails", MaxTails+1, err)
	}
	open[0].Close()
	o, err := e.Tail(context.Background(), "q", &query.Filter{})
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	open[0] = o
}

// TestAppendSaysWhenSpansAreFree: Append tells its caller it may reuse the
// spans' memory (store.Write.SpansDone) exactly when no tail took the batch:
// a tail of the project holds the spans until its reader has them, and
// their memory must not be overwritten under it.
func TestAppendSaysWhenSpansAreFree(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	g := newGen(11)
	write := func(project string) *store.Write {
		t.Helper()
		spans := g.spans(5)
		body := otlp.EncodeProto(spans)
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		w := &store.Write{Project: project, Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans}
		if err := e.Append(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := write("p"); !w.SpansDone {
		t.Fatal("no tail open: SpansDone is false, so no request's memory would ever be reused")
	}
	tl, err := e.Tail(context.Background(), "p", &query.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if w := write("p"); w.SpansDone {
		t.Fatal("a tail of the project took the batch, yet SpansDone says its memory may be reused")
	}
	if w := write("q"); !w.SpansDone {
		t.Fatal("the tail is another project's: SpansDone is false")
	}
	collect(t, tl, 1)
	tl.Close()
	if w := write("p"); !w.SpansDone {
		t.Fatal("the tail is closed: SpansDone is false")
	}
}
