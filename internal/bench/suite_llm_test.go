package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestInterleave(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{0, 8}, {1, 8}, {3, 8}, {8, 8}, {17, 8}, {100, 8}, {10, 1}} {
		in := make([]Payload, tc.n)
		for i := range in {
			in[i].Spans = i // the index stands for the payload
		}
		out := interleave(in, tc.k)
		got := make([]int, len(out))
		for i, p := range out {
			got[i] = p.Spans
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		for i, v := range sorted {
			if v != i {
				t.Fatalf("n=%d k=%d: not a permutation: %v", tc.n, tc.k, got)
			}
		}
		k := max(1, min(tc.k, tc.n))
		chunk := func(i int) int { return sort.Search(k, func(c int) bool { return (c+1)*tc.n/k > i }) }
		// The first k payloads come from the k eighths; within an eighth the
		// corpus order is kept.
		if tc.n > 0 {
			seen := map[int]bool{}
			for _, v := range got[:k] {
				seen[chunk(v)] = true
			}
			if len(seen) != k {
				t.Errorf("n=%d k=%d: first %d payloads %v come from %d chunks, want %d", tc.n, tc.k, k, got[:k], len(seen), k)
			}
		}
		last := map[int]int{}
		for _, v := range got {
			if prev, ok := last[chunk(v)]; ok && v < prev {
				t.Errorf("n=%d k=%d: chunk order broken: %v", tc.n, tc.k, got)
			}
			last[chunk(v)] = v
		}
	}
}

// fakeLLMServer answers the suite's queries from an answer key the way a
// correct server would, for testing the checks.
type fakeLLMServer struct{ key *llmKey }

func (f fakeLLMServer) modelStats(w *llmWindowKey) map[string]any {
	var groups []map[string]any
	for m, n := range w.byModel {
		groups = append(groups, map[string]any{"key": map[string]string{"model": m}, "spans": n, "counted_spans": 0})
	}
	// Put every counted span on the first group: the checks compare totals.
	if len(groups) > 0 {
		groups[0]["counted_spans"] = w.counted
	}
	return map[string]any{"group_by": []string{"model"}, "groups": groups, "totals": map[string]any{"spans": w.spans, "counted_spans": w.counted}}
}

// sessionStats answers group by session with the server's default page:
// the llmSessionGroups first sessions of the key's ranking.
func (f fakeLLMServer) sessionStats() map[string]any {
	var groups []map[string]any
	var sum int64
	for _, s := range f.key.sessionRank[:min(llmSessionGroups, len(f.key.sessionRank))] {
		groups = append(groups, map[string]any{"key": map[string]string{"session": s}, "spans": f.key.bySession[s]})
		sum += f.key.bySession[s]
	}
	out := map[string]any{"groups": groups, "total_groups": len(f.key.sessionRank), "totals": map[string]any{"spans": f.key.all.spans}}
	if len(groups) < len(f.key.sessionRank) {
		out["others"] = map[string]any{"spans": f.key.all.spans - sum}
	}
	return out
}

type pageEntry struct {
	id  string
	end uint64
}

func (f fakeLLMServer) sessionsPage() ([]pageEntry, map[string]any) {
	var all []pageEntry
	for id, end := range f.key.sessionEnd {
		all = append(all, pageEntry{id, end})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].end > all[j].end })
	page := all[:min(llmSessionsLimit, len(all))]
	var out []map[string]any
	for _, e := range page {
		out = append(out, map[string]any{"session_id": e.id, "spans": f.key.bySession[e.id],
			"last_seen": time.Unix(0, int64(e.end)).UTC().Format(time.RFC3339Nano)})
	}
	return all, map[string]any{"sessions": out, "total": len(all)}
}

func (f fakeLLMServer) timeseries() map[string]any {
	h := time.Unix(0, int64(f.key.minStart)).UTC().Truncate(time.Hour)
	// All spans in the first bucket: the check sums points.
	return map[string]any{"step_seconds": 3600, "points": []map[string]any{{"key": map[string]string{}, "time": h.Format(time.RFC3339), "spans": f.key.all.spans}}}
}

func testLLMKey(t *testing.T) *llmKey { return testLLMKeyOf(t, 20_000) }

