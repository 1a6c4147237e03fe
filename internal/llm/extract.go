package llm

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// Extract derives the normalised LLM fields of one span from its attributes
// (span, then resource for session and user) or returns nil when the span
// carries no LLM attribute. prices may be nil: then only a cost sent by the
// client is kept. Extract never modifies s.
func Extract(s *model.Span, prices *Prices) *model.LLM {
	var sc scan
	sc.add(s.Attributes, false)
	if !sc.llm {
		return nil
	}
	if s.Resource != nil {
		sc.add(s.Resource.Attributes, true)
	}
	l := &model.LLM{
		Provider:        normalizeProvider(first(sc.str(sProvider), sc.str(sSystem), sc.str(sOIProvider), sc.str(sOISystem))),
		RequestModel:    sc.str(sReqModel),
		ResponseModel:   first(sc.str(sRespModel), sc.str(sOIModel), sc.str(sLFModel)),
		SessionID:       first(sc.str(sConversation), sc.str(sSession), sc.str(sLFSession), sc.str(sTLSession)),
		UserID:          first(sc.str(sUser), sc.str(sLFUser), sc.str(sTLUser), sc.str(sEndUser)),
		AgentName:       first(sc.str(sGenAIAgent), sc.str(sOIAgent)),
		ToolName:        first(sc.str(sGenAITool), sc.str(sOITool)),
		InputTokens:     -1,
		OutputTokens:    -1,
		CacheReadTokens: -1,
		// CacheCreationTokens and ReasoningTokens are set below.
		CacheCreationTokens: -1,
		ReasoningTokens:     -1,
	}
	if l.RequestModel == "" && sc.str(sOIParams) != "" {
		l.RequestModel = invocationModel(sc.str(sOIParams))
	}
	r := classify(&sc)
	l.Operation = r.operation
	if r.tlKind != "" && sc.str(sTLEntity) != "" {
		switch r.tlKind {
		case "agent", "workflow":
			if l.AgentName == "" {
				l.AgentName = sc.str(sTLEntity)
			}
		case "tool":
			if l.ToolName == "" {
				l.ToolName = sc.str(sTLEntity)
			}
		}
	}
	hasUsage := tokens(&sc, l)
	l.Counted = r.role == roleCall || (r.role == roleUnknown && (hasUsage || l.Model() != ""))
	cost(&sc, s, l, prices)
	l.TimeToFirstTokenNanos = ttft(&sc, s)
	return l
}

