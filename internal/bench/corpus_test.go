package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

var testStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func genT(t testing.TB, corpus string, seed uint64, n int) []model.Span {
	t.Helper()
	s, err := Generate(corpus, CorpusOptions{Seed: seed, Spans: n, Start: testStart, Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCorpusDeterministic(t *testing.T) {
	for _, c := range Corpora {
		a, b := genT(t, c, 42, 3000), genT(t, c, 42, 3000)
		if !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
			t.Errorf("%s: same seed gave different spans", c)
		}
		other := genT(t, c, 43, 3000)
		if bytes.Equal(mustJSON(t, a), mustJSON(t, other)) {
			t.Errorf("%s: different seeds gave identical spans", c)
		}
	}
}

func TestCorpusShape(t *testing.T) {
	for _, c := range Corpora {
		spans := genT(t, c, 1, 20000)
		if len(spans) != 20000 {
			t.Fatalf("%s: got %d spans, want exactly 20000", c, len(spans))
		}
		type key struct {
			t model.TraceID
			s model.SpanID
		}
		seen := map[key]bool{}
		inTrace := map[model.SpanID]model.TraceID{}
		errs := 0
		end := uint64(testStart.Add(24 * time.Hour).Add(time.Hour).UnixNano())
		for i, s := range spans {
			k := key{s.TraceID, s.SpanID}
			if seen[k] {
				t.Fatalf("%s: span %d duplicates (trace id, span id) %s/%s", c, i, s.TraceID, s.SpanID)
			}
			seen[k] = true
			if s.TraceID.IsZero() || s.SpanID.IsZero() {
				t.Fatalf("%s: span %d has a zero id", c, i)
			}
			if !s.ParentSpanID.IsZero() {
				if tr, ok := inTrace[s.ParentSpanID]; !ok || tr != s.TraceID {
					t.Fatalf("%s: span %d (%s) comes before its parent or has none", c, i, s.Name)
				}
			}
			inTrace[s.SpanID] = s.TraceID
			if s.EndTimeUnixNano <= s.StartTimeUnixNano || s.StartTimeUnixNano < uint64(testStart.UnixNano()) || s.EndTimeUnixNano > end {
				t.Fatalf("%s: span %d has bad times %d..%d", c, i, s.StartTimeUnixNano, s.EndTimeUnixNano)
			}
			if v, ok := s.ResourceAttr("service.name"); !ok || v.Str != s.Service || s.Service == "" {
				t.Fatalf("%s: span %d service %q does not match its resource", c, i, s.Service)
			}
			if s.StatusCode == model.StatusError {
				errs++
			}
		}
		rate := float64(errs) / float64(len(spans))
		if rate < 0.003 || rate > 0.06 {
			t.Errorf("%s: error rate %.3f outside [0.003, 0.06]", c, rate)
		}
	}
}

func TestCanonicalCardinalities(t *testing.T) {
	spans := genT(t, CorpusCanonical, 9, 20000)
	services, ops, traces := map[string]bool{}, map[string]bool{}, map[model.TraceID]bool{}
	values := map[string]map[string]bool{}
	for _, s := range spans {
		services[s.Service] = true
		ops[s.Name] = true
		traces[s.TraceID] = true
		if len(s.Attributes) != 5 {
			t.Fatalf("span has %d attributes, want 5", len(s.Attributes))
		}
		for _, kv := range s.Attributes {
			if values[kv.Key] == nil {
				values[kv.Key] = map[string]bool{}
			}
			values[kv.Key][kv.Value.AsString()] = true
		}
	}
	if len(services) != 8 {
		t.Errorf("services = %d, want 8", len(services))
	}
	if len(ops) < 45 || len(ops) > 50 {
		t.Errorf("operation names = %d, want about 50", len(ops))
	}
	if per := float64(len(spans)) / float64(len(traces)); per < 9 || per > 11 {
		t.Errorf("spans per trace = %.1f, want about 10", per)
	}
	for k, v := range values {
		if len(v) > 100 {
			t.Errorf("attribute %s has %d values, want <= 100", k, len(v))
		}
	}
}

func TestLLMCorpusContent(t *testing.T) {
	spans := genT(t, CorpusLLM, 5, 20000)
	models, providers, sessions, services := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	withContent := 0
	dialectKeys := map[string]bool{}
	for _, s := range spans {
		services[s.Service] = true
		has := false
		for _, kv := range s.Attributes {
			switch {
			case kv.Key == "gen_ai.request.model":
				models[kv.Value.Str] = true
			case kv.Key == "llm.invocation_parameters":
				models[kv.Value.Str[strings.Index(kv.Value.Str, `"model":"`)+9:len(kv.Value.Str)-2]] = true
			case kv.Key == "gen_ai.provider.name", kv.Key == "gen_ai.system" && !strings.ContainsAny(kv.Value.Str[:1], "AOVM"):
				providers[kv.Value.Str] = true
			case kv.Key == "session.id", kv.Key == "traceloop.association.properties.session_id":
				sessions[kv.Value.Str] = true
			}
			for _, k := range []string{"gen_ai.input.messages", "llm.input_messages.", "gen_ai.prompt.", "input.value", "traceloop.", "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"} {
				if strings.HasPrefix(kv.Key, k) {
					dialectKeys[k] = true
				}
			}
			if strings.HasSuffix(kv.Key, "input.messages") || strings.HasSuffix(kv.Key, "message.content") || strings.HasSuffix(kv.Key, ".content") {
				has = true
			}
		}
		for _, e := range s.Events {
			if e.Name == "gen_ai.content.prompt" || e.Name == "gen_ai.user.message" {
				has = true
				dialectKeys[e.Name] = true
			}
		}
		if has {
			withContent++
		}
	}
	if len(models) != 6 {
		t.Errorf("models = %v, want 6", models)
	}
	if len(providers) != 4 && len(providers) != 5 { // gcp.gemini (current) and vertex_ai (legacy) name one provider
		t.Errorf("providers = %v, want 4 (5 spellings)", providers)
	}
	if len(services) != 8 {
		t.Errorf("services = %d, want 8", len(services))
	}
	if per := float64(len(spans)) / float64(len(sessions)); per < 30 || per > 55 {
		t.Errorf("spans per session = %.1f, want about 40", per)
	}
	if share := float64(withContent) / float64(len(spans)); share < 0.15 || share > 0.25 {
		t.Errorf("share of spans with prompt+completion = %.3f, want about 0.20", share)
	}
	for _, k := range []string{"gen_ai.input.messages", "llm.input_messages.", "gen_ai.prompt.", "input.value", "traceloop.", "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.content.prompt", "gen_ai.user.message"} {
		if !dialectKeys[k] {
			t.Errorf("no span uses dialect key %s", k)
		}
	}
}

func TestAPIIncident(t *testing.T) {
	o := CorpusOptions{Seed: 3, Spans: 60000, Start: testStart, Window: 24 * time.Hour}
	spans, err := Generate(CorpusAPI, o)
	if err != nil {
		t.Fatal(err)
	}
	from, to := IncidentWindow(o)
	var inErr, inAll, outErr, outAll int
	var night, day int
	for _, s := range spans {
		if !s.IsRoot() {
			continue
		}
		if v, _ := s.Attr("user_id"); v.Str == "" {
			t.Fatal("root span without user_id")
		}
		if v, _ := s.Attr("account_id"); v.Str == "" {
			t.Fatal("root span without account_id")
		}
		route, _ := s.Attr("http.route")
		at := time.Unix(0, int64(s.StartTimeUnixNano))
		if h := at.UTC().Hour(); h >= 2 && h < 4 {
			night++
		} else if h >= 14 && h < 16 {
			day++
		}
		if !strings.HasPrefix(route.Str, "/api/v1/orders") {
			continue
		}
		in := !at.Before(from) && at.Before(to)
		bad := s.StatusCode == model.StatusError
		switch {
		case in:
			inAll++
			if bad {
				inErr++
			}
		default:
			outAll++
			if bad {
				outErr++
			}
		}
	}
	if inAll == 0 || outAll == 0 {
		t.Fatalf("no orders traffic in (%d) or out (%d) of the incident", inAll, outAll)
	}
	inRate, outRate := float64(inErr)/float64(inAll), float64(outErr)/float64(outAll)
	if inRate < 5*outRate || inRate < 0.15 {
		t.Errorf("incident error rate %.3f not well above baseline %.3f", inRate, outRate)
	}
	if day < 2*night {
		t.Errorf("daily curve: %d roots at 14-16h vs %d at 02-04h, want a clear peak", day, night)
	}
}

func TestBatchesGroupByService(t *testing.T) {
	spans := genT(t, CorpusCanonical, 1, 2500)
	bs := Batches(spans, 1000)
	if len(bs) != 3 || len(bs[0]) != 1000 || len(bs[2]) != 500 {
		t.Fatalf("batch sizes wrong: %d batches", len(bs))
	}
	for _, b := range bs {
		changes := 0
		for i := 1; i < len(b); i++ {
			if b[i].Service != b[i-1].Service {
				changes++
			}
		}
		if changes > 7 {
			t.Errorf("batch has %d service changes, want at most 7 (8 services, grouped)", changes)
		}
	}
	bs[0][0].Name = "mutated"
	if spans[0].Name == "mutated" {
		t.Error("Batches aliases its input")
	}
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	if _, err := Generate("nope", CorpusOptions{Spans: 1, Start: testStart}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown corpus: err = %v", err)
	}
	if _, err := Generate(CorpusCanonical, CorpusOptions{Spans: 1}); err == nil {
		t.Error("zero start time accepted")
	}
	if _, err := Generate(CorpusCanonical, CorpusOptions{Spans: -1, Start: testStart}); err == nil {
		t.Error("negative span count accepted")
	}
}

func TestPayloadsByteIdentical(t *testing.T) {
	for _, c := range Corpora {
		for _, p := range []Protocol{ProtoOTLPProto, ProtoOTLPJSON, ProtoNativeJSON} {
			for _, gz := range []bool{false, true} {
				a, err := Prepare(Batches(genT(t, c, 7, 2500), 1000), p, gz)
				if err != nil {
					t.Fatal(err)
				}
				b, err := Prepare(Batches(genT(t, c, 7, 2500), 1000), p, gz)
				if err != nil {
					t.Fatal(err)
				}
				if len(a) != 3 || len(a) != len(b) {
					t.Fatalf("%s/%s: %d and %d payloads", c, p, len(a), len(b))
				}
				for i := range a {
					if !bytes.Equal(a[i].Body, b[i].Body) || a[i].Spans != b[i].Spans {
						t.Errorf("%s/%s gzip=%v: payload %d differs between two generations with one seed", c, p, gz, i)
					}
				}
			}
		}
	}
}

// TestStreamLLMSessionsEqualsGenerate: the streamed corpus is the one
// Generate returns, span for span, in chunks of the size asked (the last
// one shorter), and a sink's error ends it.
func TestStreamLLMSessionsEqualsGenerate(t *testing.T) {
	const n = 5000
	want := genT(t, CorpusLLMSessions, 3, n)
	var got []model.Span
	var chunks []int
	err := StreamLLMSessions(CorpusOptions{Seed: 3, Spans: n, Start: testStart, Window: 24 * time.Hour}, 700, func(s []model.Span) error {
		chunks = append(chunks, len(s))
		got = append(got, s...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || len(chunks) != 8 || chunks[0] != 700 || chunks[7] != n-7*700 {
		t.Fatalf("%d spans in chunks %v, want %d in 7 of 700 and one of %d", len(got), chunks, n, n-7*700)
	}
	if !bytes.Equal(mustJSON(t, got), mustJSON(t, want)) {
		t.Fatal("the streamed corpus differs from the generated one")
	}
	calls := 0
	stop := errors.New("stop")
	err = StreamLLMSessions(CorpusOptions{Seed: 3, Spans: n, Start: testStart, Window: 24 * time.Hour}, 700, func(s []model.Span) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("a failing sink: %v after %d calls, want its error after 1", err, calls)
	}
}