func testLLMKeyOf(t *testing.T, n int) *llmKey {
	t.Helper()
	spans, err := Generate(CorpusLLM, CorpusOptions{Seed: 3, Spans: n, Start: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), Window: llmCorpusWindow})
	if err != nil {
		t.Fatal(err)
	}
	key, err := newLLMKey(spans)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestLLMAnswerKey(t *testing.T) {
	key := testLLMKey(t)
	// The corpus's LLM calls name 6 models (by response model); agent and
	// tool spans have LLM fields but no model.
	var models []string
	for m := range key.all.byModel {
		models = append(models, m)
	}
	slices.Sort(models)
	var want []string
	for _, m := range llmModels {
		want = append(want, m.response)
	}
	want = append(want, "")
	slices.Sort(want)
	if !slices.Equal(models, want) {
		t.Errorf("models in the answer key %q, want %q", models, want)
	}
	for _, w := range []*llmWindowKey{&key.all, &key.w10, &key.w1} {
		var sum int64
		for _, n := range w.byModel {
			sum += n
		}
		if sum != w.spans || w.counted > w.spans || w.spans == 0 {
			t.Errorf("window [%d,%d): spans %d, per-model sum %d, counted %d", w.lo, w.hi, w.spans, sum, w.counted)
		}
	}
	// Windows are 10% and 1% of the time range, from its middle.
	span := key.maxStart - key.minStart
	mid := key.minStart + span/2
	for _, c := range []struct {
		w   *llmWindowKey
		div uint64
	}{{&key.w10, 10}, {&key.w1, 100}} {
		if c.w.hi-c.w.lo != span/c.div || c.w.lo > mid || c.w.hi < mid {
			t.Errorf("window [%d,%d) is not 1/%d of [%d,%d] around its middle", c.w.lo, c.w.hi, c.div, key.minStart, key.maxStart)
		}
	}
	if !(key.w1.spans < key.w10.spans && key.w10.spans < key.all.spans) {
		t.Errorf("window span counts not nested: 1%% %d, 10%% %d, all %d", key.w1.spans, key.w10.spans, key.all.spans)
	}
	// About one session per 40 spans; every session has an end time.
	if key.sessions < 20_000/80 || key.sessions > 20_000/20 || int64(len(key.sessionEnd)) != key.sessions {
		t.Errorf("%d sessions for 20000 spans", key.sessions)
	}
	var sum int64
	for _, n := range key.bySession {
		sum += n
	}
	if sum != key.all.spans {
		t.Errorf("per-session spans sum to %d, want %d", sum, key.all.spans)
	}
}

