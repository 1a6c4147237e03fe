package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/valuestore"
)

// eraseCorpus: random traces whose LLM child spans carry a prompt stored
// apart and an inline note, both naming the trace's user; the user id is on
// the root span only, as LLM apps usually set it.
func eraseCorpus() []model.Span {
	g := newGen(11)
	var out []model.Span
	for i := 0; i < 60; i++ {
		tr := g.trace()
		user := fmt.Sprintf("user-%d", i%6)
		tr[0].Attributes = append(tr[0].Attributes, model.KeyValue{Key: "user.id", Value: model.StringValue(user)})
		for j := 1; j < len(tr); j++ {
			prompt := fmt.Sprintf("SECRET-PROMPT-%s-%d %s", user, i, strings.Repeat("private details ", 80))
			tr[j].Attributes = append(tr[j].Attributes,
				model.KeyValue{Key: "gen_ai.system", Value: model.StringValue("openai")},
				model.KeyValue{Key: "gen_ai.request.model", Value: model.StringValue("gpt-4o")},
				model.KeyValue{Key: "gen_ai.usage.prompt_tokens", Value: model.IntValue(100)},
				model.KeyValue{Key: "gen_ai.prompt.0.content", Value: model.StringValue(prompt)},
				model.KeyValue{Key: "note", Value: model.StringValue(fmt.Sprintf("INLINE-SECRET-%s-%d", user, i))})
		}
		out = append(out, tr...)
	}
	return out
}

// erasedBy returns the spans of the traces holding a span of user.
func erasedBy(corpus []model.Span, user string) (erased, kept []model.Span) {
	traces := map[model.TraceID]bool{}
	for i := range corpus {
		for _, kv := range corpus[i].Attributes {
			if kv.Key == "user.id" && kv.Value.Str == user {
				traces[corpus[i].TraceID] = true
			}
		}
	}
	for i := range corpus {
		if traces[corpus[i].TraceID] {
			erased = append(erased, corpus[i])
		} else {
			kept = append(kept, corpus[i])
		}
	}
	return erased, kept
}

