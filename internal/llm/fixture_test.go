package llm

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// fixture is one testdata/*.json file: a span as an instrumentation library
// sends it and the normalised fields expected from it.
type fixture struct {
	Description string `json:"description"`
	Source      string `json:"source"`
	Span        struct {
		Name       string                     `json:"name"`
		Start      time.Time                  `json:"start"`
		End        time.Time                  `json:"end"`
		Attributes map[string]json.RawMessage `json:"attributes"`
		Resource   map[string]json.RawMessage `json:"resource"`
		Events     []struct {
			Name       string                     `json:"name"`
			Attributes map[string]json.RawMessage `json:"attributes"`
		} `json:"events"`
	} `json:"span"`
	Want struct {
		LLM    *model.LLM `json:"llm"`
		Input  []Message  `json:"input"`
		Output []Message  `json:"output"`
	} `json:"want"`
	raw map[string]json.RawMessage
}

// jsonValue turns a JSON attribute value into a model.Value the way an OTLP
// decoder would see it: strings, bools, integers (no '.' or exponent),
// doubles, arrays and objects (kvlists).
func jsonValue(t testing.TB, raw json.RawMessage) model.Value {
	t.Helper()
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return model.Value{}
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		return model.StringValue(s)
	case string(raw) == "true" || string(raw) == "false":
		return model.BoolValue(string(raw) == "true")
	case raw[0] == '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			t.Fatal(err)
		}
		vs := make([]model.Value, len(elems))
		for i, e := range elems {
			vs[i] = jsonValue(t, e)
		}
		return model.ArrayValue(vs)
	case raw[0] == '{':
		return model.KvListValue(jsonAttrs(t, raw))
	case bytes.ContainsAny(raw, ".eE"):
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		return model.DoubleValue(f)
	default:
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
		return model.IntValue(n)
	}
}

func jsonAttrs(t testing.TB, raw json.RawMessage) []model.KeyValue {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return attrsOf(t, m)
}

func attrsOf(t testing.TB, m map[string]json.RawMessage) []model.KeyValue {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	kvs := make([]model.KeyValue, 0, len(keys))
	for _, k := range keys {
		kvs = append(kvs, model.KeyValue{Key: k, Value: jsonValue(t, m[k])})
	}
	return kvs
}

func loadFixtures(t *testing.T) map[string]fixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fixture{}
	for _, p := range paths {
		if filepath.Base(p) == "prices.json" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f fixture
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		if err := d.Decode(&f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if err := json.Unmarshal(data, &f.raw); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = f
	}
	if len(out) < 8 {
		t.Fatalf("found %d fixtures, want at least 8", len(out))
	}
	return out
}

func (f *fixture) span(t testing.TB) model.Span {
	s := model.Span{
		Name:              f.Span.Name,
		StartTimeUnixNano: uint64(f.Span.Start.UnixNano()),
		EndTimeUnixNano:   uint64(f.Span.End.UnixNano()),
		Attributes:        attrsOf(t, f.Span.Attributes),
	}
	if f.Span.Resource != nil {
		s.Resource = &model.Resource{Attributes: attrsOf(t, f.Span.Resource)}
	}
	for _, e := range f.Span.Events {
		s.Events = append(s.Events, model.Event{TimeUnixNano: s.EndTimeUnixNano, Name: e.Name, Attributes: attrsOf(t, e.Attributes)})
	}
	return s
}

func testPrices(t testing.TB) *Prices {
	t.Helper()
	p, err := LoadPrices("testdata/prices.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFixtures(t *testing.T) {
	prices := testPrices(t)
	for name, f := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			s := f.span(t)
			got := Extract(&s, prices)
			if !reflect.DeepEqual(got, f.Want.LLM) {
				t.Errorf("%s\nExtract:\n got  %+v\n want %+v", f.Description, deref(got), deref(f.Want.LLM))
			}
			var want map[string]json.RawMessage
			_ = json.Unmarshal(f.raw["want"], &want)
			in, out := Messages(&s)
			if _, ok := want["input"]; ok && !reflect.DeepEqual(in, f.Want.Input) {
				t.Errorf("input messages:\n got  %+v\n want %+v", in, f.Want.Input)
			}
			if _, ok := want["output"]; ok && !reflect.DeepEqual(out, f.Want.Output) {
				t.Errorf("output messages:\n got  %+v\n want %+v", out, f.Want.Output)
			}
		})
	}
}

func deref(l *model.LLM) any {
	if l == nil {
		return nil
	}
	return *l
}
