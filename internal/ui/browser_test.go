package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rastro-dev/rastro/internal/bench"
	"github.com/rastro-dev/rastro/internal/engine"
	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/metricstore"
	"github.com/rastro-dev/rastro/internal/server"
	"github.com/rastro-dev/rastro/internal/ui"
)

const chromiumPath = "/usr/bin/chromium"

// The XSS payloads the test stores in every text field the UI shows.
const (
	xssImg    = `<img src=x onerror=window.__xss=1>`
	xssScript = `<script>window.__xss=1</script>`
	xssSVG    = `"><svg onload=window.__xss=1>`
	xssURL    = `javascript:window.__xss=1`
	xssTrace  = "a11ce0000000000000000000000000b1"
	xssRoot   = "a11ce000000000b1"
	xssLLM    = "a11ce000000000b2"
	xssLegacy = "a11ce000000000b3"
	bigTrace  = "b16b16000000000000000000000000b1"
	bigSpans  = 10000
)

// stack is a real rastro server (engine in a temp dir, loopback listener)
// with the UI mounted, as `rastro serve --ui` runs it.
type stack struct {
	base string // serves the UI and the API
	srv  *server.Server
}

func startStack(t *testing.T) *stack {
	t.Helper()
	// As cli/serve wires it: the UI and the engine's price table. The span
	// metrics are written into the metric store when a test calls
	// WriteSpanMetrics, not on a timer.
	srv, err := server.New(server.Options{HTTPAddr: "127.0.0.1:0", UI: ui.Handler(), Prices: llm.DefaultPrices(), SpanMetricsInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := logstore.Open(logstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mets, err := metricstore.Open(metricstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetBackend(eng)
	srv.SetLogs(logs)
	srv.SetMetrics(mets)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		mets.Close()
		logs.Close()
		eng.Close()
	})
	return &stack{base: "http://" + srv.HTTPAddr(), srv: srv}
}

func (s *stack) post(t *testing.T, path, ctype string, body []byte) {
	t.Helper()
	resp, err := http.Post(s.base+path, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
}

func (s *stack) get(t *testing.T, path string, out any) int {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// seed sends the demo corpora over OTLP/HTTP (the last 50 minutes), the
// XSS trace and a 10,000-span trace over native JSON.
func (s *stack) seed(t *testing.T) {
	t.Helper()
	now := time.Now()
	for _, c := range []struct {
		name  string
		spans int
	}{{bench.CorpusLLM, 3000}, {bench.CorpusAPI, 2000}} {
		spans, err := bench.Generate(c.name, bench.CorpusOptions{Seed: 11, Spans: c.spans, Start: now.Add(-50 * time.Minute), Window: 45 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := bench.Prepare(bench.Batches(spans, 500), bench.ProtoOTLPProto, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pl {
			s.post(t, "/v1/traces", "application/x-protobuf", p.Body)
		}
	}
	s.postJSON(t, xssSpans(now.Add(-2*time.Minute)))
	s.post(t, "/v1/logs", "application/json", []byte(xssLogs(now.Add(-2*time.Minute))))
	s.postJSON(t, wideTrace(now.Add(-3*time.Minute)))
}

// xssLogs is an OTLP/JSON logs request with two records of the XSS trace's
// root span whose texts are payloads.
func xssLogs(start time.Time) string {
	at := func(ms int) string { return fmt.Sprint(start.Add(time.Duration(ms) * time.Millisecond).UnixNano()) }
	rec := func(ms, sev int, body string) map[string]any {
		return map[string]any{"timeUnixNano": at(ms), "severityNumber": sev, "severityText": "log " + xssSVG,
			"traceId": xssTrace, "spanId": xssRoot, "body": map[string]any{"stringValue": body},
			"attributes": []map[string]any{{"key": "payload.img", "value": map[string]any{"stringValue": xssImg}}}}
	}
	return mustJSON(map[string]any{"resourceLogs": []map[string]any{{
		"resource":  map[string]any{"attributes": []map[string]any{{"key": "service.name", "value": map[string]any{"stringValue": "xss-svc"}}}},
		"scopeLogs": []map[string]any{{"logRecords": []map[string]any{rec(20, 9, "log body "+xssScript), rec(40, 17, "log error "+xssURL)}}},
	}}})
}

// probeMetrics is an OTLP/JSON metrics request of the last ten minutes, a
// point every 30 s: a counter ui_probe_requests (by route and method; one
// route is an XSS payload) and a latency histogram whose point of five
// minutes ago carries an exemplar of the XSS trace's root span.
func probeMetrics(now time.Time) string {
	attr := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	var counter, hist []map[string]any
	start := now.Add(-10 * time.Minute)
	for k := 1; k <= 20; k++ {
		at := fmt.Sprint(start.Add(time.Duration(k) * 30 * time.Second).UnixNano())
		for i, route := range []string{"/checkout", xssImg} {
			for j, method := range []string{"GET", "POST"} {
				counter = append(counter, map[string]any{"timeUnixNano": at, "asDouble": float64(k * (1 + i + 2*j)),
					"attributes": []map[string]any{attr("route", route), attr("method", method)}})
			}
		}
		p := map[string]any{"timeUnixNano": at, "count": fmt.Sprint(10 * k), "sum": 3.0 * float64(k),
			"bucketCounts": []string{fmt.Sprint(3 * k), fmt.Sprint(5 * k), fmt.Sprint(2 * k), "0"}, "explicitBounds": []float64{0.1, 0.5, 1},
			"attributes": []map[string]any{attr("route", "/checkout")}}
		if k == 10 {
			p["exemplars"] = []map[string]any{{"timeUnixNano": at, "asDouble": 0.3, "traceId": xssTrace, "spanId": xssRoot}}
		}
		hist = append(hist, p)
	}
	return mustJSON(map[string]any{"resourceMetrics": []map[string]any{{
		"resource": map[string]any{"attributes": []map[string]any{attr("service.name", "ui-probe")}},
		"scopeMetrics": []map[string]any{{"metrics": []map[string]any{
			{"name": "ui.probe.requests", "sum": map[string]any{"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": counter}},
			{"name": "ui.probe.latency", "unit": "s", "histogram": map[string]any{"aggregationTemporality": 2, "dataPoints": hist}},
		}}},
	}}})
}

func (s *stack) postJSON(t *testing.T, spans []map[string]any) {
	t.Helper()
	b, err := json.Marshal(spans)
	if err != nil {
		t.Fatal(err)
	}
	s.post(t, "/v1/spans", "application/json", b)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// xssSpans is one trace whose every displayed text is an XSS payload: span
// names, attribute keys and values, events, status message, and the LLM
// prompt, completion and tool call in the OTel GenAI attributes and in the
// legacy prompt/completion events.
func xssSpans(start time.Time) []map[string]any {
	at := func(ms int) string {
		return start.Add(time.Duration(ms) * time.Millisecond).UTC().Format(time.RFC3339Nano)
	}
	input := []map[string]any{{"role": "user", "parts": []map[string]any{{"type": "text", "content": xssImg + " what is " + xssSVG}}}}
	output := []map[string]any{{"role": "assistant", "finish_reason": "tool_call", "parts": []map[string]any{
		{"type": "text", "content": "answer " + xssScript},
		{"type": "tool_call", "id": "call_" + xssSVG, "name": xssImg, "arguments": map[string]any{"url": xssURL, "html": xssScript}},
	}}}
	return []map[string]any{
		{"trace_id": xssTrace, "span_id": xssRoot, "name": xssImg, "kind": "server", "service": "xss-svc",
			"start_time": at(0), "end_time": at(900), "status": "error", "status_message": xssScript,
			"attributes": map[string]any{"payload.script": xssScript, "payload.svg": xssSVG, "url.full": xssURL, "link": xssURL, xssImg: "key-payload", "user.id": "xss-user"},
			"resource":   map[string]any{"deployment.environment": xssSVG},
			"events":     []map[string]any{{"time": at(10), "name": xssImg, "attributes": map[string]any{"exception.message": xssSVG, "exception.stacktrace": xssScript}}}},
		{"trace_id": xssTrace, "span_id": xssLLM, "parent_span_id": xssRoot, "name": "chat " + xssSVG, "kind": "client", "service": "xss-svc",
			"start_time": at(100), "end_time": at(600),
			"attributes": map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
				"gen_ai.conversation.id": "xss-session", "user.id": "xss-user", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
				"gen_ai.system_instructions": mustJSON([]map[string]string{{"type": "text", "content": "system " + xssScript}}),
				"gen_ai.input.messages":      mustJSON(input), "gen_ai.output.messages": mustJSON(output)}},
		{"trace_id": xssTrace, "span_id": xssLegacy, "parent_span_id": xssRoot, "name": "legacy " + xssScript, "kind": "client", "service": "xss-svc",
			"start_time": at(620), "end_time": at(880),
			"attributes": map[string]any{"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.operation.name": "chat",
				"session.id": "xss-session", "gen_ai.usage.prompt_tokens": 50, "gen_ai.usage.completion_tokens": 10},
			"events": []map[string]any{
				{"time": at(880), "name": "gen_ai.content.prompt", "attributes": map[string]any{"gen_ai.prompt": mustJSON([]map[string]string{{"role": "user", "content": "legacy prompt " + xssImg}})}},
				{"time": at(880), "name": "gen_ai.content.completion", "attributes": map[string]any{"gen_ai.completion": mustJSON([]map[string]string{{"role": "assistant", "content": "legacy answer " + xssSVG}})}},
			}},
	}
}

// wideTrace is a trace of bigSpans spans, four children per span.
func wideTrace(start time.Time) []map[string]any {
	out := make([]map[string]any, bigSpans)
	for i := range out {
		s := map[string]any{"trace_id": bigTrace, "span_id": fmt.Sprintf("%016x", i+1), "name": fmt.Sprintf("op-%d", i%37),
			"service": fmt.Sprintf("svc-%d", i%7), "start_time": start.Add(time.Duration(i) * time.Millisecond).UnixNano(),
			"duration_ns": int64(bigSpans-i) * int64(time.Millisecond) / 4}
		if i > 0 {
			s["parent_span_id"] = fmt.Sprintf("%016x", (i-1)/4+1)
		}
		out[i] = s
	}
	return out
}

// browser is one headless Chromium tab driven over the DevTools protocol.
type browser struct {
	t      *testing.T
	ctx    context.Context
	base   string
	mu     sync.Mutex
	errs   []string // uncaught exceptions and dialogs
	shots  string   // directory for screenshots, "" for none
	dialog int
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser tests need Chromium at %s: install it with `apt-get install chromium` (%v)", chromiumPath, err)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{t: t, ctx: ctx, base: base}
	if os.Getenv("RASTRO_SCREENSHOTS") == "1" {
		b.shots = filepath.Join(repoRoot(t), "docs", "screenshots")
		if err := os.MkdirAll(b.shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.fail("a JavaScript dialog opened: " + ev.Message)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			b.fail("uncaught exception: " + msg)
		}
	}()
	return b
}

func (b *browser) fail(msg string) {
	b.mu.Lock()
	b.errs = append(b.errs, msg)
	b.mu.Unlock()
}

// check fails the test for dialogs and uncaught exceptions seen so far.
func (b *browser) check(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		t.Error(e)
	}
	b.errs = nil
}

func repoRoot(t *testing.T) string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

func (b *browser) open(t *testing.T, path string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.base+path)); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
}

// wait polls a JavaScript condition until it is true.
func (b *browser) wait(t *testing.T, cond string) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void]("!!("+cond+")", chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\nrows: " + [...document.querySelectorAll('.wf-row')].map(r => r.dataset.spanId + '@' + r.style.top).join(' ') + "\n" + document.body.innerText.slice(0, 1500)`))
		b.mu.Lock()
		errs := strings.Join(b.errs, "\n")
		b.mu.Unlock()
		t.Fatalf("waiting for %s: %v\nerrors: %s\npage: %s", cond, err, errs, state)
	}
}

func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

func (b *browser) do(t *testing.T, js string) {
	t.Helper()
	eval[chromedp.Void](t, b, js)
}

func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	if b.shots == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// safe asserts that none of the payloads ran or became markup.
func (b *browser) safe(t *testing.T, where string, mustShow ...string) {
	t.Helper()
	type report struct {
		XSS     string `json:"xss"`
		Imgs    int    `json:"imgs"`
		SVGs    int    `json:"svgs"`
		Scripts int    `json:"scripts"`
		JSLinks int    `json:"jslinks"`
		OnAttrs int    `json:"onattrs"`
		Text    string `json:"text"`
	}
	r := eval[report](t, b, `({
		xss: typeof window.__xss,
		imgs: document.querySelectorAll('img[src="x"], img[onerror]').length,
		svgs: document.querySelectorAll('svg[onload]').length,
		scripts: [...document.scripts].filter(s => !s.src || new URL(s.src).origin !== location.origin || !new URL(s.src).pathname.startsWith('/ui/')).length,
		jslinks: document.querySelectorAll('[href^="javascript:" i], [src^="javascript:" i]').length,
		onattrs: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
		text: document.body.innerText,
	})`)
	if r.XSS != "undefined" || r.Imgs+r.SVGs+r.Scripts+r.JSLinks+r.OnAttrs != 0 {
		t.Errorf("%s: payload became live: window.__xss %s, img %d, svg[onload] %d, foreign scripts %d, javascript: links %d, on* attributes %d",
			where, r.XSS, r.Imgs, r.SVGs, r.Scripts, r.JSLinks, r.OnAttrs)
	}
	for _, s := range mustShow {
		if !strings.Contains(r.Text, s) {
			t.Errorf("%s: the payload %q is not shown as text", where, s)
		}
	}
	b.check(t)
}

func TestBrowser(t *testing.T) {
	st := startStack(t)
	st.seed(t)
	b := newBrowser(t, st.base)
	t0 := time.Now()
	defer func() { t.Logf("browser tests took %s", time.Since(t0).Round(time.Millisecond)) }()

	// Facts about the seeded data, from the API.
	var llmSpans struct {
		Spans []struct {
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		} `json:"spans"`
	}
	st.get(t, "/api/v1/spans?limit=1&since=1h&q="+url.QueryEscape(`{ span.gen_ai.input.messages != nil && resource.service.name != "xss-svc" }`), &llmSpans)
	if len(llmSpans.Spans) == 0 {
		t.Fatal("the LLM corpus has no span with messages")
	}
	llmTrace, llmSpan := llmSpans.Spans[0].TraceID, llmSpans.Spans[0].SpanID
	var tr struct{ Spans []json.RawMessage }
	st.get(t, "/api/v1/traces/"+llmTrace, &tr)
	var users struct{ Values []struct{ Name string } }
	st.get(t, "/api/v1/attributes/user.id/values?limit=1&since=1h", &users)

	t.Run("search", func(t *testing.T) {
		b.open(t, "/search?since=1h")
		b.wait(t, `document.querySelectorAll('#results tbody tr').length > 0`)
		b.shot(t, "search")
		// A TraceQL service filter changes the rows.
		b.do(t, `document.querySelector('#q').value = '{ resource.service.name = "api-orders" }'; document.querySelector('#search-btn').click()`)
		b.wait(t, `location.search.includes('api-orders') && document.querySelectorAll('#results tbody tr').length > 0 &&
			[...document.querySelectorAll('#results tbody tr')].every(r => r.textContent.includes('api-orders'))`)
		// Completion of attribute keys, then values.
		b.do(t, `document.querySelector('#q').value = ''`)
		if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS("#q"), "{ span.http.ro")); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `[...document.querySelectorAll('#q-complete li')].some(li => li.textContent.startsWith('span.http.route'))`)
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `document.querySelector('#q').value.includes('span.http.route = ') &&
			[...document.querySelectorAll('#q-complete li')].some(li => li.textContent.startsWith('/api/v1/'))`)
		// Clicking a row opens the trace.
		b.open(t, "/search?since=1h")
		b.wait(t, `document.querySelectorAll('#results tbody tr').length > 0`)
		id := eval[string](t, b, `document.querySelector('#results tbody tr').dataset.traceId`)
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#results tbody tr td:nth-child(2)"))); err != nil {
			t.Fatal(err)
		}
		b.wait(t, fmt.Sprintf(`location.pathname === '/traces/%s' && document.querySelectorAll('#waterfall .wf-row').length > 0`, id))
		b.check(t)
	})

	t.Run("trace", func(t *testing.T) {
		b.open(t, "/traces/"+llmTrace+"?span="+llmSpan)
		b.wait(t, fmt.Sprintf(`document.querySelector('#span-count')?.textContent === '%d spans' && document.querySelectorAll('#waterfall .wf-row').length === %d`, len(tr.Spans), len(tr.Spans)))
		b.wait(t, `document.querySelectorAll('#conversation .msg').length >= 2 && document.querySelector('#llm-model')?.textContent.length > 0 &&
			/^\$/.test(document.querySelector('#llm-cost')?.textContent || '') && document.querySelectorAll('.wf-row.crit').length >= 1`)
		b.shot(t, "trace")
		// Escape closes the details; find highlights matches.
		b.do(t, `document.querySelector('.wf-scroll').dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}))`)
		b.wait(t, `document.querySelector('#span-detail').hidden && !location.search.includes('span=')`)
		b.check(t)
	})

	t.Run("trace with 10000 spans", func(t *testing.T) {
		b.open(t, "/search")
		start := time.Now()
		b.do(t, `window.dispatchEvent(new CustomEvent('rastro:navigate', {detail: '/traces/`+bigTrace+`'}))`)
		b.wait(t, fmt.Sprintf(`document.querySelector('#span-count')?.textContent === '%d spans' && document.querySelectorAll('.wf-row').length > 10`, bigSpans))
		took := time.Since(start)
		rows := eval[int](t, b, `document.querySelectorAll('.wf-row').length`)
		draw := eval[string](t, b, `document.querySelector('main').dataset.renderMs`)
		t.Logf("10000-span trace: shown %s after navigation (fetch + draw; draw %s ms), %d rows in the DOM", took.Round(time.Millisecond), draw, rows)
		if rows > 200 {
			t.Errorf("%d rows in the DOM: the waterfall is not virtualised", rows)
		}
		if took > 2*time.Second {
			t.Errorf("the 10000-span trace took %s to show, want < 1 s (2 s allowed on a loaded machine)", took)
		}
		// Scrolling to the end renders the last rows.
		b.do(t, `const s = document.querySelector('.wf-scroll'); s.scrollTop = s.scrollHeight`)
		b.wait(t, fmt.Sprintf(`[...document.querySelectorAll('.wf-row')].some(r => parseInt(r.style.top) === %d)`, (bigSpans-1)*26))
		b.check(t)
	})

	t.Run("llm", func(t *testing.T) {
		b.open(t, "/llm?since=1h")
		b.wait(t, `/^\$\d/.test(document.querySelector('#total-cost .v')?.textContent || '') && document.querySelector('#total-cost .v').textContent !== '$0' &&
			document.querySelectorAll('#llm-charts svg').length >= 6 && document.querySelectorAll('#llm-groups tbody tr').length > 0 &&
			document.querySelectorAll('#top-sessions tbody tr').length > 0 && document.querySelector('#prices').textContent.startsWith('prices: ') &&
			!document.querySelector('#prices').textContent.includes('…')`)
		var prices struct {
			Source string `json:"source"`
			AsOf   string `json:"as_of"`
		}
		if st.get(t, "/api/v1/llm/prices", &prices) == http.StatusOK {
			b.wait(t, fmt.Sprintf(`document.querySelector('#prices').textContent.startsWith(%q)`, "prices: "+prices.Source+", as of "+prices.AsOf))
		}
		b.shot(t, "llm")
		b.check(t)
	})

	t.Run("sessions", func(t *testing.T) {
		b.open(t, "/sessions?since=1h&sort=cost")
		b.wait(t, `document.querySelectorAll('#session-list tbody tr').length > 0`)
		b.shot(t, "sessions")
		// The search box asks the server: every row holds the user typed,
		// and the count is the server's total of matches.
		user := eval[string](t, b, `document.querySelector('#session-list tbody tr td:nth-child(2)').textContent.split(', ')[0]`)
		if user == "" {
			t.Fatal("the first session has no user")
		}
		b.do(t, fmt.Sprintf(`const s = document.querySelector('#session-search'); s.value = %q; s.dispatchEvent(new Event('input'))`, user))
		b.wait(t, fmt.Sprintf(`location.search.includes('find=') && /matching/.test(document.querySelector('#session-count').textContent) &&
			[...document.querySelectorAll('#session-list tbody tr td:nth-child(2)')].every(td => td.textContent.includes(%q))`, user))
		b.open(t, "/sessions?since=1h&sort=cost")
		b.wait(t, `document.querySelectorAll('#session-list tbody tr').length > 0`)
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#session-list tbody tr td:nth-child(3)"))); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `location.pathname.startsWith('/sessions/') && document.querySelectorAll('#turns .turn').length > 0 && document.querySelectorAll('#turns .msg').length > 0 &&
			!!document.querySelector('#turns a.turn-link[href^="/traces/"]')`)
		b.shot(t, "session")
		b.check(t)
	})

	routes := st.get(t, "/api/v1/red?group=service&since=1h", nil) != http.StatusNotFound
	t.Run("services", func(t *testing.T) {
		b.open(t, "/services?since=1h")
		if !routes {
			t.Log("GET /api/v1/red is not served yet: checking that the page shows the API's error")
			b.wait(t, `document.querySelector('#red-services .error')?.textContent.includes('no route') && document.querySelector('#heatmap .error') && document.querySelector('#dependencies .error')`)
			b.check(t)
			return
		}
		b.wait(t, `document.querySelectorAll('#red-services tbody tr').length > 0 && document.querySelectorAll('#heatmap rect.cell').length > 0 &&
			document.querySelectorAll('#error-groups tbody tr').length > 0 && document.querySelectorAll('#dependencies .edge').length > 0`)
		b.shot(t, "services")
		b.do(t, `document.querySelector('#dependencies').scrollIntoView()`)
		b.shot(t, "services-errors-deps")
		b.do(t, `document.querySelector('#red-services tbody tr').click()`)
		b.wait(t, `location.search.includes('service=') && document.querySelectorAll('#red-operations tbody tr').length > 0 && document.querySelectorAll('#heatmap rect.cell').length > 0 && document.querySelectorAll('#red-charts svg').length === 2`)
		b.do(t, `document.querySelector('#heatmap rect.cell').dispatchEvent(new MouseEvent('click', {bubbles: true}))`)
		b.wait(t, `location.pathname === '/search' && ['service', 'min_duration', 'since', 'until'].every(k => new URLSearchParams(location.search).has(k))`)
		b.check(t)
	})

	t.Run("journeys", func(t *testing.T) {
		if len(users.Values) == 0 {
			t.Fatal("no user.id values in the corpus")
		}
		b.open(t, "/journeys?key=user.id&since=1h&value="+url.QueryEscape(users.Values[0].Name))
		if !routes {
			b.wait(t, `document.querySelector('#journey .error')?.textContent.length > 0`)
			b.check(t)
			return
		}
		b.wait(t, `document.querySelectorAll('#journey-traces .tl-item').length > 0`)
		b.shot(t, "journeys")
		b.check(t)
	})

	t.Run("default window is the API's", func(t *testing.T) {
		// Without a range every page shows the last 24 hours, as the API
		// and the CLI default to (the window rule).
		for _, page := range []string{"/search", "/services", "/llm", "/sessions"} {
			b.open(t, page)
			b.wait(t, `document.querySelector('#range')?.value === '24h'`)
		}
		b.check(t)
	})

	t.Run("tail", func(t *testing.T) {
		b.open(t, "/tail")
		b.wait(t, `window.__rastroTail && window.__rastroTail.open`)
		now := time.Now().UTC()
		st.postJSON(t, []map[string]any{
			{"trace_id": "7a117a117a117a117a117a117a117a11", "span_id": "7a117a117a117a11", "name": "tail probe", "service": "tail-svc", "start_time": now.Format(time.RFC3339Nano), "duration_ns": 1000},
			{"trace_id": "7a117a117a117a117a117a117a117a11", "span_id": "7a117a117a117a12", "name": xssImg + xssSVG, "service": xssScript, "start_time": now.Format(time.RFC3339Nano), "duration_ns": 1000},
		})
		b.wait(t, `!!document.querySelector('[data-span-id="7a117a117a117a11"]') && !!document.querySelector('[data-span-id="7a117a117a117a12"]') && window.__rastroTail.rows >= 2`)
		b.shot(t, "tail")
		b.safe(t, "tail", xssImg+xssSVG, xssScript)
		// 10,000 spans at once: the list stays virtual, and every span is
		// either shown or counted as dropped by the rate cap.
		b.open(t, "/tail?rate=5000")
		b.wait(t, `window.__rastroTail && window.__rastroTail.open`)
		burst := make([]map[string]any, 10000)
		for i := range burst {
			burst[i] = map[string]any{"trace_id": "7a117a117a117a117a117a117a117a12", "span_id": fmt.Sprintf("%016x", 0x7b000000+i),
				"name": "burst", "service": "tail-svc", "start_time": now.Format(time.RFC3339Nano), "duration_ns": 1000}
		}
		st.postJSON(t, burst)
		// The server sends at most 5,000 a second (max_rate) and counts the
		// rest as limited.
		b.wait(t, `window.__rastroTail.received + window.__rastroTail.limited === 10000 && window.__rastroTail.limited > 0 &&
			window.__rastroTail.rows + window.__rastroTail.dropped === 10000 &&
			window.__rastroTail.rows >= 5000 && document.querySelectorAll('.tail-row').length < 200`)
		b.check(t)
	})

	t.Run("logs", func(t *testing.T) {
		b.open(t, "/logs?since=1h")
		b.wait(t, `window.__rastroLogs && !window.__rastroLogs.live && document.querySelectorAll('#log-list .log-row').length === 2`)
		b.shot(t, "logs")
		b.safe(t, "logs", "log body "+xssScript, "log error "+xssURL, "log "+xssSVG)
		// The lowest severity: only the error record is left.
		b.do(t, `const s = document.querySelector('#log-severity'); s.value = 'error'; s.dispatchEvent(new Event('change'))`)
		b.wait(t, `new URLSearchParams(location.search).get('severity') === 'error' && document.querySelectorAll('#log-list .log-row').length === 1 &&
			document.querySelector('#log-list .log-row').dataset.severity === '17'`)
		// Words nothing holds: an empty page that says so.
		b.open(t, "/logs?since=1h&content=nosuchwordanywhere")
		b.wait(t, `document.querySelector('.empty')?.textContent.includes('No log records match') && document.querySelectorAll('#log-list .log-row').length === 0`)
		// A record's trace link opens its trace at its span.
		b.open(t, "/logs?since=1h")
		b.wait(t, `document.querySelectorAll('#log-list .log-row a').length === 2`)
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#log-list .log-row a"))); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `location.pathname === '/traces/`+xssTrace+`' && new URLSearchParams(location.search).get('span') === '`+xssRoot+`'`)
		// Pages: 150 records are 100, then 50 more behind "Older records".
		now := time.Now().UTC()
		recs := make([]map[string]any, 150)
		for i := range recs {
			recs[i] = map[string]any{"time": now.Add(-time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano), "severity": "info",
				"service": "page-svc", "body": fmt.Sprintf("paged record %d", i)}
		}
		st.post(t, "/v1/logs", "application/json", []byte(mustJSON(recs)))
		b.open(t, "/logs?since=1h&service=page-svc")
		b.wait(t, `document.querySelectorAll('#log-list .log-row').length === 100 && !!document.querySelector('#log-more') &&
			document.querySelector('#log-list .log-row').textContent.includes('paged record 0')`)
		b.do(t, `document.querySelector('#log-more').click()`)
		b.wait(t, `document.querySelectorAll('#log-list .log-row').length === 150 && !document.querySelector('#log-more') &&
			document.querySelector('#log-list .log-row:last-child').textContent.includes('paged record 149')`)
		// Live: records that match appear as they are acknowledged; others do not.
		b.open(t, "/logs?live=1&service=live-svc")
		b.wait(t, `window.__rastroLogs && window.__rastroLogs.live && window.__rastroLogs.open`)
		st.post(t, "/v1/logs", "application/json", []byte(mustJSON([]map[string]any{
			{"time": now.Format(time.RFC3339Nano), "severity": "warn", "service": "other-svc", "body": "not for this page"},
			{"time": now.Format(time.RFC3339Nano), "severity": "warn", "service": "live-svc", "body": "live probe " + xssImg},
		})))
		b.wait(t, `window.__rastroLogs.received === 1 && document.querySelectorAll('#log-list .log-row').length === 1 &&
			document.querySelector('#log-list .log-row').textContent.includes('live probe')`)
		b.safe(t, "live logs", "live probe "+xssImg)
	})

	t.Run("metrics", func(t *testing.T) {
		now := time.Now()
		// The span metrics of the seeded spans, as the server's timer writes
		// them, and the probe metrics over OTLP/JSON.
		st.srv.WriteSpanMetrics(now.Add(-30 * time.Second))
		st.post(t, "/v1/metrics", "application/json", []byte(probeMetrics(now)))
		b.open(t, "/explore?since=1h")
		b.wait(t, `document.querySelector('#mx-metric option[value="traces_spanmetrics_calls_total"]') && document.querySelector('#mx-metric option[value="ui_probe_requests_total"]')`)
		// The filter box narrows the names.
		b.do(t, `const f = document.querySelector('#mx-filter'); f.value = 'probe'; f.dispatchEvent(new Event('input'))`)
		b.wait(t, `[...document.querySelectorAll('#mx-metric option')].filter(o => o.value).every(o => o.value.includes('probe')) &&
			!!document.querySelector('#mx-metric option[value="ui_probe_latency_seconds_bucket"]')`)
		// A counter is charted as a rate, a line per series.
		b.do(t, `const m = document.querySelector('#mx-metric'); m.value = 'ui_probe_requests_total'; m.dispatchEvent(new Event('change'))`)
		b.wait(t, `new URLSearchParams(location.search).get('metric') === 'ui_probe_requests_total' && window.__rastroMetrics?.done &&
			window.__rastroMetrics.series === 4 && document.querySelectorAll('#mx-chart path.line').length === 4 &&
			document.querySelector('#mx-query').value === 'rate(ui_probe_requests_total[1m])'`)
		// Grouping by route: two lines, the legend shows the payload route as text.
		b.wait(t, `document.querySelector('#mx-by-route')`)
		b.do(t, `document.querySelector('#mx-by-route').click()`)
		b.wait(t, `new URLSearchParams(location.search).get('by') === 'route' && window.__rastroMetrics?.done && window.__rastroMetrics.series === 2 &&
			document.querySelector('#mx-query').value === 'sum by (route) (rate(ui_probe_requests_total[1m]))' &&
			document.querySelectorAll('#mx-chart .legend span').length === 2`)
		b.safe(t, "metrics legend", `route="`+xssImg+`"`, `route="/checkout"`)
		// A label filter, then a reload: the state comes back from the URL.
		b.do(t, `const l = document.querySelector('#mx-label'); l.value = 'method'; document.querySelector('#mx-value').value = 'POST'; document.querySelector('#mx-add').requestSubmit()`)
		b.wait(t, `new URLSearchParams(location.search).get('match') === 'method="POST"' && window.__rastroMetrics?.done && window.__rastroMetrics.series === 2 &&
			document.querySelector('#mx-query').value === 'sum by (route) (rate(ui_probe_requests_total{method="POST"}[1m]))'`)
		want := "/explore?metric=ui_probe_requests_total&match=method%3D%22POST%22&by=route&since=1h"
		if got := eval[string](t, b, `location.pathname + location.search`); got != want {
			t.Errorf("URL %s, want %s", got, want)
		}
		if err := chromedp.Do(b.ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `window.__rastroMetrics?.done && window.__rastroMetrics.series === 2 && document.querySelector('#mx-by-route')?.checked &&
			document.querySelector('#mx-fn').value === 'rate' && document.querySelector('#range').value === '1h' &&
			document.querySelector('#mx-matchers .chip')?.textContent.startsWith('method="POST"')`)
		// A payload as a label filter from the URL: a chip of text, and the
		// two series of that route.
		b.open(t, "/explore?since=1h&metric=ui_probe_requests_total&match="+url.QueryEscape(`route="`+xssImg+`"`))
		b.wait(t, `window.__rastroMetrics?.done && window.__rastroMetrics.series === 2 && document.querySelectorAll('#mx-matchers .chip').length === 1`)
		b.safe(t, "metrics label filter", `route="`+xssImg+`"`, `method="GET"`)
		// A histogram: p95 by default, its exemplar a dot linking to the trace.
		b.open(t, "/explore?since=1h&metric=ui_probe_latency_seconds_bucket")
		b.wait(t, `window.__rastroMetrics?.done && window.__rastroMetrics.series === 1 && window.__rastroMetrics.exemplars === 1 &&
			document.querySelector('#mx-fn').value === 'p95' &&
			document.querySelector('#mx-query').value === 'histogram_quantile(0.95, sum by (le) (rate(ui_probe_latency_seconds_bucket[1m])))' &&
			document.querySelectorAll('#mx-chart a.exemplar').length === 1 && document.querySelector('#mx-metric option[value="ui_probe_latency_seconds_bucket"]')?.selected && document.querySelector('#mx-metric').dataset.loaded`)
		b.shot(t, "metrics")
		b.safe(t, "metrics histogram")
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#mx-chart a.exemplar circle"))); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `location.pathname === '/traces/`+xssTrace+`' && new URLSearchParams(location.search).get('span') === '`+xssRoot+`' &&
			document.querySelectorAll('.wf-row').length === 3`)
		// Span metrics are there without any metrics instrumentation.
		b.open(t, "/explore?since=1h&metric=traces_spanmetrics_calls_total&fn=raw&by=service")
		b.wait(t, `window.__rastroMetrics?.done && window.__rastroMetrics.series >= 3 &&
			[...document.querySelectorAll('#mx-chart .legend span')].some(s => s.textContent === '{service="xss-svc"}')`)
		// A query typed by hand: it runs, stays in the URL, and a construct
		// outside the subset is the server's error, as text.
		b.do(t, `document.querySelector('#mx-query').value = 'sum(rate(ui_probe_requests_total[2m]))'; document.querySelector('#mx-run').click()`)
		b.wait(t, `new URLSearchParams(location.search).get('q') === 'sum(rate(ui_probe_requests_total[2m]))' && window.__rastroMetrics?.done &&
			window.__rastroMetrics.series === 1 && !!document.querySelector('#mx-reset')`)
		b.do(t, `document.querySelector('#mx-query').value = 'irate(ui_probe_requests_total[2m])'; document.querySelector('#mx-run').click()`)
		b.wait(t, `window.__rastroMetrics?.done && window.__rastroMetrics.error && document.querySelector('#mx-chart .error')?.textContent.includes('400 from /prom/api/v1/query_range') &&
			document.querySelector('#mx-chart .error').textContent.includes('irate')`)
		b.check(t)
	})

	t.Run("state round-trips through the URL", func(t *testing.T) {
		q := `{ status = error }`
		b.open(t, "/search?since=6h&view=spans&q="+url.QueryEscape(q))
		b.wait(t, fmt.Sprintf(`document.querySelector('#q')?.value === %q && document.querySelector('#range').value === '6h' &&
			document.querySelector('#view-spans').getAttribute('aria-pressed') === 'true' && document.querySelectorAll('#results tbody tr').length > 0`, q))
		b.do(t, `const s = document.querySelector('#f-status'); s.value = 'error'; s.dispatchEvent(new Event('change'))`)
		b.wait(t, `new URLSearchParams(location.search).get('status') === 'error'`)
		if err := chromedp.Do(b.ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		b.wait(t, fmt.Sprintf(`document.querySelector('#f-status')?.value === 'error' && document.querySelector('#q').value === %q &&
			document.querySelector('#range').value === '6h' && document.querySelector('#view-spans').getAttribute('aria-pressed') === 'true'`, q))
		// The time picker writes since into the URL.
		b.do(t, `const r = document.querySelector('#range'); r.value = '15m'; r.dispatchEvent(new Event('change'))`)
		b.wait(t, `new URLSearchParams(location.search).get('since') === '15m' && new URLSearchParams(location.search).get('status') === 'error'`)
		b.check(t)
	})

	t.Run("back and forward", func(t *testing.T) {
		b.open(t, "/search?since=1h")
		b.wait(t, `document.querySelector('main').dataset.page === 'search'`)
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`nav.top a[href^="/llm"]`))); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `document.querySelector('main').dataset.page === 'llm' && location.pathname === '/llm' && location.search === '?since=1h'`)
		b.do(t, `history.back()`)
		b.wait(t, `document.querySelector('main').dataset.page === 'search' && location.pathname === '/search'`)
		b.do(t, `history.forward()`)
		b.wait(t, `document.querySelector('main').dataset.page === 'llm' && document.querySelector('#total-cost')`)
		b.check(t)
	})

	t.Run("usable at 800 px", func(t *testing.T) {
		if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(800, 800)); err != nil {
			t.Fatal(err)
		}
		defer chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 800))
		for _, p := range []struct{ name, path, ready string }{
			{"search-800", "/search?since=1h", `document.querySelectorAll('#results tbody tr').length > 0`},
			{"trace-800", "/traces/" + llmTrace + "?span=" + llmSpan, `document.querySelectorAll('#conversation .msg').length > 0`},
			{"llm-800", "/llm?since=1h", `document.querySelectorAll('#llm-charts svg').length >= 6`},
			{"metrics-800", "/explore?since=1h&metric=ui_probe_requests_total&by=route", `window.__rastroMetrics?.done && document.querySelector('#mx-metric').dataset.loaded`},
		} {
			b.open(t, p.path)
			b.wait(t, p.ready)
			if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 810 {
				t.Errorf("%s: the page is %d px wide at an 800 px viewport", p.path, w)
			}
			b.shot(t, p.name)
		}
		b.check(t)
	})

	t.Run("token prompt on 401", func(t *testing.T) {
		// A front that wants a bearer token, as access control will.
		target, _ := url.Parse(st.base)
		proxy := httputil.NewSingleHostReverseProxy(target)
		uh := ui.Handler()
		front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/api/") {
				uh.ServeHTTP(w, r)
				return
			}
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error": "a bearer token is required"}`)
				return
			}
			proxy.ServeHTTP(w, r)
		})}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go front.Serve(ln)
		defer front.Close()
		if err := chromedp.Do(b.ctx, chromedp.Navigate("http://"+ln.Addr().String()+"/llm?since=1h")); err != nil {
			t.Fatal(err)
		}
		b.wait(t, `document.querySelector('dialog.token').open && document.querySelector('#total-cost, #llm-totals .error')`)
		b.do(t, `document.querySelector('#token-input').value = 's3cret'; document.querySelector('dialog.token form').requestSubmit()`)
		b.wait(t, `!document.querySelector('dialog.token').open && /^\$\d/.test(document.querySelector('#total-cost .v')?.textContent || '') && localStorage.getItem('rastro.token') === 's3cret'`)
		b.check(t)
	})

	t.Run("xss", func(t *testing.T) {
		// The trace, its root span's details.
		b.open(t, "/traces/"+xssTrace+"?span="+xssRoot)
		b.wait(t, `document.querySelectorAll('.wf-row').length === 3 && !document.querySelector('#span-detail').hidden && document.querySelector('#status-message')`)
		b.safe(t, "trace, root span", xssImg, xssScript, xssSVG, xssURL, "key-payload")
		// The span's log records, oldest first, as text.
		b.wait(t, `document.querySelectorAll('#span-logs .log-record').length === 2 && /^Logs \(2\)/.test(document.querySelector('#span-logs h3').textContent)`)
		b.safe(t, "trace, root span's logs", "log body "+xssScript, "log error "+xssURL, "log "+xssSVG)
		// The LLM span: the conversation and the tool call.
		b.do(t, `document.querySelector('.wf-row[data-span-id="`+xssLLM+`"]').click()`)
		b.wait(t, `document.querySelectorAll('#conversation .msg').length >= 3 && !!document.querySelector('#conversation .tool-call')`)
		b.shot(t, "xss-trace")
		b.safe(t, "trace, LLM span", "system "+xssScript, xssImg+" what is "+xssSVG, "answer "+xssScript, xssURL)
		b.do(t, `document.querySelector('.wf-row[data-span-id="`+xssLegacy+`"]').click()`)
		b.wait(t, `document.querySelectorAll('#conversation .msg').length >= 2`)
		b.safe(t, "trace, legacy LLM span", "legacy prompt "+xssImg, "legacy answer "+xssSVG)
		// Find within the trace highlights the payload spans.
		b.do(t, `const f = document.querySelector('#find'); f.value = 'onerror'; f.dispatchEvent(new Event('input'))`)
		b.wait(t, `document.querySelectorAll('.wf-row.match').length >= 2`)
		b.safe(t, "trace, find")
		// Search results, traces and spans.
		b.open(t, "/search?since=1h&q="+url.QueryEscape(`{ resource.service.name = "xss-svc" }`))
		b.wait(t, `document.querySelectorAll('#results tbody tr').length === 1`)
		b.safe(t, "search traces", xssImg)
		b.open(t, "/search?since=1h&view=spans&q="+url.QueryEscape(`{ resource.service.name = "xss-svc" }`))
		b.wait(t, `document.querySelectorAll('#results tbody tr').length === 3`)
		b.safe(t, "search spans", xssImg, "legacy "+xssScript, "chat "+xssSVG)
		// The session replay reads the server's extracted messages.
		b.open(t, "/sessions/xss-session")
		b.wait(t, `document.querySelectorAll('#turns .msg').length >= 3`)
		b.safe(t, "session", xssImg+" what is "+xssSVG, "answer "+xssScript, "legacy prompt "+xssImg)
	})
}
