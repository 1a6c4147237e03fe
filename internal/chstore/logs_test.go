package chstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
)

var logWordList = []string{"payment", "declined", "retry", "Timeout", "cache", "miss", "disk", "full", "user", "Café", "order", "shipped"}

// randomLogs makes n records over the hour before end: three services,
// every severity, bodies of 1-5 words (some maps, some with a word only in
// an attribute), a third of them in one of five traces, some sharing a time.
func randomLogs(rng *rand.Rand, n int, end time.Time) []model.LogRecord {
	traces := make([]model.TraceID, 5)
	for i := range traces {
		traces[i] = model.TraceID{0xee, byte(i + 1), 3}
	}
	out := make([]model.LogRecord, n)
	for i := range out {
		var words []string
		for range 1 + rng.IntN(5) {
			words = append(words, logWordList[rng.IntN(len(logWordList))])
		}
		svc := fmt.Sprintf("svc-%d", rng.IntN(3))
		r := model.LogRecord{
			TimeUnixNano:   uint64(end.Add(-time.Duration(rng.IntN(3600)) * time.Second).UnixNano()),
			SeverityNumber: model.SeverityNumber(1 + rng.IntN(24)),
			Body:           model.StringValue(strings.Join(words, " ")),
			Resource:       &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(svc)}}},
			Scope:          &model.Scope{Name: "test"},
		}
		if rng.IntN(4) == 0 {
			r.Body = model.KvListValue([]model.KeyValue{{Key: "msg", Value: model.StringValue(strings.Join(words, " "))}})
		}
		if rng.IntN(3) == 0 {
			r.Attributes = []model.KeyValue{{Key: "note", Value: model.StringValue(logWordList[rng.IntN(len(logWordList))])}}
		}
		if rng.IntN(3) == 0 {
			r.TraceID, r.SpanID = traces[rng.IntN(len(traces))], model.SpanID{byte(rng.IntN(4) + 1)}
		}
		if i > 0 && rng.IntN(10) == 0 {
			r.TimeUnixNano = out[i-1].TimeUnixNano // same time: sequence numbers order them
		}
		out[i] = r
	}
	return out
}

// randomLogQuery draws a query over the records' fields.
func randomLogQuery(rng *rand.Rand, end time.Time) store.LogQuery {
	q := store.LogQuery{Project: "p", Limit: 1 + rng.IntN(40)}
	if rng.IntN(2) == 0 {
		q.Since = uint64(end.Add(-time.Duration(rng.IntN(3600)) * time.Second).UnixNano())
	}
	if rng.IntN(3) == 0 {
		q.Until = uint64(end.Add(-time.Duration(rng.IntN(1800)) * time.Second).UnixNano())
		if q.Until <= q.Since {
			q.Until = 0
		}
	}
	if rng.IntN(3) == 0 {
		q.Service = fmt.Sprintf("svc-%d", rng.IntN(4)) // svc-3: none
	}
	if rng.IntN(3) == 0 {
		q.MinSeverity = model.SeverityNumber(rng.IntN(25))
	}
	if rng.IntN(4) == 0 {
		q.TraceID = model.TraceID{0xee, byte(rng.IntN(6) + 1), 3}
	}
	if rng.IntN(5) == 0 {
		q.SpanID = model.SpanID{byte(rng.IntN(4) + 1)}
	}
	if rng.IntN(2) == 0 {
		var words []string
		for range 1 + rng.IntN(2) {
			words = append(words, strings.ToUpper(logWordList[rng.IntN(len(logWordList))])) // case is folded
		}
		q.Text = strings.Join(words, " ")
	}
	return q
}

// walkLogs pages through q with cursors and returns every hit.
func walkLogs(t *testing.T, b store.LogBackend, q store.LogQuery) []store.LogHit {
	t.Helper()
	var all []store.LogHit
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("query %+v: more than 1000 pages", q)
		}
		page, err := b.SearchLogs(q)
		if err != nil {
			t.Fatalf("query %+v: %v", q, err)
		}
		if len(page.Hits) > q.Limit {
			t.Fatalf("query %+v: %d hits on a page of %d", q, len(page.Hits), q.Limit)
		}
		all = append(all, page.Hits...)
		if page.Next == nil {
			return all
		}
		q.Before = page.Next
	}
}

