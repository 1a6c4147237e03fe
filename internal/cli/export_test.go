package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/export"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// exportCorpus ingests an LLM corpus (every dialect) and a canonical one
// into a real server over OTLP/HTTP and returns the spans sent.
func exportCorpus(t *testing.T, base string, start time.Time) []model.Span {
	return exportCorpusN(t, base, start, 700, 500)
}

// exportCorpusN is exportCorpus with llmSpans LLM and canonSpans canonical
// spans.
func exportCorpusN(t testing.TB, base string, start time.Time, llmSpans, canonSpans int) []model.Span {
	t.Helper()
	var all []model.Span
	for _, c := range []struct {
		name  string
		spans int
	}{{bench.CorpusLLM, llmSpans}, {bench.CorpusCanonical, canonSpans}} {
		// Generated at a fixed start and moved to start: a corpus's content
		// depends on the hour it starts at.
		fixed := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
		spans, err := bench.Generate(c.name, bench.CorpusOptions{Seed: 7, Spans: c.spans, Start: fixed, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		spans = bench.Moved(spans, start.Sub(fixed))
		for _, b := range bench.Batches(spans, 200) {
			resp, err := http.Post(base+"/v1/traces", "application/x-protobuf", bytes.NewReader(otlp.EncodeProto(b)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("ingest %s: %s", c.name, resp.Status)
			}
		}
		all = append(all, spans...)
	}
	return all
}

// apiSpans pages through GET /api/v1/spans and returns each span as the
// generic JSON the API sent, keyed by trace id/span id.
func apiSpans(t *testing.T, base string, params url.Values) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	params.Set("limit", "10000")
	for {
		resp, err := http.Get(base + "/api/v1/spans?" + params.Encode())
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		var page struct {
			Spans      []map[string]any `json:"spans"`
			NextCursor string           `json:"next_cursor"`
		}
		err = dec.Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("search %v: %s %v", params, resp.Status, err)
		}
		for _, s := range page.Spans {
			out[s["trace_id"].(string)+"/"+s["span_id"].(string)] = s
		}
		if page.NextCursor == "" {
			return out
		}
		params.Set("cursor", page.NextCursor)
	}
}

func readExport(t *testing.T, path string) []export.Row {
	t.Helper()
	rows, err := parquet.ReadFile[export.Row](path)
	if err != nil {
		t.Fatalf("read %s back: %v", path, err)
	}
	return rows
}

func runExportCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb lockedBuffer
	code = Main(context.Background(), append([]string{"export"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestExportParquetMatchesTheAPI exports a corpus through the real command
// against a real server, reads the file back with parquet-go's reader and
// compares every column of every span with what the span API returns for
// it. Small pages and row groups make the export span many of both.
func TestExportParquetMatchesTheAPI(t *testing.T) {
	base, _ := startTestServer(t)
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	sent := exportCorpus(t, base, start)
	path := filepath.Join(t.TempDir(), "spans.parquet")
	stdout, stderr, code := runExportCmd(t, "--server", base, "--since", "4h", "--out", path, "--page-spans", "97", "--row-group-spans", "128")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := fmt.Sprintf("wrote %d spans to %s", len(sent), path); !strings.Contains(stdout, want) {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	rows := readExport(t, path)
	api := apiSpans(t, base, url.Values{"since": {"all"}})
	if len(rows) != len(sent) || len(api) != len(sent) {
		t.Fatalf("%d rows exported, API has %d spans, %d sent", len(rows), len(api), len(sent))
	}
	var llmRows, parents, costs, events int
	seen := map[string]bool{}
	for i := range rows {
		r := &rows[i]
		key := r.TraceID + "/" + r.SpanID
		if seen[key] {
			t.Fatalf("span %s exported twice", key)
		}
		seen[key] = true
		s, ok := api[key]
		if !ok {
			t.Fatalf("exported span %s is not in the API", key)
		}
		compareRow(t, key, r, s)
		if r.LLMModel != nil {
			llmRows++
		}
		if r.ParentSpanID != nil {
			parents++
		}
		if r.LLMCostUSD != nil {
			costs++
		}
		if r.Events != "[]" {
			events++
		}
	}
	// The corpus exercises what is compared: not a comparison of NULLs.
	if llmRows < 100 || parents < 100 || costs < 50 || events < 10 {
		t.Errorf("corpus too thin: %d LLM rows, %d with parents, %d with cost, %d with events", llmRows, parents, costs, events)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(pf.RowGroups()), (len(sent)+127)/128; got != want {
		t.Errorf("%d row groups, want %d of at most 128 spans", got, want)
	}
	if v, _ := pf.Lookup("rastro.export.schema"); v != export.SchemaVersion {
		t.Errorf("schema version metadata %q", v)
	}
	if v, _ := pf.Lookup("rastro.export.query"); !strings.Contains(v, "since=") || !strings.Contains(v, "until=") {
		t.Errorf("query metadata %q", v)
	}
	// The column types a reader sees: timestamps in nanoseconds, UTC; maps;
	// JSON.
	for col, want := range map[string]string{"start_time": "TIMESTAMP(isAdjustedToUTC=true,unit=NANOS)", "events": "JSON"} {
		leaf, ok := pf.Schema().Lookup(col)
		if !ok || leaf.Node.Type().LogicalType() == nil || leaf.Node.Type().LogicalType().String() != want {
			t.Errorf("column %s: logical type %v, want %s", col, leaf.Node.Type().LogicalType(), want)
		}
	}
	for _, f := range pf.Schema().Fields() {
		if n := f.Name(); (n == "attributes" || n == "resource_attributes") && (f.Type().LogicalType() == nil || f.Type().LogicalType().String() != "MAP") {
			t.Errorf("%s is not a MAP: %v", n, f.Type().LogicalType())
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("export left files behind: %v", ents)
	}
}

// compareRow checks every column of r against the API's span JSON s.
func compareRow(t *testing.T, key string, r *export.Row, s map[string]any) {
	t.Helper()
	str := func(k string) *string {
		if v, ok := s[k]; ok {
			x := fmt.Sprint(v)
			return &x
		}
		return nil
	}
	num := func(v any) int64 {
		n, err := v.(json.Number).Int64()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return n
	}
	check := func(col string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("span %s column %s: got %v, want %v", key, col, deref(got), deref(want))
		}
	}
	check("name", r.Name, s["name"])
	check("service", r.Service, s["service"])
	check("kind", r.Kind, fmt.Sprint(s["kind"]))
	check("status_code", r.StatusCode, fmt.Sprint(s["status"]))
	check("parent_span_id", r.ParentSpanID, str("parent_span_id"))
	check("status_message", r.StatusMessage, str("status_message"))
	check("trace_state", r.TraceState, str("trace_state"))
	check("start_time", r.StartTime, num(s["start_time_unix_nano"]))
	check("end_time", r.EndTime, num(s["end_time_unix_nano"]))
	check("duration_ns", r.DurationNs, num(s["duration_ns"]))
	var scopeName, scopeVersion *string
	if sc, ok := s["scope"].(map[string]any); ok {
		for k, dst := range map[string]**string{"name": &scopeName, "version": &scopeVersion} {
			if v, ok := sc[k]; ok {
				x := v.(string)
				*dst = &x
			}
		}
	}
	check("scope_name", r.ScopeName, scopeName)
	check("scope_version", r.ScopeVersion, scopeVersion)
	compareMap(t, key, "attributes", r.Attributes, s["attributes"].(map[string]any))
	compareMap(t, key, "resource_attributes", r.ResourceAttributes, s["resource"].(map[string]any))
	check("events", decodeJSON(t, r.Events), s["events"])
	check("links", decodeJSON(t, r.Links), s["links"])

	l, _ := s["llm"].(map[string]any)
	lstr := func(k string) *string {
		if v, ok := l[k]; ok {
			x := v.(string)
			return &x
		}
		return nil
	}
	lint := func(k string) *int64 {
		if v, ok := l[k]; ok {
			x := num(v)
			return &x
		}
		return nil
	}
	for col, p := range map[string][2]*string{
		"llm_provider": {r.LLMProvider, lstr("provider")}, "llm_model": {r.LLMModel, lstr("model")},
		"llm_request_model": {r.LLMRequestModel, lstr("request_model")}, "llm_response_model": {r.LLMResponseModel, lstr("response_model")},
		"llm_operation": {r.LLMOperation, lstr("operation")}, "llm_session_id": {r.LLMSessionID, lstr("session_id")},
		"llm_user_id": {r.LLMUserID, lstr("user_id")}, "llm_agent": {r.LLMAgent, lstr("agent")}, "llm_tool": {r.LLMTool, lstr("tool")},
		"llm_cost_source": {r.LLMCostSource, lstr("cost_source")},
	} {
		check(col, p[0], p[1])
	}
	for col, p := range map[string][2]*int64{
		"llm_input_tokens": {r.LLMInputTokens, lint("input_tokens")}, "llm_output_tokens": {r.LLMOutputTokens, lint("output_tokens")},
		"llm_cache_read_tokens": {r.LLMCacheReadTokens, lint("cache_read_tokens")}, "llm_cache_creation_tokens": {r.LLMCacheCreationTokens, lint("cache_creation_tokens")},
		"llm_reasoning_tokens": {r.LLMReasoningTokens, lint("reasoning_tokens")}, "llm_time_to_first_token_ns": {r.LLMTimeToFirstTokenNs, lint("time_to_first_token_ns")},
	} {
		check(col, p[0], p[1])
	}
	var counted *bool
	if v, ok := l["counted"]; ok {
		x := v.(bool)
		counted = &x
	}
	check("llm_counted", r.LLMCounted, counted)
	var cost *float64
	if v, ok := l["cost_usd"]; ok {
		x, err := v.(json.Number).Float64()
		if err != nil {
			t.Fatal(err)
		}
		cost = &x
	}
	check("llm_cost_usd", r.LLMCostUSD, cost)
}

// compareMap: a string value is itself in the MAP column; any other value
// is its API JSON, which decodes to the same value.
func compareMap(t *testing.T, key, col string, got map[string]string, want map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("span %s column %s: %d keys, want %d: %v vs %v", key, col, len(got), len(want), got, want)
		return
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("span %s column %s: key %q missing", key, col, k)
			continue
		}
		if ws, isStr := w.(string); isStr {
			if g != ws {
				t.Errorf("span %s column %s[%q] = %q, want %q", key, col, k, g, ws)
			}
		} else if dg := decodeJSON(t, g); !reflect.DeepEqual(dg, w) {
			t.Errorf("span %s column %s[%q] = %s, want %v", key, col, k, g, w)
		}
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("column value %q is not JSON: %v", s, err)
	}
	return v
}

func deref(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "NULL"
		}
		return rv.Elem().Interface()
	}
	return v
}

// TestExportKeepsOnlyMatchingSpans: a TraceQL filter, a flag filter and a
// window export exactly the spans of the corpus that match them (counted
// by brute force over the spans sent).
func TestExportKeepsOnlyMatchingSpans(t *testing.T) {
	base, _ := startTestServer(t)
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	sent := exportCorpus(t, base, start)
	from, to := start.Add(15*time.Minute), start.Add(40*time.Minute)
	ids := func(rows []export.Row) map[string]bool {
		m := map[string]bool{}
		for _, r := range rows {
			m[r.TraceID+"/"+r.SpanID] = true
		}
		return m
	}
	want := func(keep func(*model.Span) bool) map[string]bool {
		m := map[string]bool{}
		for i := range sent {
			s := &sent[i]
			at := time.Unix(0, int64(s.StartTimeUnixNano))
			if !at.Before(from) && at.Before(to) && keep(s) {
				m[s.TraceID.String()+"/"+s.SpanID.String()] = true
			}
		}
		return m
	}
	service := sent[len(sent)-1].Service
	for _, c := range []struct {
		name string
		args []string
		keep func(*model.Span) bool
	}{
		{"window", nil, func(*model.Span) bool { return true }},
		{"traceql", []string{"{ status = error }"}, func(s *model.Span) bool { return s.StatusCode == model.StatusError }},
		{"service flag", []string{"--service", service}, func(s *model.Span) bool { return s.Service == service }},
	} {
		path := filepath.Join(t.TempDir(), "out.parquet")
		args := append([]string{"--server", base, "--since", from.Format(time.RFC3339), "--until", to.Format(time.RFC3339), "--out", path}, c.args...)
		if _, stderr, code := runExportCmd(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		got, w := ids(readExport(t, path)), want(c.keep)
		if len(w) == 0 || len(w) == len(sent) {
			t.Fatalf("%s: the filter keeps %d of %d spans: not a test of filtering", c.name, len(w), len(sent))
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: exported %d spans, %d match", c.name, len(got), len(w))
		}
	}
}

// TestExportResumesFromItsCursor: --max-spans stops early with a valid file
// and a cursor; a second export from that cursor writes the rest, and the
// two files hold every span exactly once.
func TestExportResumesFromItsCursor(t *testing.T) {
	base, _ := startTestServer(t)
	sent := exportCorpus(t, base, time.Now().Add(-3*time.Hour))
	dir := t.TempDir()
	first, rest := filepath.Join(dir, "part-1.parquet"), filepath.Join(dir, "part-2.parquet")
	stdout, stderr, code := runExportCmd(t, "--server", base, "--since", "6h", "--out", first, "--max-spans", "450", "--page-spans", "200", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum exportSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	if sum.Spans != 450 || sum.Complete || sum.NextCursor == "" {
		t.Fatalf("summary after --max-spans 450: %+v", sum)
	}
	stdout, stderr, code = runExportCmd(t, "--server", base, "--since", sum.Since, "--until", sum.Until, "--cursor", sum.NextCursor, "--out", rest)
	if code != 0 || strings.Contains(stdout, "more spans match") {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	seen := map[string]int{}
	for _, p := range []string{first, rest} {
		for _, r := range readExport(t, p) {
			seen[r.TraceID+"/"+r.SpanID]++
		}
	}
	for i := range sent {
		if k := sent[i].TraceID.String() + "/" + sent[i].SpanID.String(); seen[k] != 1 {
			t.Errorf("span %s is in the two files %d times, want once", k, seen[k])
		}
	}
	if len(seen) != len(sent) {
		t.Errorf("%d spans in the two files, %d sent", len(seen), len(sent))
	}
	// Without --json the early stop says how to go on.
	stdout, _, _ = runExportCmd(t, "--server", base, "--since", "6h", "--out", filepath.Join(dir, "x.parquet"), "--max-spans", "10", "{ duration >= 0ms }")
	if !strings.Contains(stdout, "more spans match; to export them: rastro export --server "+base) || !strings.Contains(stdout, "'{ duration >= 0ms }'") {
		t.Errorf("early stop output: %q", stdout)
	}
}

// TestExportRefusesBadInput: bad flags are usage errors naming the flag
// (exit 2) and a query the server refuses fails (exit 1); neither leaves a
// file, and an existing file is never replaced without --force.
func TestExportRefusesBadInput(t *testing.T) {
	base, _ := startTestServer(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "kept.parquet")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "new.parquet")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--server", base}, 2, "--out FILE is required"},
		{[]string{"--server", base, "--out", out, "--format", "csv"}, 2, `--format "csv": the only format is parquet`},
		{[]string{"--server", base, "--out", out, "--page-spans", "0"}, 2, "--page-spans 0: want 1..10000"},
		{[]string{"--server", base, "--out", out, "--row-group-spans", "-3"}, 2, "--row-group-spans -3"},
		{[]string{"--server", base, "--out", out, "--max-spans", "-1"}, 2, "--max-spans -1"},
		{[]string{"--server", base, "--out", out, "--since", "yesterday"}, 2, `--since: invalid time "yesterday"`},
		{[]string{"--server", base, "--out", out, "--since", "1h", "--until", "2h"}, 2, "is not before --until"},
		{[]string{"--server", base, "--out", existing}, 2, "exists: choose another file or give --force"},
		{[]string{"--server", base, "--out", filepath.Join(dir, "no", "such", "x.parquet")}, 2, "does not exist"},
		{[]string{"--server", base, "--out", out, "{ span.a = bar }"}, 1, "q: position"},
		{[]string{"--server", base, "--out", out, "--cursor", "abc"}, 1, `cursor "abc" is not a cursor`},
		{[]string{"--server", "http://127.0.0.1:1", "--out", out}, 1, "cannot reach the server"},
	} {
		_, stderr, code := runExportCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) || !strings.HasPrefix(stderr, "rastro export: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("existing file changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("failed exports left files: %v", ents)
	}
	// With --force it is replaced; an empty window is a valid empty file.
	if _, stderr, code := runExportCmd(t, "--server", base, "--out", existing, "--force"); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	if rows := readExport(t, existing); len(rows) != 0 {
		t.Errorf("empty store exported %d rows", len(rows))
	}
}

// TestExportReadsOneProject: --project exports that project's spans only.
func TestExportReadsOneProject(t *testing.T) {
	base, _ := startTestServer(t)
	start := time.Now().Add(-time.Hour)
	spans, err := bench.Generate(bench.CorpusCanonical, bench.CorpusOptions{Seed: 11, Spans: 300, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	for i, project := range []string{"team-a", "team-b"} {
		part := spans[i*150 : (i+1)*150]
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/traces", bytes.NewReader(otlp.EncodeProto(part)))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Scope-OrgID", project)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("ingest %s: %s", project, resp.Status)
		}
	}
	path := filepath.Join(t.TempDir(), "a.parquet")
	if _, stderr, code := runExportCmd(t, "--server", base, "--project", "team-a", "--since", "2h", "--out", path); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := map[string]bool{}
	for _, s := range spans[:150] {
		want[s.TraceID.String()+"/"+s.SpanID.String()] = true
	}
	rows := readExport(t, path)
	for _, r := range rows {
		if !want[r.TraceID+"/"+r.SpanID] {
			t.Errorf("span %s/%s of another project exported", r.TraceID, r.SpanID)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("%d rows, want team-a's %d spans", len(rows), len(want))
	}
}