// Enrich sets spans[i].LLM = Extract(&spans[i], prices) for every span.
func Enrich(spans []model.Span, prices *Prices) {
	for i := range spans {
		spans[i].LLM = Extract(&spans[i], prices)
	}
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// invocationModel reads "model" from OpenInference llm.invocation_parameters.
func invocationModel(params string) string {
	if !strings.Contains(params, `"model"`) {
		return ""
	}
	var p struct {
		Model string `json:"model"`
	}
	if json.Unmarshal([]byte(params), &p) != nil {
		return ""
	}
	return p.Model
}

// providerAliases maps the names the dialects use to the OTel
// gen_ai.provider.name well-known values. Keys are lower case.
var providerAliases = map[string]string{
	"openai":              "openai",
	"anthropic":           "anthropic",
	"mistral":             "mistral_ai",
	"mistralai":           "mistral_ai",
	"mistral_ai":          "mistral_ai",
	"vertex_ai":           "gcp.vertex_ai",
	"vertexai":            "gcp.vertex_ai",
	"vertex":              "gcp.vertex_ai",
	"gcp.vertex_ai":       "gcp.vertex_ai",
	"google":              "gcp.gemini",
	"gemini":              "gcp.gemini",
	"google_genai":        "gcp.gemini",
	"google.generativeai": "gcp.gemini",
	"googlegenai":         "gcp.gemini",
	"gcp.gemini":          "gcp.gemini",
	"gcp.gen_ai":          "gcp.gen_ai",
	"bedrock":             "aws.bedrock",
	"aws_bedrock":         "aws.bedrock",
	"aws-bedrock":         "aws.bedrock",
	"awsbedrock":          "aws.bedrock",
	"aws.bedrock":         "aws.bedrock",
	"azure":               "azure.ai.openai",
	"azure_openai":        "azure.ai.openai",
	"azureopenai":         "azure.ai.openai",
	"az.ai.openai":        "azure.ai.openai",
	"azure.ai.openai":     "azure.ai.openai",
	"az.ai.inference":     "azure.ai.inference",
	"azure.ai.inference":  "azure.ai.inference",
	"cohere":              "cohere",
	"deepseek":            "deepseek",
	"groq":                "groq",
	"xai":                 "x_ai",
	"x_ai":                "x_ai",
	"x.ai":                "x_ai",
	"watsonx":             "ibm.watsonx.ai",
	"ibm.watsonx.ai":      "ibm.watsonx.ai",
	"perplexity":          "perplexity",
}

// normalizeProvider returns the OTel well-known provider name for the
// aliases in providerAliases, else the name in lower case.
func normalizeProvider(p string) string {
	if p == "" {
		return ""
	}
	if n, ok := providerAliases[p]; ok {
		return n
	}
	lp := strings.ToLower(strings.TrimSpace(p))
	if n, ok := providerAliases[lp]; ok {
		return n
	}
	return lp
}

type role uint8

const (
	roleUnknown   role = iota // no kind marker: counted if it reports usage
	roleCall                  // one model invocation: counted
	roleAggregate             // agent / workflow / chain / task: usage repeats children
	roleTool                  // tool execution: no usage of its own
	roleOther                 // retrieval, reranker, evaluator, guardrail, ...
)

type kind struct {
	role      role
	operation string
	tlKind    string
}

// classify decides what the span is from the first kind marker present, in
// order: gen_ai.operation.name, openinference.span.kind,
// langfuse.observation.type, traceloop.span.kind, llm.request.type.
func classify(sc *scan) kind {
	k := kind{tlKind: strings.ToLower(sc.str(sTLKind))}
	if op := sc.str(sOperation); op != "" {
		k.operation = op
		switch strings.ToLower(op) {
		case "chat", "text_completion", "generate_content", "embeddings", "completion", "embedding",
			"chat_completion", "chat.completions", "responses", "generate", "rerank":
			k.role = roleCall
		case "invoke_agent", "create_agent", "invoke_workflow", "agent", "workflow":
			k.role = roleAggregate
		case "execute_tool":
			k.role = roleTool
		default:
			k.role = roleOther
		}
		return k
	}
	if oi := sc.str(sOIKind); oi != "" {
		switch strings.ToUpper(oi) {
		case "LLM":
			k.role, k.operation = roleCall, "chat"
		case "EMBEDDING":
			k.role, k.operation = roleCall, "embeddings"
		case "AGENT":
			k.role, k.operation = roleAggregate, "invoke_agent"
		case "CHAIN":
			k.role, k.operation = roleAggregate, "chain"
		case "TOOL":
			k.role, k.operation = roleTool, "execute_tool"
		case "RETRIEVER":
			k.role, k.operation = roleOther, "retrieval"
		default:
			k.role, k.operation = roleOther, strings.ToLower(oi)
		}
		if k.role == roleCall {
			if op := requestTypeOperation(sc.str(sRequestType)); op != "" {
				k.operation = op
			}
		}
		return k
	}
	if lf := sc.str(sLFType); lf != "" {
		switch strings.ToLower(lf) {
		case "generation":
			k.role, k.operation = roleCall, "chat"
		case "embedding":
			k.role, k.operation = roleCall, "embeddings"
		case "agent":
			k.role, k.operation = roleAggregate, "invoke_agent"
		case "chain":
			k.role, k.operation = roleAggregate, "chain"
		case "span":
			k.role = roleAggregate
		case "tool":
			k.role, k.operation = roleTool, "execute_tool"
		case "retriever":
			k.role, k.operation = roleOther, "retrieval"
		default:
			k.role = roleOther
		}
		return k
	}
	if k.tlKind != "" {
		switch k.tlKind {
		case "workflow":
			k.role, k.operation = roleAggregate, "invoke_workflow"
		case "agent":
			k.role, k.operation = roleAggregate, "invoke_agent"
		case "task":
			k.role, k.operation = roleAggregate, "task"
		case "tool":
			k.role, k.operation = roleTool, "execute_tool"
		default:
			k.role = roleOther
		}
		return k
	}
	if op := requestTypeOperation(sc.str(sRequestType)); op != "" {
		k.role, k.operation = roleCall, op
	}
	return k
}

// requestTypeOperation maps OpenLLMetry llm.request.type to an OTel
// operation name.
func requestTypeOperation(t string) string {
	switch strings.ToLower(t) {
	case "":
		return ""
	case "chat":
		return "chat"
	case "completion":
		return "text_completion"
	case "embedding":
		return "embeddings"
	case "rerank":
		return "rerank"
	}
	return strings.ToLower(t)
}

// usage is one dialect's token report before normalisation; -1 = absent.
type usage struct {
	in, out, cacheRead, cacheWrite, reasoning, total int64
}

func slot(sc *scan, slots ...int) int64 {
	for _, s := range slots {
		if n, ok := sc.num(s); ok {
			return n
		}
	}
	return -1
}

// tokens fills the token fields from the first dialect that reports usage
// (OTel GenAI, then OpenInference, then Langfuse usage_details) and says
// whether any was reported.
func tokens(sc *scan, l *model.LLM) bool {
	g := usage{
		in:         slot(sc, nInput, nPrompt),
		out:        slot(sc, nOutput, nCompletion),
		cacheRead:  slot(sc, nCacheRead, nCacheReadOld),
		cacheWrite: slot(sc, nCacheWrite, nCacheWriteAlt, nCacheWriteOld),
		reasoning:  slot(sc, nReasoning, nReasoningOld),
		total:      slot(sc, nTotal, nTotalTraceloop),
	}
	if g.in >= 0 || g.out >= 0 {
		g.normalize(true, l)
		return true
	}
	oi := usage{
		in:         slot(sc, nOIPrompt),
		out:        slot(sc, nOICompletion),
		cacheRead:  slot(sc, nOICacheRead),
		cacheWrite: slot(sc, nOICacheWrite),
		reasoning:  slot(sc, nOIReasoning),
		total:      slot(sc, nOITotal),
	}
	if oi.in >= 0 || oi.out >= 0 {
		oi.normalize(true, l)
		return true
	}
	if u := sc.str(sLFUsage); u != "" {
		if lf, ok := langfuseUsage(u); ok {
			lf.normalize(false, l)
			return true
		}
	}
	return false
}

func pos(n int64) int64 { return max(n, 0) }

// normalize writes the counts into l so that InputTokens includes the cache
// tokens and OutputTokens the reasoning tokens. included says whether the
// dialect's convention already counts them inside input/output (OTel GenAI
// and OpenInference: yes; Langfuse usage_details: no, its keys are
// disjoint). A reported total that matches the other reading overrides the
// convention (some instrumentations break it), and cache tokens larger than
// the input (or reasoning larger than the output) cannot be inside it.
func (u usage) normalize(included bool, l *model.LLM) {
	cache := pos(u.cacheRead) + pos(u.cacheWrite)
	rs := pos(u.reasoning)
	addCache, addRs := !included, !included
	if u.total >= 0 && (cache > 0 || rs > 0) {
		base := pos(u.in) + pos(u.out)
		sum := func(c, r bool) int64 {
			t := base
			if c {
				t += cache
			}
			if r {
				t += rs
			}
			return t
		}
		if sum(addCache, addRs) != u.total {
			for _, c := range [...][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				if sum(c[0], c[1]) == u.total {
					addCache, addRs = c[0], c[1]
					break
				}
			}
		}
	}
	if cache > pos(u.in) {
		addCache = true
	}
	if rs > pos(u.out) {
		addRs = true
	}
	if u.in >= 0 || cache > 0 {
		l.InputTokens = pos(u.in)
		if addCache {
			l.InputTokens += cache
		}
	}
	if u.out >= 0 || rs > 0 {
		l.OutputTokens = pos(u.out)
		if addRs {
			l.OutputTokens += rs
		}
	}
	l.CacheReadTokens = u.cacheRead
	l.CacheCreationTokens = u.cacheWrite
	l.ReasoningTokens = u.reasoning
}

// langfuseUsage reads langfuse.observation.usage_details, a JSON object of
// usage type -> count. Keys follow Langfuse's convention: "input", "output",
// "total", and detail types that are disjoint from them, named after what
// they are ("input_cached_tokens", "cache_read_input_tokens",
// "cache_creation_input_tokens", "output_reasoning_tokens", ...).
func langfuseUsage(s string) (usage, bool) {
	var m map[string]json.Number
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if d.Decode(&m) != nil || len(m) == 0 {
		return usage{}, false
	}
	u := usage{in: -1, out: -1, cacheRead: -1, cacheWrite: -1, reasoning: -1, total: -1}
	addTo := func(p *int64, n int64) {
		if *p < 0 {
			*p = 0
		}
		*p += n
	}
	any := false
	for k, v := range m {
		n, ok := count(model.StringValue(v.String()))
		if !ok {
			continue
		}
		lk := strings.ToLower(k)
		switch {
		case lk == "input" || lk == "prompt_tokens" || lk == "input_tokens" || lk == "prompt":
			addTo(&u.in, n)
		case lk == "output" || lk == "completion_tokens" || lk == "output_tokens" || lk == "completion":
			addTo(&u.out, n)
		case lk == "total" || lk == "total_tokens":
			u.total = n
		case strings.Contains(lk, "cache_creation") || strings.Contains(lk, "cache_write"):
			addTo(&u.cacheWrite, n)
		case strings.Contains(lk, "cache") || strings.Contains(lk, "cached"):
			addTo(&u.cacheRead, n)
		case strings.Contains(lk, "reasoning"):
			addTo(&u.reasoning, n)
		case strings.HasPrefix(lk, "input") || strings.HasPrefix(lk, "prompt"):
			addTo(&u.in, n) // e.g. input_audio: part of the input
		case strings.HasPrefix(lk, "output") || strings.HasPrefix(lk, "completion"):
			addTo(&u.out, n)
		default:
			continue
		}
		any = true
	}
	if !any {
		return usage{}, false
	}
	if u.in < 0 && u.out < 0 && u.total < 0 {
		u.in = 0 // only details were given: they are all of the input
	}
	return u, true
}

// cost sets CostNanoUSD and CostSource: a client-sent cost wins; else the
// price table prices the tokens; else no cost.
func cost(sc *scan, s *model.Span, l *model.LLM, prices *Prices) {
	if usd, ok := clientCost(sc); ok {
		if n, ok := usdToNano(usd); ok {
			l.CostNanoUSD, l.CostSource = n, model.CostClient
			return
		}
	}
	if prices == nil || (l.InputTokens < 0 && l.OutputTokens < 0) {
		return
	}
	at := time.Unix(0, int64(s.StartTimeUnixNano))
	in, out := pos(l.InputTokens), pos(l.OutputTokens)
	cr, cw := pos(l.CacheReadTokens), pos(l.CacheCreationTokens)
	for _, m := range [...]string{l.ResponseModel, l.RequestModel} {
		if m == "" {
			continue
		}
		if n, ok := prices.Cost(l.Provider, m, at, in, out, cr, cw); ok {
			l.CostNanoUSD, l.CostSource = n, model.CostComputed
			return
		}
	}
}

func clientCost(sc *scan) (float64, bool) {
	if f, ok := sc.flt(fCostTotal); ok {
		return f, true
	}
	if c := sc.str(sLFCost); c != "" {
		if f, ok := langfuseCost(c); ok {
			return f, true
		}
	}
	if f, ok := sc.flt(fGenAICost); ok {
		return f, true
	}
	p, okP := sc.flt(fCostPrompt)
	c, okC := sc.flt(fCostCompletion)
	if okP || okC {
		return p + c, true
	}
	return 0, false
}

// langfuseCost reads langfuse.observation.cost_details (type -> USD): its
// "total" when present, else the sum of the types.
func langfuseCost(s string) (float64, bool) {
	var m map[string]json.Number
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if d.Decode(&m) != nil {
		return 0, false
	}
	if t, ok := m["total"]; ok {
		return number(model.StringValue(t.String()))
	}
	sum, any := 0.0, false
	for _, v := range m {
		if f, ok := number(model.StringValue(v.String())); ok {
			sum += f
			any = true
		}
	}
	return sum, any
}

// ttft returns the time to first token in nanoseconds, 0 when not reported.
func ttft(sc *scan, s *model.Span) uint64 {
	for _, slot := range [...]int{fTTFC, fTTFT} {
		if f, ok := sc.flt(slot); ok {
			if n, ok := secondsToNanos(f); ok {
				return n
			}
		}
	}
	if c := sc.str(sLFCompletionStart); c != "" {
		c = strings.Trim(c, `"`)
		t, err := time.Parse(time.RFC3339Nano, c)
		if err != nil {
			t, err = time.Parse("2006-01-02T15:04:05.999999999", c)
		}
		if err == nil {
			if n := t.UnixNano(); n > 0 && uint64(n) > s.StartTimeUnixNano {
				return uint64(n) - s.StartTimeUnixNano
			}
		}
	}
	return 0
}

// NormalizeProvider is the provider name as LLM spans carry it
// (model.LLM.Provider): the OTel well-known name for a known alias, else
// the name in lower case. The GenAI metrics' provider goes through it too.
func NormalizeProvider(p string) string { return normalizeProvider(p) }
