package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/rastro-dev/rastro/internal/promql"
	"github.com/rastro-dev/rastro/internal/store"
)

// A matrix large enough to be encoded on several CPUs is the same bytes as
// its one-CPU encoding, and valid JSON with every series in order.
func TestPromMatrixParallelEncoding(t *testing.T) {
	var m []promql.Series
	for i := range 500 {
		s := promql.Series{Labels: store.Labels{{Name: "__name__", Value: "up"}, {Name: "inst", Value: fmt.Sprint(i)}}}
		for j := range 100 {
			s.Points = append(s.Points, promql.Point{T: int64(j) * 15_000, F: float64(i*j) / 7})
		}
		m = append(m, s)
	}
	res := promql.Result{Type: promql.TypeMatrix, Matrix: m}
	prev := runtime.GOMAXPROCS(1)
	seq := appendPromResult(nil, res)
	runtime.GOMAXPROCS(4)
	par := appendPromResult(nil, res)
	par2 := appendPromResult(make([]byte, 0, 10), res) // pooled side buffers reused
	runtime.GOMAXPROCS(prev)
	if !bytes.Equal(seq, par) || !bytes.Equal(seq, par2) {
		t.Fatalf("parallel encoding differs from the sequential one (%d, %d and %d bytes)", len(seq), len(par), len(par2))
	}
	var ans struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal(par, &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Result) != 500 {
		t.Fatalf("%d series, want 500", len(ans.Result))
	}
	for i, s := range ans.Result {
		if s.Metric["inst"] != fmt.Sprint(i) || len(s.Values) != 100 {
			t.Fatalf("series %d: %v with %d values", i, s.Metric, len(s.Values))
		}
	}
}

// The times of a matrix's points are formatted once and copied to later
// series with the same steps; series whose points sit at other times (one
// that starts late, one with gaps, milliseconds, times before 1970) still
// get their own times, written as Prometheus writes them (jsonutil.
// MarshalTimestamp: -1.500, 0.007). The expected answer formats every point
// anew.
func TestPromMatrixTimesOfEverySeries(t *testing.T) {
	grids := [][]int64{
		{0, 15_000, 30_000, 45_000},
		{15_000, 30_000, 45_000},            // starts one step late: every index differs
		{0, 30_000, 45_000},                 // a gap
		{0, 15_000, 30_000, 45_000, 60_000}, // one more than the first series
		{-1_500, 7, 15_000, 1435781451781},
		{0, 15_000, 30_000, 45_000},
	}
	var m []promql.Series
	for i, g := range grids {
		s := promql.Series{Labels: store.Labels{{Name: "i", Value: fmt.Sprint(i)}}}
		for j, ts := range g {
			s.Points = append(s.Points, promql.Point{T: ts, F: float64(i*10+j) / 3})
		}
		m = append(m, s)
	}
	got := appendPromSeries(nil, m, 0, len(m))
	var want []byte
	for i, s := range m {
		if i > 0 {
			want = append(want, ',')
		}
		want = append(want, `{"metric":`...)
		want = appendPromLabels(want, s.Labels)
		want = append(want, `,"values":[`...)
		for j, p := range s.Points {
			if j > 0 {
				want = append(want, ',')
			}
			want = appendPromPoint(want, p)
		}
		want = append(want, "]}"...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("matrix encoding:\n got %s\nwant %s", got, want)
	}
	if !bytes.Contains(got, []byte(`[-1.500,"`)) || !bytes.Contains(got, []byte(`[1435781451.781,"`)) || !bytes.Contains(got, []byte(`[0.007,"`)) {
		t.Fatalf("times not written as Prometheus does: %s", got)
	}
}