func TestLLMChecks(t *testing.T) {
	key := testLLMKeyOf(t, 60_000) // more sessions than a page of groups holds
	if len(key.sessionRank) <= llmSessionGroups {
		t.Fatalf("%d session values: the page of groups would hold them all", len(key.sessionRank))
	}
	srv := fakeLLMServer{key}
	kinds := llmKinds(key)
	byName := map[string]*llmKind{}
	for i := range kinds {
		byName[kinds[i].name] = &kinds[i]
	}
	all, page := srv.sessionsPage()
	right := map[string]map[string]any{
		"model_all":     srv.modelStats(&key.all),
		"model_10pct":   srv.modelStats(&key.w10),
		"model_1pct":    srv.modelStats(&key.w1),
		"session_all":   srv.sessionStats(),
		"sessions_50":   page,
		"timeseries_1h": srv.timeseries(),
	}
	if len(right) != len(kinds) {
		t.Fatalf("test covers %d kinds, the suite has %d", len(right), len(kinds))
	}
	for name, body := range right {
		k := byName[name]
		if k == nil {
			t.Fatalf("no kind %s", name)
		}
		for _, exact := range []bool{true, false} {
			if _, err := k.check(mustJSON(t, body), exact); err != nil {
				t.Errorf("%s (exact %v): a right answer was refused: %v", name, exact, err)
			}
		}
	}
	// The paths carry the windows as absolute nanoseconds.
	if p := byName["model_1pct"].path; !strings.Contains(p, fmt.Sprintf("since=%d&until=%d", key.w1.lo, key.w1.hi)) {
		t.Errorf("1%% window path %q", p)
	}

	// Wrong answers, each a mutation of a right one.
	type mutation struct {
		name, kind string
		exactOnly  bool // a short answer is fine during ingest
		mutate     func(m map[string]any)
	}
	groups := func(m map[string]any) []map[string]any { return m["groups"].([]map[string]any) }
	muts := []mutation{
		{"a model group one span short", "model_all", true, func(m map[string]any) {
			g := groups(m)[0]
			g["spans"] = g["spans"].(int64) - 1
			m["totals"].(map[string]any)["spans"] = key.all.spans - 1
		}},
		{"a model group one span over", "model_10pct", false, func(m map[string]any) {
			g := groups(m)[0]
			g["spans"] = g["spans"].(int64) + 1
			m["totals"].(map[string]any)["spans"] = key.w10.spans + 1
		}},
		{"totals disagree with groups", "model_1pct", false, func(m map[string]any) { m["totals"].(map[string]any)["spans"] = key.w1.spans + 5 }},
		{"a model from outside the window", "model_1pct", false, func(m map[string]any) {
			m["groups"] = append(groups(m), map[string]any{"key": map[string]string{"model": "gpt-9"}, "spans": 0})
		}},
		{"no groups at all", "model_all", true, func(m map[string]any) {
			m["groups"] = []map[string]any{}
			m["totals"] = map[string]any{"spans": 0, "counted_spans": 0}
		}},
		{"counted spans short", "model_all", true, func(m map[string]any) {
			groups(m)[0]["counted_spans"] = key.all.counted - 1
			m["totals"].(map[string]any)["counted_spans"] = key.all.counted - 1
		}},
		{"a session group missing", "session_all", false, func(m map[string]any) { m["groups"] = groups(m)[1:] }},
		{"a session counted twice", "session_all", false, func(m map[string]any) {
			g := groups(m)[0]
			g["spans"] = g["spans"].(int64) * 2
		}},
		{"sessions out of rank", "session_all", true, func(m map[string]any) {
			g := groups(m)
			g[0], g[1] = g[1], g[0]
		}},
		{"a cheap session on the page", "session_all", true, func(m map[string]any) {
			g, last := groups(m), key.sessionRank[len(key.sessionRank)-1]
			g[len(g)-1] = map[string]any{"key": map[string]string{"session": last}, "spans": key.bySession[last]}
			m["others"].(map[string]any)["spans"] = key.all.spans - sumSpans(g)
		}},
		{"total_groups short", "session_all", true, func(m map[string]any) { m["total_groups"] = len(key.sessionRank) - 1 }},
		{"others missing", "session_all", false, func(m map[string]any) { delete(m, "others") }},
		{"totals over the corpus", "session_all", false, func(m map[string]any) {
			m["totals"].(map[string]any)["spans"] = key.all.spans + 1
			m["others"].(map[string]any)["spans"] = m["others"].(map[string]any)["spans"].(int64) + 1
		}},
		{"sessions total wrong", "sessions_50", true, func(m map[string]any) { m["total"] = len(all) - 1 }},
		{"sessions page short", "sessions_50", false, func(m map[string]any) {
			m["sessions"] = m["sessions"].([]map[string]any)[1:]
		}},
		{"sessions page not sorted", "sessions_50", false, func(m map[string]any) {
			s := m["sessions"].([]map[string]any)
			s[0], s[1] = s[1], s[0]
		}},
		{"an old session on the first page", "sessions_50", true, func(m map[string]any) {
			old := all[len(all)-1]
			s := m["sessions"].([]map[string]any)
			s[len(s)-1] = map[string]any{"session_id": old.id, "spans": key.bySession[old.id],
				"last_seen": time.Unix(0, int64(old.end)).UTC().Format(time.RFC3339Nano)}
		}},
		{"a session with the wrong last_seen", "sessions_50", true, func(m map[string]any) {
			s := m["sessions"].([]map[string]any)
			s[len(s)-1]["last_seen"] = time.Unix(0, int64(all[len(s)-1].end)-1).UTC().Format(time.RFC3339Nano)
		}},
		{"timeseries short", "timeseries_1h", true, func(m map[string]any) {
			m["points"].([]map[string]any)[0]["spans"] = key.all.spans - 1
		}},
		{"timeseries bucket off the hour", "timeseries_1h", false, func(m map[string]any) {
			m["points"].([]map[string]any)[0]["time"] = time.Unix(0, int64(key.minStart)).UTC().Truncate(time.Hour).Add(30 * time.Minute).Format(time.RFC3339)
		}},
		{"timeseries wrong step", "timeseries_1h", false, func(m map[string]any) { m["step_seconds"] = 60 }},
	}
	for _, mu := range muts {
		// Rebuild the right answer: mutations change it in place.
		var body map[string]any
		switch mu.kind {
		case "model_all":
			body = srv.modelStats(&key.all)
		case "model_10pct":
			body = srv.modelStats(&key.w10)
		case "model_1pct":
			body = srv.modelStats(&key.w1)
		case "session_all":
			body = srv.sessionStats()
		case "sessions_50":
			_, body = srv.sessionsPage()
		case "timeseries_1h":
			body = srv.timeseries()
		}
		mu.mutate(body)
		b := mustJSON(t, body)
		if _, err := byName[mu.kind].check(b, true); err == nil {
			t.Errorf("%s: a wrong answer (%s) passed the exact check", mu.kind, mu.name)
		}
		_, err := byName[mu.kind].check(b, false)
		if mu.exactOnly && err != nil {
			t.Errorf("%s: %s is a possible answer during ingest, refused: %v", mu.kind, mu.name, err)
		}
		if !mu.exactOnly && err == nil {
			t.Errorf("%s: a wrong answer (%s) passed the during-ingest check", mu.kind, mu.name)
		}
	}
	if _, err := byName["model_all"].check([]byte("not json"), false); err == nil {
		t.Error("a non-JSON answer passed")
	}
}

