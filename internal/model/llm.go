package model

// LLM holds the LLM fields of a span, normalised at ingest from whichever
// attribute dialect the client sent (OTel GenAI current and legacy,
// OpenInference, OpenLLMetry, Langfuse): see internal/llm and docs/llm.md.
// A span without any LLM information has a nil *LLM.
//
// Token counts follow the OTel GenAI convention whatever the source:
// InputTokens includes CacheReadTokens and CacheCreationTokens, OutputTokens
// includes ReasoningTokens. A negative count means "not reported".
type LLM struct {
	Provider      string // e.g. "openai", "anthropic", "aws.bedrock"
	RequestModel  string
	ResponseModel string
	Operation     string // "chat", "text_completion", "embeddings", "execute_tool", "invoke_agent", ...

	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	ReasoningTokens     int64

	// CostNanoUSD is the span's cost in billionths of a US dollar (integer so
	// sums are exact). CostSource says where it came from.
	CostNanoUSD int64
	CostSource  CostSource

	SessionID string // session or conversation id
	UserID    string
	AgentName string
	ToolName  string

	TimeToFirstTokenNanos uint64 // 0 = not reported

	// Counted reports whether this span's tokens and cost count toward usage
	// totals. It is false for agent, workflow and chain spans, whose reported
	// usage repeats the totals of the LLM calls beneath them (docs/llm.md).
	Counted bool
}

// CostSource says where an LLM span's cost came from.
type CostSource uint8

const (
	CostNone     CostSource = 0 // no cost: unknown model, or not an LLM call
	CostClient   CostSource = 1 // sent by the client (e.g. llm.cost.total); wins over a computed one
	CostComputed CostSource = 2 // computed from the token counts and the price table
)

// Model returns the response model when known, else the request model.
func (l *LLM) Model() string {
	if l.ResponseModel != "" {
		return l.ResponseModel
	}
	return l.RequestModel
}
