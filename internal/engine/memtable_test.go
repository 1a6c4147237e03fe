package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestMemtableResendsEqualBruteForce: over random batches of spans re-sent
// any number of times, in traces small enough to be searched by walking
// their chains and large enough to be indexed by span (crossing from one
// to the other mid-batch), the buffer's live rows, counts and trace lookups
// are exactly the newest copy of every (project, trace, span), as a map of
// every insert says; and what a seal writes (sealRows, with some spans
// dropped) is those copies less the dropped, each with the minimum start of
// its trace's written spans.
func TestMemtableResendsEqualBruteForce(t *testing.T) {
	type key struct {
		project string
		trace   model.TraceID
		span    model.SpanID
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 77))
		m := newMemtable(time.Now(), nil)
		projects := []string{"a", "b"}
		newest := map[key]string{} // the name of the newest copy
		gen := 0
		for range 40 {
			p := projects[rng.IntN(len(projects))]
			var batch []model.Span
			for range 1 + rng.IntN(60) {
				tr := byte(rng.IntN(chainedTrace + 4))
				// Trace t has up to 2t+1 distinct spans: the first
				// traces stay below chainedTrace, the others cross it.
				s := rspan(tr, byte(rng.IntN(2*int(tr)+1)), rbase+uint64(rng.IntN(1000)), "")
				gen++
				s.Name = string(rune('a' + gen%26))
				s.Name += string(rune('a' + gen/26%26))
				s.Name += string(rune('a' + gen/676%26))
				batch = append(batch, s)
				newest[key{p, s.TraceID, s.SpanID}] = s.Name
			}
			m.insert(p, batch, 0)
		}
		live := map[key]string{}
		m.scan(func(r *row) bool {
			k := key{r.project, r.span.TraceID, r.span.SpanID}
			if _, dup := live[k]; dup {
				t.Fatalf("seed %d: span %v is live twice", seed, k)
			}
			live[k] = r.span.Name
			return true
		})
		if len(live) != len(newest) || m.live.Load() != int64(len(newest)) {
			t.Fatalf("seed %d: %d live rows by scan, %d by count; want %d", seed, len(live), m.live.Load(), len(newest))
		}
		traces := map[string]map[model.TraceID]int{}
		for k, name := range newest {
			if live[k] != name {
				t.Fatalf("seed %d: span %v is live as %q, the newest copy is %q", seed, k, live[k], name)
			}
			if traces[k.project] == nil {
				traces[k.project] = map[model.TraceID]int{}
			}
			traces[k.project][k.trace]++
		}
		for _, p := range projects {
			spans, ntraces := m.counts(p)
			var want int64
			for tr, n := range traces[p] {
				want += int64(n)
				rows := m.traceRows(p, tr)
				if len(rows) != n {
					t.Fatalf("seed %d: project %s trace %s: traceRows has %d rows, want %d", seed, p, tr, len(rows), n)
				}
				for _, r := range rows {
					if name := newest[key{p, tr, r.span.SpanID}]; r.span.Name != name {
						t.Fatalf("seed %d: traceRows returns copy %q of span %s, the newest is %q", seed, r.span.Name, r.span.SpanID, name)
					}
				}
			}
			if spans != want || ntraces != int64(len(traces[p])) {
				t.Errorf("seed %d: project %s counts %d spans, %d traces; want %d, %d", seed, p, spans, ntraces, want, len(traces[p]))
			}
		}

		drop := func(p string, s *model.Span) bool { return (s.Name[0]+s.SpanID[0])%5 == 0 }
		wantMin := map[key]uint64{} // by (project, trace)
		written := 0
		m.scan(func(r *row) bool {
			if !drop(r.project, r.span) {
				k := key{r.project, r.span.TraceID, model.SpanID{}}
				if v, ok := wantMin[k]; !ok || r.span.StartTimeUnixNano < v {
					wantMin[k] = r.span.StartTimeUnixNano
				}
				written++
			}
			return true
		})
		got := 0
		// The seal's drop sees the ids and times only.
		dropIDs := func(p string, s *model.Span) bool {
			name := newest[key{p, s.TraceID, s.SpanID}]
			return (name[0]+s.SpanID[0])%5 == 0
		}
		byProject, src := m.sealRows(dropIDs)
		for p, refs := range byProject {
			if len(refs) == 0 {
				t.Errorf("seed %d: project %s has an empty list to seal", seed, p)
			}
			for _, ref := range refs {
				s := src.Span(ref.Row)
				if drop(p, s) || newest[key{p, s.TraceID, s.SpanID}] != s.Name {
					t.Fatalf("seed %d: the seal writes span %s named %q (dropped: %v)", seed, s.SpanID, s.Name, drop(p, s))
				}
				if m := wantMin[key{p, s.TraceID, model.SpanID{}}]; ref.TraceMin != m {
					t.Fatalf("seed %d: span %s of trace %s is written with trace minimum %d, want %d", seed, s.SpanID, s.TraceID, ref.TraceMin, m)
				}
				got++
			}
		}
		if got != written {
			t.Fatalf("seed %d: the seal writes %d spans, want %d", seed, got, written)
		}
	}
}