func TestLLMTargetsAndDetail(t *testing.T) {
	sum := map[string]Spread{}
	set := func(m string, v float64) { sum[m] = Spread{Median: v, Min: v, Max: v, N: 1} }
	for _, k := range llmKinds(&llmKey{}) {
		set(k.name+"_cold_ms", 30)
		set(k.name+"_warm_p50_ms", 1)
		set(k.name+"_warm_p95_ms", 2)
	}
	set("model_10pct_warm_p95_ms", 25) // over its 20 ms target
	set("session_all_cold_ms", 75)     // over the 60 ms cold target
	rec := &Record{Suite: "llm", Machine: Machine{CPUs: 2}, Scenarios: []ScenarioRecord{
		{Name: llmAfterScenario, Status: "ok", Summary: sum},
		{Name: llmDuringScenario, Status: "refused", Reasons: []string{"round 1: query during ingest: model_all: wrong answer"}},
	}}
	got := map[string]string{}
	for _, tg := range llmTargets(rec) {
		got[tg.Name] = tg.Status + " " + tg.Got
	}
	for name, want := range map[string]string{
		"Warm p95, stats group_by=model, whole corpus (median of runs)": "PASS 2.00 ms",
		"Warm p95, stats group_by=model, 10% window (median of runs)":   "FAIL 25.00 ms",
		"Warm p95, timeseries step=1h, whole corpus (median of runs)":   "REPORT 2.00 ms",
		"Cold, every query with a target (worst kind, median of runs)":  "FAIL 75.00 ms (stats group_by=session, whole corpus (page of 1,000))",
		"p95 during ingest, stats group_by=model, whole corpus":         "FAIL refused",
	} {
		if got[name] != want {
			t.Errorf("target %q = %q, want %q (all: %v)", name, got[name], want, got)
		}
	}
	s, _ := LookupSuite("llm")
	rec.Targets = llmTargets(rec)
	md := Markdown(s, rec, "")
	for _, want := range []string{"| stats group_by=model, 10% window | < 20 | 30.00 | 1.00 | 25.00 (25.00-25.00) | 30.0x | n/a |", "| Target | Want | Got | Result |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "Cold/warm") > strings.Index(md, "| Target |") {
		t.Error("the per-query table must come before the targets")
	}
}

