package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

// storedPieces returns the SHA-256 of every piece the engine stores apart
// for these spans (values of 1 KiB and more, prompts and completions of 128
// bytes and more), with how many spans hold each.
func storedPieces(spans []model.Span) map[[32]byte]int {
	out := map[[32]byte]int{}
	for i := range spans {
		seen := map[[32]byte]bool{}
		for _, kv := range spans[i].Attributes {
			v := kv.Value.Str
			if kv.Value.Type != model.ValueString || !(len(v) >= engine.DefaultValueThreshold ||
				text.IsMessageKey(kv.Key) && len(v) >= segment.DefaultContentThreshold) {
				continue
			}
			for _, p := range segment.Pieces(v) {
				h := sha256.Sum256([]byte(p))
				if !seen[h] {
					seen[h] = true
					out[h]++
				}
			}
		}
	}
	return out
}

// sessionOf returns the conversation id a span of the llm-sessions corpus
// carries, in whichever dialect.
func sessionOf(s *model.Span) string {
	for _, k := range []string{"session.id", "gen_ai.conversation.id", "traceloop.association.properties.session_id"} {
		if v, ok := s.Attr(k); ok {
			return v.Str
		}
	}
	return ""
}

// TestConversationStoredOnce: conversations that resend their history
// store each message once; reads give back the exact spans after restart
// and compaction; erasing a session removes from disk the messages no other
// span holds, and keeps the shared system prompts and the other sessions;
// so does retention, for the messages only expired spans held.
func TestConversationStoredOnce(t *testing.T) {
	spans, err := bench.Generate(bench.CorpusLLMSessions, bench.CorpusOptions{Seed: 3, Spans: 6000,
		Start: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pieces := storedPieces(spans)
	occurrences := 0
	for _, n := range pieces {
		occurrences += n
	}
	if occurrences < 2*len(pieces) {
		t.Fatalf("test premise: %d pieces in %d occurrences; the corpus should repeat its history", len(pieces), occurrences)
	}
	opts := engine.Options{Dir: t.TempDir(), BlockSpans: 64, NoCompaction: true, EraseDelay: time.Hour,
		Durability: engine.DurabilityBuffered}
	e, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	half := len(spans) / 2
	appendSealed(t, e, spans[:half], 500)
	appendSealed(t, e, spans[half:], 500)
	if vs := e.ValueStats(); vs.Values != len(pieces) {
		t.Fatalf("value store holds %d values; the corpus has %d distinct pieces", vs.Values, len(pieces))
	}

	byTrace := map[model.TraceID][]model.Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	requireExact := func(what string) {
		t.Helper()
		for id, want := range byTrace {
			got, res, err := e.Trace(context.Background(), "default", id)
			if err != nil || len(res.Warnings) > 0 {
				t.Fatalf("%s: trace %s: %v %v", what, id, err, res.Warnings)
			}
			requireSameSpans(t, fmt.Sprintf("%s: trace %s", what, id), got, want)
		}
	}
	requireExact("sealed")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e, err = engine.Open(opts); err != nil {
		t.Fatal(err)
	}
	requireExact("after restart")
	if res, err := e.Compact(context.Background()); err != nil || res.Merges == 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	requireExact("after compaction")
	if vs := e.ValueStats(); vs.Values != len(pieces) {
		t.Fatalf("after compaction the value store holds %d values, want %d", vs.Values, len(pieces))
	}

	// Erase the session with the most turns.
	turns := map[string]int{}
	for i := range spans {
		turns[sessionOf(&spans[i])]++
	}
	victim := ""
	for s, n := range turns {
		if s != "" && (victim == "" || n > turns[victim] || n == turns[victim] && s < victim) {
			victim = s
		}
	}
	var erased, kept []model.Span
	erasedTraces := map[model.TraceID]bool{}
	for i := range spans {
		if sessionOf(&spans[i]) == victim {
			erasedTraces[spans[i].TraceID] = true
		}
	}
	for _, s := range spans {
		if erasedTraces[s.TraceID] {
			erased = append(erased, s)
		} else {
			kept = append(kept, s)
		}
	}
	q := fmt.Sprintf(`{ span.session.id = %q || span.gen_ai.conversation.id = %q || span.traceloop.association.properties.session_id = %q }`, victim, victim, victim)
	if _, err := e.Erase(context.Background(), store.EraseRequest{Project: "default", Query: q}); err != nil {
		t.Fatal(err)
	}
	if err := e.EraseNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	keptPieces, erasedPieces := storedPieces(kept), storedPieces(erased)
	only, shared := 0, 0
	for h := range erasedPieces {
		if keptPieces[h] > 0 {
			shared++
			continue
		}
		only++
		if e.HasValue(h) {
			t.Fatalf("a message of the erased session %s is still in the value store", victim)
		}
	}
	if only == 0 || shared == 0 {
		t.Fatalf("test premise: the erased session has %d pieces of its own and %d shared (its system prompt)", only, shared)
	}
	for h := range keptPieces {
		if !e.HasValue(h) {
			t.Fatalf("a piece other spans hold was deleted with the erased session")
		}
	}
	for id := range erasedTraces {
		delete(byTrace, id)
	}
	requireExact("after the erasure")

	// Retention, reopened with one that ends in the middle of the corpus's
	// hour. The clock runs on between the option and the sweep, so a span
	// that starts within a minute after the cut may go either way; those
	// before it must be gone, with the messages only they held, and those
	// after it kept, exactly, with theirs.
	cut := time.Date(2026, 5, 1, 0, 30, 0, 0, time.UTC)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ropts := opts
	ropts.Retention = time.Since(cut)
	if e, err = engine.Open(ropts); err != nil {
		t.Fatal(err)
	}
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	cutNs, sureNs := uint64(cut.UnixNano()), uint64(cut.Add(time.Minute).UnixNano())
	var expired, stay, remaining []model.Span
	for _, s := range kept {
		switch {
		case s.StartTimeUnixNano < cutNs:
			expired = append(expired, s)
		case s.StartTimeUnixNano >= sureNs:
			stay = append(stay, s)
			remaining = append(remaining, s)
		default:
			remaining = append(remaining, s)
		}
	}
	expiredPieces, remainingPieces := storedPieces(expired), storedPieces(remaining)
	only, shared = 0, 0
	for h := range expiredPieces {
		if remainingPieces[h] > 0 {
			shared++
			continue
		}
		only++
		if e.HasValue(h) {
			t.Fatal("a message only expired spans held is still in the value store after the retention sweep")
		}
	}
	if only == 0 || shared == 0 {
		t.Fatalf("test premise: %d pieces held only by expired spans, %d shared with later ones", only, shared)
	}
	for h := range storedPieces(stay) {
		if !e.HasValue(h) {
			t.Fatal("a piece a span within retention holds was deleted by the retention sweep")
		}
	}
	gone, checked := 0, 0
	for id, want := range byTrace {
		first, last := want[0].StartTimeUnixNano, want[0].StartTimeUnixNano
		for _, s := range want {
			first, last = min(first, s.StartTimeUnixNano), max(last, s.StartTimeUnixNano)
		}
		got, _, err := e.Trace(context.Background(), "default", id)
		switch {
		case err != nil:
			t.Fatal(err)
		case last < cutNs:
			if len(got) != 0 {
				t.Fatalf("after the retention sweep: expired trace %s has %d spans", id, len(got))
			}
			gone++
		case first >= sureNs:
			requireSameSpans(t, fmt.Sprintf("after the retention sweep: trace %s", id), got, want)
			checked++
		}
	}
	if gone == 0 || checked == 0 {
		t.Fatalf("test premise: %d traces expired, %d checked", gone, checked)
	}
}

// requireSameSpans compares two sets of spans by span id: name, times,
// parent, status and attributes (with their full values).
func requireSameSpans(t *testing.T, what string, got, want []model.Span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d spans, want %d", what, len(got), len(want))
	}
	byID := map[model.SpanID]*model.Span{}
	for i := range want {
		byID[want[i].SpanID] = &want[i]
	}
	for i := range got {
		g, w := &got[i], byID[got[i].SpanID]
		switch {
		case w == nil:
			t.Fatalf("%s: unexpected span %s", what, g.SpanID)
		case g.Name != w.Name || g.StartTimeUnixNano != w.StartTimeUnixNano || g.EndTimeUnixNano != w.EndTimeUnixNano ||
			g.ParentSpanID != w.ParentSpanID || g.StatusCode != w.StatusCode:
			t.Fatalf("%s: span %s differs in its fields", what, g.SpanID)
		case !model.EqualKeyValues(g.Attributes, w.Attributes):
			t.Fatalf("%s: span %s attributes differ", what, g.SpanID)
		}
	}
}
