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
