package segment

import (
	"errors"
	"os"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// TestContainsTrace checks ContainsTrace against FindTrace for every trace
// of the corpus, ids next to them, ids of other projects and unknown
// projects; then proves it reads no block by wiping every block's bytes.
func TestContainsTrace(t *testing.T) {
	corpus := genCorpus(41, 3, 80, 150)
	path, _ := writeCorpus(t, corpus, WriterOptions{BlockSpans: 64})
	r := openT(t, path)
	names, all := expected(corpus)

	type probe struct {
		project string
		id      model.TraceID
	}
	var probes []probe
	seen := map[probe]bool{}
	for _, p := range names {
		for _, s := range corpus[p] {
			k := probe{p, s.TraceID}
			if seen[k] {
				continue
			}
			seen[k] = true
			probes = append(probes, k)
			for _, d := range []byte{1, 255} {
				x := s.TraceID
				x[15] += d
				probes = append(probes, probe{p, x})
			}
			probes = append(probes, probe{p + "-other", s.TraceID}, probe{names[(len(p)+1)%len(names)], s.TraceID})
		}
	}
	probes = append(probes, probe{names[0], model.TraceID{}},
		probe{names[len(names)-1], model.TraceID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}})

	want := map[probe]bool{}
	present := 0
	for _, pr := range probes {
		spans, err := r.FindTrace(pr.project, pr.id)
		if err != nil {
			t.Fatalf("FindTrace(%q, %s): %v", pr.project, pr.id, err)
		}
		got, err := r.ContainsTrace(pr.project, pr.id)
		if err != nil {
			t.Fatalf("ContainsTrace(%q, %s): %v", pr.project, pr.id, err)
		}
		if got != (len(spans) > 0) {
			t.Fatalf("ContainsTrace(%q, %s) = %v, FindTrace found %d spans", pr.project, pr.id, got, len(spans))
		}
		want[pr] = got
	}
	for pr, ok := range want {
		if ok {
			present++
			if !seen[pr] {
				t.Fatalf("ContainsTrace(%q, %s) = true for a trace not in the corpus", pr.project, pr.id)
			}
		}
	}
	if present != len(seen) {
		t.Fatalf("%d traces present, corpus has %d", present, len(seen))
	}
	if len(all) == 0 {
		t.Fatal("empty corpus")
	}

	// Wipe every block: ContainsTrace must still answer (it reads no block),
	// while FindTrace now fails.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range r.blocks {
		clear(data[b.Offset : b.Offset+b.Length])
	}
	wiped := path + ".wiped"
	if err := os.WriteFile(wiped, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rw := openT(t, wiped)
	for _, pr := range probes {
		got, err := rw.ContainsTrace(pr.project, pr.id)
		if err != nil || got != want[pr] {
			t.Fatalf("ContainsTrace on a file with wiped blocks (%q, %s) = %v, %v; want %v", pr.project, pr.id, got, err, want[pr])
		}
	}
	if _, err := rw.FindTrace(probes[0].project, probes[0].id); !IsCorruption(err) {
		t.Fatalf("FindTrace on wiped blocks: %v, want corruption", err)
	}

	// A damaged index page is reported as corruption at that page.
	data, _ = os.ReadFile(path)
	off, _ := r.tix.pageBounds(0)
	data[off+5] ^= 1
	bad := path + ".bad"
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rb := openT(t, bad)
	f := r.tix.fences[0]
	_, err = rb.ContainsTrace(r.Info().Projects[f.Project].Name, f.First)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != off {
		t.Fatalf("ContainsTrace over a damaged page: %v, want corruption at %d", err, off)
	}
}
