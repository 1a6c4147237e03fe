package server

import (
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	zipkinmodel "github.com/openzipkin/zipkin-go/model"
	"github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	"github.com/openzipkin/zipkin-go/reporter"
	reporterhttp "github.com/openzipkin/zipkin-go/reporter/http"

	"github.com/rastro-dev/rastro/internal/model"
)

// zipkinTrace is a client span and the server span that shares its id,
// with endpoints, tags, an error and an annotation.
func zipkinTrace(high uint64) []zipkinmodel.SpanModel {
	now := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	tid := zipkinmodel.TraceID{High: high, Low: 0xabcdef}
	root := zipkinmodel.ID(0x100)
	call := zipkinmodel.ID(0x200)
	return []zipkinmodel.SpanModel{
		{SpanContext: zipkinmodel.SpanContext{TraceID: tid, ID: root}, Name: "get /orders", Kind: zipkinmodel.Server,
			Timestamp: now, Duration: 80 * time.Millisecond,
			LocalEndpoint: &zipkinmodel.Endpoint{ServiceName: "frontend", IPv4: net.ParseIP("10.0.0.1"), Port: 8080},
			Tags:          map[string]string{"http.method": "GET", "http.path": "/orders"}},
		{SpanContext: zipkinmodel.SpanContext{TraceID: tid, ID: call, ParentID: &root}, Name: "get /stock", Kind: zipkinmodel.Client,
			Timestamp: now.Add(5 * time.Millisecond), Duration: 50 * time.Millisecond,
			LocalEndpoint:  &zipkinmodel.Endpoint{ServiceName: "frontend"},
			RemoteEndpoint: &zipkinmodel.Endpoint{ServiceName: "stock", IPv4: net.ParseIP("10.0.0.2"), Port: 9000},
			Annotations:    []zipkinmodel.Annotation{{Timestamp: now.Add(6 * time.Millisecond), Value: "wire send"}}},
		{SpanContext: zipkinmodel.SpanContext{TraceID: tid, ID: call, ParentID: &root}, Name: "get /stock", Kind: zipkinmodel.Server,
			Shared: true, Timestamp: now.Add(10 * time.Millisecond), Duration: 40 * time.Millisecond,
			LocalEndpoint: &zipkinmodel.Endpoint{ServiceName: "stock"},
			Tags:          map[string]string{"error": "out of stock", "otel.library.name": "brave"}},
		// A child of the server side, in the stock service: its parent id is
		// the shared one.
		{SpanContext: zipkinmodel.SpanContext{TraceID: tid, ID: 0x300, ParentID: &call}, Name: "select stock",
			Timestamp: now.Add(12 * time.Millisecond), Duration: 20 * time.Millisecond,
			LocalEndpoint: &zipkinmodel.Endpoint{ServiceName: "stock"}},
	}
}

