package segment_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// attrKey names an attribute as the filters do: its scope and key.
type attrKey struct {
	resource bool
	key      string
}

// presentAttrs returns, per attribute, the string values the spans carry
// (top level, span and resource attributes: what the filters cover).
func presentAttrs(spans []model.Span) map[attrKey]map[string]bool {
	out := map[attrKey]map[string]bool{}
	add := func(resource bool, kvs []model.KeyValue) {
		for _, kv := range kvs {
			if kv.Value.Type != model.ValueString {
				continue
			}
			k := attrKey{resource, kv.Key}
			if out[k] == nil {
				out[k] = map[string]bool{}
			}
			out[k][kv.Value.Str] = true
		}
	}
	for i := range spans {
		add(false, spans[i].Attributes)
		if spans[i].Resource != nil {
			add(true, spans[i].Resource.Attributes)
		}
	}
	return out
}

// absentProbe is a value absent from its attribute in the whole segment.
type absentProbe struct {
	attrKey
	value, kind string
}

// absentProbes derives values that are absent but look like present ones:
// a present value with a character appended (u-1234 -> u-12345) or
// removed, its case changed, its Unicode normal form changed, and ids
// of the same shape that no span carries. At most perKey present values of
// each attribute are used.
func absentProbes(present map[attrKey]map[string]bool, perKey int, r *rand.Rand) []absentProbe {
	var out []absentProbe
	keys := make([]attrKey, 0, len(present))
	for k := range present {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b attrKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		vals := make([]string, 0, len(present[k]))
		for v := range present[k] {
			vals = append(vals, v)
		}
		slices.Sort(vals)
		r.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
		if len(vals) > perKey {
			vals = vals[:perKey]
		}
		add := func(v, kind string) {
			if !present[k][v] {
				out = append(out, absentProbe{k, v, kind})
			}
		}
		for _, v := range vals {
			add(v+"5", "prefix")
			add(v+"0", "prefix")
			if len(v) > 1 {
				add(v[:len(v)-1], "prefix")
			}
			add(strings.ToUpper(v), "case")
			add(strings.ToLower(v), "case")
			add(norm.NFD.String(v), "unicode")
			add(norm.NFC.String(v), "unicode")
			add(fmt.Sprintf("%s-absent-%d", v, r.IntN(1e6)), "other")
		}
		for range 20 {
			add(fmt.Sprintf("u-%d", 1000000+r.IntN(9000000)), "other")
		}
	}
	return out
}

