package server

import (
	"cmp"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// llmGroupJSON is the shape appendGroups writes, encoded the reference way.
type llmGroupJSON struct {
	Key  map[string]string `json:"key"`
	Time string            `json:"time,omitempty"`
	measuresJSON
}

// TestLLMJSONEqualsEncodingJSON: the appenders of the LLM routes write the
// bytes encoding/json writes for the same groups and measures, over random
// values, awkward strings and floats at the edges of its number formats.
func TestLLMJSONEqualsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "gpt-4o", "sess-0001", `quo"te`, `back\slash`, "<tag>&amp", "tab\there", "nl\n", "é-ü", "\u2028\u2029",
		"bad\xffutf8", "\x00", "emoji 🦜"}
	floats := []float64{0, 1, 0.5, 1e-7, 1.5e-9, 9.999e20, 1e21, 123456789.123, 3e-6, 1e-6, 0.000999}
	pick := func() string { return strs[r.IntN(len(strs))] }
	num := func() int64 {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return math.MaxInt64
		case 2:
			return r.Int64N(1000) // a cost below 1e-6 USD: exponent form
		}
		return r.Int64N(1e12)
	}
	q := func() *store.Quantiles {
		if r.IntN(3) == 0 {
			return nil
		}
		f := func() float64 { return floats[r.IntN(len(floats))] * float64(r.IntN(1e6)+1) }
		return &store.Quantiles{P50: f(), P95: f(), P99: f(), Max: f()}
	}
	for iter := range 300 {
		gs := make([]store.LLMGroup, r.IntN(5))
		want := make([]llmGroupJSON, len(gs))
		withTime := iter%2 == 1
		for i := range gs {
			key := map[string]string{}
			for range r.IntN(4) {
				key[pick()] = pick()
			}
			m := store.Measures{Spans: num(), Counted: num(), Errors: num(), Traces: num(), InputTokens: num(),
				OutputTokens: num(), CacheReadTokens: num(), CacheCreationTokens: num(), ReasoningTokens: num(),
				CostNanoUSD: num(), Latency: q(), TTFT: q()}
			if r.IntN(2) == 0 {
				m.Metrics = store.MetricMeasures{Calls: num() - 5, Errors: num(), InputTokens: num(), OutputTokens: num(), CostNanoUSD: num(),
					DurationSeconds: floats[r.IntN(len(floats))] * float64(r.IntN(1e6)), Duration: q()}
			}
			if r.IntN(2) == 0 {
				m.MinStart, m.MaxEnd = uint64(r.Int64N(2e18)), uint64(r.Int64N(2e18))
			}
			gs[i] = store.LLMGroup{Key: key, Bucket: r.Int64N(4e9), M: m}
			want[i] = llmGroupJSON{Key: key, measuresJSON: measures(&m)}
			if withTime {
				want[i].Time = time.Unix(gs[i].Bucket, 0).UTC().Format(time.RFC3339)
			}
		}
		wb, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendGroups(nil, gs, withTime); string(got) != string(wb) {
			t.Fatalf("iter %d:\n got %s\nwant %s", iter, got, wb)
		}
		for i := range gs {
			mb, _ := json.Marshal(measures(&gs[i].M))
			if got := appendMeasures(nil, &gs[i].M); string(got) != string(mb) {
				t.Fatalf("iter %d measures:\n got %s\nwant %s", iter, got, mb)
			}
		}
	}
}

// TestFirstPositionsEqualsStableSort: the page of sessions a bounded heap
// selects is the first k of a stable sort, ties (many: few distinct
// values) in input order.
func TestFirstPositionsEqualsStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 500 {
		n := r.IntN(300)
		vals := make([]int, n)
		for i := range vals {
			vals[i] = r.IntN(1 + iter%20)
		}
		before := func(i, j int32) bool { return vals[i] > vals[j] || (vals[i] == vals[j] && i < j) }
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(vals[b], vals[a]) })
		k := r.IntN(n + 5)
		got := store.FirstPositions(n, k, before)
		if !slices.Equal(got, want[:min(k, n)]) {
			t.Fatalf("iter %d, n %d, k %d:\n got %v\nwant %v", iter, n, k, got, want[:min(k, n)])
		}
	}
}
