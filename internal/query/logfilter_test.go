package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
)

// logRecords is a small fixed set of records for the known answers below.
func logRecords() []model.LogRecord {
	kv := func(k string, v model.Value) model.KeyValue { return model.KeyValue{Key: k, Value: v} }
	res := func(service string, more ...model.KeyValue) *model.Resource {
		return &model.Resource{Attributes: append([]model.KeyValue{kv("service.name", model.StringValue(service))}, more...)}
	}
	tid, _ := model.ParseTraceID("5b8efff798038103d269b633813fc60c")
	sid, _ := model.ParseSpanID("eee19b7ec3c1b174")
	structured := model.Value{Type: model.ValueKvList, List: &model.List{KvList: []model.KeyValue{
		kv("event", model.StringValue("login")),
		kv("user", model.Value{Type: model.ValueKvList, List: &model.List{KvList: []model.KeyValue{kv("id", model.IntValue(42))}}}),
	}}}
	return []model.LogRecord{
		// 0: an error of checkout with a trace and attributes
		{SeverityNumber: 17, SeverityText: "ERROR", Body: model.StringValue("payment provider timed out after 200ms"),
			Attributes: []model.KeyValue{kv("order.id", model.IntValue(42)), kv("retry", model.BoolValue(true)), kv("region", model.StringValue("eu-1"))},
			TraceID:    tid, SpanID: sid, Service: "checkout", Resource: res("checkout", kv("deployment.environment", model.StringValue("prod"))),
			Scope: &model.Scope{Name: "payments", Version: "1.2.0"}},
		// 1: an info of checkout, no trace
		{SeverityNumber: 9, SeverityText: "Info", Body: model.StringValue("order 43 placed"),
			Attributes: []model.KeyValue{kv("order.id", model.IntValue(43)), kv("latency", model.DoubleValue(0.25))},
			Service:    "checkout", Resource: res("checkout", kv("region", model.StringValue("us-2")))},
		// 2: a structured warn of auth with an event name
		{SeverityNumber: 13, SeverityText: "WARN", Body: structured, EventName: "user.login", Service: "auth", Resource: res("auth")},
		// 3: no severity, empty body
		{Service: "batch", Resource: res("batch")},
	}
}