// requireGone checks every file of a data directory for the erased spans:
// raw bytes (the WAL holds request bodies as sent), every segment file's
// decoded spans, and the value store's index (reopened from disk).
func requireGone(t *testing.T, dir string, erased []model.Span, marker string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			return fmt.Errorf("%s still holds %q", p, marker)
		}
		if strings.HasSuffix(p, ".seg") {
			r, err := segment.Open(p)
			if err != nil {
				return err
			}
			defer r.Close()
			ids := map[model.TraceID]bool{}
			for i := range erased {
				ids[erased[i].TraceID] = true
			}
			for i := range r.Blocks() {
				spans, err := r.ReadBlock(i)
				if err != nil {
					return err
				}
				for j := range spans {
					if ids[spans[j].TraceID] {
						return fmt.Errorf("%s still holds span %s of erased trace %s", p, spans[j].SpanID, spans[j].TraceID)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := valuestore.Open(valuestore.Options{Dir: filepath.Join(dir, "values")})
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	for i := range erased {
		for _, kv := range erased[i].Attributes {
			if kv.Key == "gen_ai.prompt.0.content" && vs.Has(valuestore.RefOf([]byte(kv.Value.Str))) {
				t.Fatalf("value store still holds the prompt of erased span %s", erased[i].SpanID)
			}
		}
	}
}

// TestEraseByFilterHidesAtOnceThenRemovesEverywhere: an erasure by user id
// hides every trace of that user from every query as soon as it is
// acknowledged, survives a crash right after, and its pass removes the bytes
// from segments, WAL and value store, reporting the count.
func TestEraseByFilterHidesAtOnceThenRemovesEverywhere(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, BlockSpans: 16, NoCompaction: true, EraseDelay: time.Hour, ValueThreshold: 512}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	corpus := eraseCorpus()
	half := len(corpus) / 2
	appendSpans(t, e, "default", corpus[:half])
	if err := e.Seal(); err != nil { // half in a segment, half in the WAL and buffer
		t.Fatal(err)
	}
	appendSpans(t, e, "default", corpus[half:])
	appendSpans(t, e, "other", corpus[:10]) // another project's copy is not erased
	erased, kept := erasedBy(corpus, "user-2")

	st, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", Query: `{ span.user.id = "user-2" }`})
	if err != nil {
		t.Fatal(err)
	}
	traces := map[model.TraceID]bool{}
	for i := range erased {
		traces[erased[i].TraceID] = true
	}
	if st.State != store.EraseHidden || st.Traces != len(traces) || st.Traces == 0 {
		t.Fatalf("erase status %+v, want hidden with %d traces", st, len(traces))
	}
	requireHidden := func(e *Engine, what string) {
		t.Helper()
		got := searchAll(t, e, "default", &query.Filter{}, 500)
		if len(got) != len(kept) {
			t.Fatalf("%s: %d spans visible, want %d", what, len(got), len(kept))
		}
		for i := range got {
			if traces[got[i].TraceID] {
				t.Fatalf("%s: erased trace %s still searchable", what, got[i].TraceID)
			}
		}
		if got, _, _ := e.Trace(context.Background(), "default", erased[0].TraceID); len(got) != 0 {
			t.Fatalf("%s: erased trace returned by id", what)
		}
		if got := searchAll(t, e, "other", &query.Filter{}, 500); len(got) != 10 {
			t.Fatalf("%s: other project has %d spans, want 10", what, len(got))
		}
		st, err := e.LLMStats(context.Background(), "default", &store.LLMQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, g := range st.Groups {
			n += g.M.Spans
		}
		if want := countLLM(kept); n != want {
			t.Fatalf("%s: LLM totals count %d spans, want %d", what, n, want)
		}
		// Discovery (tag values, services) leaves the erased traces out too.
		for _, key := range []string{"span.user.id", "span.note"} {
			vals, _, err := e.AttributeValues(context.Background(), "default", key, 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{}
			for i := range kept {
				if v, ok := kept[i].Attr(strings.TrimPrefix(key, "span.")); ok {
					want[v.Str]++
				}
			}
			got := map[string]int{}
			for _, v := range vals {
				got[v.Name] = v.Count
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: values of %s %v, want %v", what, key, got, want)
			}
		}
	}
	requireHidden(e, "after the erase is acknowledged")

	// A crash right after the acknowledgement: the copy of the directory is
	// what a restart finds (every write so far was fsynced).
	crash := t.TempDir()
	copyDir(t, dir, crash)

	if err := e.EraseNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	var done store.Erasure
	for _, s := range testErasures(e) {
		if s.ID == st.ID {
			done = s
		}
	}
	if done.State != store.EraseDone || done.SpansErased != int64(len(erased)) {
		t.Fatalf("after the pass: %+v, want done with %d spans erased", done, len(erased))
	}
	requireHidden(e, "after the pass")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, dir, erased, "SECRET-PROMPT-user-2-")
	requireGone(t, dir, erased, "INLINE-SECRET-user-2-")

	opts.Dir = crash
	e2, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	requireHidden(e2, "after a crash and restart")
	if err := e2.EraseNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	requireHidden(e2, "after the pass on the restarted store")
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, crash, erased, "SECRET-PROMPT-user-2-")
}

func countLLM(spans []model.Span) int64 {
	var n int64
	for i := range spans {
		for _, kv := range spans[i].Attributes {
			if strings.HasPrefix(kv.Key, "gen_ai.") {
				n++
				break
			}
		}
	}
	return n
}

// TestEraseTraceAndBadRequests: erasing one trace by id; requests that name
// nothing, both, or everything are refused with a clear error.
func TestEraseTraceAndBadRequests(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, BlockSpans: 16, NoCompaction: true, EraseDelay: 10 * time.Millisecond, LifecycleInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	corpus := eraseCorpus()
	appendSpans(t, e, "default", corpus)
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	id := corpus[0].TraceID
	for _, bad := range []store.EraseRequest{
		{Project: "default"},
		{Project: "default", TraceID: &id, Query: `{ span.user.id = "x" }`},
		{Project: "default", Query: `{ }`},
		{Project: "default", Query: `{ span.user.id = `},
		// Conditions every trace meets, however worded, unless confirmed.
		{Project: "default", Query: `{ duration >= 0 }`},
		{Project: "default", Query: `{ status = error || !(status = error) }`},
		{Project: "default", Query: `{ !(span.no.such.key = "x") }`},
	} {
		if _, err := e.Erase(context.Background(), bad); !errors.Is(err, ErrEraseRequest) {
			t.Fatalf("erase %+v: err %v, want ErrEraseRequest", bad, err)
		}
	}
	st, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", TraceID: &id})
	if err != nil || st.Traces != 1 {
		t.Fatalf("erase trace: %+v %v", st, err)
	}
	want := 0
	for i := range corpus {
		if corpus[i].TraceID == id {
			want++
		}
	}
	// The lifecycle loop runs the pass by itself after EraseDelay.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var cur store.Erasure
		for _, s := range testErasures(e) {
			if s.ID == st.ID {
				cur = s
			}
		}
		if cur.State == store.EraseDone {
			if cur.SpansErased != int64(want) {
				t.Fatalf("done with %d spans erased, want %d", cur.SpansErased, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasure still %s after 20s", cur.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, _, _ := e.Trace(context.Background(), "default", id); len(got) != 0 {
		t.Fatalf("erased trace returned")
	}
}

// TestDamagedErasureListIsFoundAndRefused: the erasure list is checksummed;
// fsck names it, and the store refuses to open rather than let erased traces
// reappear.
func TestDamagedErasureListIsFoundAndRefused(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, NoCompaction: true, EraseDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	corpus := eraseCorpus()
	appendSpans(t, e, "default", corpus)
	if _, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", TraceID: &corpus[0].TraceID}); err != nil {
		t.Fatal(err)
	}
	e.stopForTest()
	path := filepath.Join(dir, erasuresName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[10] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Fsck(dir, FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		if p.File == path {
			found = true
		}
	}
	if !found {
		t.Fatalf("fsck did not report the damaged erasure list: %+v", rep.Problems)
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), erasuresName) {
		t.Fatalf("open with a damaged erasure list: %v, want an error naming it", err)
	}
}

// TestEraseCoveringEveryTraceNeedsConfirmation: a query whose traces are
// all the project holds is refused unless confirmed, even when it matches
// only some spans (one per trace: the root with the user id).
func TestEraseCoveringEveryTraceNeedsConfirmation(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), BlockSpans: 16, NoCompaction: true, EraseDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	corpus := eraseCorpus()
	appendSpans(t, e, "default", corpus[:len(corpus)/2])
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendSpans(t, e, "default", corpus[len(corpus)/2:])
	q := `{ span.user.id =~ "user-.*" }`
	if _, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", Query: q}); !errors.Is(err, ErrEraseRequest) || !strings.Contains(err.Error(), "every one of the 60 traces") {
		t.Fatalf("erase %s: err %v, want a refusal naming the 60 traces", q, err)
	}
	if n := len(testErasures(e)); n != 0 {
		t.Fatalf("a refused erasure was recorded: %d erasures", n)
	}
	// Some of the traces: accepted without confirmation.
	st, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", Query: `{ span.user.id =~ "user-[12]" }`})
	if err != nil || st.Traces != 20 {
		t.Fatalf("erase two users: %+v, %v; want 20 traces", st, err)
	}
	// Confirmed: every trace.
	st, err = e.Erase(context.Background(), store.EraseRequest{Project: "default", Query: q, All: true})
	if err != nil || st.Traces != 40 || st.State != store.EraseHidden {
		t.Fatalf("confirmed erasure: %+v, %v; want the 40 traces left, hidden", st, err)
	}
	if got := searchAll(t, e, "default", &query.Filter{}, 1000); len(got) != 0 {
		t.Fatalf("%d spans still visible after erasing every trace", len(got))
	}
}
