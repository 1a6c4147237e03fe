package engine

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/segment"
	"github.com/rastro-dev/rastro/internal/sketch"
	"github.com/rastro-dev/rastro/internal/store"
)

// The segments' sessions and groups are cached and shared by queries; each
// query adds the write buffer's entries to a copy. The copy must equal the
// sessions or groups of all entries together, and the cached part must be
// left exactly as it was (a later query reads it again).

func sessionListEntries() (seg, mem []segment.AggEntry) {
	en := func(id, user string, spans int64, lo, hi uint64) segment.AggEntry {
		m := segment.AggMeasures{Spans: spans, Counted: spans, CostNanoUSD: 10 * spans, MinStart: lo, MaxEnd: hi}
		if spans == 0 {
			m = segment.AggMeasures{}
		}
		return segment.AggEntry{Key: segment.AggKey{Session: id, User: user}, M: m}
	}
	seg = []segment.AggEntry{
		en("a", "u1", 2, 10, 20), en("a", "u3", 0, 0, 0), en("b", "", 1, 5, 6), en("c", "u2", 4, 30, 40), en("", "u9", 3, 1, 2),
	}
	mem = []segment.AggEntry{
		en("a", "u2", 1, 50, 60), // a new user of a cached session, between its users
		en("b", "", 2, 1, 3),     // earlier than the cached first seen
		en("d", "u5", 1, 70, 80), // a new session
		en("d", "u4", 0, 0, 0),
		en("", "u9", 1, 1, 2), // no session: not listed
	}
	return seg, mem
}

func TestSessionListExtendLeavesTheCachedListAlone(t *testing.T) {
	seg, mem := sessionListEntries()
	base := newSessionList(seg)
	before := fmt.Sprintf("%+v", base.out)
	got := base.extend(mem)
	want := newSessionList(append(slices.Clone(seg), mem...)).out
	slices.SortFunc(got, func(a, b store.SessionSummary) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(want, func(a, b store.SessionSummary) int { return strings.Compare(a.ID, b.ID) })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("extended list:\n got %+v\nwant %+v", got, want)
	}
	if after := fmt.Sprintf("%+v", base.out); after != before {
		t.Fatalf("the cached list changed:\nbefore %s\n after %s", before, after)
	}
	if len(base.byID) != 3 {
		t.Fatalf("the cached index changed: %v", base.byID)
	}
	if got := base.extend(nil); &got[0] != &base.out[0] {
		t.Fatalf("with nothing to add, the list is not the cached one")
	}
}

func TestLLMGroupsExtendLeavesTheCachedGroupsAlone(t *testing.T) {
	sk := func(vals ...uint64) *sketch.Sketch {
		s := sketch.New()
		for _, v := range vals {
			s.Add(v)
		}
		return s
	}
	en := func(id, model string, spans int64, lat *sketch.Sketch) segment.AggEntry {
		return segment.AggEntry{Key: segment.AggKey{Session: id, Model: model},
			M: segment.AggMeasures{Spans: spans, CostNanoUSD: spans * 3, MinStart: 1, MaxEnd: 2, Latency: lat}}
	}
	seg := []segment.AggEntry{en("a", "m1", 1, sk(10)), en("b", "m1", 2, sk(20, 30)), en("a", "m2", 1, sk(40))}
	mem := []segment.AggEntry{en("b", "m2", 1, sk(50)), en("c", "m1", 1, sk(60))}
	for _, groupBy := range [][]string{{"session"}, {"model"}, {"model", "session"}} {
		base := gatherGroups(seg, groupBy, nil)
		before := fmt.Sprintf("%+v %v %v", base.groups, base.keys, base.first)
		var counts []uint64
		for _, g := range base.groups {
			counts = append(counts, g.M.Latency.Count())
		}
		got := base.extend(mem)
		want := gatherGroups(append(slices.Clone(seg), mem...), groupBy, nil)
		all := func(gs *llmGroups) string {
			var s string
			for j := range gs.groups {
				g := gs.groups[j]
				s += fmt.Sprintf("%v:%d/%d/%d;", *gs.key(int32(j)), g.M.Spans, g.M.CostNanoUSD, g.M.Latency.Count())
			}
			return s
		}
		if all(got) != all(want) {
			t.Fatalf("group by %v, extended:\n got %s\nwant %s", groupBy, all(got), all(want))
		}
		if after := fmt.Sprintf("%+v %v %v", base.groups, base.keys, base.first); after != before {
			t.Fatalf("group by %v: the cached groups changed", groupBy)
		}
		for j, g := range base.groups {
			if g.M.Latency.Count() != counts[j] {
				t.Fatalf("group by %v: a cached group's sketch was merged into", groupBy)
			}
		}
		for _, e := range seg {
			if e.M.Latency.Count() != uint64(e.M.Spans) {
				t.Fatalf("group by %v: an entry's sketch was merged into", groupBy)
			}
		}
	}
}