// logKey is what two stores must agree on for one record (sequence
// numbers differ between stores; their order must not).
func logKey(r *model.LogRecord) string {
	return string(otlp.AppendLogJSON(nil, r))
}

func sameLogs(t *testing.T, what string, q store.LogQuery, ch, ls []store.LogHit) {
	t.Helper()
	if len(ch) != len(ls) {
		t.Fatalf("%s: query %+v: ClickHouse %d records, the log store %d", what, q, len(ch), len(ls))
	}
	for i := range ch {
		if a, b := logKey(&ch[i].Record), logKey(&ls[i].Record); a != b {
			t.Fatalf("%s: query %+v: record %d:\nClickHouse %s\nlog store  %s", what, q, i, a, b)
		}
	}
}

// TestLogsEqualLogStore: the same requests into ClickHouse and the
// embedded log store, then random queries (window, service, severity,
// trace, span, words, page sizes) walked page by page with cursors: the
// same records in the same order from both; and again after erasing a
// trace's records from both.
func TestLogsEqualLogStore(t *testing.T) {
	s := open(t, Options{})
	ls, err := logstore.Open(logstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	rng := rand.New(rand.NewPCG(7, 19))
	end := time.Now().Truncate(time.Second)
	recs := randomLogs(rng, 1500, end)
	for i := 0; i < len(recs); i += 100 {
		body := otlp.EncodeLogsProto(recs[i:min(i+100, len(recs))])
		for _, b := range []store.LogBackend{s, ls} {
			res, err := b.AppendLogs("p", store.LogFormatProto, body)
			if err != nil || res.Accepted != min(100, len(recs)-i) {
				t.Fatalf("append: %+v, %v", res, err)
			}
		}
	}
	// Another project's records stay out of p's answers.
	if _, err := s.AppendLogs("other", store.LogFormatProto, otlp.EncodeLogsProto(recs[:50])); err != nil {
		t.Fatal(err)
	}
	check := func(what string, n int) {
		t.Helper()
		found := 0
		for range n {
			q := randomLogQuery(rng, end)
			got := walkLogs(t, s, q)
			sameLogs(t, what, q, got, walkLogs(t, ls, q))
			if len(got) > 0 {
				found++
			}
		}
		if found < n/3 {
			t.Fatalf("%s: only %d of %d random queries found records: the comparison says little", what, found, n)
		}
		q := store.LogQuery{Project: "p", Limit: 10_000}
		sameLogs(t, what+", everything", q, walkLogs(t, s, q), walkLogs(t, ls, q))
	}
	check("before erasure", 100)

	trace := model.TraceID{0xee, 2, 3}
	nch, err := s.EraseTrace("p", trace)
	if err != nil {
		t.Fatal(err)
	}
	nls, err := ls.EraseTrace("p", trace)
	if err != nil || nch != nls || nch == 0 {
		t.Fatalf("erase: ClickHouse %d records (%v), the log store %d", nch, err, nls)
	}
	check("after erasure", 50)
	// The removal itself: the mutation leaves no row of the trace acknowledged before.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left uint64
		if err := s.conn.QueryRow(t.Context(), "SELECT count() FROM logs WHERE project = 'p' AND trace_id = unhex(?)", hexID(trace)).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows of the erased trace left after 30s", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A record of the trace sent after the erasure is kept, by both.
	late := otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: uint64(end.UnixNano()), TraceID: trace, Body: model.StringValue("after"),
		Resource: &model.Resource{}, Scope: &model.Scope{}}})
	for _, b := range []store.LogBackend{s, ls} {
		if _, err := b.AppendLogs("p", store.LogFormatProto, late); err != nil {
			t.Fatal(err)
		}
	}
	q := store.LogQuery{Project: "p", TraceID: trace, Limit: 100}
	got := walkLogs(t, s, q)
	if len(got) != 1 || got[0].Record.Body.Str != "after" {
		t.Fatalf("the trace after its erasure: %d records, want the one sent later", len(got))
	}
	sameLogs(t, "a record sent after the erasure", q, got, walkLogs(t, ls, q))
}

