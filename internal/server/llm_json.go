package server

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// The LLM statistics routes can answer tens of thousands of groups (group
// by session over a day: one per session, ~400 bytes each). encoding/json
// spends most of their time in reflection and map-key sorting, so these
// appenders write the same bytes directly: appendGroups(b, gs) equals
// json.Marshal of the []llmGroupJSON the groups convert to
// (TestLLMJSONEqualsEncodingJSON), and the answers keep their shape.

// appendGroups appends groups as a JSON array of llmGroupJSON; withTime
// adds each group's bucket as "time" (time series).
func appendGroups(b []byte, gs []store.LLMGroup, withTime bool) []byte {
	b = append(b, '[')
	var names []string
	for i := range gs {
		g := &gs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":{`...)
		names = names[:0]
		for k := range g.Key {
			names = append(names, k)
		}
		slices.Sort(names)
		for j, k := range names {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, g.Key[k])
		}
		b = append(b, '}')
		if withTime {
			b = append(b, `,"time":`...)
			b = appendJSONString(b, bucketTime(g.Bucket))
		}
		b = append(b, ',')
		b = appendMeasuresFields(b, &g.M)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendMeasures appends m as a measuresJSON object.
func appendMeasures(b []byte, m *store.Measures) []byte {
	b = append(b, '{')
	b = appendMeasuresFields(b, m)
	return append(b, '}')
}

// appendMeasuresFields appends the fields of measuresJSON(m), without braces.
func appendMeasuresFields(b []byte, m *store.Measures) []byte {
	b = appendInt(b, `"spans":`, m.Spans)
	b = appendInt(b, `,"counted_spans":`, m.Counted)
	b = appendInt(b, `,"errors":`, m.Errors)
	b = appendInt(b, `,"traces":`, m.Traces)
	b = appendInt(b, `,"input_tokens":`, m.InputTokens)
	b = appendInt(b, `,"output_tokens":`, m.OutputTokens)
	b = appendInt(b, `,"cache_read_tokens":`, m.CacheReadTokens)
	b = appendInt(b, `,"cache_creation_tokens":`, m.CacheCreationTokens)
	b = appendInt(b, `,"reasoning_tokens":`, m.ReasoningTokens)
	b = append(b, `,"cost_usd":`...)
	b = appendJSONFloat(b, float64(m.CostNanoUSD)/1e9)
	if m.MinStart != 0 {
		b = appendTime(append(b, `,"first_seen":`...), m.MinStart)
	}
	if m.MaxEnd != 0 {
		b = appendTime(append(b, `,"last_seen":`...), m.MaxEnd)
	}
	if q := quantiles(m.Latency); q != nil {
		b = append(b, `,"latency_ms":`...)
		b = appendQuantilesJSON(b, q)
	}
	if q := quantiles(m.TTFT); q != nil {
		b = append(b, `,"time_to_first_token_ms":`...)
		b = appendQuantilesJSON(b, q)
	}
	if mm := &m.Metrics; *mm != (store.MetricMeasures{}) {
		b = appendInt(b, `,"from_metrics":{"calls":`, mm.Calls)
		b = appendInt(b, `,"errors":`, mm.Errors)
		b = appendInt(b, `,"input_tokens":`, mm.InputTokens)
		b = appendInt(b, `,"output_tokens":`, mm.OutputTokens)
		b = appendJSONFloat(append(b, `,"cost_usd":`...), float64(mm.CostNanoUSD)/1e9)
		if mean, ok := meanMs(mm); ok {
			b = appendJSONFloat(append(b, `,"duration_mean_ms":`...), mean)
		}
		if q := quantiles(mm.Duration); q != nil {
			b = appendJSONFloat(append(b, `,"duration_ms":{"p50":`...), q.P50)
			b = appendJSONFloat(append(b, `,"p95":`...), q.P95)
			b = appendJSONFloat(append(b, `,"p99":`...), q.P99)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return b
}

// appendTime appends rfc3339(ns) quoted (its characters need no escaping).
func appendTime(b []byte, ns uint64) []byte {
	b = time.Unix(0, int64(ns)).UTC().AppendFormat(append(b, '"'), time.RFC3339Nano)
	return append(b, '"')
}

func appendQuantilesJSON(b []byte, q *quantilesJSON) []byte {
	b = append(b, `{"p50":`...)
	b = appendJSONFloat(b, q.P50)
	b = append(b, `,"p95":`...)
	b = appendJSONFloat(b, q.P95)
	b = append(b, `,"p99":`...)
	b = appendJSONFloat(b, q.P99)
	b = append(b, `,"max":`...)
	b = appendJSONFloat(b, q.Max)
	return append(b, '}')
}

func appendInt(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(append(b, name...), v, 10)
}

// appendJSONFloat formats f as encoding/json does (finite values only; the
// measures have no others).
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...) // not reached: encoding/json would fail the whole answer
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString quotes s as encoding/json does: plain ASCII directly,
// anything it escapes (controls, quotes, <, >, &, non-ASCII) through it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONValue appends v with encoding/json (small values).
func appendJSONValue(b []byte, v any) ([]byte, error) {
	q, err := json.Marshal(v)
	return append(b, q...), err
}

// writeJSONBytes writes an encoded JSON answer as writeJSON does.
func writeJSONBytes(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
