package segment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/sketch"
)

// bruteOps recomputes the service aggregates of spans directly.
func bruteOps(spans []model.Span) (map[OpsKey]OpsMeasures, map[ErrKey]ErrMeasures) {
	ops := map[OpsKey]OpsMeasures{}
	errs := map[ErrKey]ErrMeasures{}
	for i := range spans {
		s := &spans[i]
		k := OpsKey{s.Service, s.Name, int64(s.StartTimeUnixNano/60e9) * 60}
		m := ops[k]
		if m.Latency == nil {
			m.Latency = sketch.New()
		}
		m.Spans++
		m.Latency.Add(s.Duration())
		if s.StatusCode == model.StatusError {
			m.Errors++
			ek := ErrKeyOf(s)
			e := errs[ek]
			if e.Count == 0 || s.StartTimeUnixNano < e.First {
				e.First = s.StartTimeUnixNano
			}
			later := e.Count == 0 || s.StartTimeUnixNano > e.Last ||
				s.StartTimeUnixNano == e.Last && (bytes.Compare(s.TraceID[:], e.Trace[:]) < 0 ||
					s.TraceID == e.Trace && bytes.Compare(s.SpanID[:], e.Span[:]) < 0)
			if later {
				e.Last, e.Trace, e.Span = s.StartTimeUnixNano, s.TraceID, s.SpanID
			}
			e.Count++
			errs[ek] = e
		}
		ops[k] = m
	}
	return ops, errs
}

func requireOps(t *testing.T, what string, got OpsAggregates, spans []model.Span) {
	t.Helper()
	wantOps, wantErrs := bruteOps(spans)
	if len(got.Ops) != len(wantOps) || len(got.Errors) != len(wantErrs) {
		t.Fatalf("%s: %d ops and %d error groups, want %d and %d", what, len(got.Ops), len(got.Errors), len(wantOps), len(wantErrs))
	}
	for i := range got.Ops {
		e := &got.Ops[i]
		if i > 0 && compareOpsKeys(&got.Ops[i-1].Key, &e.Key) >= 0 {
			t.Fatalf("%s: ops not sorted", what)
		}
		w, ok := wantOps[e.Key]
		if !ok || w.Spans != e.M.Spans || w.Errors != e.M.Errors || !bytes.Equal(sketchBytes(w.Latency), sketchBytes(e.M.Latency)) {
			t.Fatalf("%s: ops %+v = %d/%d, want %d/%d (found %t)", what, e.Key, e.M.Spans, e.M.Errors, w.Spans, w.Errors, ok)
		}
	}
	for i := range got.Errors {
		e := &got.Errors[i]
		if i > 0 && compareErrKeys(&got.Errors[i-1].Key, &e.Key) >= 0 {
			t.Fatalf("%s: error groups not sorted", what)
		}
		if w, ok := wantErrs[e.Key]; !ok || w != e.M {
			t.Fatalf("%s: error group %+v = %+v, want %+v", what, e.Key, e.M, w)
		}
	}
}

// TestOpsAggregates: each block's stored service aggregates equal a
// brute-force aggregation of its spans, and each project rollup equals one
// over the project's spans.
func TestOpsAggregates(t *testing.T) {
	corpus := genCorpus(61, 3, 120, 60)
	for p, spans := range corpus {
		for i := range spans {
			if i%7 == 0 {
				spans[i].StatusCode = model.StatusError
				spans[i].StatusMessage = fmt.Sprintf("timeout after %d ms", i)
			}
		}
		corpus[p] = spans
	}
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 100})
	r := openT(t, path)
	if !r.HasOpsAggregates() {
		t.Fatal("HasOpsAggregates = false for a new segment")
	}
	groups := 0
	for i := range r.Blocks() {
		spans, err := r.ReadBlock(i)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.BlockOps(i)
		if err != nil {
			t.Fatalf("BlockOps(%d): %v", i, err)
		}
		requireOps(t, fmt.Sprintf("block %d", i), got, spans)
		groups += len(got.Errors)
	}
	if groups == 0 {
		t.Fatal("corpus has no error groups")
	}
	for _, p := range r.Info().Projects {
		got, err := r.SegmentOps(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		_, want := expected(map[string][]model.Span{p.Name: corpus[p.Name]})
		requireOps(t, "rollup of "+p.Name, got, want)
	}
	if got, err := r.SegmentOps("no-such-project"); len(got.Ops) != 0 || err != nil {
		t.Fatalf("SegmentOps(unknown) = %v, %v", got, err)
	}
	old := openT(t, "testdata/v1.rseg")
	if old.HasOpsAggregates() {
		t.Fatal("v1 fixture claims service aggregates")
	}
}

func TestNormalizeErrorMessage(t *testing.T) {
	same := [][2]string{
		{"timeout after 3012 ms on 10.0.0.7", "timeout after 15 ms on 10.0.0.9"},
		{"order 8f14e45f-ceea-467f-a0e0-2b6f4e1c9a10 not found", "order 0b7a4c1e-1d2f-4a6b-9c8d-7e6f5a4b3c2d not found"},
		{"rate limited: retry in 30s.", "rate limited:  retry in 2s."},
		{"span deadbeef12345678 failed", "span 0123456789abcdef failed"},
	}
	for _, c := range same {
		a, b := model.NormalizeErrorMessage(c[0]), model.NormalizeErrorMessage(c[1])
		if a != b {
			t.Errorf("%q -> %q but %q -> %q", c[0], a, c[1], b)
		}
	}
	for in, want := range map[string]string{
		"timeout after 3012 ms":     "timeout after <n> ms",
		"  connection\nreset  ":     "connection reset",
		"HTTP 503 from api.example": "HTTP <n> from api.example",
		"invalid model gpt4o":       "invalid model gpt4o",
		"cafe babe":                 "cafe babe",
		"":                          "",
	} {
		if got := model.NormalizeErrorMessage(in); got != want {
			t.Errorf("model.NormalizeErrorMessage(%q) = %q, want %q", in, got, want)
		}
	}
	long := model.NormalizeErrorMessage(string(bytes.Repeat([]byte("é"), 300)))
	if len(long) > model.MaxErrorMessageBytes || len(long) < model.MaxErrorMessageBytes-1 {
		t.Errorf("long message cut to %d bytes", len(long))
	}
}

// FuzzDecodeOpsPart: hostile part contents never panic, and what decodes
// re-encodes to the same bytes.
func FuzzDecodeOpsPart(f *testing.F) {
	_, spans := expected(genCorpus(62, 1, 20, 10))
	a := NewOpsAggregator()
	for i := range spans {
		if i%3 == 0 {
			spans[i].StatusCode = model.StatusError
		}
		a.Add(&spans[i])
	}
	agg := a.Aggregates()
	f.Add(encodeOpsPart(nil, &agg))
	f.Add(encodeOpsPart(nil, &OpsAggregates{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeOpsPart(string(b))
		if err != nil {
			return
		}
		enc := encodeOpsPart(nil, &got)
		again, err := decodeOpsPart(string(enc))
		if err != nil || !bytes.Equal(encodeOpsPart(nil, &again), enc) {
			t.Fatalf("re-encoded part does not round-trip: %v", err)
		}
	})
}
