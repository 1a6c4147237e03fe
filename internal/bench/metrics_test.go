package bench

import (
	"strings"
	"testing"
)

const sampleMetrics = `# HELP rastro_decode_ns_total Nanoseconds spent decoding.
# TYPE rastro_decode_ns_total counter
rastro_decode_ns_total{protocol="otlp-proto"} 1.5e+06
rastro_decode_ns_total{protocol="otlp-json"} 42
rastro_ingest_spans_total{project="a",protocol="otlp-proto"} 600
rastro_ingest_spans_total{project="b", protocol="otlp-proto"} 400
rastro_wal_fsyncs_total 7
weird_label{path="a\"b\\c"} 1
broken{ 3
not_a_number{a="b"} abc
`

func TestParseMetrics(t *testing.T) {
	m := ParseMetrics(sampleMetrics)
	if v, ok := m.Sum("rastro_decode_ns_total", "protocol", "otlp-proto"); !ok || v != 1.5e6 {
		t.Errorf("decode ns otlp-proto = %v, %v", v, ok)
	}
	if v, ok := m.Sum("rastro_ingest_spans_total", "protocol", "otlp-proto"); !ok || v != 1000 {
		t.Errorf("ingest spans summed over projects = %v, %v; want 1000", v, ok)
	}
	if v, ok := m.Sum("rastro_wal_fsyncs_total"); !ok || v != 7 {
		t.Errorf("fsyncs = %v, %v", v, ok)
	}
	if _, ok := m.Sum("rastro_decode_ns_total", "protocol", "otlp-grpc"); ok {
		t.Error("matched a label value that is absent")
	}
	if v, ok := m.Sum("weird_label", "path", `a"b\c`); !ok || v != 1 {
		t.Errorf("escaped label value not read: %v %v", v, ok)
	}
	if _, ok := m.Sum("not_a_number"); ok {
		t.Error("a non-numeric sample was accepted")
	}
}

func TestLogField(t *testing.T) {
	line := `time=2026-11-30T03:14:13.790Z level=INFO msg=listening http=127.0.0.1:38217 grpc="127.0.0.1:42799" data_dir=/tmp/x`
	if h, g := logField(line, "http"), logField(line, "grpc"); h != "127.0.0.1:38217" || g != "127.0.0.1:42799" {
		t.Errorf("http %q grpc %q", h, g)
	}
	if logField(line, "missing") != "" {
		t.Error("missing key found")
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add(sampleMetrics)
	f.Add(`a{b="c\`)
	f.Add("x 1\ny{z=\"\"} 2 1700000000000\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, m := range ParseMetrics(s) {
			if m.Name == "" && !strings.Contains(s, "{") {
				t.Fatalf("empty metric name from %q", s)
			}
		}
	})
}
