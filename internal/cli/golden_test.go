package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goldenCorpus is a small fixed store: a failing checkout trace (two
// services), and an LLM session of two traces an hour apart: an agent span
// (no model), two chat calls and a tool call.
const goldenCorpus = `{"resourceSpans":[
 {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"checkout"}}]},"scopeSpans":[{"spans":[
  {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"POST /checkout","kind":2,
   "startTimeUnixNano":"1764496800000000000","endTimeUnixNano":"1764496800250000000",
   "attributes":[{"key":"http.response.status_code","value":{"intValue":"502"}}],
   "status":{"code":2,"message":"payment provider timed out"}}]}]},
 {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"payments"}}]},"scopeSpans":[{"spans":[
  {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b175","parentSpanId":"eee19b7ec3c1b174","name":"charge","kind":3,
   "startTimeUnixNano":"1764496800010000000","endTimeUnixNano":"1764496800210000000",
   "status":{"code":2,"message":"timeout after 200ms"}}]}]},
 {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"support-bot"}}]},"scopeSpans":[{"spans":[
  {"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"invoke_agent support","kind":1,
   "startTimeUnixNano":"1764498600000000000","endTimeUnixNano":"1764498602000000000",
   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}},{"key":"gen_ai.agent.name","value":{"stringValue":"support"}},
    {"key":"session.id","value":{"stringValue":"conv-1"}},{"key":"user.id","value":{"stringValue":"u-1"}}]},
  {"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203332","parentSpanId":"b7ad6b7169203331","name":"chat gpt-4o","kind":3,
   "startTimeUnixNano":"1764498600100000000","endTimeUnixNano":"1764498600900000000",
   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.system","value":{"stringValue":"openai"}},
    {"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"100"}},
    {"key":"gen_ai.usage.output_tokens","value":{"intValue":"20"}},{"key":"session.id","value":{"stringValue":"conv-1"}},{"key":"user.id","value":{"stringValue":"u-1"}},
    {"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"Where is my parcel?\"}]}]"}},
    {"key":"gen_ai.output.messages","value":{"stringValue":"[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"It left Lisbon today.\"}]}]"}}]},
  {"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203333","parentSpanId":"b7ad6b7169203331","name":"execute_tool track_parcel","kind":1,
   "startTimeUnixNano":"1764498601000000000","endTimeUnixNano":"1764498601050000000",
   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.name","value":{"stringValue":"track_parcel"}},
    {"key":"session.id","value":{"stringValue":"conv-1"}}]},
  {"traceId":"0af7651916cd43dd8448eb211c80319d","spanId":"b7ad6b7169203334","name":"chat gpt-4o","kind":3,
   "startTimeUnixNano":"1764502200000000000","endTimeUnixNano":"1764502201000000000",
   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.system","value":{"stringValue":"openai"}},
    {"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"200"}},
    {"key":"gen_ai.usage.output_tokens","value":{"intValue":"40"}},{"key":"session.id","value":{"stringValue":"conv-1"}},{"key":"user.id","value":{"stringValue":"u-1"}},
    {"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"Where is my parcel?\"}]},{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"It left Lisbon today.\"}]},{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"When will it arrive?\"}]}]"}},
    {"key":"gen_ai.output.messages","value":{"stringValue":"[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"Tomorrow before noon.\"}]}]"}}]}
 ]}]}
]}`

// goldenLogs are the checkout trace's log records and one without a trace.
const goldenLogs = `{"resourceLogs":[
 {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"checkout"}}]},"scopeLogs":[{"logRecords":[
  {"timeUnixNano":"1764496800005000000","severityNumber":9,"severityText":"INFO","body":{"stringValue":"charging card for order 42"},
   "traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"},
  {"timeUnixNano":"1764496800240000000","severityNumber":17,"severityText":"ERROR","body":{"stringValue":"payment provider timed out after 200ms; giving up"},
   "traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"}]}]},
 {"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"payments"}}]},"scopeLogs":[{"logRecords":[
  {"timeUnixNano":"1764496900000000000","severityNumber":13,"body":{"kvlistValue":{"values":[{"key":"msg","value":{"stringValue":"provider latency high"}},{"key":"p99_ms","value":{"intValue":"950"}}]}}}]}]}
]}`

// goldenWindow is the corpus's day (2025-11-30, UTC).
var goldenWindow = []string{"--since", "2025-11-30T00:00:00Z", "--until", "2025-12-01T00:00:00Z"}

// TestGoldenTables runs each client command against a real server holding
// goldenCorpus and compares its output with testdata/golden/NAME.txt, times
// in a fixed zone (UTC+2, and --utc). RASTRO_UPDATE_GOLDEN=1 rewrites the
// files; review the diff.
func TestGoldenTables(t *testing.T) {
	base, _ := startTestServer(t)
	resp, err := http.Post(base+"/v1/traces", "application/json", strings.NewReader(goldenCorpus))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %s", resp.Status)
	}
	resp, err = http.Post(base+"/v1/logs", "application/json", strings.NewReader(goldenLogs))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest logs: %s", resp.Status)
	}
	win := func(args ...string) []string { return append(args, goldenWindow...) }
	for _, c := range []struct {
		name string
		args []string
	}{
		{"search", win("search")},
		{"search-utc", win("search", "--utc")},
		{"search-traces", win("search", "--traces")},
		{"search-errors", win("search", "{ status = error }")},
		{"trace", []string{"trace", "5b8efff798038103d269b633813fc60c"}},
		{"services", win("services")},
		{"services-operations", win("services", "checkout")},
		{"red", win("red")},
		{"errors", win("errors")},
		{"llm-stats-model", win("llm", "stats", "--by", "model")},
		{"llm-stats-hour", win("llm", "stats", "--by", "hour")},
		{"llm-stats-day-model", win("llm", "stats", "--by", "day,model")},
		{"sessions", win("sessions")},
		{"session", []string{"sessions", "conv-1"}},
		{"metrics", win("metrics", "{ } | count_over_time() by (resource.service.name)", "--step", "1h")},
		{"logs", win("logs")},
		{"logs-words-severity", win("logs", "--severity", "warn", "payment", "provider")},
		{"logs-trace", []string{"logs", "--trace", "5b8efff798038103d269b633813fc60c"}},
		{"empty-logs-default-window", []string{"logs"}},
		// Empty answers and their window hints.
		{"empty-default-window", []string{"search"}},
		{"empty-services-default-window", []string{"services", "checkout"}},
		{"empty-bounded-window", []string{"search", "--since", "2025-12-01T00:00:00Z", "--until", "2025-12-02T00:00:00Z"}},
		{"empty-sessions-1h", []string{"sessions", "--since", "1h"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb strings.Builder
			env := &Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false },
				Zone: time.FixedZone("UTC+2", 2*3600)}
			if code := run(context.Background(), env, append(c.args, "--server", base)); code != 0 {
				t.Fatalf("rastro %s: exit %d: %s", strings.Join(c.args, " "), code, errb.String())
			}
			got := strings.ReplaceAll(out.String(), base, "http://SERVER")
			checkGolden(t, c.name, "rastro "+strings.Join(c.args, " ")+"\n"+got)
		})
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if os.Getenv("RASTRO_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (RASTRO_UPDATE_GOLDEN=1 go test ./internal/cli -run Golden writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (RASTRO_UPDATE_GOLDEN=1 rewrites it):\ngot:\n%s\nwant:\n%s", name, path, got, want)
	}
}

// TestErrorsAreNotPrefixedTwice: an error that names its command (the
// engine's "fsck: ...") is printed once under "rastro fsck: ".
func TestErrorsAreNotPrefixedTwice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, nil, 0o644)
	var out, errb strings.Builder
	code := Main(context.Background(), []string{"fsck", file}, &out, &errb)
	if want := "rastro fsck: " + file + " is not a directory\n"; code != 1 || errb.String() != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, errb.String(), want)
	}
}
