package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// rowMayMatch is the reference of FilterRows: the same conditions,
// evaluated on a decoded span (no span here holds a stored value).
func rowMayMatch(s *model.Span, rf *RowFilter) bool {
	if rf.Start != 0 && s.StartTimeUnixNano < rf.Start || rf.End != 0 && s.StartTimeUnixNano >= rf.End {
		return false
	}
	if d := s.Duration(); d < rf.MinDuration || rf.MaxDuration != 0 && d > rf.MaxDuration {
		return false
	}
	if rf.Services != nil && !slices.Contains(rf.Services, s.Service) || rf.Names != nil && !slices.Contains(rf.Names, s.Name) {
		return false
	}
	if rf.HasStatus && s.StatusCode != rf.Status || rf.Kinds != nil && !slices.Contains(rf.Kinds, s.Kind) {
		return false
	}
	holds := func(kvs []model.KeyValue, c *AttrCond) bool {
		for _, kv := range kvs {
			v := kv.Value
			if kv.Key == c.Key && (v.Type == model.ValueString && slices.Contains(c.Strs, v.Str) ||
				v.Type == model.ValueInt && slices.Contains(c.Ints, v.Int) ||
				v.Type == model.ValueDouble && slices.ContainsFunc(c.Ints, func(i int64) bool { return float64(i) == v.Double })) {
				return true
			}
		}
		return false
	}
	for i := range rf.Attrs {
		c := &rf.Attrs[i]
		inRes := c.Resource && s.Resource != nil && holds(s.Resource.Attributes, c)
		if !(c.Span && holds(s.Attributes, c)) && !inRes {
			return false
		}
	}
	return true
}

// TestFilterRowsEqualsBruteForce checks, on blocks with and without
// columns stored as pieces, that FilterRows names exactly the rows whose
// decoded spans pass the same conditions, and that Decode returns those
// rows as ReadBlock decodes them.
func TestFilterRowsEqualsBruteForce(t *testing.T) {
	corpus := textHeavyCorpus(3, 2500)
	for i := range corpus {
		if i%7 == 0 { // a double equal to an integer, for number conditions
			corpus[i].Attributes = append(corpus[i].Attributes, model.KeyValue{Key: "http.status_code", Value: model.DoubleValue(404)})
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	filters := func(all []model.Span) []RowFilter {
		sp := &all[rng.IntN(len(all))]
		user, _ := sp.Attr("user.id")
		route, _ := sp.Attr("http.route")
		return []RowFilter{
			{Attrs: []AttrCond{{Span: true, Key: "user.id", Strs: []string{user.Str}}}},
			{Attrs: []AttrCond{{Span: true, Key: "user.id", Strs: []string{"absent"}}}},
			{Attrs: []AttrCond{{Span: true, Resource: true, Key: "host.name", Strs: []string{pick([]string{"host-0", "host-2"})}}}},
			{Attrs: []AttrCond{{Resource: true, Key: "user.id", Strs: []string{user.Str}}}},
			{Attrs: []AttrCond{{Span: true, Key: "http.status_code", Ints: []int64{300, 404}, Strs: []string{"300"}}}},
			{Attrs: []AttrCond{{Span: true, Key: "user.id", Strs: []string{user.Str}}, {Span: true, Key: "http.route", Strs: []string{route.Str}}}},
			{Services: []string{sp.Service}, HasStatus: true, Status: model.StatusError},
			{Names: []string{sp.Name, "none"}, Kinds: []model.SpanKind{model.KindServer}},
			{Names: []string{}},
			{Attrs: []AttrCond{{Span: true, Key: "http.method", Strs: []string{pick([]string{"val0", "val1", "val2"})}}},
				Start: sp.StartTimeUnixNano, End: sp.StartTimeUnixNano + 400_000_000, MinDuration: 20_000_000, MaxDuration: 40_000_000},
		}
	}
	for _, off := range []bool{false, true} {
		r := openT(t, writePieces(t, corpus, off))
		for b := range r.Blocks() {
			all, err := r.ReadBlock(b)
			if err != nil {
				t.Fatal(err)
			}
			for k, rf := range filters(all) {
				m, err := r.FilterRows(b, &rf)
				if err != nil {
					t.Fatalf("pieces off %v block %d filter %d: %v", off, b, k, err)
				}
				var want []model.Span
				var rows []int
				for j := range all {
					if rowMayMatch(&all[j], &rf) {
						want = append(want, all[j])
						rows = append(rows, j)
					}
				}
				var got []int
				for _, rg := range m.Ranges {
					for j := rg.Lo; j < rg.Hi; j++ {
						got = append(got, j)
					}
				}
				if !slices.Equal(got, rows) || m.Rows != len(rows) {
					t.Fatalf("pieces off %v block %d filter %d %+v: rows %v (%d), want %v", off, b, k, rf, got, m.Rows, rows)
				}
				spans, err := m.Decode()
				if err != nil {
					t.Fatal(err)
				}
				requireSpansEqual(t, fmt.Sprintf("block %d filter %d", b, k), spans, want)
			}
		}
	}
}

// TestFilterRowsDamagedColumn: damage to a column the filter reads is a
// CorruptionError, as from ReadBlock.
func TestFilterRowsDamagedColumn(t *testing.T) {
	path := writePieces(t, textHeavyCorpus(1, 1100), true)
	r := openT(t, path)
	c, _ := r.blocks[0].col(colAttrs)
	c.CRC ^= 1
	for j := range r.blocks[0].Cols {
		if r.blocks[0].Cols[j].ID == colAttrs {
			r.blocks[0].Cols[j] = c
		}
	}
	_, err := r.FilterRows(0, &RowFilter{Attrs: []AttrCond{{Span: true, Key: "user.id", Strs: []string{"val1"}}}})
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("FilterRows over a damaged attributes column: %v, want a CorruptionError", err)
	}
	if _, err := r.FilterRows(len(r.blocks), &RowFilter{}); err == nil {
		t.Fatal("FilterRows of a block out of range: no error")
	}
}
