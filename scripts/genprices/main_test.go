package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestExtractProviders(t *testing.T) {
	bundle := "import x from 'y';\nconst E = [\n  {\n    id: \"p\",\n    a: !0,\n    b: !1,\n    c: void 0,\n    n: 2e5,\n    h: .5,\n" +
		"    s: 'it\\'s \\u00e9',\n    t: `two\nlines`,\n    \"quoted\": null,\n    /* @__PURE__ */ models: [1, [], {},]\n  }\n], k = E;\nfunction f() {}\n"
	got, err := extractProviders(bundle)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{
		"id": "p", "a": true, "b": false, "n": jsNumber("2e5"), "h": jsNumber(".5"),
		"s": "it's é", "t": "two\nlines", "quoted": nil,
		"models": []any{jsNumber("1"), []any{}, map[string]any{}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	for _, bad := range []string{
		"const E = [{ id: \"p\", f: () => 1 }];",
		"const E = [{ id: `a${b}` }];",
		"const E = [{ id: \"p\" ",
		"let E = [{ id: \"p\" }];",
	} {
		if _, err := extractProviders(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestLeafRule(t *testing.T) {
	for _, c := range []struct {
		op, arg string
		want    rule
		err     string
	}{
		{"equals", "gpt-4o", rule{"model", "gpt-4o"}, ""},
		{"starts_with", "claude-2", rule{"pattern", "claude-2*"}, ""},
		{"ends_with", "claude-fable-5", rule{"pattern", "*claude-fable-5"}, ""},
		{"contains", "amazon.nova-pro", rule{"pattern", "*amazon.nova-pro*"}, ""},
		{"contains", "a*b", rule{"regexp", `.*a\*b.*`}, ""},
		{"regex", `^claude-opus-5-\d{8}$`, rule{"regexp", `claude-opus-5-\d{8}`}, ""},
		{"regex", `^gemini-3\.5-flash-\d`, rule{"regexp", `gemini-3\.5-flash-\d.*`}, ""},
		{"regex", `^o[134]`, rule{"regexp", `o[134].*`}, ""},
		{"regex", `mini|nano`, rule{"regexp", `.*(?:mini|nano).*`}, ""},
		{"regex", `^a|b$`, rule{"regexp", `.*(?:^a|b$).*`}, ""},
		{"regex", `^GLM-`, rule{}, "upper-case"},
		{"regex", `^[A-Z]+$`, rule{}, "upper-case"},
		{"regex", `^(?!.*-tts)`, rule{}, "lookahead"},
		{"regex", `(?<=x)y`, rule{}, "not RE2"},
	} {
		got, err := leafRule(c.op, c.arg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q: error %v, want %q", c.op, c.arg, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %q: %v %v, want %v", c.op, c.arg, got, err, c.want)
		}
	}
	// Each regexp, as internal/llm compiles it, matches the names genai-prices' search does.
	for _, c := range []struct {
		re, name string
		want     bool
	}{
		{`^gemini-3\.5-flash-\d`, "gemini-3.5-flash-001", true},
		{`^gemini-3\.5-flash-\d`, "x-gemini-3.5-flash-001", false},
		{`mini|nano`, "gpt-5-nano-2025", true},
		{`^a|b$`, "xb", true},
		{`^a|b$`, "xbx", false},
	} {
		r, err := leafRule("regex", c.re)
		if err != nil {
			t.Fatal(err)
		}
		full := regexp.MustCompile(`^(?i:` + r.text + `)$`)
		js := regexp.MustCompile(c.re)
		if full.MatchString(c.name) != c.want || js.MatchString(c.name) != c.want {
			t.Errorf("/%s/ as %q on %q: %v (genai-prices %v), want %v", c.re, r.text, c.name, full.MatchString(c.name), js.MatchString(c.name), c.want)
		}
	}
}

func TestConvertMatch(t *testing.T) {
	or := map[string]any{"or": []any{
		map[string]any{"equals": "gemini-2.5-flash-lite"},
		map[string]any{"and": []any{
			map[string]any{"starts_with": "gemini-2.5-flash-lite-preview"},
			map[string]any{"regex": "^(?!.*-[tT][tT][sS](?:$|-))"},
		}},
	}}
	rules, notes, err := convertMatch(or)
	if err != nil {
		t.Fatal(err)
	}
	if want := []rule{{"model", "gemini-2.5-flash-lite"}, {"pattern", "gemini-2.5-flash-lite-preview*"}}; !reflect.DeepEqual(rules, want) || len(notes) != 1 {
		t.Errorf("rules %v notes %v", rules, notes)
	}
	// The original rule is still evaluated exactly (for shadowing).
	if matches(or, "gemini-2.5-flash-lite-preview-tts") || !matches(or, "gemini-2.5-flash-lite-preview-06-17") {
		t.Error("lookahead evaluated wrongly")
	}
	and := map[string]any{"and": []any{map[string]any{"starts_with": "a"}, map[string]any{"ends_with": "b"}}}
	if _, _, err := convertMatch(and); err == nil {
		t.Error("an and of two conditions was converted")
	}
}

func TestConvertPrices(t *testing.T) {
	g := &generator{stats: newStats()}
	m := &gModel{provider: "p", id: "m"}
	n := func(s string) jsNumber { return jsNumber(s) }
	// Dated history, a tiered price at its base, a missing output price.
	ps, err := g.convertPrices(m, []any{
		map[string]any{"prices": map[string]any{"input_mtok": n("10"), "output_mtok": n("40")}},
		map[string]any{"constraint": map[string]any{"type": "start_date", "start_date": "2025-06-10"},
			"prices": map[string]any{"input_mtok": map[string]any{"base": n("2"), "tiers": []any{}}, "cache_read_mtok": n("0.5"), "web_searches_kcount": n("10")}},
	})
	want := []period{
		{from: "1970-01-01", input: "10", output: "40"},
		{from: "2025-06-10", input: "2", output: "0", cacheRead: "0.5"},
	}
	if err != nil || !reflect.DeepEqual(ps, want) {
		t.Errorf("got %+v %v, want %+v", ps, err, want)
	}
	// Time of day: the price in force for most of the day (16 h here), not the fallback.
	ps, err = g.convertPrices(m, []any{
		map[string]any{"prices": map[string]any{"input_mtok": n("0.135"), "output_mtok": n("0.55")}},
		map[string]any{"constraint": map[string]any{"type": "time_of_date", "start_time": "00:30:00Z", "end_time": "16:30:00Z"},
			"prices": map[string]any{"input_mtok": n("0.27"), "output_mtok": n("1.1")}},
	})
	if want := []period{{from: "1970-01-01", input: "0.27", output: "1.1"}}; err != nil || !reflect.DeepEqual(ps, want) {
		t.Errorf("time of day: got %+v %v", ps, err)
	}
	// Float noise is rounded to 9 decimals.
	ps, err = g.convertPrices(m, map[string]any{"input_mtok": n("0.18000000000000002"), "cache_write_mtok": n("0.08333333333333334")})
	if want := []period{{from: "1970-01-01", input: "0.18", output: "0", cacheWrite: "0.083333333"}}; err != nil || !reflect.DeepEqual(ps, want) {
		t.Errorf("rounding: got %+v %v", ps, err)
	}
	// No per-token price: skipped.
	if _, err := g.convertPrices(m, map[string]any{"audio_hours": n("3")}); err == nil || !strings.Contains(err.Error(), "no per-token price") {
		t.Errorf("audio-only model: %v", err)
	}
	// An empty price object is a free model.
	if ps, err := g.convertPrices(m, map[string]any{}); err != nil || ps[0].input != "0" || ps[0].output != "0" {
		t.Errorf("free model: %+v %v", ps, err)
	}
}

func TestTimeOfDay(t *testing.T) {
	for s, want := range map[string]int{"00:30:00Z": 1800, "16:30:00Z": 59400, "08:00:00+08:00": 0, "23:00:00-02:00": 3600} {
		if got, err := timeOfDay(s); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", s, got, err, want)
		}
	}
}