// TestZipkinIngestFromZipkinGo sends spans with zipkin-go's HTTP reporter,
// in JSON and in protobuf, and finds them through the query API.
func TestZipkinIngestFromZipkinGo(t *testing.T) {
	ts := startServer(t, Options{})
	for _, c := range []struct {
		name string
		high uint64
		opts []reporterhttp.ReporterOption
	}{
		{"json", 1, nil},
		{"protobuf", 2, []reporterhttp.ReporterOption{reporterhttp.Serializer(zipkin_proto3.SpanSerializer{})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rep reporter.Reporter = reporterhttp.NewReporter(ts.base+"/api/v2/spans", c.opts...)
			spans := zipkinTrace(c.high)
			for _, s := range spans {
				rep.Send(s)
			}
			if err := rep.Close(); err != nil { // flushes: returns once sent and answered
				t.Fatal(err)
			}
			id := model.TraceID{0, 0, 0, 0, 0, 0, 0, byte(c.high), 0, 0, 0, 0, 0, 0xab, 0xcd, 0xef}
			var tr traceResp
			if code := ts.get("/api/v1/traces/"+id.String(), &tr); code != 200 || len(tr.Spans) != 4 {
				t.Fatalf("trace: %d, %d spans (the shared server span must not replace the client span)", code, len(tr.Spans))
			}
			by := map[string]map[string]any{}
			for _, s := range tr.Spans {
				by[s["service"].(string)+" "+s["kind"].(string)] = s
			}
			client, server := by["frontend client"], by["stock server"]
			if client == nil || server == nil || by["frontend server"] == nil {
				t.Fatalf("spans by service and kind: %v", by)
			}
			if server["parent_span_id"] != client["span_id"] || server["span_id"] == client["span_id"] {
				t.Fatalf("shared span: server %v/%v, client %v", server["span_id"], server["parent_span_id"], client["span_id"])
			}
			if child := by["stock unspecified"]; child == nil || child["parent_span_id"] != server["span_id"] {
				t.Fatalf("the server side's child is not under the server span: %v", child)
			}
			if server["status"] != "error" || server["status_message"] != "out of stock" {
				t.Fatalf("error tag: %v %v", server["status"], server["status_message"])
			}
			attrs := client["attributes"].(map[string]any)
			if attrs["peer.service"] != "stock" || attrs["net.peer.ip"] != "10.0.0.2" || attrs["net.peer.port"] != json.Number("9000") {
				t.Fatalf("client attributes: %v", attrs)
			}
			if ev := client["events"].([]any); len(ev) != 1 || ev[0].(map[string]any)["name"] != "wire send" {
				t.Fatalf("annotations: %v", client["events"])
			}
			if d := client["duration_ns"]; d != json.Number("50000000") {
				t.Fatalf("client duration %v, want 50ms", d)
			}
			// Searchable like any span.
			var page spansResp
			if code := ts.get("/api/v1/spans?q="+url.QueryEscape(`{ resource.service.name = "stock" && status = error }`)+"&since=1h", &page); code != 200 || len(page.Spans) < 1 {
				t.Fatalf("search: %d %d", code, len(page.Spans))
			}
		})
	}
}

func TestZipkinBadInput(t *testing.T) {
	ts := startServer(t, Options{})
	for _, c := range []struct {
		ctype, body string
		code        int
		msg         string
	}{
		{"application/json", `{"not":"an array"}`, 400, "want a JSON array of Zipkin v2 spans"},
		{"application/json", `[{"traceId":"xyz","id":"0000000000000001","timestamp":1}]`, 400, "traceId"},
		{"application/json", `[{"traceId":"0000000000000001","id":"0000000000000001","timestamp":"soon"}]`, 400, "timestamp"},
		{"text/csv", `a,b`, 415, "/api/v2/spans"},
		{"application/x-protobuf", "\x0a\x05\x0a\x02\x01", 400, "zipkin-protobuf"},
	} {
		code, body := ts.post("/api/v2/spans", c.ctype, []byte(c.body))
		if code != c.code || !bytes.Contains(body, []byte(c.msg)) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.ctype, c.body, code, body, c.code, c.msg)
		}
	}
	var page spansResp
	if ts.get("/api/v1/spans", &page); len(page.Spans) != 0 {
		t.Fatalf("refused requests stored %d spans", len(page.Spans))
	}
	// One bad id among good spans: the good ones are kept.
	code, body := ts.post("/api/v2/spans", "application/json", []byte(`[
		{"traceId":"0000000000000001","id":"0000000000000001","name":"ok","timestamp":1700000000000000,"duration":5,"localEndpoint":{"serviceName":"a"}},
		{"traceId":"0000000000000001","id":"not hex","name":"bad","timestamp":1700000000000000}]`))
	if code != 202 || len(body) != 0 {
		t.Fatalf("partly bad: %d %s", code, body)
	}
	if ts.get("/api/v1/spans?since=30000h", &page); len(page.Spans) != 1 || !strings.Contains(page.Spans[0]["name"].(string), "ok") {
		t.Fatalf("partly bad: stored %v", page.Spans)
	}
}