// TestLogsBadRequest: a malformed request stores nothing and says why; a
// record with a malformed id is rejected alone.
func TestLogsBadRequest(t *testing.T) {
	s := open(t, Options{})
	if _, err := s.AppendLogs("p", store.LogFormatProto, []byte{0xff, 0xff, 0xff}); err == nil {
		t.Fatal("a malformed protobuf request was accepted")
	}
	if _, err := s.AppendLogs("p", store.LogFormatJSON, []byte(`{"resourceLogs": [`)); err == nil {
		t.Fatal("a malformed JSON request was accepted")
	}
	res, err := s.AppendLogs("p", store.LogFormatJSON, []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[
		{"timeUnixNano":"1000","body":{"stringValue":"kept"}},
		{"timeUnixNano":"1000","traceId":"abc","body":{"stringValue":"bad id"}}]}]}]}`))
	if err != nil || res.Accepted != 1 || res.Rejected != 1 || res.RejectMsg == "" {
		t.Fatalf("one good and one bad record: %+v, %v", res, err)
	}
	page, err := s.SearchLogs(store.LogQuery{Project: "p"})
	if err != nil || len(page.Hits) != 1 || page.Hits[0].Record.Body.Str != "kept" {
		t.Fatalf("stored: %+v, %v; want the good record only", page.Hits, err)
	}
}

// TestLogsRetention: expired records are hidden at once; the sweep drops
// a day partition whose every record has expired and deletes a project's
// expired records in partitions it shares with a project kept longer.
func TestLogsRetention(t *testing.T) {
	day := 24 * time.Hour
	now := time.Now().UTC().Truncate(day).Add(12 * time.Hour)
	s := open(t, Options{Retention: 7 * day, ProjectRetention: map[string]time.Duration{"a": 2 * day},
		RetentionEvery: time.Hour, Now: func() time.Time { return now }})
	at := func(project string, age time.Duration, body string) {
		t.Helper()
		r := model.LogRecord{TimeUnixNano: uint64(now.Add(-age).UnixNano()), Body: model.StringValue(body), Resource: &model.Resource{}, Scope: &model.Scope{}}
		if _, err := s.AppendLogs(project, store.LogFormatProto, otlp.EncodeLogsProto([]model.LogRecord{r})); err != nil {
			t.Fatal(err)
		}
	}
	at("a", 10*day, "gone")
	at("b", 10*day, "gone") // the partition of 10 days ago: all expired
	at("a", 3*day, "gone")  // a's retention is 2 days
	at("b", 3*day, "kept")
	at("a", time.Hour, "kept")
	visible := func(when string) {
		t.Helper()
		for p, want := range map[string]int{"a": 1, "b": 1} {
			page, err := s.SearchLogs(store.LogQuery{Project: p, Limit: 100})
			if err != nil || len(page.Hits) != want {
				t.Fatalf("%s: project %s: %d records (%v), want %d", when, p, len(page.Hits), err, want)
			}
			for _, h := range page.Hits {
				if h.Record.Body.Str != "kept" {
					t.Fatalf("%s: project %s shows an expired record", when, p)
				}
			}
		}
	}
	visible("before the sweep")
	sw, err := s.SweepRetention(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.LogPartitionsDropped) != 1 || len(sw.LogDeletes) != 1 || sw.LogDeletes["a"] == 0 {
		t.Fatalf("sweep: %+v, want one log partition dropped and one delete for a", sw)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n uint64
		if err := s.conn.QueryRow(context.Background(), "SELECT count() FROM logs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d log rows left after 30s, want the 2 kept", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	visible("after the sweep")
}

// TestLogsInjection: injection strings through every log parameter
// (project, service, words, attribute keys, erasure's project) find their
// own record only and change nothing else: the other tables keep their
// rows, the plain project keeps every record, and the erasures record one
// row each.
func TestLogsInjection(t *testing.T) {
	s := open(t, Options{})
	ctx := t.Context()
	at := uint64(time.Now().Add(-time.Minute).UnixNano())
	var recs []model.LogRecord
	for i, inj := range injections {
		recs = append(recs, model.LogRecord{TimeUnixNano: at + uint64(i), TraceID: model.TraceID{7, byte(i + 1)}, Body: model.StringValue("marker " + inj),
			Attributes: []model.KeyValue{{Key: inj, Value: model.StringValue(inj)}},
			Resource:   &model.Resource{Attributes: []model.KeyValue{{Key: "service.name", Value: model.StringValue(inj)}}}, Scope: &model.Scope{}})
	}
	for _, project := range []string{"plain", injections[3]} {
		if _, err := s.AppendLogs(project, store.LogFormatProto, otlp.EncodeLogsProto(recs)); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() string {
		var out []string
		for _, table := range []string{"spans", "trace_index", "schema_migrations", "erasures"} {
			var n uint64
			if err := s.conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
				t.Fatalf("count %s: %v", table, err)
			}
			out = append(out, fmt.Sprintf("%s=%d", table, n))
		}
		return strings.Join(out, " ")
	}
	before := counts()
	for i, inj := range injections {
		page, err := s.SearchLogs(store.LogQuery{Project: "plain", Service: inj, Limit: 100})
		if err != nil || len(page.Hits) != 1 || page.Hits[0].Record.TraceID != recs[i].TraceID {
			t.Errorf("service %q: %d records (%v), want its own", inj, len(page.Hits), err)
		}
		page, err = s.SearchLogs(store.LogQuery{Project: "plain", Text: inj, Limit: 100})
		if err != nil || len(page.Hits) == 0 {
			t.Errorf("words %q: %d records (%v), want its own at least", inj, len(page.Hits), err)
		}
		page, err = s.SearchLogs(store.LogQuery{Project: inj, Limit: 100})
		if err != nil || (inj != injections[3] && len(page.Hits) != 0) {
			t.Errorf("project %q: %d records (%v)", inj, len(page.Hits), err)
		}
		if n, err := s.EraseTrace(inj, model.TraceID{7, byte(i + 1)}); err != nil || (inj != injections[3] && n != 0) {
			t.Errorf("erase in project %q: %d records, %v", inj, n, err)
		}
	}
	if after := counts(); after != before {
		t.Errorf("tables changed: %s, then %s", before, after)
	}
	var erasures uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM log_erasures").Scan(&erasures); err != nil || erasures != uint64(len(injections)) {
		t.Errorf("%d log erasures recorded (%v), want one per call (%d)", erasures, err, len(injections))
	}
	page, err := s.SearchLogs(store.LogQuery{Project: "plain", Limit: 1000})
	if err != nil || len(page.Hits) != len(injections) {
		t.Errorf("project plain after: %d records (%v), want all %d", len(page.Hits), err, len(injections))
	}
}

// TestLogsTwoProcesses: two stores on one database (two rastro serve
// processes) see each other's records at once, and an erasure made through
// one hides the records from the other.
func TestLogsTwoProcesses(t *testing.T) {
	url := chtestURL(t)
	a, b := open(t, Options{URL: url}), open(t, Options{URL: url})
	trace := model.TraceID{0xab, 1}
	now := uint64(time.Now().Add(-time.Minute).UnixNano())
	rec := func(body string, i uint64) model.LogRecord {
		return model.LogRecord{TimeUnixNano: now + i, TraceID: trace, Body: model.StringValue(body), Resource: &model.Resource{}, Scope: &model.Scope{}}
	}
	if _, err := a.AppendLogs("p", store.LogFormatProto, otlp.EncodeLogsProto([]model.LogRecord{rec("from a", 0)})); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendLogs("p", store.LogFormatProto, otlp.EncodeLogsProto([]model.LogRecord{rec("from b", 1)})); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		page, err := s.SearchLogs(store.LogQuery{Project: "p", TraceID: trace})
		if err != nil || len(page.Hits) != 2 || page.Hits[0].Record.Body.Str != "from b" || page.Hits[1].Record.Body.Str != "from a" {
			t.Fatalf("store %s: %+v, %v; want both records, newest first", name, page.Hits, err)
		}
	}
	if n, err := b.EraseTrace("p", trace); err != nil || n != 2 {
		t.Fatalf("erase through b: %d, %v; want 2", n, err)
	}
	if page, err := a.SearchLogs(store.LogQuery{Project: "p"}); err != nil || len(page.Hits) != 0 {
		t.Fatalf("store a after b's erasure: %d records, %v; want none", len(page.Hits), err)
	}
}
