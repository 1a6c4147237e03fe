package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/rastro-dev/rastro/internal/logstore"
)

// POST /api/v1/admin/compact merges the log store's segments too, reported
// apart from the spans'; the records are unchanged.
func TestCompactOverHTTPMergesLogs(t *testing.T) {
	ts := startServer(t, Options{})
	ls, err := logstore.Open(logstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Close() })
	ts.srv.SetLogs(ls)
	for i := range 3 {
		rec := fmt.Sprintf(`[{"time": "2026-12-02T10:00:0%dZ", "severity": "warn", "body": "merged entry %d"}]`, i, i)
		if code, body := ts.post("/v1/logs", "application/json", []byte(rec)); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
		if err := ls.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	code, body, _ := ts.do(http.MethodPost, "/api/v1/admin/compact", "")
	var r struct {
		LogMerges   int `json:"log_merges"`
		LogSegments int `json:"log_segments_after"`
	}
	if code != 200 || json.Unmarshal(body, &r) != nil || r.LogMerges != 1 || r.LogSegments != 1 {
		t.Fatalf("compact: %d %s", code, body)
	}
	var lr struct {
		Logs []json.RawMessage `json:"logs"`
	}
	if ts.get("/api/v1/logs?since=all&content=merged", &lr); len(lr.Logs) != 3 {
		t.Fatalf("after compaction: %d records, want 3", len(lr.Logs))
	}
}