// TestBenchLLMEndToEnd runs `rastro bench llm` for real, tiny: ingest,
// restarts, cold and warm queries with checked answers, queries during
// ingest. It asserts the suite works, never how fast anything is.
func TestBenchLLMEndToEnd(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runRastro(t, "bench", "llm", "--runs", "1", "--spans", "3000", "--batch", "100", "--out-dir", out, "--tmp-dir", t.TempDir())
	if err != nil {
		t.Fatalf("rastro bench llm: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	rec := readRaw(t, out, "llm")
	after, ok := rec.Scenario(llmAfterScenario)
	if !ok || after.Status != "ok" {
		t.Fatalf("%s not ok: %+v", llmAfterScenario, after)
	}
	during, ok := rec.Scenario(llmDuringScenario)
	if !ok || during.Status != "ok" {
		t.Fatalf("%s not ok: %+v", llmDuringScenario, during)
	}
	for _, k := range llmKinds(&llmKey{}) {
		for _, m := range []string{"_cold_ms", "_warm_p50_ms", "_warm_p95_ms"} {
			if !(after.Summary[k.name+m].Median > 0) {
				t.Errorf("metric %s%s missing or zero: %+v", k.name, m, after.Summary[k.name+m])
			}
		}
	}
	if after.Summary["buffer_spans"].Median != 0 || !(after.Summary["segments"].Median >= 1) {
		t.Errorf("after a graceful stop the store should be sealed: %+v %+v", after.Summary["buffer_spans"], after.Summary["segments"])
	}
	if !(during.Summary["ingest_queries"].Median >= 1) || !(during.Summary["spans_per_s"].Median > 0) {
		t.Errorf("no query fired during ingest: %+v", during.Summary)
	}
	if len(rec.Targets) != 9 {
		t.Fatalf("targets = %+v", rec.Targets)
	}
	for _, tg := range rec.Targets {
		if tg.Status != "PASS" && tg.Status != "FAIL" && tg.Status != "REPORT" {
			t.Errorf("target %q has status %q", tg.Name, tg.Status)
		}
	}
	doc, err := os.ReadFile(filepath.Join(out, "llm.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| llm-after-ingest |", "| llm-during-ingest |", "Cold/warm", "| stats group_by=session, whole corpus (page of 1,000) |"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("llm.md lacks %q:\n%s", want, doc)
		}
	}
}

// TestLoadRetry429 checks the llm suite's ingest mode: 429s are retried
// until acknowledged and counted apart, so every span arrives once; other
// failures are still failures.
func TestLoadRetry429(t *testing.T) {
	f := &fakeIngest{policy: func(n int) (int, int64) {
		switch n {
		case 2, 3, 4, 9:
			return 429, 0
		case 12:
			return 500, 0
		}
		return 200, 0
	}}
	ts := httptest.NewServer(f)
	defer ts.Close()
	pl := testPayloads(t, 2000, 100, false) // 20 payloads
	res, err := Load(context.Background(), LoadOptions{Endpoint: ts.URL, Protocol: ProtoOTLPProto, Concurrency: 2, KeepAlive: true, Retry429: true}, pl)
	if err != nil {
		t.Fatal(err)
	}
	if res.Retried429 != 4 || res.Status429 != 0 || res.Errors != 1 || res.Requests != 20 {
		t.Errorf("retried %d, 429s %d, errors %d, requests %d; want 4, 0, 1, 20", res.Retried429, res.Status429, res.Errors, res.Requests)
	}
	if res.AcceptedSpans != 1900 || int64(f.spans) != 1900 {
		t.Errorf("accepted %d, server stored %d; want 1900 (one payload failed with 500)", res.AcceptedSpans, f.spans)
	}
	// A run that cannot get past 429s ends with its context, not in a loop.
	always := &fakeIngest{policy: func(int) (int, int64) { return 429, 0 }}
	ts2 := httptest.NewServer(always)
	defer ts2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, _ = Load(ctx, LoadOptions{Endpoint: ts2.URL, Protocol: ProtoOTLPProto, Concurrency: 2, KeepAlive: true, Retry429: true}, pl)
	if res.AcceptedSpans != 0 || res.Retried429 == 0 {
		t.Errorf("against a server that always answers 429: %+v", res)
	}
}

func sumSpans(groups []map[string]any) int64 {
	var n int64
	for _, g := range groups {
		n += g["spans"].(int64)
	}
	return n
}
