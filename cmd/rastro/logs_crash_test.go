package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
)

// TestCrashKeepsEveryAcknowledgedLogRecord SIGKILLs the server at random
// moments while clients send OTLP logs and seals run (small --seal-bytes):
// after each restart every acknowledged record is there exactly once, and no
// record is there twice.
func TestCrashKeepsEveryAcknowledgedLogRecord(t *testing.T) {
	iterations := crashIterations(5)
	dir := t.TempDir()
	var ackedMu sync.Mutex
	acked := map[string]bool{}
	verify := func(c *child) {
		t.Helper()
		seen := map[string]int{}
		cursor := ""
		for {
			u := c.base + "/api/v1/logs?limit=10000"
			if cursor != "" {
				u += "&cursor=" + url.QueryEscape(cursor)
			}
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			var page struct {
				Logs []struct {
					Body string `json:"body"`
				} `json:"logs"`
				Next string `json:"next_cursor"`
			}
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET /api/v1/logs: %d %v", resp.StatusCode, err)
			}
			for _, l := range page.Logs {
				seen[l.Body]++
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		for body, n := range seen {
			if n != 1 {
				t.Fatalf("record %q is stored %d times", body, n)
			}
		}
		ackedMu.Lock()
		defer ackedMu.Unlock()
		for body := range acked {
			if seen[body] != 1 {
				t.Fatalf("acknowledged record %q is missing after the crash", body)
			}
		}
	}
	crashRounds(t, dir, iterations, 2, []string{"--seal-bytes", "256KiB"}, verify,
		func(ctx context.Context, client *http.Client, c *child, it, w, n int) (bool, error) {
			recs := logBatch(it, w, n)
			ok, err := postOTLP(ctx, client, c, "/v1/logs", "", otlp.EncodeLogsProto(recs))
			if ok {
				ackedMu.Lock()
				for i := range recs {
					acked[recs[i].Body.Str] = true
				}
				ackedMu.Unlock()
			}
			return ok, err
		}, "a sealed log segment in the manifest", func(*child) bool { return publishedFiles(dir+"/logs", "segments") > 0 })
	c := startChild(t, dir)
	verify(c)
	if len(acked) == 0 {
		t.Fatal("no batch was ever acknowledged")
	}
	segments := publishedFiles(dir+"/logs", "segments")
	if segments == 0 {
		t.Fatal("no log segment was sealed during the crash runs")
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	t.Logf("%d iterations, %d acknowledged records verified, %d segments", iterations, len(acked), segments)
}

// logBatch builds 50 log records whose bodies are unique to (iteration,
// worker, n).
func logBatch(it, worker, n int) []model.LogRecord {
	res := &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue("crash")}}}
	recs := make([]model.LogRecord, 50)
	for i := range recs {
		recs[i] = model.LogRecord{TimeUnixNano: uint64(time.Now().UnixNano()), SeverityNumber: 9,
			Body: model.StringValue(fmt.Sprintf("crashlog it%d w%d n%d i%d", it, worker, n, i)), Resource: res, Scope: &model.Scope{}}
	}
	return recs
}
