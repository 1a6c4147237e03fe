package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// sseEvent is one server-sent event; comment lines (": ...") come as
// events named ":" with the comment as data.
type sseEvent struct{ name, data string }

// openTail starts GET /api/v1/tail?params and returns its events, once the
// server has said the tail is open.
func openTail(t *testing.T, ts *testServer, params url.Values, hdr ...string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.base+"/api/v1/tail?"+params.Encode(), nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("tail: %s %q: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	events := make(chan sseEvent, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev = sseEvent{":", strings.TrimSpace(line[1:])}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[len("data: "):]
			}
		}
	}()
	if ev := <-events; ev != (sseEvent{":", "tail open"}) {
		t.Fatalf("first event %+v, want the open comment", ev)
	}
	return events, resp
}

// nextSpans returns the span names of the next "spans" event.
func nextSpans(t *testing.T, events <-chan sseEvent) []string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("tail stream ended")
			}
			if ev.name != "spans" {
				continue
			}
			var b struct {
				Spans []struct {
					Name    string `json:"name"`
					Service string `json:"service"`
				} `json:"spans"`
			}
			if err := json.Unmarshal([]byte(ev.data), &b); err != nil {
				t.Fatalf("spans event %q: %v", ev.data, err)
			}
			var names []string
			for _, s := range b.Spans {
				names = append(names, s.Service+"/"+s.Name)
			}
			return names
		case <-timeout:
			t.Fatal("no spans event within 10 s")
		}
	}
}

// TestTailStreamsWhatSDKsSend: spans exported by the OTel SDK reach an open
// tail as they are acknowledged, filtered by TraceQL and project.
func TestTailStreamsWhatSDKsSend(t *testing.T) {
	ts := startServer(t, Options{})
	events, _ := openTail(t, ts, url.Values{"q": {`{ status = error || span.llm = true }`}})
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(ts.srv.HTTPAddr()), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "agent"))))
	defer tp.Shutdown(ctx)
	tr := tp.Tracer("tail-test")
	_, ok := tr.Start(ctx, "fine")
	ok.End() // matches nothing
	_, bad := tr.Start(ctx, "failed")
	bad.SetStatus(codes.Error, "boom")
	bad.End()
	if got := nextSpans(t, events); strings.Join(got, ",") != "agent/failed" {
		t.Fatalf("first batch %v, want [agent/failed]", got)
	}
	// Another project's spans do not reach this tail; the next matching
	// span of this one does, and alone.
	if code, b := ts.post("/v1/spans", "application/json", []byte(`[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331","name":"elsewhere","service":"other","start_time_unix_nano":1,"end_time_unix_nano":2,"status":"error"}]`), "X-Scope-OrgID", "team-b"); code != 200 {
		t.Fatalf("post to team-b: %d %s", code, b)
	}
	_, call := tr.Start(ctx, "chat")
	call.SetAttributes(attribute.Bool("llm", true))
	call.End()
	if got := nextSpans(t, events); strings.Join(got, ",") != "agent/chat" {
		t.Fatalf("second batch %v, want [agent/chat]", got)
	}
}

// TestTailRefusesBadParametersAndEndsOnShutdown: a malformed filter is a 400
// naming the parameter; a server shutting down ends open streams instead of
// waiting for their clients.
func TestTailRefusesBadParametersAndEndsOnShutdown(t *testing.T) {
	ts := startServer(t, Options{})
	for q, want := range map[string]string{
		"q=" + url.QueryEscape("{ status = "): "q: ",
		"limit=5":                             "limit: a tail takes no limit",
		"min_duration=abc":                    "min_duration: invalid duration",
		"max_rate=0":                          "max_rate: \"0\" is not a whole number from 1",
	} {
		var e struct{ Error string }
		if code := ts.get("/api/v1/tail?"+q, &e); code != 400 || !strings.Contains(e.Error, want) {
			t.Errorf("GET /api/v1/tail?%s: %d %q, want 400 containing %q", q, code, e.Error, want)
		}
	}
	events, _ := openTail(t, ts, url.Values{}, "X-Scope-OrgID", "p1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open tail: %v", err)
	}
	for range events { // drained: the stream ended
	}
}

// TestTailClientThatStopsReadingDoesNotHoldShutdown: a tail client that
// reads nothing leaves its handler blocked writing; shutdown still ends it
// (before, Shutdown waited out its whole timeout).
func TestTailClientThatStopsReadingDoesNotHoldShutdown(t *testing.T) {
	ts := startServer(t, Options{})
	req, _ := http.NewRequest(http.MethodGet, ts.base+"/api/v1/tail", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read
	big := strings.Repeat("x", 256<<10)
	for i := range 64 { // 16 MiB of events: more than the socket buffers hold
		body := fmt.Sprintf(`[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"%016x","name":"n","service":"s","start_time_unix_nano":1764460800000000000,"end_time_unix_nano":1764460800250000000,"attributes":{"p":"%s"}}]`, i+1, big)
		if code, b := ts.post("/v1/spans", "application/json", []byte(body)); code != 200 {
			t.Fatalf("post: %d %s", code, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a tail client that reads nothing: %v", err)
	}
}

// TestTailMaxRate: with max_rate=N a client is sent at most N spans of a
// burst (a second's worth), and a "limited" event counts the rest, so a
// browser that cannot render more does not receive more.
func TestTailMaxRate(t *testing.T) {
	ts := startServer(t, Options{})
	events, _ := openTail(t, ts, url.Values{"max_rate": {"5"}})
	var spans []string
	for i := range 20 {
		spans = append(spans, fmt.Sprintf(`{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b71692033%02x","name":"s%d","service":"svc","start_time_unix_nano":1,"end_time_unix_nano":2}`, i+1, i))
	}
	if code, b := ts.post("/v1/spans", "application/json", []byte("["+strings.Join(spans, ",")+"]")); code != 200 {
		t.Fatalf("ingest: %d %s", code, b)
	}
	sent, limited := 0, 0
	timeout := time.After(10 * time.Second)
	for sent+limited < 20 {
		select {
		case ev := <-events:
			switch ev.name {
			case "spans":
				var b struct{ Spans []json.RawMessage }
				json.Unmarshal([]byte(ev.data), &b)
				sent += len(b.Spans)
			case "limited":
				var b struct{ Limited int }
				json.Unmarshal([]byte(ev.data), &b)
				limited += b.Limited
			}
		case <-timeout:
			t.Fatalf("after 10 s: %d spans sent, %d limited, want 20 in all", sent, limited)
		}
	}
	if sent != 5 || limited != 15 {
		t.Fatalf("a burst of 20 at max_rate=5: %d sent, %d limited; want 5 and 15", sent, limited)
	}
}

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := tokenBucket{rate: 10, tokens: 10, last: t0}
	if n := b.take(25, t0); n != 10 {
		t.Fatalf("burst: %d pass, want 10", n)
	}
	if n := b.take(25, t0.Add(500*time.Millisecond)); n != 5 {
		t.Fatalf("half a second later: %d pass, want 5", n)
	}
	if n := b.take(3, t0.Add(time.Hour)); n != 3 {
		t.Fatalf("an hour later, 3 of 3: %d pass", n)
	}
	if n := b.take(25, t0.Add(time.Hour)); n != 7 {
		t.Fatalf("the bucket holds one second at most: %d pass, want 7", n)
	}
}