// fpCorpus writes the first n spans of a bench corpus as one segment of
// 1024-span blocks (the engine's default), and returns its reader.
func fpCorpus(t *testing.T, corpus string, n int) (*segment.Reader, []model.Span) {
	t.Helper()
	spans, err := bench.Generate(corpus, bench.CorpusOptions{Seed: 1, Spans: n,
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := segment.Write(dir, "s", map[string][]model.Span{"p": spans}, segment.WriterOptions{BlockSpans: 1024}); err != nil {
		t.Fatal(err)
	}
	r, err := segment.Open(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, spans
}

// binomialTail is P(X >= k) for X ~ Binomial(n, p).
func binomialTail(n int, p float64, k int) float64 {
	sum, term := 0.0, math.Pow(1-p, float64(n)) // P(X = 0)
	for i := 0; i <= n; i++ {
		if i >= k {
			sum += term
		}
		term *= float64(n-i) / float64(i+1) * p / (1 - p)
	}
	return sum
}

// TestAttrFilterFalsePositives measures the false-positive rate of every
// kind of attribute filter on the canonical, api and llm corpora, with
// absent values that share prefixes, case or Unicode normal forms with
// present ones, against its design bound: the per-block bloom filters
// (1%), the segment summary's value dictionaries (exact) and its fuse
// filter (2^-16). Every present value must pass every filter.
func TestAttrFilterFalsePositives(t *testing.T) {
	for _, corpus := range []string{bench.CorpusCanonical, bench.CorpusAPI, bench.CorpusLLM} {
		t.Run(corpus, func(t *testing.T) {
			r, spans := fpCorpus(t, corpus, 100_000)
			present := presentAttrs(spans)
			probes := absentProbes(present, 100, rand.New(rand.NewPCG(3, 4)))
			st := r.AttrSummaryStats()
			if !r.HasAttrSummary() || st.FP != 1.0/65536 {
				t.Fatalf("summary %+v, want one with a 16-bit filter", st)
			}

			// No false negatives: every present value passes the summary.
			for k, vals := range present {
				for v := range vals {
					if !r.SegmentMayContainAttr(k.resource, k.key, v) {
						t.Fatalf("summary rejects present %v = %q", k, v)
					}
				}
			}

			// Block filters: every absent probe against every block.
			blocks := len(r.Blocks())
			var passes, trials int
			hot := 0 // probes passing more than 5% of the blocks
			worst := 0
			for _, p := range probes {
				n := 0
				for i := 0; i < blocks; i++ {
					if r.MayContainAttr(i, p.resource, p.key, p.value) {
						n++
					}
				}
				passes += n
				trials += blocks
				if 20*n > blocks {
					hot++
				}
				worst = max(worst, n)
			}
			rate := float64(passes) / float64(trials)
			t.Logf("%s: %d blocks, %d absent probes: block filter FP %.4f (bound 0.01); %d probes pass > 5%% of blocks, worst passes %d",
				corpus, blocks, len(probes), rate, hot, worst)
			if rate > 0.015 {
				t.Errorf("block filter false-positive rate %.4f, design bound 0.01", rate)
			}
			// Independent filters (section 20: each block's entries are
			// salted with its number) pass a value in more than 5% of the
			// blocks as often as a binomial law says; unsalted filters of
			// the same size in blocks with the same entries passed the
			// same values (canonical: 73 of 991 probes, one in 19 of 99
			// blocks).
			if want := binomialTail(blocks, 0.01, blocks/20+1) * float64(len(probes)); float64(hot) > 3*want+3 {
				t.Errorf("%d of %d absent values pass more than 5%% of the blocks; independent filters: %.1f", hot, len(probes), want)
			}

			// The summary: keys no span has, and the look-alike probes of
			// keys with dictionaries, are all rejected (exact); look-alikes
			// of filtered keys pass at the filter's rate, measured on a
			// million random values of the keys it filters.
			var filtered []attrKey
			for k := range present {
				if !segment.AttrSummaryHasDict(r, k.resource, k.key) {
					filtered = append(filtered, k)
				}
			}
			slices.SortFunc(filtered, func(a, b attrKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			kinds := map[string]int{}
			lookFiltered, lookPassed := 0, 0
			for _, p := range probes {
				kinds[p.kind]++
				dict := segment.AttrSummaryHasDict(r, p.resource, p.key)
				if !dict {
					lookFiltered++
				}
				if r.SegmentMayContainAttr(p.resource, p.key, p.value) {
					if dict {
						t.Errorf("summary dictionary passes absent %v = %q (%s)", p.attrKey, p.value, p.kind)
					}
					lookPassed++
				}
			}
			// A look-alike is no likelier to pass the filter than any
			// absent value: at most a few, at 2^-16 each.
			if limit := 3 + 4*float64(lookFiltered)/65536; float64(lookPassed) > limit {
				t.Errorf("summary filter passes %d of %d look-alike values, want <= %.0f", lookPassed, lookFiltered, limit)
			}
			if r.SegmentMayContainAttr(false, "no.such.key", "x") || r.SegmentMayContainIntAttr(false, "no.such.key", 1) {
				t.Errorf("summary passes a key no span has")
			}
			filterPassed, filterProbes := 0, 0
			rr := rand.New(rand.NewPCG(5, 6))
			if len(filtered) > 0 {
				for range 1_000_000 {
					k := filtered[rr.IntN(len(filtered))]
					v := fmt.Sprintf("absent-%016x", rr.Uint64())
					filterProbes++
					if r.SegmentMayContainAttr(k.resource, k.key, v) {
						filterPassed++
					}
				}
			}
			frate := float64(filterPassed) / float64(max(filterProbes, 1))
			t.Logf("%s: summary resident %d B (reader total %d B) for %d spans", corpus, r.AttrSummaryBytes(), r.ResidentBytes(), len(spans))
			t.Logf("%s: summary %d keys (%d with dictionaries, %d values), filter %d entries in %d B (%.2f bits/entry): "+
				"look-alike probes %v: %d of %d to the filter passed; random probes of %d filtered keys: %d/%d passed = %.2g (bound %.2g)",
				corpus, st.Keys, st.DictKeys, st.DictValues, st.Entries, st.FilterBytes, float64(8*st.FilterBytes)/float64(max(st.Entries, 1)),
				kinds, lookPassed, lookFiltered, len(filtered), filterPassed, filterProbes, frate, st.FP)
			// 2^-16 of a million is 15: 60 is beyond any plausible
			// fluctuation (Poisson), not beyond a broken filter.
			if filterPassed > 60 {
				t.Errorf("summary filter passed %d of %d absent values, design bound %.2g", filterPassed, filterProbes, st.FP)
			}
		})
	}
}