func TestLogFilterKnownAnswers(t *testing.T) {
	recs := logRecords()
	for _, c := range []struct {
		q    string
		want []int
	}{
		{``, []int{0, 1, 2, 3}},
		{`{}`, []int{0, 1, 2, 3}},
		{`{ severity >= warn }`, []int{0, 2}},
		{`severity >= WARN`, []int{0, 2}},
		{`severity > 13`, []int{0}},
		{`severity < info2`, []int{1}}, // a record without severity has none to compare
		{`severity = 17`, []int{0}},
		{`severity = nil`, []int{3}},
		{`severity_text = "Info"`, []int{1}},
		{`service = "checkout"`, []int{0, 1}},
		{`resource.service.name = "checkout" && severity >= error`, []int{0}},
		{`service != "checkout"`, []int{2, 3}},
		{`body = "order 43 placed"`, []int{1}},
		{`body =~ ".*timed out.*"`, []int{0}},
		{`body =~ "timed out"`, nil},          // anchored
		{`body !~ ".*timed out.*"`, []int{1}}, // a record whose body is not a string is not compared
		{`body.event = "login"`, []int{2}},
		{`body.user.id = 42`, []int{2}},
		{`body.user.id > 40 && event_name = "user.login"`, []int{2}},
		{`.order.id = 42`, []int{0}},
		{`attr.order.id >= 42`, []int{0, 1}},
		{`.order.id = 42.0`, []int{0}},
		{`.order.id != 42`, []int{1}}, // absent is not "different"
		{`.latency < 0.5`, []int{1}},
		{`.retry = true`, []int{0}},
		{`.retry`, []int{0}},
		{`!.retry`, []int{1, 2, 3}},
		{`.region = "us-2"`, []int{1}}, // a resource attribute, found by .KEY
		{`attr.region = "us-2"`, nil},
		{`resource.region = "us-2"`, []int{1}},
		{`.region = "eu-1"`, []int{0}}, // the record's attribute comes first
		{`resource.deployment.environment = "prod"`, []int{0}},
		{`trace_id = "5B8EFFF798038103D269B633813FC60C"`, []int{0}},
		{`trace_id = nil`, []int{1, 2, 3}},
		{`span_id = "eee19b7ec3c1b174"`, []int{0}},
		{`scope.name = "payments" && scope.version =~ "1\\..*"`, []int{0}},
		{`event_name != nil`, []int{2}},
		{`(service = "auth" || service = "batch") && !(severity = nil)`, []int{2}},
		{`service = "auth" || service = "batch" && severity = nil`, []int{2, 3}}, // && binds tighter
		{"body =~ `order \\d+ placed`", []int{1}},
		{`.order.id = "42"`, nil}, // types differ: no match
	} {
		f, err := ParseLogFilter(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		var got []int
		for i := range recs {
			if f.Match(&recs[i]) {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: matches records %v, want %v", c.q, got, c.want)
		}
		if f.String() != c.q {
			t.Errorf("%s: String() = %q", c.q, f.String())
		}
	}
}

func TestLogFilterErrors(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{`{ severity >= loud }`, `severity "loud"`},
		{`severity >= 25`, ``}, // numbers beyond 24 compare; nothing has them
		{`severity =~ "x"`, `severity compares with a number or a name`},
		{`colour = "red"`, `unknown field "colour"`},
		{`attr. = 1`, `names no key`},
		{`service = checkout`, `quote strings`},
		{`service = 3`, `service is a string`},
		{`body =~ "("`, `regular expression`},
		{`body =~ 3`, `takes a regular expression in quotes`},
		{`.x > true`, `does not apply to booleans`},
		{`.x > nil`, `nil compares only with = or !=`},
		{`{ service = "a"`, `expected } or an operator`},
		{`(service = "a"`, `expected ) or an operator`},
		{`service = "a" service = "b"`, `unexpected "service" after the filter`},
		{`service = "a`, `unterminated string`},
		{`service = "a" & x`, `unexpected character '&'`},
		{`&& service = "a"`, `expected a field`},
		{`service =`, `expected a value after =`},
		{strings.Repeat("(", 100) + `.a` + strings.Repeat(")", 100), `nested more than`},
		{strings.Repeat("!", 100) + `.a`, `nested more than`},
		{`.a = "` + strings.Repeat("x", 17<<10) + `"`, `at most`},
		{"\xff", `not valid UTF-8`},
	} {
		_, err := ParseLogFilter(c.q)
		if c.want == "" {
			if err != nil {
				t.Errorf("%.40s: %v", c.q, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: error %v, want one that says %q", c.q, err, c.want)
		} else if !strings.HasPrefix(err.Error(), "log filter: ") {
			t.Errorf("%.60s: error %q does not say it is about the log filter", c.q, err)
		}
	}
}

// TestLogFilterHintsAreNecessary: every record a random filter matches
// satisfies the filter's hints (so a store may skip what fails them).
func TestLogFilterHintsAreNecessary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := logRecords()
	for i := range 200 {
		r := recs[i%len(recs)]
		r.SeverityNumber = model.SeverityNumber(rng.IntN(25))
		r.Service = []string{"checkout", "auth", "batch"}[rng.IntN(3)]
		recs = append(recs, r)
	}
	conds := []string{`severity >= warn`, `severity > 9`, `severity = 17`, `severity < 13`, `service = "checkout"`, `service != "auth"`,
		`trace_id = "5b8efff798038103d269b633813fc60c"`, `.order.id = 42`, `body =~ ".*order.*"`, `severity = nil`}
	joins := []string{" && ", " || "}
	for range 2000 {
		n := 1 + rng.IntN(4)
		var b strings.Builder
		for j := range n {
			if j > 0 {
				b.WriteString(joins[rng.IntN(2)])
			}
			if rng.IntN(5) == 0 {
				b.WriteString("!")
			}
			b.WriteString(conds[rng.IntN(len(conds))])
		}
		q := b.String()
		f, err := ParseLogFilter(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		h := f.Hints()
		for i := range recs {
			r := &recs[i]
			if !f.Match(r) {
				continue
			}
			if h.Service != "" && r.Service != h.Service || r.SeverityNumber < h.MinSeverity || !h.TraceID.IsZero() && r.TraceID != h.TraceID {
				t.Fatalf("%s: record %d (service %s, severity %d) matches but fails the hints %+v", q, i, r.Service, r.SeverityNumber, h)
			}
		}
	}
	// And hints are found where they hold.
	f, _ := ParseLogFilter(`{ service = "checkout" && severity > warn && trace_id = "5b8efff798038103d269b633813fc60c" }`)
	if h := f.Hints(); h.Service != "checkout" || h.MinSeverity != 14 || h.TraceID.IsZero() {
		t.Errorf("hints %+v, want service checkout, severity from 14 and the trace", h)
	}
	f, _ = ParseLogFilter(`service = "checkout" || severity > warn`)
	if h := f.Hints(); h != (LogHints{}) {
		t.Errorf("hints of an || filter: %+v, want none", h)
	}
}

func FuzzParseLogFilter(f *testing.F) {
	for _, s := range []string{`{ severity >= warn && body =~ ".*x.*" }`, `.a.b = 1 || !(service = "x")`, `body.user.id > 4e2`, "body =~ `a`", `trace_id = nil`} {
		f.Add(s)
	}
	recs := logRecords()
	f.Fuzz(func(t *testing.T, q string) {
		lf, err := ParseLogFilter(q)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "log filter: ") {
				t.Fatalf("%q: error %q", q, err)
			}
			return
		}
		if lf.String() != q {
			t.Fatalf("String() = %q, want %q", lf.String(), q)
		}
		h := lf.Hints()
		for i := range recs {
			if lf.Match(&recs[i]) && recs[i].SeverityNumber < h.MinSeverity {
				t.Fatalf("%q: record %d matches below the hinted severity %d", q, i, h.MinSeverity)
			}
		}
		_ = fmt.Sprint(h)
	})
}
