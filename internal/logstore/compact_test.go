package logstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/vfs"
	"github.com/rastro-dev/rastro/internal/wal"
)

// corpus appends rounds of random batches to s over three projects, seals
// after each, erases one trace of acme halfway, and returns what the store
// must hold.
func corpus(t *testing.T, s *Store, g *gen, rounds int) []stored {
	t.Helper()
	var all []stored
	var seq uint64
	for round := range rounds {
		project := []string{"", "acme", "beta"}[round%3]
		recs := g.records(1 + g.r.IntN(400))
		if _, err := s.AppendLogs(project, FormatProto, otlp.EncodeLogsProto(recs)); err != nil {
			t.Fatal(err)
		}
		for _, r := range normalized(t, recs) {
			all = append(all, stored{project: project, seq: seq, rec: r})
			seq++
		}
		if round == rounds/2 {
			victim := g.traces[0]
			if _, err := s.EraseTrace("acme", victim); err != nil {
				t.Fatal(err)
			}
			all = slices.DeleteFunc(all, func(x stored) bool { return x.project == "acme" && x.rec.TraceID == victim })
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// projectSegments counts each project's segments.
func projectSegments(s *Store) map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := map[string]int{}
	for _, seg := range s.segs {
		n[seg.project]++
	}
	return n
}

// Search equals brute force before and after a full compaction, over
// several projects with an erasure and a retention, and after a restart; a
// cursor taken before the merge pages on after it; every project ends with
// one segment, and its records older than its retention are gone.
func TestCompactSearchEqualsBruteForce(t *testing.T) {
	dir := t.TempDir()
	g := newGen(11)
	// acme keeps 1 hour: with the clock at t0+90min, its records before
	// t0+30min go with the merge; the other projects keep everything.
	now := time.Unix(0, int64(g.t0+5400e9))
	cutoff := g.t0 + 1800e9
	opts := Options{Dir: dir, SealBytes: 64 << 20, WALMode: wal.ModeBuffered, Now: func() time.Time { return now },
		Retention: func(p string) time.Duration {
			if p == "acme" {
				return time.Hour
			}
			return 0
		}}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	all := corpus(t, s, g, 36)
	before := projectSegments(s)
	for _, p := range []string{"", "acme", "beta"} {
		if before[p] < 10 {
			t.Fatalf("project %q has %d segments before compaction, the test wants many", p, before[p])
		}
	}
	for range 60 {
		checkQuery(t, s, all, g.query(all))
	}
	// A first page before the merge, the rest after it.
	q := Query{Project: "beta", Limit: 50}
	first, err := s.SearchLogs(q)
	if err != nil || first.Next == nil {
		t.Fatalf("first page: %v, %+v", err, first.Next)
	}

	res, err := s.Compact(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if after := projectSegments(s); after[""] != 1 || after["acme"] != 1 || after["beta"] != 1 || len(after) != 3 {
		t.Fatalf("segments per project after a full compaction: %v (before %v), want one each", after, before)
	}
	if res.Merges == 0 || res.SegmentsBefore != before[""]+before["acme"]+before["beta"] || res.SegmentsAfter != 3 {
		t.Fatalf("result %+v", res)
	}
	q.Before = first.Next
	q.Limit = 1 << 20
	rest, err := s.SearchLogs(q)
	if err != nil {
		t.Fatal(err)
	}
	want := bruteForce(all, Query{Project: "beta"})
	got := append(slices.Clone(first.Hits), rest.Hits...)
	if len(got) != len(want) {
		t.Fatalf("paging across the merge: %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].seq || !sameRecord(&got[i].Record, &want[i].rec) {
			t.Fatalf("paging across the merge: hit %d is seq %d, want %d", i, got[i].Seq, want[i].seq)
		}
	}

	dropped := 0
	all = slices.DeleteFunc(all, func(x stored) bool {
		old := x.project == "acme" && x.rec.Time() < cutoff
		if old {
			dropped++
		}
		return old
	})
	if dropped == 0 {
		t.Fatal("the corpus has no record past acme's retention")
	}
	for range 100 {
		checkQuery(t, s, all, g.query(all))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Stats(); st.Segments != 3 || st.Records != len(all) {
		t.Fatalf("after a restart: %+v, want 3 segments and %d records", st, len(all))
	}
	for range 100 {
		checkQuery(t, s, all, g.query(all))
	}
}

// The background policy merges fanout adjacent segments of one tier, not
// fewer, and never a full segment.
func TestCompactionPolicy(t *testing.T) {
	g := newGen(12)
	s, err := Open(Options{Dir: t.TempDir(), CompactionFanout: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		if _, err := s.AppendLogs("acme", FormatProto, otlp.EncodeLogsProto(g.records(100))); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		// Another project's segments between acme's do not keep them apart.
		if _, err := s.AppendLogs(fmt.Sprint("other", i), FormatProto, otlp.EncodeLogsProto(g.records(10))); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.Compact(context.Background(), false); err != nil || res.Merges != 0 {
		t.Fatalf("three tier-0 segments of fan-out 4: %+v, %v; want no merge", res, err)
	}
	if _, err := s.AppendLogs("acme", FormatProto, otlp.EncodeLogsProto(g.records(100))); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Compact(context.Background(), false); err != nil || res.Merges != 1 || res.SegmentsAfter != 4 {
		t.Fatalf("four tier-0 segments: %+v, %v; want one merge leaving acme's and the three others", res, err)
	}
	if n := projectSegments(s)["acme"]; n != 1 {
		t.Fatalf("acme has %d segments, want 1", n)
	}
	// A full segment (half the cap or more) is left alone even when
	// forced: of acme's big segment and two small ones after it, only the
	// small ones merge.
	s.mu.RLock()
	var big *segment
	for _, seg := range s.segs {
		if seg.project == "acme" {
			big = seg
		}
	}
	s.mu.RUnlock()
	for range 2 {
		if _, err := s.AppendLogs("acme", FormatProto, otlp.EncodeLogsProto(g.records(50))); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	s.opts.CompactionMaxSegmentBytes = 2 * big.bytes
	if res, err := s.Compact(context.Background(), true); err != nil || res.Merges != 1 {
		t.Fatalf("forced, with one full segment and two small ones: %+v, %v; want one merge", res, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var acme []*segment
	for _, seg := range s.segs {
		if seg.project == "acme" {
			acme = append(acme, seg)
		}
	}
	if len(acme) != 2 || acme[0] != big || acme[1].count != 100 {
		t.Fatalf("acme's segments after the forced merge: %d, want the full one unchanged and the two small ones merged", len(acme))
	}
}

func TestCompactionOptionsAreChecked(t *testing.T) {
	for _, o := range []Options{{CompactionFanout: 1}, {CompactionFanout: 65}, {CompactionMaxSegmentBytes: -1}} {
		o.Dir = t.TempDir()
		if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "fan-out") {
			t.Fatalf("Open(%+v) = %v, want an error naming the compaction settings", o, err)
		}
	}
}

// With Options.Compaction, seals wake a background merge.
func TestBackgroundCompaction(t *testing.T) {
	g := newGen(13)
	s, err := Open(Options{Dir: t.TempDir(), Compaction: true, CompactionFanout: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if _, err := s.AppendLogs("", FormatProto, otlp.EncodeLogsProto(g.records(100))); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Stats().Segments != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("two tier-0 segments with fan-out 2 were not merged: %+v", s.Stats())
		}
		// Wait for the compactor: its Compact holds compactMu.
		s.compactMu.Lock()
		s.compactMu.Unlock() //nolint:staticcheck // an empty critical section waits for the merge
	}
	if st := s.Stats(); st.Records != 200 {
		t.Fatalf("after the background merge: %+v", st)
	}
}

// A query that took its view before a merge still reads the inputs, which
// are removed when it lets go; queries running during merges see every
// record exactly once.
func TestQueriesDuringCompaction(t *testing.T) {
	fsys := vfs.NewMemFS()
	dir := "/data/logs"
	g := newGen(14)
	s, err := Open(Options{Dir: dir, FS: fsys, CompactionFanout: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := corpus(t, s, g, 24)

	// A view held across a merge.
	s.mu.RLock()
	held := slices.Clone(s.segs)
	acquire(held)
	s.mu.RUnlock()
	if _, err := s.Compact(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for _, seg := range held {
		if _, err := seg.readBlock(0); err != nil {
			t.Fatalf("a segment held across the merge no longer reads: %v", err)
		}
		s.release(seg)
	}
	if files, st := fsys.Names(".rlog"), s.Stats(); len(files) != st.Segments || st.Segments != 3 {
		t.Fatalf("after the view is let go: files %v, %d segments", files, st.Segments)
	}

	// Merges while queries run: each round adds small segments, then
	// merges them while every project is searched in a loop.
	counts := map[string]int{}
	for _, x := range all {
		counts[x.project]++
	}
	var queries atomic.Int64
	for round := range 4 {
		for k := range 6 {
			p := []string{"", "acme", "beta"}[k%3]
			n := 1 + g.r.IntN(300)
			if _, err := s.AppendLogs(p, FormatProto, otlp.EncodeLogsProto(g.records(n))); err != nil {
				t.Fatal(err)
			}
			counts[p] += n
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for _, p := range []string{"", "acme", "beta"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					if err := searchOnce(s, p, counts[p]); err != nil {
						errs <- fmt.Errorf("round %d: %w", round, err)
						return
					}
					queries.Add(1)
				}
			}()
		}
		res, err := s.Compact(context.Background(), true)
		stop.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if err != nil || res.SegmentsAfter != 3 {
			t.Fatalf("round %d: Compact = %+v, %v", round, res, err)
		}
	}
	if queries.Load() == 0 {
		t.Fatal("no query ran")
	}
}

// searchOnce searches all of a project's records and checks that each
// comes once and that there are want of them.
func searchOnce(s *Store, project string, want int) error {
	page, err := s.SearchLogs(Query{Project: project, Limit: 1 << 20})
	if err != nil {
		return err
	}
	seen := map[uint64]bool{}
	for _, h := range page.Hits {
		if seen[h.Seq] {
			return fmt.Errorf("project %q: record %d seen twice", project, h.Seq)
		}
		seen[h.Seq] = true
	}
	if len(seen) != want {
		return fmt.Errorf("project %q: %d records, want %d", project, len(seen), want)
	}
	return nil
}

// An erasure that rewrites a merge's input while the merge runs makes the
// merge start again from the rewritten segment: the erased records do not
// come back.
func TestEraseDuringMerge(t *testing.T) {
	mem := vfs.NewMemFS()
	var s *Store
	var armed atomic.Bool
	var erased atomic.Int64
	g := newGen(16)
	victim := g.traces[2]
	// Full compaction merges the projects in the order of their first
	// segment: "" is done when acme's merge starts.
	acmeMerging := func() bool { n := projectSegments(s); return n[""] == 1 && n["acme"] > 1 }
	fsys := &vfs.Faulty{FS: mem, Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if op == vfs.OpCreate && strings.HasSuffix(name, ".rlog.tmp") && armed.Load() && acmeMerging() && armed.CompareAndSwap(true, false) {
			// acme's merge, whose inputs are all of acme's segments, is
			// writing its output: erase now (once: the erasure's rewrite
			// creates a segment too).
			n, err := s.EraseTrace("acme", victim)
			if err != nil {
				panic(err)
			}
			erased.Store(int64(n))
		}
		return vfs.Fault{}
	}}
	st, err := Open(Options{Dir: "/data/logs", FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all := corpus(t, st, g, 9)
	s = st
	armed.Store(true)
	res, err := s.Compact(context.Background(), true)
	armed.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	// The buffer was empty: the records came out of rewritten inputs of
	// the running merge, which was then dropped and planned again.
	if erased.Load() == 0 {
		t.Fatalf("the erasure during the merge removed nothing (Compact %+v)", res)
	}
	all = slices.DeleteFunc(all, func(x stored) bool { return x.project == "acme" && x.rec.TraceID == victim })
	for _, p := range []string{"", "acme", "beta"} {
		if err := searchOnce(s, p, len(bruteForce(all, Query{Project: p}))); err != nil {
			t.Fatal(err)
		}
	}
	if n := projectSegments(s)["acme"]; n != 1 {
		t.Fatalf("acme has %d segments after the merge, want 1", n)
	}
}

// A power cut at every sync point of a compaction (each file sync,
// directory sync, rename and removal) leaves the store with every
// acknowledged record exactly once, under its sequence number, and no
// erased record; a restart removes the files the manifest does not list.
func TestPowerCutDuringCompaction(t *testing.T) {
	mem := vfs.NewMemFS()
	dir := "/data/logs"
	var armed atomic.Bool
	var mu sync.Mutex
	var images []*vfs.MemFS
	rng := rand.New(rand.NewPCG(5, 5))
	fsys := &vfs.Faulty{FS: mem, Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		switch op {
		case vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpRemove:
			if armed.Load() {
				mu.Lock()
				images = append(images, mem.Crash(vfs.CrashOptions{KeepDirOps: len(images)%2 == 1, Torn: len(images)%3 == 2, Rand: rng}))
				mu.Unlock()
			}
		}
		return vfs.Fault{}
	}}
	g := newGen(15)
	s, err := Open(Options{Dir: dir, FS: fsys, CompactionFanout: 3})
	if err != nil {
		t.Fatal(err)
	}
	all := corpus(t, s, g, 12)
	// An erasure just before the merge.
	victim := g.traces[1]
	if _, err := s.EraseTrace("beta", victim); err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(x stored) bool { return x.project == "beta" && x.rec.TraceID == victim })
	armed.Store(true)
	if res, err := s.Compact(context.Background(), true); err != nil || res.Merges < 3 {
		t.Fatalf("Compact = %+v, %v", res, err)
	}
	armed.Store(false)
	images = append(images, mem.Crash(vfs.CrashOptions{}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(images) < 10 {
		t.Fatalf("only %d sync points", len(images))
	}
	for i, im := range images {
		s, err := Open(Options{Dir: dir, FS: im})
		if err != nil {
			t.Fatalf("image %d: reopen: %v", i, err)
		}
		for _, p := range []string{"", "acme", "beta"} {
			want := bruteForce(all, Query{Project: p})
			page, err := s.SearchLogs(Query{Project: p, Limit: 1 << 20})
			if err != nil {
				t.Fatalf("image %d: %v", i, err)
			}
			if len(page.Hits) != len(want) {
				t.Fatalf("image %d, project %q: %d records, want %d", i, p, len(page.Hits), len(want))
			}
			for j := range want {
				if page.Hits[j].Seq != want[j].seq || !sameRecord(&page.Hits[j].Record, &want[j].rec) {
					t.Fatalf("image %d, project %q: record %d is seq %d, want %d", i, p, j, page.Hits[j].Seq, want[j].seq)
				}
			}
		}
		if files, st := im.Names(".rlog"), s.Stats(); len(files) != st.Segments {
			t.Fatalf("image %d: %d segment files for %d listed segments", i, len(files), st.Segments)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("image %d: close: %v", i, err)
		}
	}
}
